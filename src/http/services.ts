// What route handlers may use: the shards, the committed views, the node's identity.
import type { Commands, SubmitOptions } from '../actors/pool.js';
import type { CommandResult, RoutedCommand } from '../actors/types.js';
import {
  BODY_DEPTH_MAX,
  VIEW_CACHE_ENTRIES_MAX,
  READ_SNAPSHOT_HOLD_MS,
  VIEW_FRESH_WAIT_MS,
  type Config,
} from '../config.js';
import type { Reads } from '../log/log.js';
import { unreachable, type DatabaseHealth } from '../log/unavailable.js';
import { decodeView, type View } from '../reads/views.js';
import { DamagedRowError } from '../log/record.js';
import {
  expiredRefusal,
  invalid,
  refusal,
  type ErrorCode,
  type Refusal,
} from '../protocol/errors.js';
import { parseStrictObject } from '../protocol/strict-json.js';

import type { Validator } from '../protocol/schemas.js';
import type { NodeStore } from '../store.js';
import type { LocalDirectory } from '../directory/directory.js';
import type { SigningKey } from '../protocol/signing.js';
import type { MemberRegistry } from '../network/members.js';
import { cacheable } from './cache.js';
import { failure, type HttpReply } from './reply.js';
import { ClaimTaken, type RequestContext } from './server.js';

export interface Services {
  config: Config;
  pool: Commands;
  log: Reads;
  store: NodeStore;
  /** The network pepper (P8) and its published version id. */
  pepper: Buffer;
  pepperVersion: string;
  /** Seals names and account references before they leave the request (sealing.ts). */
  sealingKey: Buffer;
  /** The in-memory directory index (SPEC D). */
  directory?: LocalDirectory;
  /** The node's signing key, for answers signed on the front end. */
  signer?: () => SigningKey;
  /** The network's other members and their keys (confirm verifies their answers). */
  members?: MemberRegistry;
  /** Delivers outbox events as webhooks (P11). */
  events?: { notify(ids: readonly string[]): void };
  /**
   * Cluster mode (P22, issue 29): the database the views are read from across the network, as
   * this instance last found it. Given, a public read never waits on it in place (publicView).
   */
  database?: DatabaseHealth;
  /**
   * Cluster mode: a count that moves whenever the log is refreshed (after each commit of this
   * instance's and each heard from another's): a view loaded before it moved may be stale.
   */
  refreshes?: () => number;
}

/**
 * Views last read, by key, with the stored bytes they were decoded from and the log and its peek
 * version they were read at. While that version holds, the key still has those bytes and the view
 * is answered without a read (the read was a tenth of a public GET's CPU). Otherwise the committed
 * bytes are read, and when they are the very bytes decoded last time for that key their checksum
 * and decoding are not done again (those were a fifth). Entries of any node in the process may
 * share the map: equal bytes decode to the same view wherever they come from.
 */
const decodedViews = new Map<string, DecodedView>();

interface DecodedView {
  bytes: Buffer;
  view: View;
  reply: HttpReply;
  /** The log and its peek version the bytes were last read at (set by viewReply). */
  log: Reads | null;
  version: number;
  /** The reply made cacheable (cacheableViewReply), once for these bytes. */
  cacheable: HttpReply | null;
  /** Cluster mode: the log these bytes were loaded from, its refresh count then, and when. */
  loaded: { log: Reads; refreshes: number; atMs: number } | null;
}

/**
 * The view of the committed `bytes`, which the log lends for this call only: they are compared
 * where they lie, and copied only when they are new (the answer is written later, from the copy).
 */
function decoded(bytes: Buffer, key: string): DecodedView {
  const known = decodedViews.get(key);
  if (known !== undefined && known.bytes.equals(bytes)) return known;
  const own = Buffer.from(bytes);
  const view = decodeView(own);
  if (view === null) throw new DamagedRowError('views', key);
  const reply = Object.freeze({ status: view.status, body: view.body, signed: view.signed });
  if (known === undefined && decodedViews.size >= VIEW_CACHE_ENTRIES_MAX) {
    decodedViews.delete(decodedViews.keys().next().value!);
  }
  const entry = { bytes: own, view, reply, log: null, version: 0, cacheable: null, loaded: null };
  decodedViews.set(key, entry);
  return entry;
}

