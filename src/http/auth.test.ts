// Request authentication (P5): the signing string against the profile's vectors, and the
// Authenticator's checks (missing, malformed, unknown_key, stale, bad_signature, replayed).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { describe, expect, it } from 'vitest';
import { REPLAY_CLOCK_STEP_MS } from '../config.js';
import type { Refusal } from '../protocol/errors.js';
import { verifyBytes } from '../protocol/signing.js';
import type { Credential } from '../store.js';
import { Authenticator, type Authenticated, signingString, type SignedRequest } from './auth.js';

ed.hashes.sha512 = sha512;

interface RequestVector {
  method: string;
  target: string;
  timestamp: string;
  idempotency_key: string | null;
  body: string;
  signing_string: string;
  signature_hex: string;
}
interface Vectors {
  key: { seed_hex: string; public_key_hex: string };
  request_signature: RequestVector[];
}
const vectors = JSON.parse(
  readFileSync(new URL('../../../shared/vectors/protocol-vectors.json', import.meta.url), 'utf8'),
) as Vectors;

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

const SKEW_MS = 300_000; // tidy: format (the window of this test's authenticators)
const NOW = Date.parse('2026-11-21T12:00:00Z');
const AT_NOW = '2026-11-21T12:00:00Z';

interface Party {
  keyId: string;
  secret: Uint8Array;
  credential: Credential;
}

function party(
  keyId: string,
  member: string,
  options: { local: boolean; revokedAt?: string },
): Party {
  const secret = ed.utils.randomSecretKey();
  const credential: Credential = {
    key_id: keyId,
    member,
    public_key: hex(ed.getPublicKey(secret)),
    local: options.local,
    created_at: '2026-11-01T00:00:00Z',
    revoked_at: options.revokedAt ?? null,
  };
  return { keyId, secret, credential };
}

const alice = party('key_alice', 'local', { local: true });
const bob = party('key_bob', 'beta', { local: false });
const revoked = party('key_revoked', 'gamma', { local: false, revokedAt: '2026-11-20T00:00:00Z' });

function authenticator(replayEntriesPerCredentialMax = 10_000): Authenticator {
  const auth = new Authenticator({ skewMs: SKEW_MS, replayEntriesPerCredentialMax });
  auth.load([alice.credential, bob.credential, revoked.credential]);
  return auth;
}

interface Draft {
  method?: string;
  target?: string;
  timestamp?: string;
  idempotencyKey?: string;
  body?: string;
}

/**
 * A request signed with @noble by `signer`, presented under `signer`'s key id unless overridden.
 */
function signed(signer: Party, draft: Draft = {}): SignedRequest {
  const method = draft.method ?? 'POST';
  const target = draft.target ?? '/api/path/v1/receipts';
  const timestamp = draft.timestamp ?? AT_NOW;
  const bodySha256Hex = sha256(draft.body ?? '{"issued_by":"payee"}');
  const idempotencyKey = draft.idempotencyKey;
  const text = signingString({ method, target, timestamp, idempotencyKey, bodySha256Hex });
  const signature = hex(ed.sign(Buffer.from(text, 'utf8'), signer.secret));
  return {
    method,
    target,
    keyId: signer.keyId,
    timestamp,
    signature,
    idempotencyKey,
    bodySha256Hex,
  };
}

/** The signature with S (little-endian bytes 32..63) replaced by S + L, L the group order. */
function withNonCanonicalS(signatureHex: string): string {
  const bytes = Buffer.from(signatureHex, 'hex');
  let s = 0n;
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(bytes[i]!);
  let t = s + 2n ** 252n + 27742317777372353535851937790883648493n;
  for (let i = 32; i < 64; i++) {
    bytes[i] = Number(t & 0xffn);
    t >>= 8n;
  }
  return bytes.toString('hex');
}

function refused(reason: string) {
  return { code: 'path.auth.unauthenticated', message: expect.any(String), detail: { reason } };
}

