// Request authentication (P5): a signature by a registered credential over the signing string,
// a fresh timestamp, and no replay of the same signing string inside the window.
import { createHash } from 'node:crypto';
import type { Caller, ReplayMark } from '../actors/types.js';
import { REPLAY_CLOCK_STEP_MS } from '../config.js';
// P5's signing string: the one definition the client library signs with.
import { signingStringOfDigest as signingString } from '@path-node/client/signing';
import { refusal, type Refusal } from '../protocol/errors.js';
import { signBytes, verifyBytes, type SigningKey } from '../protocol/signing.js';
import { parseTime } from '../protocol/time.js';
import type { Credential } from '../store.js';
import { replayRows } from '../reads/rows.js';
import { DigestWindow } from './replay-window.js';

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
  'missing' | 'malformed' | 'unknown_key' | 'stale' | 'bad_signature' | 'replayed';

/** P5: a malformed timestamp's refusal says the form the node expects. */
export { signingString };

const TIMESTAMP_FORM =
  'Path-Timestamp must be an RFC 3339 UTC time ending in Z, with whole or ' +
  'fractional seconds, such as 2026-11-21T12:00:00Z or 2026-11-21T12:00:00.123Z';

/**
 * The P5 headers of a request this node's code sends with a key of its own: to another member
 * node (its signing key is that member's credential) or, from the command line, as a member.
 */
export function signedHeaders(r: {
  keyId: string;
  key: SigningKey;
  method: string;
  target: string;
  body: string;
  timestamp?: string;
}): Record<string, string> {
  const timestamp = r.timestamp ?? new Date().toISOString();
  const text = signingString({
    method: r.method,
    target: r.target,
    timestamp,
    idempotencyKey: undefined,
    bodySha256Hex: createHash('sha256').update(r.body).digest('hex'),
  });
  return {
    'path-key-id': r.keyId,
    'path-timestamp': timestamp,
    'path-signature': signBytes(Buffer.from(text, 'utf8'), r.key),
  };
}

export function unauthenticated(
  reason: AuthFailure,
  code: 'path.auth.unauthenticated' | 'external.auth.unauthenticated' = 'path.auth.unauthenticated',
): Refusal {
  const message = reason === 'malformed' ? TIMESTAMP_FORM : 'request authentication failed';
  return refusal(code, message, { reason });
}

/**
 * What a running node remembers of an accepted request so that a restart does not forget it
 * (P5): the row key of the `replay` table, written in the same commit as the change the request
 * authorised. Keys start with the time after which the row may be forgotten, so the expired rows
 * are one range.
 */
export type { ReplayMark };
export type Authenticated = Caller & { replay: ReplayMark };

/** A remembered request: when it may be forgotten (ms), per credential, in insertion order. */
type Seen = DigestWindow;

export class Authenticator {
  private credentials = new Map<string, Credential>();
  /** Credential key id -> digests of its recent signing strings (P5: each its own share). */
  private readonly seen = new Map<string, Seen>();
  private forgottenTotal = 0;

  /** The external discovery interface refuses with its own code (SPEC L). */
  constructor(
    private readonly options: {
      skewMs: number;
      /**
       * Each credential's share of the replay memory (P5): one credential cannot fill another's.
       */
      replayEntriesPerCredentialMax: number;
      code?: 'path.auth.unauthenticated' | 'external.auth.unauthenticated';
    },
  ) {}

  load(credentials: readonly Credential[]): void {
    this.credentials = new Map(
      credentials.filter((c) => c.revoked_at === null).map((c) => [c.key_id, c]),
    );
  }

  /** The refusal of a request already seen, found elsewhere than in this memory (P22). */
  replayed(): Refusal {
    return unauthenticated('replayed', this.options.code);
  }