/** The committed view at `key`, decoded once for its bytes, or undefined when there is none. */
function committedView(services: Pick<Services, 'log'>, key: string): DecodedView | undefined {
  const { log } = services;
  const version = log.peekVersion();
  let found = decodedViews.get(key);
  if (found === undefined || found.log !== log || found.version !== version) {
    found = log.peek('views', key, decoded);
    if (found === undefined) return undefined;
    found.log = log;
    found.version = version;
  }
  return found;
}

/** A committed public answer, or null when there is none for the key. */
export function viewReply(services: Pick<Services, 'log'>, key: string): HttpReply | null {
  const found = committedView(services, key);
  return found === undefined ? null : answerOf(found);
}

function answerOf(found: DecodedView): HttpReply {
  const { view, reply } = found;
  if (view.expiry !== null && Date.now() >= view.expiry.at) {
    return failure(expiredRefusal(view.expiry.code as ErrorCode));
  }
  return reply;
}

/** A value now, or later when it had to be asked of the database. */
export type Later<T> = T | Promise<T>;

/** `next` of the value, at once when it is here, else when it comes. */
export function after<T, U>(value: Later<T>, next: (value: T) => Later<U>): Later<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/**
 * viewReply for the public reads, which must not hold the thread that serves HTTP (issue 29).
 * Embedded, LMDB's map answers in place as before. In cluster mode a view loaded since the log's
 * last refresh and less than READ_SNAPSHOT_HOLD_MS ago (the bound PostgreSQL's own read cache
 * keeps) answers from memory; any other is loaded (`Log.load`), and while its fresh bytes are
 * slower than VIEW_FRESH_WAIT_MS or the database is unreachable, the bytes this instance last
 * read of it answer: a reader may see a view as it was a moment before, but keeps being answered.
 */
export function publicView(
  services: Pick<Services, 'log' | 'database' | 'refreshes'>,
  key: string,
): Later<HttpReply | null> {
  const { log, database } = services;
  if (database === undefined) return viewReply(services, key);
  const refreshes = services.refreshes?.() ?? log.peekVersion();
  const known = decodedViews.get(key);
  const mine = known?.loaded?.log === log ? known : undefined;
  const loaded = mine?.loaded;
  if (loaded?.refreshes === refreshes && Date.now() - loaded.atMs < READ_SNAPSHOT_HOLD_MS)
    return answerOf(mine!);
  // Known unreachable: the bytes last read answer without a load that would only wait or fail
  // (the instance's own reads, the credentials poll among them, find when it is back).
  if (mine !== undefined && !database.reachable) return answerOf(mine);
  const fresh = loadView(log, { database, refreshes }, key);
  const answered = mine === undefined ? fresh : freshOrKnown(fresh, mine);
  return answered.then((found) => (found === undefined ? null : answerOf(found)));
}

/** The fresh bytes if they come in VIEW_FRESH_WAIT_MS and the database answers, else `known`. */
function freshOrKnown(
  fresh: Promise<DecodedView | undefined>,
  known: DecodedView,
): Promise<DecodedView | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<DecodedView>((resolve) => {
    timer = setTimeout(() => resolve(known), VIEW_FRESH_WAIT_MS);
  });
  const settled = fresh.then(
    (found) => found,
    (error: unknown) => {
      if (unreachable(error)) return known;
      throw error;
    },
  );
  return Promise.race([settled, waited]).finally(() => clearTimeout(timer));
}

/** Loads of views under way, by log, refresh count and key: one per key however many ask. */
const loadingViews = new WeakMap<Reads, Map<string, Promise<DecodedView | undefined>>>();

function loadView(
  log: Reads,
  at: { database: DatabaseHealth; refreshes: number },
  key: string,
): Promise<DecodedView | undefined> {
  const { database, refreshes } = at;
  let loading = loadingViews.get(log);
  if (loading === undefined) loadingViews.set(log, (loading = new Map()));
  const id = `${refreshes}\u0000${key}`;
  const under = loading.get(id);
  if (under !== undefined) return under;
  const atMs = Date.now();
  const load = log.load('views', key).then(
    (bytes) => {
      database.succeeded();
      if (bytes === undefined) return undefined;
      const found = decoded(bytes, key);
      found.loaded = { log, refreshes, atMs };
      return found;
    },
    (error: unknown) => {
      database.failed(error);
      throw error;
    },
  );
  const settled = load.finally(() => loading.delete(id));
  // A rejection is the caller's; this copy of it is only for the map.
  settled.catch(() => undefined);
  loading.set(id, load);
  return load;
}