describe('signingString reproduces the vectors (P5)', () => {
  it.each(vectors.request_signature.map((v) => [`${v.method} ${v.target}`, v] as const))(
    '%s',
    (_name, v) => {
      const text = signingString({
        method: v.method,
        target: v.target,
        timestamp: v.timestamp,
        idempotencyKey: v.idempotency_key ?? undefined,
        bodySha256Hex: sha256(v.body),
      });
      expect(text).toBe(v.signing_string);
    },
  );

  it.each(vectors.request_signature.map((v) => [`${v.method} ${v.target}`, v] as const))(
    'the vector signature of %s verifies (@noble strict and verifyBytes)',
    (_name, v) => {
      const message = Buffer.from(v.signing_string, 'utf8');
      expect(
        ed.verify(
          Buffer.from(v.signature_hex, 'hex'),
          message,
          Buffer.from(vectors.key.public_key_hex, 'hex'),
          { zip215: false },
        ),
      ).toBe(true);
      expect(verifyBytes(message, v.signature_hex, vectors.key.public_key_hex)).toEqual({
        valid: true,
      });
      expect(hex(ed.sign(message, Buffer.from(vectors.key.seed_hex, 'hex')))).toBe(v.signature_hex);
    },
  );

  it(
    'upper-cases the method, has no trailing newline, ' +
      'and an empty line for no idempotency key',
    () => {
      const text = signingString({
        method: 'get',
        target: '/a?b=1',
        timestamp: AT_NOW,
        idempotencyKey: undefined,
        bodySha256Hex: sha256(''),
      });
      expect(text).toBe(`path-request-v1\nGET\n/a?b=1\n${AT_NOW}\n\n${sha256('')}`);
      expect(text.split('\n')).toHaveLength(6);
    },
  );

  it('the vector requests authenticate end to end under the vector key', () => {
    const auth = new Authenticator({ skewMs: SKEW_MS, replayEntriesPerCredentialMax: 100 });
    auth.load([
      {
        key_id: 'vector',
        member: 'alpha',
        public_key: vectors.key.public_key_hex,
        local: true,
        created_at: AT_NOW,
        revoked_at: null,
      },
    ]);
    for (const v of vectors.request_signature) {
      const request: SignedRequest = {
        method: v.method,
        target: v.target,
        keyId: 'vector',
        timestamp: v.timestamp,
        signature: v.signature_hex,
        idempotencyKey: v.idempotency_key ?? undefined,
        bodySha256Hex: sha256(v.body),
      };
      expect(auth.authenticate(request, Date.parse(v.timestamp))).toMatchObject({
        member: 'alpha',
        local: true,
      });
    }
  });
});

describe('Authenticator accepts (P5)', () => {
  it('a signed request from a registered credential, answering its member and local flag', () => {
    const auth = authenticator();
    expect(auth.authenticate(signed(alice), NOW)).toMatchObject({ member: 'local', local: true });
    expect(auth.authenticate(signed(bob), NOW)).toMatchObject({ member: 'beta', local: false });
  });

  it('a timestamp with fractional seconds', () => {
    expect(
      authenticator().authenticate(signed(alice, { timestamp: '2026-11-21T12:00:00.123Z' }), NOW),
    ).toMatchObject({ member: 'local', local: true });
  });

  it('a timestamp 299 s in the past or in the future, and exactly 300 s either way', () => {
    const auth = authenticator();
    expect(
      auth.authenticate(signed(alice, { timestamp: '2026-11-21T11:55:01Z' }), NOW),
    ).toMatchObject({ member: 'local', local: true });
    expect(
      auth.authenticate(signed(alice, { timestamp: '2026-11-21T12:04:59Z' }), NOW),
    ).toMatchObject({ member: 'local', local: true });
    expect(
      auth.authenticate(signed(alice, { timestamp: '2026-11-21T11:55:00Z' }), NOW),
    ).toMatchObject({ member: 'local', local: true });
    expect(
      auth.authenticate(signed(alice, { timestamp: '2026-11-21T12:05:00Z' }), NOW),
    ).toMatchObject({ member: 'local', local: true });
  });

  it('a GET without body or idempotency key', () => {
    const request = signed(bob, {
      method: 'GET',
      target: '/api/path/v1/connect/connections/con_abc/usage?limit=10',
      body: '',
    });
    expect(authenticator().authenticate(request, NOW)).toMatchObject({
      member: 'beta',
      local: false,
    });
  });
});

