// What route handlers may use: the shards, the committed views, the node's identity.
import type { ShardPool } from '../actors/pool.js';
import type { Config } from '../config.js';
import type { Log } from '../log/log.js';
import { decodeView } from '../log/views.js';
import { refusal, type Refusal } from '../protocol/errors.js';
import type { Validator } from '../protocol/schemas.js';
import type { NodeStore } from '../store.js';
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
}

/** A committed public answer, or null when there is none for the key. */
export function viewReply(services: Services, key: string): HttpReply | null {
  const bytes = services.log.get('views', key);
  if (bytes === undefined) return null;
  const view = decodeView(bytes);
  if (view === null) throw new Error(`stored answer for a public read failed its checksum`);
  return { status: view.status, body: view.body, signed: view.signed };
}

export function notFound(what: string): HttpReply {
  return failure(refusal('path.core.not_found', `no such ${what}`));
}

type Parsed<T> = { ok: true; value: T } | { ok: false; refusal: Refusal };

/** The JSON body as an object, or a 400 refusal (P7). */
export function parseBody(context: RequestContext): Parsed<Record<string, unknown>> {
  const notObject = { ok: false, refusal: refusal('path.core.invalid_request', 'request body must be a JSON object', { field: '(body)' }) } as const;
  if (context.body.length === 0) return notObject;
  let value: unknown;
  try {
    value = JSON.parse(context.body.toString('utf8'));
  } catch {
    return { ok: false, refusal: refusal('path.core.invalid_request', 'request body is not valid JSON', { field: '(body)' }) };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return notObject;
  return { ok: true, value: value as Record<string, unknown> };
}

/** Parses and validates the body against a route schema. */
export function validBody<T>(context: RequestContext, validate: Validator<T>): Parsed<T> {
  const body = parseBody(context);
  return body.ok ? validate(body.value) : body;
}

/** The subject that owns an address, attestation or binding id (the route index in the views). */
export function subjectOf(services: Services, id: string): string | null {
  const bytes = services.log.get('views', `route/${id}`);
  if (bytes === undefined) return null;
  const view = decodeView(bytes);
  return view === null ? null : view.body.toString('utf8');
}

/** Parses a query string into its parameters. */
export function queryParams(context: RequestContext): URLSearchParams {
  return new URLSearchParams(context.query);
}

/** Runs a command on its aggregate and turns the actor's answer into an HTTP answer. */
export async function runCommand(services: Services, context: RequestContext, aggregate: string, key: string, name: string, input: unknown): Promise<HttpReply> {
  const result = await services.pool.submit({
    aggregate, key, command: { name, input, caller: context.caller },
    ...(context.idempotency === undefined ? {} : { idempotency: context.idempotency }),
  });
  const reply = result.reply;
  return { status: reply.status, body: reply.body, signed: reply.signed, ...(reply.status === 503 ? { headers: { 'retry-after': '1' } } : {}) };
}