/**
 * viewReply for a view that is the same for every caller: a 200 carries its ETag and
 * `cacheControl` (cache.ts), made when its bytes are first read and kept with them.
 */
export function cacheableViewReply(
  services: Pick<Services, 'log' | 'database'>,
  key: string,
  cacheControl: string,
): Later<HttpReply | null> {
  return after(publicView(services, key), (reply) => {
    if (reply === null || reply.status !== 200) return reply;
    const found = decodedViews.get(key)!;
    found.cacheable ??= cacheable(found.reply, { cacheControl, compress: false });
    return found.cacheable;
  });
}

export function notFound(what: string): HttpReply {
  return failure(refusal('path.core.not_found', `no such ${what}`));
}

type Parsed<T> = { ok: true; value: T } | { ok: false; refusal: Refusal };

/**
 * The JSON body as an object, or a 400 refusal naming the field (P7): invalid UTF-8, invalid
 * JSON, not an object, too deep, or not I-JSON (P2: nothing is signed that parsing changed).
 */
export function parseBody(context: Pick<RequestContext, 'body'>): Parsed<Record<string, unknown>> {
  const parsed = parseStrictObject(context.body, { depthMax: BODY_DEPTH_MAX });
  if (parsed.ok) return parsed;
  return { ok: false, refusal: invalid(parsed.problem.field, parsed.problem.message) };
}

/** Parses and validates the body against a route schema. */
export function validBody<T>(
  context: Pick<RequestContext, 'body'>,
  validate: Validator<T>,
): Parsed<T> {
  const body = parseBody(context);
  return body.ok ? validate(body.value) : body;
}

/**
 * The aggregate that holds an id: the subject of an address, attestation or binding; the connection
 * of a delegation; the session of a checkout id (the route index in the views).
 */
export function ownerOf(services: Services, id: string): Later<string | null> {
  const key = `route/${id}`;
  const owner = (bytes: Buffer | undefined) => {
    if (bytes === undefined) return null;
    const view = decodeView(bytes);
    if (view === null) throw new DamagedRowError('views', key);
    return view.body.toString('utf8');
  };
  // Cluster mode: asked of the database without holding the thread (issue 29).
  if (services.database === undefined) return owner(services.log.get('views', key));
  return services.log.load('views', key).then(owner);
}

/** Parses a query string into its parameters. */
export function queryParams(context: RequestContext): URLSearchParams {
  return new URLSearchParams(context.query);
}

/**
 * Sends a command to its aggregate and takes in what its commit changed before anyone is
 * answered. Given the request that carried it, the command's commit also remembers that
 * request, so that it is refused as a replay after a restart (P5).
 */
export async function submit(
  services: Services,
  routed: RoutedCommand,
  from?: RequestContext,
  options?: SubmitOptions,
): Promise<CommandResult> {
  const sent = claiming(routed, from);
  // The pool's after-commit fan-out (node.ts) has run when this resolves: this thread's reads
  // see the commit, so a read or an idempotent retry right after this answer finds it.
  const result = await services.pool.submit(sent, options);
  if (result.taken !== undefined) throw new ClaimTaken(result.taken);
  if (result.committed && (sent.replay !== undefined || sent.idempotency !== undefined))
    from!.claimed = true;
  return result;
}

/**
 * The command with what it claims for its request (P5, P7): the request's replay mark and
 * idempotency answer, until a commit of the request has carried them; nothing after (the request
 * claims each once, server.ts RequestClaims).
 */
function claiming(routed: RoutedCommand, from: RequestContext | undefined): RoutedCommand {
  if (from === undefined) return routed;
  if (from.claimed === true) {
    const { replay: _replay, idempotency: _idempotency, ...unclaimed } = routed;
    return unclaimed;
  }
  return from.replay === undefined ? routed : { ...routed, replay: from.replay };
}

/** Runs a command on its aggregate and turns the actor's answer into an HTTP answer. */
export async function runCommand(
  services: Services,
  context: RequestContext,
  aggregate: string,
  key: string,
  name: string,
  input: unknown,
): Promise<HttpReply> {
  const result = await submit(
    services,
    {
      aggregate,
      key,
      command: { name, input, caller: context.caller },
      ...(context.idempotency === undefined ? {} : { idempotency: context.idempotency }),
    },
    context,
  );
  const reply = result.reply;
  return {
    status: reply.status,
    body: reply.body,
    signed: reply.signed,
    ...(reply.status === 503 ? { headers: { 'retry-after': '1' } } : {}),
  };
}
