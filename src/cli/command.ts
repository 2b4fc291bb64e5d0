// The `path-node` command (P15): serve, credentials add|create|revoke, keys rotate, backup,
// verify, bulk lookups from a file, the webhook secret, and the network's external clients and
// members. Which words name a command and which flags it takes come from one table
// (commands.ts), which help and usage errors are printed from too (usage.ts): `path-node help
// [COMMAND]`, or `--help` or `-h` on any command. It runs bundled into one file (main.ts).
import { nativeServerProblem } from '../http/native.js';
import { resolve } from 'node:path';
import {
  ConfigError,
  DEFAULT_LIMITS,
  LOOKUP_FILE_CONCURRENCY_DEFAULT,
  PRIVATE_UMASK,
  loadConfig,
  parseFlags,
  envOf,
  storeOf,
  switchedOn,
  webhookUrlsOf,
} from '../config.js';
import type { CommandName } from './commands.js';
import { createLogger } from '../logger.js';
import { BackupRefused, backupDataDir } from '../log/backup.js';
import { privateDataDir } from '../log/data-dir.js';
import { EventsUsageError, listEvents, resendEvent, showEvent, triggerEvent } from './events.js';
import { listen } from './listen.js';
import { LookupUsageError, lookupFile } from './lookup.js';
import { VerifyRefused, verifyDataDir } from './verify.js';
import {
  SWITCHES,
  UnknownCommand,
  UsageError,
  checkUsage,
  commandOf,
  helpFor,
  usageFor,
} from './usage.js';
import { withStore as withOpenedStore, type Place } from '../log/open.js';
import { flushAccessLogs, startNode, type RunningNode } from '../node.js';
import { generateSeedHex } from '../protocol/signing.js';
import { NodeStore } from '../store.js';

type Flags = Record<string, string | true>;

/** A yes-or-no flag: given bare, or as `--name true`. */
function flag(flags: Flags, name: string): boolean {
  return flags[name] === true || flags[name] === 'true';
}

