// What a handler answers, and the status lines uWebSockets.js wants.
import { errorBody, statusOf, type Refusal } from '../protocol/errors.js';

export interface HttpReply {
  status: number;
  body: string | Uint8Array;
  /** Carries a signed object (P10: adds Path-Protocol-Version). */
  signed: boolean;
  headers?: Record<string, string>;
  /** Set on a 200 whose bytes never change once made: its validator and codings (cache.ts). */
  cache?: ReplyCache;
}

/** What a cacheable 200 carries, made with its bytes, never per request (cache.ts). */
export interface ReplyCache {
  /** The strong entity tag of the body's bytes, quoted, as the ETag header carries it. */
  etag: string;
  /** The 304 of this representation: no body; the same ETag, Cache-Control and Vary. */
  notModified: HttpReply;
  /** The same content in other codings, each a representation of its own (documents only). */
  coded?: Readonly<Record<'br' | 'gzip', HttpReply>>;
}

/** Tells a ready answer from a command input where a builder may return either. */
export function isReply(value: unknown): value is HttpReply {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as HttpReply).status === 'number' &&
    'body' in value &&
    'signed' in value
  );
}

export function json(status: number, value: unknown, signed = false): HttpReply {
  return { status, body: JSON.stringify(value), signed };
}

export function failure(r: Refusal, headers?: Record<string, string>): HttpReply {
  const retry: Record<string, string> =
    r.code === 'path.core.unavailable'
      ? { 'retry-after': String(r.detail?.retry_after_seconds ?? 1) }
      : {};
  return {
    status: statusOf(r.code),
    body: errorBody(r),
    signed: false,
    headers: { ...retry, ...headers },
  };
}

const REASONS: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  204: 'No Content',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  410: 'Gone',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  503: 'Service Unavailable',
};

/** As bytes: uWebSockets.js takes them without the copy a JS string costs on every answer. */
const STATUS_LINES = new Map<number, Buffer>();

export function statusLine(status: number): Buffer {
  let line = STATUS_LINES.get(status);
  if (line === undefined) {
    line = Buffer.from(`${status} ${REASONS[status] ?? 'Status'}`, 'latin1');
    STATUS_LINES.set(status, line);
  }
  return line;
}
