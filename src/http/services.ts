// What route handlers may use: the shards, the committed views, the node's identity.
import type { ShardPool } from '../actors/pool.js';
import type { CommandResult, RoutedCommand } from '../actors/types.js';
import type { Config } from '../config.js';
import type { Log } from '../log/log.js';
import { decodeView } from '../log/views.js';
import { DamagedRowError } from '../log/record.js';
import { expiredRefusal, refusal, type ErrorCode, type Refusal } from '../protocol/errors.js';

import type { Validator } from '../protocol/schemas.js';
import type { NodeStore } from '../store.js';
import type { LocalDirectory } from '../directory/directory.js';
import type { SigningKey } from '../protocol/signing.js';
import type { MemberRegistry } from '../network/members.js';
import { failure, type HttpReply } from './reply.js';
import type { RequestContext } from './server.js';

export interface Services {
  config: Config;
  pool: ShardPool;
  log: Log;
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
}

/** A committed public answer, or null when there is none for the key. */
export function viewReply(services: Services, key: string): HttpReply | null {
  const bytes = services.log.get('views', key);
  if (bytes === undefined) return null;
  const view = decodeView(bytes);
  if (view === null) throw new DamagedRowError('views', key);
  if (view.expiry !== null && Date.now() >= view.expiry.at) {
    return failure(expiredRefusal(view.expiry.code as ErrorCode));
  }
  return { status: view.status, body: view.body, signed: view.signed };
}

export function notFound(what: string): HttpReply {
  return failure(refusal('path.core.not_found', `no such ${what}`));
}

type Parsed<T> = { ok: true; value: T } | { ok: false; refusal: Refusal };

/** Deepest nesting of objects and arrays a body may have: ample for every schema, far below any stack limit. */
export const BODY_DEPTH_MAX = 32;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The JSON body as an object, or a 400 refusal (P7): invalid UTF-8, invalid JSON, too deep, non-finite numbers. */
export function parseBody(context: RequestContext): Parsed<Record<string, unknown>> {
  const bad = (message: string, field = '(body)') => ({ ok: false as const, refusal: refusal('path.core.invalid_request', message, { field }) });
  if (context.body.length === 0) return bad('request body must be a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(context.body));
  } catch {
    return bad('request body is not valid UTF-8 JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return bad('request body must be a JSON object');
  const problem = shapeProblem(value);
  return problem === null ? { ok: true, value: value as Record<string, unknown> } : bad(problem.message, problem.field);
}

/** Walks the parsed body without recursion: nesting beyond BODY_DEPTH_MAX or a number out of range is refused. */
function shapeProblem(root: object): { field: string; message: string } | null {
  const stack: [unknown, string, number][] = [[root, '', 0]];
  while (stack.length > 0) {
    const [value, path, depth] = stack.pop()!;
    const field = path === '' ? '(body)' : path;
    if (typeof value === 'number' && !Number.isFinite(value)) return { field, message: `${field}: number out of range` };
    if (value === null || typeof value !== 'object') continue;
    if (depth >= BODY_DEPTH_MAX) return { field, message: `${field}: nested deeper than ${BODY_DEPTH_MAX} levels` };
    for (const [key, child] of Object.entries(value)) stack.push([child, path === '' ? key : `${path}.${key}`, depth + 1]);
  }
  return null;
}

/** Parses and validates the body against a route schema. */
export function validBody<T>(context: RequestContext, validate: Validator<T>): Parsed<T> {
  const body = parseBody(context);
  return body.ok ? validate(body.value) : body;
}

/** The aggregate that holds an id: the subject of an address, attestation or binding; the connection of a delegation; the session of a checkout id (the route index in the views). */
export function ownerOf(services: Services, id: string): string | null {
  const bytes = services.log.get('views', `route/${id}`);
  if (bytes === undefined) return null;
  const view = decodeView(bytes);
  if (view === null) throw new DamagedRowError('views', `route/${id}`);
  return view.body.toString('utf8');
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
export async function submit(services: Services, routed: RoutedCommand, from?: RequestContext): Promise<CommandResult> {
  const replay = from?.replay;
  // The pool's after-commit fan-out (node.ts) has run when this resolves: this thread's reads
  // see the commit, so a read or an idempotent retry right after this answer finds it.
  return services.pool.submit(replay === undefined ? routed : { ...routed, replay });
}

/** Runs a command on its aggregate and turns the actor's answer into an HTTP answer. */
export async function runCommand(services: Services, context: RequestContext, aggregate: string, key: string, name: string, input: unknown): Promise<HttpReply> {
  const result = await submit(services, {
    aggregate, key, command: { name, input, caller: context.caller },
    ...(context.idempotency === undefined ? {} : { idempotency: context.idempotency }),
  }, context);
  const reply = result.reply;
  return { status: reply.status, body: reply.body, signed: reply.signed, ...(reply.status === 503 ? { headers: { 'retry-after': '1' } } : {}) };
}
