// One HTTP exchange of the client: the request built from a discovery entry (P4, P6), signed
// per P5 when there is a credential, and the answer read as JSON, an error envelope (SPEC Errors)
// becoming a PathError. Nothing here verifies signed objects; client.ts does.
import { toHex, utf8 } from './bytes.js';
import { sha256Hex } from './canonical.js';
import { ed } from './ed25519.js';
import { CLIENT_CODES, PathError } from './errors.js';
import { signingString as ofDigest } from './signing-string.js';
import type { CallOptions, CallResult, Endpoint, FetchLike, QueryValue } from './types.js';

export interface Signer {
  keyId: string;
  seed: Uint8Array;
}

/**
 * The last Path-Timestamp handed out per credential key id (ms). Timestamps are strictly
 * increasing per credential, so two identical calls in one millisecond have different signing
 * strings and the second is not refused as a replay (P5).
 */
const lastStamp = new Map<string, number>();

function nextTimestamp(keyId: string): string {
  const at = Math.max(Date.now(), (lastStamp.get(keyId) ?? 0) + 1);
  lastStamp.set(keyId, at);
  return new Date(at).toISOString();
}

/** The P5 headers of one request, under a fresh timestamp. */
export function signatureHeaders(
  signer: Signer,
  request: { method: string; target: string; idempotencyKey: string | undefined; body: Uint8Array },
): Record<string, string> {
  const timestamp = nextTimestamp(signer.keyId);
  const text = signingString({ ...request, timestamp });
  return {
    'path-key-id': signer.keyId,
    'path-timestamp': timestamp,
    'path-signature': toHex(ed.sign(utf8(text), signer.seed)),
  };
}

/** P5: the signing string of a request and its body. */
export function signingString(request: {
  method: string;
  target: string;
  timestamp: string;
  idempotencyKey: string | undefined;
  body: Uint8Array;
}): string {
  return ofDigest({ ...request, bodySha256Hex: sha256Hex(request.body) });
}

/** The URL template with its `{name}` placeholders filled, URL-encoded, and the query added. */
export function expandUrl(
  operation: string,
  endpoint: Endpoint,
  params: CallOptions['params'],
  query: CallOptions['query'],
): URL {
  const path = endpoint.url.replace(/\{([^}]*)\}/g, (_match, name: string) => {
    const value = params !== undefined && Object.hasOwn(params, name) ? params[name] : undefined;
    if (value === undefined) {
      throw new PathError({
        status: 0,
        code: CLIENT_CODES.paramMissing,
        message: `${operation} needs the parameter "${name}"`,
        detail: { operation, param: name },
      });
    }
    return encodeURIComponent(String(value));
  });
  const pairs = Object.entries(query ?? {}).filter(
    (pair): pair is [string, Exclude<QueryValue, undefined>] => pair[1] !== undefined,
  );
  const search = pairs
    .map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(String(value))}`)
    .join('&');
  if (search === '') return new URL(path);
  return new URL(`${path}${path.includes('?') ? '&' : '?'}${search}`);
}

/** Sends one request and reads its answer; an error status throws PathError. */
export async function exchange(
  fetcher: FetchLike,
  request: {
    method: string;
    url: URL;
    body: unknown;
    idempotencyKey: string | undefined;
    signer: Signer | null;
  },
): Promise<CallResult> {
  const body = request.body === undefined ? new Uint8Array(0) : utf8(JSON.stringify(request.body));
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body.length > 0) headers['content-type'] = 'application/json';
  if (request.idempotencyKey !== undefined)
    headers['path-idempotency-key'] = request.idempotencyKey;
  if (request.signer !== null) {
    const target = request.url.pathname + request.url.search;
    const signed = { method: request.method, target, idempotencyKey: request.idempotencyKey, body };
    Object.assign(headers, signatureHeaders(request.signer, signed));
  }
  const response = await fetcher(request.url.href, {
    method: request.method,
    headers,
    ...(body.length > 0 ? { body: body as BodyInit } : {}),
  });
  return readAnswer(response);
}

/** The answer's JSON; an error envelope, an error status or a body that is not JSON throws. */
export async function readAnswer(response: Response): Promise<CallResult> {
  const text = await response.text();
  let body: any = null;
  if (text.length > 0) {
    try {
      body = JSON.parse(text);
    } catch {
      throw new PathError({
        status: response.status,
        code: CLIENT_CODES.responseMalformed,
        message: `the answer (HTTP ${response.status}) is not JSON`,
      });
    }
  }
  if (response.status >= 200 && response.status < 300)
    return { status: response.status, headers: response.headers, body };
  const error = body !== null && typeof body === 'object' ? body.error : undefined;
  if (error !== null && typeof error === 'object' && typeof error.code === 'string') {
    throw new PathError({
      status: response.status,
      code: error.code,
      message: typeof error.message === 'string' ? error.message : error.code,
      ...(error.detail !== null && typeof error.detail === 'object'
        ? { detail: error.detail as Record<string, unknown> }
        : {}),
    });
  }
  throw new PathError({
    status: response.status,
    code: CLIENT_CODES.responseMalformed,
    message: `the answer (HTTP ${response.status}) carries no error envelope`,
  });
}
