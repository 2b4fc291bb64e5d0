// Request authentication (P5): a signature by a registered credential over the signing string,
// a fresh timestamp, and no replay of the same signing string inside the window.
import { createHash } from 'node:crypto';
import type { Caller } from '../actors/types.js';
import { refusal, type Refusal } from '../protocol/errors.js';
import { verifyBytes } from '../protocol/signing.js';
import { parseTime } from '../protocol/time.js';
import type { Credential } from '../store.js';

export interface SignedRequest {
  method: string;
  /** Path and query exactly as sent. */
  target: string;
  keyId: string | undefined;
  timestamp: string | undefined;
  signature: string | undefined;
  idempotencyKey: string | undefined;
  bodySha256Hex: string;
}

export type AuthFailure =
  | 'missing' | 'malformed' | 'unknown_key' | 'stale' | 'bad_signature' | 'replayed';

/** P5: a malformed timestamp's refusal says the form the node expects. */
const TIMESTAMP_FORM = 'Path-Timestamp must be an RFC 3339 UTC time ending in Z, with whole or '
  + 'fractional seconds, such as 2026-11-21T12:00:00Z or 2026-11-21T12:00:00.123Z';

export function signingString(r: { method: string; target: string; timestamp: string; idempotencyKey: string | undefined; bodySha256Hex: string }): string {
  return `path-request-v1\n${r.method.toUpperCase()}\n${r.target}\n${r.timestamp}\n${r.idempotencyKey ?? ''}\n${r.bodySha256Hex}`;
}

export function unauthenticated(reason: AuthFailure, code: 'path.auth.unauthenticated' | 'external.auth.unauthenticated' = 'path.auth.unauthenticated'): Refusal {
  const message = reason === 'malformed' ? TIMESTAMP_FORM : 'request authentication failed';
  return refusal(code, message, { reason });
}

export class Authenticator {
  private credentials = new Map<string, Credential>();
  /** Digest of signing string -> time after which it may be forgotten; insertion-ordered. */
  private readonly seen = new Map<string, number>();

  /** The external discovery interface refuses with its own code (SPEC L). */
  constructor(private readonly options: { skewMs: number; replayEntriesMax: number; code?: 'path.auth.unauthenticated' | 'external.auth.unauthenticated' }) {}

  load(credentials: readonly Credential[]): void {
    this.credentials = new Map(credentials.filter((c) => c.revoked_at === null).map((c) => [c.key_id, c]));
  }

  authenticate(request: SignedRequest, now: number): Caller | Refusal {
    const fail = (reason: AuthFailure) => unauthenticated(reason, this.options.code);
    const { keyId, timestamp, signature } = request;
    if (!keyId || !timestamp || !signature) return fail('missing');
    const at = parseTime(timestamp);
    if (at === null) return fail('malformed');
    if (Math.abs(now - at) > this.options.skewMs) return fail('stale');
    const credential = this.credentials.get(keyId);
    if (credential === undefined) return fail('unknown_key');
    const text = signingString({ ...request, timestamp });
    const verdict = verifyBytes(Buffer.from(text, 'utf8'), signature, credential.public_key);
    if (!verdict.valid) return fail('bad_signature');
    const digest = createHash('sha256').update(keyId).update('\n').update(text).digest('base64');
    this.forgetExpired(now);
    if (this.seen.has(digest)) return fail('replayed');
    if (this.seen.size >= this.options.replayEntriesMax) {
      return refusal('path.core.unavailable', 'too many recent requests to check for replay', { retry_after_seconds: 1 });
    }
    this.seen.set(digest, now + 2 * this.options.skewMs);
    return { member: credential.member, local: credential.local };
  }

  /** Entries older than the freshness window can never match a fresh request again. */
  private forgetExpired(now: number): void {
    for (const [digest, until] of this.seen) {
      if (until > now) break;
      this.seen.delete(digest);
    }
  }
}
