// The table of the `path-node` commands and their flags (P15, issue 31): what each accepts,
// what help says of it, and an example. The command line takes a command's flags from here and
// refuses any other, and help, the synopses and the usage errors are all printed from it, so
// what help says cannot drift from what the parser accepts.
import {
  DEFAULT_LIMITS,
  LOOKUP_FILE_CONCURRENCY_DEFAULT,
  SERVE_FLAGS,
  envOf,
  type FlagSpec,
} from '../config.js';

export interface CommandSpec {
  /** The command's words: `credentials add`. */
  readonly name: string;
  /** One line on what it does, for the list of commands. */
  readonly sentence: string;
  /** More that its help says after the sentence: exit codes, what it needs. */
  readonly detail?: string;
  /** A word the command takes after its name (`events show EVENT_ID`). */
  readonly operand?: { readonly name: string; readonly sentence: string; readonly optional?: true };
  readonly flags: readonly FlagSpec[];
  /** Flags of which one is given, shown as one in the synopsis: `(--data-dir D | --store URL)`. */
  readonly either?: readonly [string, string];
  /** A whole command line, as an operator would type it. */
  readonly example: string;
}

const dataDir: FlagSpec = {
  name: 'data-dir',
  argument: 'D',
  sentence: "The node's data directory, whether the node runs or not.",
  default: './data',
  env: 'PATH_DATA_DIR',
  example: '/var/lib/path-node',
};

const store: FlagSpec = {
  name: 'store',
  argument: 'URL',
  sentence: "Cluster mode (P22): the database the node's instances share.",
  defaultShown: 'none, the embedded store in --data-dir',
  env: 'PATH_STORE',
  example: 'postgres://path@db.internal/path',
};

/** Where an administrative command finds the node's state: its data directory or database. */
const place = [dataDir, store] as const;
const PLACE = ['data-dir', 'store'] as const;

const member = (sentence: string): FlagSpec => ({
  name: 'member',
  argument: 'NAME',
  required: true,
  sentence,
  example: 'acme',
});

const publicKey = (whose: string): FlagSpec => ({
  name: 'public-key',
  argument: 'HEX',
  required: true,
  sentence: `${whose} Ed25519 public key, 64 hex digits.`,
  example: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
});

const keyId = (what: string): FlagSpec => ({
  name: 'key-id',
  argument: 'ID',
  required: true,
  sentence: `The ${what}'s key id, as printed when it was added.`,
  example: 'cred_0f2c9e61a4b84d7f9d3e5a1b2c3d4e5f',
});

const OVERLAP_HOURS = DEFAULT_LIMITS.webhook_secret_overlap_ms / 3600_000;

const eventId = { name: 'EVENT_ID', sentence: 'The event, as `events list` names it.' };