  authenticate(request: SignedRequest, now: number): Authenticated | Refusal {
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
    // 128 bits of the digest tell signing strings apart as well as all 256, in half the memory.
    const digest = createHash('sha256')
      .update(keyId)
      .update('\n')
      .update(text)
      .digest()
      .subarray(0, DIGEST_BYTES);
    const seen = this.seenOf(keyId);
    this.forgottenTotal += seen.forgetExpired(now);
    if (seen.has(digest)) return fail('replayed');
    if (seen.size >= this.options.replayEntriesPerCredentialMax) {
      return refusal(
        'path.core.unavailable',
        'this credential has too many recent requests to check for replay',
        { retry_after_seconds: 1 },
      );
    }
    seen.add(digest, this.heldUntil(at));
    const kept = this.rowUntil(at);
    return {
      member: credential.member,
      local: credential.local,
      replay: { key: replayRows.keyOf(kept, digest.toString('base64url')), keyId, until: kept },
    };
  }

  /** Takes back what an earlier run remembered (rows of the `replay` table still to keep). */
  restore(rows: Iterable<{ key: string; keyId: string }>, now: number): number {
    const kept: { until: number; digest: string; keyId: string }[] = [];
    for (const row of rows) {
      const cut = row.key.indexOf('/');
      const until = this.heldUntil(this.rowAt(Number.parseInt(row.key.slice(0, cut), 16)));
      if (until > now) kept.push({ until, digest: row.key.slice(cut + 1), keyId: row.keyId });
    }
    kept.sort((a, b) => a.until - b.until);
    for (const { until, digest, keyId } of kept)
      this.seenOf(keyId).add(Buffer.from(digest, 'base64url'), until);
    return kept.length;
  }

  /** Everything remembered now, as replay rows (written on an orderly stop). */
  *remembered(): Iterable<ReplayMark> {
    for (const [keyId, seen] of this.seen) {
      for (const { digest, until } of seen.entries()) {
        const kept = this.rowUntil(this.heldAt(until));
        yield { key: replayRows.keyOf(kept, digest.toString('base64url')), keyId, until: kept };
      }
    }
  }

  /** Entries in memory, for every credential (diagnostics and tests). */
  size(): number {
    let n = 0;
    for (const seen of this.seen.values()) n += seen.size;
    return n;
  }

  /**
   * Requests forgotten since the start (their window passed): the front end's collection once
   * quiet counts them as work done, since the memory they held is garbage until it runs.
   */
  get forgotten(): number {
    return this.forgottenTotal;
  }

  /** Drops what no fresh request can match any more, for every credential. */
  forget(now: number): void {
    for (const [keyId, seen] of this.seen) {
      this.forgottenTotal += seen.forgetExpired(now);
      if (seen.size === 0) this.seen.delete(keyId);
    }
  }

  /**
   * Until when memory holds a request stamped `at`: while its timestamp can be fresh (P5: up to
   * the skew past it, that instant included), and a margin more, so that this clock stepping
   * back by up to the margin does not make a forgotten request fresh again. Requests of one
   * credential come nearly in order of their timestamps; one out of order is kept until those
   * before it go (never less long).
   */
  private heldUntil(at: number): number {
    return at + this.options.skewMs + 1 + REPLAY_CLOCK_STEP_MS;
  }

  private heldAt(until: number): number {
    return until - this.options.skewMs - 1 - REPLAY_CLOCK_STEP_MS;
  }

  /**
   * Until when a request stamped `at` is kept as a row: keyed by the request's own time, not
   * this clock's, the same request makes the same key on every instance of a cluster, where its
   * claim is checked (issue 29); kept while it can be fresh on a clock up to the skew apart.
   */
  private rowUntil(at: number): number {
    return at + 2 * this.options.skewMs;
  }

  private rowAt(until: number): number {
    return until - 2 * this.options.skewMs;
  }

  private seenOf(keyId: string): Seen {
    let seen = this.seen.get(keyId);
    if (seen === undefined) {
      seen = new DigestWindow();
      this.seen.set(keyId, seen);
    }
    return seen;
  }
}

const DIGEST_BYTES = 16; // tidy: format (replay row keys hold the digest: 128 bits)