describe('Authenticator refuses with path.auth.unauthenticated (P5)', () => {
  it('missing: no key id, no timestamp or no signature', () => {
    const auth = authenticator();
    expect(auth.authenticate({ ...signed(alice), keyId: undefined }, NOW)).toEqual(
      refused('missing'),
    );
    expect(auth.authenticate({ ...signed(alice), timestamp: undefined }, NOW)).toEqual(
      refused('missing'),
    );
    expect(auth.authenticate({ ...signed(alice), signature: undefined }, NOW)).toEqual(
      refused('missing'),
    );
    expect(auth.authenticate({ ...signed(alice), signature: '' }, NOW)).toEqual(refused('missing'));
  });

  it('unknown_key: a key id that is not registered', () => {
    expect(authenticator().authenticate({ ...signed(alice), keyId: 'key_nobody' }, NOW)).toEqual(
      refused('unknown_key'),
    );
  });

  it('unknown_key: a revoked credential, even with a good signature', () => {
    expect(authenticator().authenticate(signed(revoked), NOW)).toEqual(refused('unknown_key'));
  });

  it('unknown_key after a reload that no longer lists the credential', () => {
    const auth = authenticator();
    auth.load([bob.credential]);
    expect(auth.authenticate(signed(alice), NOW)).toEqual(refused('unknown_key'));
    expect(auth.authenticate(signed(bob), NOW)).toMatchObject({ member: 'beta', local: false });
  });

  it('stale: 301 s in the past and 301 s in the future', () => {
    const auth = authenticator();
    expect(auth.authenticate(signed(alice, { timestamp: '2026-11-21T11:54:59Z' }), NOW)).toEqual(
      refused('stale'),
    );
    expect(auth.authenticate(signed(alice, { timestamp: '2026-11-21T12:05:01Z' }), NOW)).toEqual(
      refused('stale'),
    );
    expect(
      auth.authenticate(signed(alice, { timestamp: '2026-11-21T11:54:59.999Z' }), NOW),
    ).toEqual(refused('stale'));
  });

  it('malformed: a timestamp not RFC 3339 UTC with Z, even when correctly signed and fresh', () => {
    const auth = authenticator();
    const notUtcWithZ = [
      '2026-11-21T12:00:00+00:00',
      '2026-11-21T13:00:00+01:00',
      '2026-11-21T12:00:00',
      '2026-11-21 12:00:00Z',
      '2026-11-21T12:00:00z',
      '2026-02-30T12:00:00Z',
      'Sat, 21 Nov 2026 12:00:00 GMT',
      '1795262400',
    ];
    for (const timestamp of notUtcWithZ) {
      const result = auth.authenticate(signed(alice, { timestamp }), NOW) as Refusal;
      expect(result, timestamp).toEqual(refused('malformed'));
      // P5: the message says the form that was expected
      expect(result.message).toContain('RFC 3339 UTC');
      expect(result.message).toContain('ending in Z');
    }
  });

  it('malformed comes before the key: an unknown key with a bad timestamp is malformed', () => {
    const request = signed(alice, { timestamp: '2026-11-21T12:00:00+01:00' });
    const result = authenticator().authenticate({ ...request, keyId: 'key_nobody' }, NOW);
    expect(result).toEqual(refused('malformed'));
  });

  it('bad_signature: signed by another key than the one named', () => {
    expect(authenticator().authenticate({ ...signed(bob), keyId: alice.keyId }, NOW)).toEqual(
      refused('bad_signature'),
    );
  });

  it.each([
    ['the method', { method: 'PUT' }],
    ['the target', { target: '/api/path/v1/receipts?x=1' }],
    ['the timestamp', { timestamp: '2026-11-21T12:00:01Z' }],
    ['the idempotency key', { idempotencyKey: 'idem-2' }],
  ] as [string, Partial<SignedRequest>][])(
    'bad_signature: %s differs from what was signed',
    (_name, change) => {
      expect(
        authenticator().authenticate(
          { ...signed(alice, { idempotencyKey: 'idem-1' }), ...change },
          NOW,
        ),
      ).toEqual(refused('bad_signature'));
    },
  );

  it('bad_signature: the body differs from what was signed', () => {
    expect(
      authenticator().authenticate(
        { ...signed(alice), bodySha256Hex: sha256('{"issued_by":"payer"}') },
        NOW,
      ),
    ).toEqual(refused('bad_signature'));
  });

  it('bad_signature: a malformed or non-canonical signature', () => {
    const auth = authenticator();
    const good = signed(alice);
    expect(auth.authenticate({ ...good, signature: good.signature!.toUpperCase() }, NOW)).toEqual(
      refused('bad_signature'),
    );
    expect(auth.authenticate({ ...good, signature: good.signature!.slice(2) }, NOW)).toEqual(
      refused('bad_signature'),
    );
    expect(auth.authenticate({ ...good, signature: 'zz'.repeat(64) }, NOW)).toEqual(
      refused('bad_signature'),
    );
    // S + L (P1): the same curve equation under a second encoding; refused, so it cannot slip
    // past the replay check as a "different" signature either
    expect(
      auth.authenticate({ ...good, signature: withNonCanonicalS(good.signature!) }, NOW),
    ).toEqual(refused('bad_signature'));
    expect(auth.authenticate(good, NOW)).toMatchObject({ member: 'local', local: true });
    expect(
      auth.authenticate({ ...good, signature: withNonCanonicalS(good.signature!) }, NOW),
    ).toMatchObject({ code: 'path.auth.unauthenticated' });
  });

  it('replayed: the same signing string a second time inside the window', () => {
    const auth = authenticator();
    const request = signed(alice, { idempotencyKey: 'idem-1' });
    expect(auth.authenticate(request, NOW)).toMatchObject({ member: 'local', local: true });
    expect(auth.authenticate(request, NOW + 1_000)).toEqual(refused('replayed'));
    expect(auth.authenticate({ ...request }, NOW + 299_000)).toEqual(refused('replayed'));
  });

  it('the error detail names the reason only, never which key ids exist', () => {
    const auth = authenticator();
    const unknown = auth.authenticate({ ...signed(alice), keyId: 'key_nobody' }, NOW) as Refusal;
    expect(Object.keys(unknown.detail ?? {})).toEqual(['reason']);
    expect(unknown.message).not.toContain('key_nobody');
  });
});

