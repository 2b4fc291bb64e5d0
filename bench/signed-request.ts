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
export async function signedPost(baseUrl: string, credential: ClientCredential, target: string, value: unknown): Promise<{ status: number; text: string }> {
  const body = Buffer.from(JSON.stringify(value), 'utf8');
  const headers = requestSigner(credential)({ method: 'POST', target, timestamp: new Date().toISOString(), body });
  const res = await fetch(baseUrl + target, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
  return { status: res.status, text: await res.text() };
}