/** Every command, in the order `path-node help` lists them. */
export const COMMANDS = [
  {
    name: 'serve',
    sentence: 'Runs the node (also what `path-node` alone does).',
    flags: SERVE_FLAGS.map((flag) => ({ ...flag, env: envOf(flag.name) })),
    example:
      'path-node serve --data-dir /var/lib/path-node --member acme ' +
      '--base-url https://pay.example.com',
  },
  {
    name: 'credentials add',
    sentence: 'Adds a credential for a public key its holder made.',
    flags: [
      ...place,
      member('The member the credential acts for.'),
      publicKey("The caller's"),
      {
        name: 'local',
        sentence: "Makes it the operator's own credential, for the node's own objects.",
        defaultShown: 'off',
        example: '',
      },
    ],
    either: PLACE,
    example: 'path-node credentials add --data-dir D --member acme --public-key HEX --local',
  },
  {
    name: 'credentials create',
    sentence: 'Makes a credential; prints its keys as the client takes them.',
    flags: [
      ...place,
      member('The member the credential acts for.'),
      {
        name: 'local',
        sentence: "Makes it the operator's own credential, for the node's own objects.",
        defaultShown: 'off',
        example: '',
      },
    ],
    either: PLACE,
    example: 'path-node credentials create --data-dir /var/lib/path-node --member acme --local',
  },
  {
    name: 'credentials revoke',
    sentence: 'Revokes a credential; a running node refuses it within 0.5 s.',
    flags: [...place, keyId('credential')],
    either: PLACE,
    example: 'path-node credentials revoke --data-dir /var/lib/path-node --key-id cred_...',
  },
  {
    name: 'keys rotate',
    sentence: 'Makes a new signing key; the old one stays published, retired.',
    flags: place,
    either: PLACE,
    example: 'path-node keys rotate --data-dir /var/lib/path-node',
  },
  {
    name: 'backup',
    sentence: 'Copies the data directory consistently, running or not.',
    flags: [
      { ...dataDir, sentence: 'The data directory to copy.' },
      {
        name: 'out',
        argument: 'DIR',
        required: true,
        sentence: 'The directory to write the copy to: a new or empty one.',
        example: '/backups/path-node-2026-11-27',
      },
      { ...store, sentence: 'Refused: back up the cluster database with PostgreSQL tools.' },
    ],
    example: 'path-node backup --data-dir /var/lib/path-node --out /backups/path-node-2026-11-27',
  },
  {
    name: 'verify',
    sentence: 'Checks a stopped data directory or a backup for damage.',
    detail:
      'Each damaged item is printed as a JSON line, then the summary. Exits 0 when sound, 1 ' +
      'on damage, 2 while a node runs on the directory.',
    flags: [
      { ...dataDir, sentence: 'The stopped data directory or the backup to check.' },
      { ...store, sentence: "Refused: a cluster's instances scrub their partitions themselves." },
    ],
    example: 'path-node verify --data-dir /backups/path-node-2026-11-27',
  },
  {
    name: 'lookup',
    sentence: 'Looks up the identifiers of a CSV file in bulk, resumably.',
    detail:
      'Progress goes to stderr. Exits 0 when done, 3 when the lookup budget stops it and 1 ' +
      'on any other stop (both resumable with --resume), 2 on a usage error.',
    flags: [
      {
        name: 'base-url',
        argument: 'URL',
        required: true,
        sentence: 'The node to ask.',
        example: 'https://pay.example.com',
      },
      {
        name: 'key-id',
        argument: 'ID',
        required: true,
        sentence: 'The key id of the credential that signs the lookups.',
        example: 'cred_0f2c9e61a4b84d7f9d3e5a1b2c3d4e5f',
      },
      {
        name: 'private-key-file',
        argument: 'F',
        required: true,
        sentence: "A file holding that credential's 32-byte private key as hex.",
        example: 'lookup.key',
      },
      {
        name: 'in',
        argument: 'IN.csv',
        required: true,
        sentence: 'The input, rows of identifier_type,identifier.',
        example: 'numbers.csv',
      },
      {
        name: 'out',
        argument: 'OUT.csv',
        required: true,
        sentence: 'The output, one row per input row with hashes, never the identifiers.',
        example: 'found.csv',
      },
      {
        name: 'concurrency',
        argument: 'N',
        sentence: 'Batches in flight at once.',
        default: String(LOOKUP_FILE_CONCURRENCY_DEFAULT),
        example: '4',
      },
      {
        name: 'signed',
        switch: true,
        sentence: "Adds an answer column with each row's signed answer.",
        defaultShown: 'off',
        example: '',
      },
      {
        name: 'resume',
        switch: true,
        sentence: 'Continues after the last row already in the output file.',
        defaultShown: 'off',
        example: '',
      },
    ],
    example:
      'path-node lookup --base-url https://pay.example.com --key-id cred_... ' +
      '--private-key-file lookup.key --in numbers.csv --out found.csv',
  },
  {
    name: 'events list',
    sentence: 'Lists the webhook events the node keeps, one JSON line each.',
    flags: [
      ...place,
      {
        name: 'undelivered',
        switch: true,
        sentence: 'Lists only the events not yet delivered to every endpoint.',
        defaultShown: 'off',
        example: '',
      },
    ],
    either: PLACE,
    example: 'path-node events list --data-dir /var/lib/path-node --undelivered',
  },
  {
    name: 'events show',
    sentence: 'Shows one event and its deliveries.',
    operand: eventId,
    flags: place,
    either: PLACE,
    example: 'path-node events show evt_... --data-dir /var/lib/path-node',
  },
  {
    name: 'events resend',
    sentence: 'Delivers one event to every endpoint again.',
    operand: eventId,
    flags: place,
    either: PLACE,
    example: 'path-node events resend evt_... --data-dir /var/lib/path-node',
  },
  {
    name: 'events trigger',
    sentence: 'Sends the webhook endpoints a signed test event.',
    operand: {
      name: 'TYPE',
      sentence:
        'The event type: request.paid, receipt.issued, checkout.session.completed or ' +
        'checkout.session.expired.',
    },
    flags: [
      ...place,
      {
        name: 'webhook-urls',
        argument: 'URLS',
        sentence: "The endpoints to send it to, comma-separated: serve's own setting.",
        defaultShown: 'none',
        env: 'PATH_WEBHOOK_URLS',
        example: 'https://hooks.example.com/path',
      },
      {
        name: 'dev',
        sentence: 'Development only: allows http and loopback endpoints (P11).',
        defaultShown: 'off',
        env: 'PATH_DEV',
        example: '',
      },
    ],
    either: PLACE,
    example:
      'path-node events trigger receipt.issued --data-dir /var/lib/path-node ' +
      '--webhook-urls https://hooks.example.com/path',
  },
  {
    name: 'listen',
    sentence: 'Receives webhook deliveries here, verifies and prints them.',
    flags: [
      {
        name: 'port',
        argument: 'P',
        required: true,
        sentence: 'The port to receive on; 0 picks a free one.',
        example: '9000',
      },
      {
        name: 'host',
        argument: 'HOST',
        sentence: 'The address to receive on.',
        default: '127.0.0.1',
        example: '0.0.0.0',
      },
      {
        name: 'data-dir',
        argument: 'D',
        sentence: "A node's data directory, whose secrets and keys verify deliveries.",
        defaultShown: 'none; this or --base-url is needed',
        example: '/var/lib/path-node',
      },
      {
        name: 'base-url',
        argument: 'URL',
        sentence: 'A node whose published keys verify deliveries.',
        defaultShown: 'none',
        example: 'https://pay.example.com',
      },
      {
        name: 'secret',
        argument: 'whsec_...',
        sentence: 'The webhook secret, to verify v1 signatures too with --base-url.',
        defaultShown: 'none',
        example: 'whsec_...',
      },
      {
        name: 'forward-to',
        argument: 'URL',
        sentence: 'Passes each verified delivery on, unchanged, to a local handler.',
        defaultShown: 'none',
        example: 'http://127.0.0.1:3000/hooks',
      },
    ],
    example: 'path-node listen --port 9000 --data-dir D --forward-to http://127.0.0.1:3000/hooks',
  },
  {
    name: 'webhooks secret',
    sentence: 'Prints the webhook secret (v1 signatures), made on first use.',
    flags: place,
    either: PLACE,
    example: 'path-node webhooks secret --data-dir /var/lib/path-node',
  },
  {
    name: 'webhooks rotate-secret',
    sentence: `Makes a new webhook secret; the old one signs ${OVERLAP_HOURS} h beside it.`,
    flags: place,
    either: PLACE,
    example: 'path-node webhooks rotate-secret --data-dir /var/lib/path-node',
  },
  {
    name: 'external-clients add',
    sentence: 'Adds a client of the external discovery interface (SPEC L).',
    flags: [
      ...place,
      {
        name: 'client',
        argument: 'NAME',
        required: true,
        sentence: 'The name the client is known by.',
        example: 'registry-a',
      },
      publicKey("The client's"),
      {
        name: 'registries',
        argument: 'R1,R2',
        required: true,
        sentence: 'The registries it may query, comma-separated.',
        example: 'br.pix.dict,in.npci.upi',
      },
    ],
    either: PLACE,
    example:
      'path-node external-clients add --data-dir D --client registry-a --public-key HEX ' +
      '--registries R1,R2',
  },
  {
    name: 'external-clients revoke',
    sentence: 'Revokes a client of the external discovery interface.',
    flags: [...place, keyId('external client')],
    either: PLACE,
    example: 'path-node external-clients revoke --data-dir /var/lib/path-node --key-id ext_...',
  },
  {
    name: 'members add',
    sentence: 'Lists another node as a member of the network.',
    flags: [
      ...place,
      member("The member's name, as its node signs."),
      {
        name: 'base-url',
        argument: 'URL',
        required: true,
        sentence: "The member node's origin, an absolute http(s) URL.",
        example: 'https://pay.beta.example',
      },
    ],
    either: PLACE,
    example: 'path-node members add --data-dir D --member beta --base-url https://pay.beta.example',
  },
  {
    name: 'members remove',
    sentence: 'Takes a member off the network list.',
    flags: [...place, member('The member to remove.')],
    either: PLACE,
    example: 'path-node members remove --data-dir /var/lib/path-node --member beta',
  },
  {
    name: 'help',
    sentence: 'Lists the commands, or explains one: flags, defaults, example.',
    operand: { name: 'COMMAND', sentence: 'The command to explain.', optional: true },
    flags: [],
    example: 'path-node help serve',
  },
] as const satisfies readonly CommandSpec[];

export type CommandName = (typeof COMMANDS)[number]['name'];

/** A command of the table, known by its name. */
export type Command = CommandSpec & { readonly name: CommandName };
export const TABLE: readonly Command[] = COMMANDS;

/** Flags every command takes: help for it. */
export const HELP_FLAG: FlagSpec = {
  name: 'help',
  switch: true,
  sentence: 'Prints this help (also -h).',
  example: '',
};