describe('replay window (P5)', () => {
  it('a retry signed again with a fresh timestamp is accepted', () => {
    const auth = authenticator();
    expect(auth.authenticate(signed(alice, { idempotencyKey: 'idem-1' }), NOW)).toMatchObject({
      member: 'local',
      local: true,
    });
    const retry = signed(alice, { idempotencyKey: 'idem-1', timestamp: '2026-11-21T12:00:02Z' });
    expect(auth.authenticate(retry, NOW + 2_000)).toMatchObject({ member: 'local', local: true });
  });

  it('the same signing string under two different key ids is not a replay', () => {
    const auth = authenticator();
    const a = signed(alice);
    const b = signed(bob);
    expect(signingString({ ...a, timestamp: a.timestamp! })).toBe(
      signingString({ ...b, timestamp: b.timestamp! }),
    );
    expect(auth.authenticate(a, NOW)).toMatchObject({ member: 'local', local: true });
    expect(auth.authenticate(b, NOW)).toMatchObject({ member: 'beta', local: false });
  });

  it('a forged attempt does not poison the cache: the genuine request after it is accepted', () => {
    const auth = authenticator();
    const genuine = signed(alice);
    const forged = { ...genuine, signature: signed(bob).signature };
    expect(auth.authenticate(forged, NOW)).toEqual(refused('bad_signature'));
    expect(auth.authenticate(genuine, NOW)).toMatchObject({ member: 'local', local: true });
  });

  it('refused requests (stale, unknown key) are not remembered', () => {
    const auth = authenticator();
    const request = signed(alice, { timestamp: '2026-11-21T12:05:30Z' });
    expect(auth.authenticate(request, NOW)).toEqual(refused('stale'));
    expect(auth.authenticate(request, NOW + 30_000)).toMatchObject({
      member: 'local',
      local: true,
    });
  });

  it(
    'the replay memory is bounded: when full, ' +
      'fresh requests are refused as unavailable, not let through',
    () => {
      const auth = authenticator(2);
      expect(auth.authenticate(signed(alice, { idempotencyKey: '1' }), NOW)).toMatchObject({
        member: 'local',
        local: true,
      });
      expect(auth.authenticate(signed(alice, { idempotencyKey: '2' }), NOW)).toMatchObject({
        member: 'local',
        local: true,
      });
      expect(auth.authenticate(signed(alice, { idempotencyKey: '3' }), NOW)).toMatchObject({
        code: 'path.core.unavailable',
      });
      // once the remembered entries are older than any acceptable timestamp they are forgotten
      const later = NOW + 2 * SKEW_MS + 1;
      const fresh = signed(alice, {
        idempotencyKey: '3',
        timestamp: new Date(later).toISOString(),
      });
      expect(auth.authenticate(fresh, later)).toMatchObject({ member: 'local', local: true });
    },
  );

  it('each credential has its own share: a full one refuses its own requests alone', () => {
    const auth = authenticator(2);
    for (const key of ['1', '2'])
      expect(auth.authenticate(signed(bob, { idempotencyKey: key }), NOW)).toMatchObject({
        member: 'beta',
      });
    expect(auth.authenticate(signed(bob, { idempotencyKey: '3' }), NOW)).toMatchObject({
      code: 'path.core.unavailable',
    });
    expect(auth.authenticate(signed(alice, { idempotencyKey: '1' }), NOW)).toMatchObject({
      member: 'local',
      local: true,
    });
  });

  it('what one run remembered, restored from rows, refuses the same request in the next', () => {
    const first = authenticator();
    const accepted = first.authenticate(signed(alice), NOW) as Authenticated;
    const rows = [...first.remembered()];
    expect(rows).toEqual([accepted.replay]);
    const next = authenticator();
    expect(next.restore(rows, NOW + 1_000)).toBe(1);
    expect(next.authenticate(signed(alice), NOW + 1_000)).toEqual(refused('replayed'));
    // Rows past their time are not taken back.
    expect(authenticator().restore(rows, NOW + 2 * SKEW_MS + 1)).toBe(0);
  });
});

