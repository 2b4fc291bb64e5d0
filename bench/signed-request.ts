// Request signing as a client does it (P5): the headers of one signed request.
import { createHash } from 'node:crypto';
import { signingString } from '../src/http/auth.js';
import { signBytes, signingKeyFromSeed } from '../src/protocol/signing.js';

export const API_PREFIX = '/api/path/v1';

export interface ClientCredential {
  keyId: string;
  seedHex: string;
}

export interface SignedRequestParts {
  method: string;
  target: string;
  timestamp: string;
  idempotencyKey?: string;
  body: Buffer;
}

/** Signs requests for one credential; the key is parsed once. */
export function requestSigner(credential: ClientCredential): (r: SignedRequestParts) => Record<string, string> {
  const key = signingKeyFromSeed(credential.seedHex);
  return (r) => {
    const bodySha256Hex = createHash('sha256').update(r.body).digest('hex');
    const text = signingString({ method: r.method, target: r.target, timestamp: r.timestamp, idempotencyKey: r.idempotencyKey, bodySha256Hex });
    return {
      'path-key-id': credential.keyId,
      'path-timestamp': r.timestamp,
      'path-signature': signBytes(Buffer.from(text, 'utf8'), key),
      ...(r.idempotencyKey === undefined ? {} : { 'path-idempotency-key': r.idempotencyKey }),
    };
  };
}

/** One signed JSON POST with fetch; resolves with the status and the body text. */
export function signedPost(baseUrl: string, credential: ClientCredential, target: string, value: unknown): Promise<{ status: number; text: string }> {
  return signedRequest(baseUrl, credential, 'POST', target, value);
}

/** The last timestamp handed out: each signed call gets its own millisecond, so none is a replay. */
let lastStamp = 0;

/** One signed JSON request with fetch; resolves with the status and the body text. */
export async function signedRequest(baseUrl: string, credential: ClientCredential, method: 'POST' | 'PUT', target: string, value: unknown): Promise<{ status: number; text: string }> {
  lastStamp = Math.max(Date.now(), lastStamp + 1);
  const body = Buffer.from(JSON.stringify(value), 'utf8');
  const headers = requestSigner(credential)({ method, target, timestamp: new Date(lastStamp).toISOString(), body });
  const res = await fetch(baseUrl + target, { method, headers: { ...headers, 'content-type': 'application/json' }, body });
  return { status: res.status, text: await res.text() };
}

/** Like signedRequest, but fails unless the node answers `expected`; resolves with the parsed answer. */
export async function expectSigned<T>(baseUrl: string, credential: ClientCredential, method: 'POST' | 'PUT', target: string, value: unknown, expected: number): Promise<T> {
  const res = await signedRequest(baseUrl, credential, method, target, value);
  if (res.status !== expected) throw new Error(`${method} ${target} answered ${res.status} (expected ${expected}): ${res.text.slice(0, 500)}`);
  return JSON.parse(res.text) as T;
}