function need(flags: Flags, name: string): string {
  const v = flags[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

const dataDirOf = (flags: Flags): string =>
  typeof flags['data-dir'] === 'string'
    ? flags['data-dir']
    : (process.env.PATH_DATA_DIR ?? './data');

/** Where the node keeps its state: the data directory, or cluster mode's database (P22). */
function placeOf(flags: Flags): Place {
  const store = flags.store ?? process.env.PATH_STORE ?? '';
  if (store === true) throw new UsageError('--store needs a postgres:// URL');
  try {
    return { dataDir: dataDirOf(flags), store: storeOf(store) };
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }
}

/**
 * Opens the store for an administrative command. These write keys and secrets too (`keys
 * rotate`, `webhooks secret`): an embedded data directory open to others is made private first,
 * as `serve` does (P16), and the command says so on stderr (its stdout is its answer).
 */
async function withStore<T>(flags: Flags, action: (store: NodeStore) => Promise<T>): Promise<T> {
  const place = placeOf(flags);
  const narrowed = place.store === null ? privateDataDir(place.dataDir) : null;
  if (narrowed !== null) {
    process.stderr.write(
      `path-node: data directory ${narrowed.data_dir} was open to other users ` +
        `(${narrowed.mode_before}); narrowed to ${narrowed.mode_after}\n`,
    );
  }
  return withOpenedStore(place, ({ tables }) => action(new NodeStore(tables)));
}

async function serve(flags: Flags): Promise<void> {
  const config = loadConfig(flags);
  const logger = createLogger(config.logLevel);
  // No server but the native one (issue 32): its stand-in would fail on the first request.
  const unserved = nativeServerProblem();
  if (unserved !== null) {
    logger.fatal({ reason: unserved }, 'cannot serve HTTP; not starting');
    flushAccessLogs();
    process.exit(1);
  }
  const fatal = (message: string) => {
    logger.fatal({ reason: message }, 'cannot continue safely; exiting');
    flushAccessLogs();
    process.exit(1);
  };
  // The handlers are in place before the start: a stop asked for while the node starts ends it
  // at once, before it answers anyone (what the start committed is as durable as after a kill,
  // P14); one asked for once it listens drains it. A signal handled after the `listening` line
  // always finds the node, which is assigned in the same turn as that line is written.
  let node: RunningNode | undefined;
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    if (node === undefined) {
      logger.info({ signal }, 'stopped before it was ready');
      flushAccessLogs();
      process.exit(0);
    }
    node.stop().then(
      () => {
        flushAccessLogs();
        process.exit(0);
      },
      (error: unknown) => fatal((error as Error).message),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  node = await startNode(config, logger, fatal);
}

type Handler = (flags: Flags, operands: readonly string[]) => Promise<void>;

/** What each command of the table does; the type asks for one handler per command. */
const HANDLERS: Record<CommandName, Handler> = {
  serve: (flags) => serve(flags),
  'credentials add': (flags) => addCredential(flags, 'add'),
  'credentials create': (flags) => addCredential(flags, 'create'),
  'credentials revoke': (flags) =>
    revokeKey(flags, 'credential', (st, key, now) => st.revokeCredential(key, now)),
  'keys rotate': (flags) => rotateKeys(flags),
  backup: (flags) => backup(flags),
  verify: (flags) => verify(flags),
  lookup: (flags) => lookup(flags),
  'events list': (flags) =>
    events(flags, async (place) => {
      const undelivered = flag(flags, 'undelivered');
      const lines = await listEvents(place, { undelivered });
      for (const line of lines) print(line);
      // Standard output stays one JSON object per event (none here), so a script reading it
      // sees no line it must skip; the person at the terminal is told on standard error.
      if (lines.length === 0)
        process.stderr.write(
          undelivered ? 'no undelivered events are kept\n' : 'no events are kept\n',
        );
    }),
  // The table asks for the event id (EVENT_ID) before a handler runs.
  'events show': (flags, [id]) =>
    events(flags, async (place) => print(await showEvent(place, id!))),
  'events resend': (flags, [id]) =>
    events(flags, async (place) => print(await resendEvent(place, id!, Date.now()))),
  'events trigger': (flags, [type]) => events(flags, (place) => trigger(place, type!, flags)),
  listen: (flags) => listenCommand(flags),
  'webhooks secret': (flags) => webhookSecret(flags),
  'webhooks rotate-secret': (flags) => rotateWebhookSecret(flags),
  'external-clients add': (flags) => addExternalClient(flags),
  'external-clients revoke': (flags) =>
    revokeKey(flags, 'external client', (st, key, now) => st.revokeExternalClient(key, now)),
  'members add': (flags) => addMember(flags),
  'members remove': (flags) => removeMember(flags),
  help: async (_flags, operands) => {
    process.stdout.write(`${helpFor(operands)}\n`);
  },
};

async function main(words: readonly string[], flags: Flags): Promise<void> {
  // P16: every command may create the data directory and its files; they are private from birth.
  process.umask(PRIVATE_UMASK);
  if (flags.help === true) {
    process.stdout.write(`${helpFor(words)}\n`);
    return;
  }
  const { command, operands } = commandOf(words);
  // Checked before anything is opened or written: a mistake changes nothing.
  checkUsage(command, operands, flags);
  try {
    await HANDLERS[command.name](flags, operands);
  } catch (error) {
    // A refusal of what was given is a mistake of this command's usage: its usage follows.
    const refused = error instanceof ConfigError || error instanceof RangeError;
    const commandless = error instanceof UsageError && error.command === undefined;
    if (refused || (commandless && !(error instanceof UnknownCommand)))
      throw new UsageError((error as Error).message, command);
    throw error;
  }
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

/** `credentials add` takes the caller's public key; `credentials create` makes the key pair. */
async function addCredential(flags: Flags, sub: 'add' | 'create'): Promise<void> {
  const member = need(flags, 'member');
  const local = flag(flags, 'local');
  const generated = sub === 'create' ? generateSeedHex() : null;
  const publicKeyHex = generated?.publicKeyHex ?? need(flags, 'public-key').toLowerCase();
  const credential = await withStore(flags, (store) =>
    store.addCredential({ member, publicKeyHex, local, now: Date.now() }),
  );
  if (generated === null) return print({ key_id: credential.key_id });
  // `credential` is the same pair in the shape @path-node/client takes (P18):
  // `new PathClient({ baseUrl, credential })`.
  return print({
    key_id: credential.key_id,
    public_key: publicKeyHex,
    private_key: generated.seedHex,
    credential: { keyId: credential.key_id, privateKeyHex: generated.seedHex },
  });
}

/** Revokes the key named by --key-id through `revoke`; `what` names its kind when unknown. */
async function revokeKey(
  flags: Flags,
  what: string,
  revoke: (store: NodeStore, keyId: string, now: number) => Promise<boolean>,
): Promise<void> {
  const keyId = need(flags, 'key-id');
  const revoked = await withStore(flags, (store) => revoke(store, keyId, Date.now()));
  if (!revoked) throw new UsageError(`no ${what} with that key id`);
  return print({ key_id: keyId, revoked: true });
}

async function addExternalClient(flags: Flags): Promise<void> {
  const client = need(flags, 'client');
  const publicKeyHex = need(flags, 'public-key').toLowerCase();
  const registries = need(flags, 'registries')
    .split(',')
    .map((r) => r.trim())
    .filter((r) => r !== '');
  const added = await withStore(flags, (store) =>
    store.addExternalClient({ client, publicKeyHex, registries, now: Date.now() }),
  );
  return print({ key_id: added.key_id });
}

async function addMember(flags: Flags): Promise<void> {
  const member = need(flags, 'member');
  const baseUrl = need(flags, 'base-url');
  if (!/^https?:\/\/[^/]+\/?$/.test(baseUrl))
    throw new UsageError('--base-url must be an absolute http(s) origin');
  const added = await withStore(flags, (store) =>
    store.addMember({ member, baseUrl, now: Date.now() }),
  );
  return print({ member: added.member, base_url: added.base_url });
}

async function removeMember(flags: Flags): Promise<void> {
  const member = need(flags, 'member');
  if (!(await withStore(flags, (store) => store.removeMember(member))))
    throw new UsageError('no such member');
  return print({ member, removed: true });
}

async function rotateKeys(flags: Flags): Promise<void> {
  const key = await withStore(flags, (store) => store.rotateSigningKey(Date.now()));
  return print({ kid: key.kid, public_key: key.public_key });
}

/** A consistent copy of the data directory, taken while the node runs or not. */
async function backup(flags: Flags): Promise<void> {
  const out = need(flags, 'out');
  const started = new Date().toISOString();
  if (placeOf(flags).store !== null) {
    throw new UsageError(
      'backup copies the embedded store; in cluster mode back up the PostgreSQL database ' +
        'with its own tools (pg_basebackup and WAL archiving)',
    );
  }
  try {
    const { bytes } = await backupDataDir(dataDirOf(flags), out);
    return print({ out: resolve(out), bytes, started_at: started });
  } catch (error) {
    if (error instanceof BackupRefused) throw new UsageError(error.message);
    throw error;
  }
}

/**
 * Checks a stopped data directory or a backup (issue 28): each damaged item a line, then the
 * summary; exit 0 when sound, 1 when damaged.
 */
async function verify(flags: Flags): Promise<void> {
  if (placeOf(flags).store !== null) {
    throw new UsageError(
      'verify checks an embedded data directory or its backup; in cluster mode each instance ' +
        'scrubs the partitions it holds (path_log_damaged_records)',
    );
  }
  try {
    const verified = await verifyDataDir(dataDirOf(flags), (damaged) => print({ damaged }));
    print({ verified });
    if (!verified.sound) process.exitCode = 1;
  } catch (error) {
    if (error instanceof VerifyRefused) throw new UsageError(error.message);
    throw error;
  }
}

/** Bulk lookups from a CSV file; the exit code says whether it finished or where it stopped. */
async function lookup(flags: Flags): Promise<void> {
  const concurrency = Number(flags.concurrency ?? LOOKUP_FILE_CONCURRENCY_DEFAULT);
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new UsageError('--concurrency must be a whole number of at least 1');
  try {
    process.exitCode = await lookupFile({
      baseUrl: need(flags, 'base-url'),
      keyId: need(flags, 'key-id'),
      privateKeyFile: need(flags, 'private-key-file'),
      in: need(flags, 'in'),
      out: need(flags, 'out'),
      concurrency,
      signed: flag(flags, 'signed'),
      resume: flag(flags, 'resume'),
    });
  } catch (error) {
    if (error instanceof LookupUsageError) throw new UsageError(error.message);
    throw error;
  }
}

/** `events list|show|resend`: the operator's view of webhook events (P11). */
async function events(flags: Flags, action: (place: Place) => Promise<void>): Promise<void> {
  try {
    await action(placeOf(flags));
  } catch (error) {
    if (error instanceof EventsUsageError) throw new UsageError(error.message);
    throw error;
  }
}

/**
 * `events trigger TYPE`: a test event to the operator's endpoints, which are serve's own setting
 * (`--webhook-urls` or PATH_WEBHOOK_URLS, `--dev` or PATH_DEV for http and loopback targets).
 * Exits 1 unless every endpoint acknowledged it.
 */
async function trigger(place: Place, type: string, flags: Flags): Promise<void> {
  // serve's own settings, read as serve reads them; the table asks for TYPE before this runs.
  const setting = (name: string) => flags[name] ?? process.env[envOf(name)];
  const raw = setting('webhook-urls');
  const urls = webhookUrlsOf(raw === true || raw === undefined ? '' : raw);
  const dev = switchedOn(setting('dev'));
  const sent = await triggerEvent(place, type, { urls, dev, now: Date.now() });
  print(sent.line);
  if (!sent.acknowledged) process.exitCode = 1;
}

/** A local receiver that verifies and prints each delivery; runs until stopped. */
async function listenCommand(flags: Flags): Promise<void> {
  const text = (name: string) => (typeof flags[name] === 'string' ? flags[name] : undefined);
  const port = Number(need(flags, 'port'));
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError('--port must be an integer from 0 to 65535');
  if (text('data-dir') === undefined && text('base-url') === undefined)
    throw new UsageError('listen needs --data-dir or --base-url to verify deliveries');
  const bound = await listen({
    port,
    host: text('host') ?? '127.0.0.1',
    dataDir: text('data-dir'),
    baseUrl: text('base-url'),
    secret: text('secret'),
    forwardTo: text('forward-to'),
  });
  process.stderr.write(
    `path-node listen: receiving on http://${text('host') ?? '127.0.0.1'}:${bound}\n`,
  );
}

/** The secret receivers verify `v1` signatures with (P11); made on first use. */
async function webhookSecret(flags: Flags): Promise<void> {
  const secret = await withStore(flags, (store) => store.ensureWebhookSecret(Date.now()));
  return print({ secret: secret.secret, created_at: secret.created_at });
}

/** A new secret; the previous one still signs beside it for the overlap (P11). */
async function rotateWebhookSecret(flags: Flags): Promise<void> {
  const overlapMs = DEFAULT_LIMITS.webhook_secret_overlap_ms;
  const now = Date.now();
  const secret = await withStore(flags, (store) => store.rotateWebhookSecret(now, overlapMs));
  const previousUntil = new Date(now + overlapMs).toISOString();
  return print({ secret: secret.secret, previous_signs_until: previousUntil });
}

const { positional, flags } = parseFlags(process.argv.slice(2), { switches: SWITCHES });
main(positional, flags).catch((error: unknown) => {
  if (error instanceof UsageError || error instanceof ConfigError || error instanceof RangeError) {
    const usage = usageFor(error instanceof UsageError ? error : new UsageError(''), positional);
    process.stderr.write(`path-node: ${error.message}\n${usage}\n`);
    process.exit(2);
  }
  // Whatever failed at start (data directory in use, port in use), one line and no stack.
  process.stderr.write(`path-node: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