describe('requests forgotten as their window passes (issue 33)', () => {
  it('are counted, so that a quiet front end collects the memory they held', () => {
    const auth = authenticator();
    for (let i = 0; i < 5; i++) {
      const answer = auth.authenticate(signed(alice, { body: `{"n":${i}}` }), NOW);
      expect('member' in answer).toBe(true);
    }
    expect(auth.size()).toBe(5);
    expect(auth.forgotten).toBe(0);
    // Kept while the timestamp can be fresh, and the margin for this clock stepping back.
    const kept = NOW + SKEW_MS + REPLAY_CLOCK_STEP_MS;
    auth.forget(kept);
    expect(auth.forgotten).toBe(0);
    auth.forget(kept + 1);
    expect(auth.size()).toBe(0);
    expect(auth.forgotten).toBe(5);
  });
});

describe('how long a request is remembered (P5, issue 33)', () => {
  const at = (ms: number) => new Date(ms).toISOString();

  it('while its own timestamp is fresh, the last fresh instant included, however early', () => {
    // A client whose clock runs the whole skew ahead: fresh from its arrival until twice the
    // skew later. The sweep runs meanwhile; the same bytes at the last fresh instant are refused.
    const auth = authenticator();
    const ahead = signed(alice, { timestamp: at(NOW + SKEW_MS) });
    expect(auth.authenticate(ahead, NOW)).toMatchObject({ member: 'local' });
    auth.forget(NOW + 2 * SKEW_MS);
    expect(auth.authenticate(ahead, NOW + 2 * SKEW_MS)).toEqual(refused('replayed'));
    expect(auth.authenticate(ahead, NOW + 2 * SKEW_MS + 1)).toEqual(refused('stale'));
  });

  it('kept past its freshness by the margin for this clock stepping back, then let go', () => {
    const auth = authenticator();
    const request = signed(alice);
    expect(auth.authenticate(request, NOW)).toMatchObject({ member: 'local' });
    auth.forget(NOW + SKEW_MS + 1);
    // The clock stepped back by the margin: the request is fresh again, and still remembered.
    expect(auth.authenticate(request, NOW + SKEW_MS + 1 - REPLAY_CLOCK_STEP_MS)).toEqual(
      refused('replayed'),
    );
    // A synchronised client's requests take the window's memory for the skew and the margin,
    // not for twice the skew.
    auth.forget(NOW + SKEW_MS + REPLAY_CLOCK_STEP_MS + 1);
    expect(auth.size()).toBe(0);
  });

  it('one that came out of order is kept until those before it go, never less', () => {
    const auth = authenticator();
    const later = signed(alice, { timestamp: at(NOW + 10_000), body: '{"n":1}' });
    const earlier = signed(alice, { timestamp: at(NOW - 10_000), body: '{"n":2}' });
    expect(auth.authenticate(later, NOW)).toMatchObject({ member: 'local' });
    expect(auth.authenticate(earlier, NOW)).toMatchObject({ member: 'local' });
    // Past the earlier one's time but not the later one's: both still remembered.
    auth.forget(NOW - 10_000 + SKEW_MS + REPLAY_CLOCK_STEP_MS + 1);
    expect(auth.size()).toBe(2);
    auth.forget(NOW + 10_000 + SKEW_MS + REPLAY_CLOCK_STEP_MS + 1);
    expect(auth.size()).toBe(0);
  });
});
