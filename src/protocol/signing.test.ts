// Ed25519 signing and strict verification (P1, P2), against the profile's vectors (RFC 8032
// TEST 1 key) and cross-checked with @noble/ed25519 in its RFC 8032 strict mode.
import { readFileSync } from 'node:fs';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { describe, expect, it } from 'vitest';
import { canonicalBytes } from './canonical.js';
import {
  envelopeFields,
  generateSeedHex,
  kidOf,
  signBytes,
  signingKeyFromSeed,
  signObject,
  verifyBytes,
  verifyObject,
} from './signing.js';

ed.hashes.sha512 = sha512;

type Json = Record<string, unknown>;
interface Vectors {
  key: { seed_hex: string; public_key_hex: string; public_key_x_base64url: string };
  envelope: { object_without_signature: Json; signature_hex: string; signed_object: Json };
  transition: { signed_object: Json };
}
const vectors = JSON.parse(
  readFileSync(new URL('../../../shared/vectors/protocol-vectors.json', import.meta.url), 'utf8'),
) as Vectors;
const key = signingKeyFromSeed(vectors.key.seed_hex);
const publicKey = vectors.key.public_key_hex;
const envelope = vectors.envelope.signed_object;
const transition = vectors.transition.signed_object;

/** The group order L of edwards25519 (RFC 8032 section 5.1). */
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

function withoutSignature(object: Json): Json {
  const { signature: _signature, ...rest } = object;
  return rest;
}

function nobleVerifies(signatureHex: string, message: Uint8Array, publicKeyHex: string): boolean {
  return ed.verify(Buffer.from(signatureHex, 'hex'), message, Buffer.from(publicKeyHex, 'hex'), {
    zip215: false,
  });
}

/**
 * The signature with S (little-endian bytes 32..63)
 * replaced by S + L: same curve equation, non-canonical S.
 */
function malleate(signatureHex: string): string {
  const bytes = Buffer.from(signatureHex, 'hex');
  let s = 0n;
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(bytes[i]!);
  let t = s + L;
  for (let i = 32; i < 64; i++) {
    bytes[i] = Number(t & 0xffn);
    t >>= 8n;
  }
  return bytes.toString('hex');
}

function clone(object: Json): Json {
  return JSON.parse(JSON.stringify(object)) as Json;
}

describe('keys (P1)', () => {
  it('derives the RFC 8032 TEST 1 public key from the vector seed', () => {
    expect(key.publicKeyHex).toBe(publicKey);
    expect(
      Buffer.from(ed.getPublicKey(Buffer.from(vectors.key.seed_hex, 'hex'))).toString('hex'),
    ).toBe(publicKey);
  });

  it('the JWK x member is the base64url of the same 32 bytes (P4)', () => {
    expect(Buffer.from(key.publicKeyHex, 'hex').toString('base64url')).toBe(
      vectors.key.public_key_x_base64url,
    );
  });

  it('signs the empty message as RFC 8032 TEST 1 says', () => {
    expect(signBytes(new Uint8Array(0), key)).toBe(
      'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155' +
        '5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
    );
  });

  it('refuses a seed that is not 32 bytes of lowercase hex', () => {
    expect(() => signingKeyFromSeed(vectors.key.seed_hex.toUpperCase())).toThrow(RangeError);
    expect(() => signingKeyFromSeed(vectors.key.seed_hex.slice(2))).toThrow(RangeError);
    expect(() => signingKeyFromSeed(`${vectors.key.seed_hex}00`)).toThrow(RangeError);
  });

  it('kidOf is a stable fingerprint of the public key, distinct per key, header-safe (P1)', () => {
    const other = generateSeedHex();
    expect(kidOf(publicKey)).toBe(kidOf(publicKey));
    expect(key.kid).toBe(kidOf(publicKey));
    expect(signingKeyFromSeed(other.seedHex).kid).toBe(kidOf(other.publicKeyHex));
    expect(kidOf(other.publicKeyHex)).not.toBe(kidOf(publicKey));
    expect(key.kid).toMatch(/^[A-Za-z0-9._-]+$/);
  });

  it('generateSeedHex gives a seed whose derived public key matches the one returned', () => {
    const { seedHex, publicKeyHex } = generateSeedHex();
    expect(seedHex).toMatch(/^[0-9a-f]{64}$/);
    expect(signingKeyFromSeed(seedHex).publicKeyHex).toBe(publicKeyHex);
    expect(Buffer.from(ed.getPublicKey(Buffer.from(seedHex, 'hex'))).toString('hex')).toBe(
      publicKeyHex,
    );
  });

  it(
    'envelopeFields carries grammar 2, protocol 0.2.0, ' +
      'the time and the key id, as in the vectors',
    () => {
      const fields = envelopeFields(key, '2026-11-21T12:00:00Z');
      expect(fields).toEqual({
        grammar: 2,
        protocol_version: '0.2.0',
        signed_at: '2026-11-21T12:00:00Z',
        kid: key.kid,
      });
      expect({ grammar: envelope.grammar, protocol_version: envelope.protocol_version }).toEqual({
        grammar: fields.grammar,
        protocol_version: fields.protocol_version,
      });
    },
  );
});

describe('signing reproduces the vectors (P2)', () => {
  it('envelope: the signature over the object without signature is byte-exact', () => {
    const signed = signObject(vectors.envelope.object_without_signature, key);
    expect(signed.signature).toBe(vectors.envelope.signature_hex);
    expect(signed).toEqual(envelope);
    expect(envelope.signature).toBe(vectors.envelope.signature_hex);
  });

  it('transition: the signature is byte-exact', () => {
    const signed = signObject(withoutSignature(transition), key);
    expect(signed.signature).toBe(transition.signature);
  });

  it('signObject does not alter its input', () => {
    const input = clone(vectors.envelope.object_without_signature);
    signObject(input, key);
    expect(input).toEqual(vectors.envelope.object_without_signature);
    expect('signature' in input).toBe(false);
  });

  it('@noble/ed25519 (strict) verifies both vector signatures over the canonical bytes', () => {
    for (const object of [envelope, transition]) {
      expect(
        nobleVerifies(
          object.signature as string,
          canonicalBytes(withoutSignature(object)),
          publicKey,
        ),
      ).toBe(true);
    }
  });

  it('@noble/ed25519 signs the same bytes to the same signature (Ed25519 is deterministic)', () => {
    const message = canonicalBytes(vectors.envelope.object_without_signature);
    expect(
      Buffer.from(ed.sign(message, Buffer.from(vectors.key.seed_hex, 'hex'))).toString('hex'),
    ).toBe(vectors.envelope.signature_hex);
  });

  it('a freshly generated key signs objects that @noble and verifyObject accept', () => {
    const fresh = signingKeyFromSeed(generateSeedHex().seedHex);
    const signed = signObject(
      {
        type: 'path.event',
        id: 'evt_1',
        data: { amount: '1.00' },
        ...envelopeFields(fresh, '2026-11-21T12:00:00Z'),
      },
      fresh,
    );
    expect(verifyObject(signed, fresh.publicKeyHex)).toEqual({ valid: true });
    expect(
      nobleVerifies(signed.signature, canonicalBytes(withoutSignature(signed)), fresh.publicKeyHex),
    ).toBe(true);
  });
});

describe('verification of good objects (P1, P2)', () => {
  it('accepts both vector objects under the vector key', () => {
    expect(verifyObject(envelope, publicKey)).toEqual({ valid: true });
    expect(verifyObject(transition, publicKey)).toEqual({ valid: true });
  });

  it('accepts the object with its members in another order (canonical form)', () => {
    const reversed = Object.fromEntries(Object.entries(envelope).reverse());
    expect(verifyObject(reversed, publicKey)).toEqual({ valid: true });
  });

  it('verifyBytes accepts the vector signature over the canonical bytes', () => {
    expect(
      verifyBytes(
        canonicalBytes(vectors.envelope.object_without_signature),
        vectors.envelope.signature_hex,
        publicKey,
      ),
    ).toEqual({ valid: true });
  });
});

describe('every member is covered by the signature (P2)', () => {
  const cases: [string, (o: Json) => void][] = [
    [
      'an altered amount, even one numerically equal ("10.50" -> "10.5")',
      (o) => {
        (o.received as Json).value = '10.5';
      },
    ],
    [
      'an altered status',
      (o) => {
        o.status = 'reversed';
      },
    ],
    [
      'an altered unknown nested member (via.x_vendor_note)',
      (o) => {
        (o.via as Json).x_vendor_note = 'changed';
      },
    ],
    [
      'an added top-level member',
      (o) => {
        o.x_extra = 'added';
      },
    ],
    [
      'an added nested member',
      (o) => {
        (o.payer as Json).name = 'Beta Ltd';
      },
    ],
    [
      'a removed member (kid)',
      (o) => {
        delete o.kid;
      },
    ],
    [
      'an altered kid',
      (o) => {
        o.kid = 'test-key-2';
      },
    ],
    [
      'an altered signed_at',
      (o) => {
        o.signed_at = '2026-11-21T12:00:01Z';
      },
    ],
    [
      'an altered grammar',
      (o) => {
        o.grammar = 3;
      },
    ],
    [
      'an altered protocol_version',
      (o) => {
        o.protocol_version = '0.2.1';
      },
    ],
    [
      'null replaced by an empty object',
      (o) => {
        o.fx = {};
      },
    ],
    [
      'array elements reordered',
      (o) => {
        o.rail_references = [
          { type: 'book_entry', value: 'BE-2026-000002' },
          ...(o.rail_references as Json[]),
        ];
      },
    ],
  ];
  it.each(cases)('refuses %s', (_name, mutate) => {
    const object = clone(envelope);
    mutate(object);
    expect(verifyObject(object, publicKey)).toEqual({ valid: false, reason: 'signature_invalid' });
    expect(
      nobleVerifies(
        object.signature as string,
        canonicalBytes(withoutSignature(object)),
        publicKey,
      ),
    ).toBe(false);
  });

  it('covers an embedded envelope exactly as stored, including its own signature', () => {
    const consent = signObject(
      { type: 'path.consent', scope: 'pay', ...envelopeFields(key, '2026-11-21T11:00:00Z') },
      key,
    );
    const outer = signObject(
      { type: 'path.delegation', consent, ...envelopeFields(key, '2026-11-21T12:00:00Z') },
      key,
    );
    expect(verifyObject(outer, publicKey)).toEqual({ valid: true });
    expect(verifyObject(outer.consent, publicKey)).toEqual({ valid: true });

    const tampered = clone(outer);
    (tampered.consent as Json).signature = malleate((tampered.consent as Json).signature as string);
    expect(verifyObject(tampered, publicKey)).toEqual({
      valid: false,
      reason: 'signature_invalid',
    });
    const stripped = clone(outer);
    delete (stripped.consent as Json).signature;
    expect(verifyObject(stripped, publicKey)).toEqual({
      valid: false,
      reason: 'signature_invalid',
    });
  });

  it('refuses a valid signature checked under another key', () => {
    const other = generateSeedHex().publicKeyHex;
    expect(verifyObject(envelope, other)).toEqual({ valid: false, reason: 'signature_invalid' });
  });

  it('refuses the envelope signature moved onto the transition', () => {
    expect(verifyObject({ ...transition, signature: envelope.signature }, publicKey)).toEqual({
      valid: false,
      reason: 'signature_invalid',
    });
  });
});

describe('P1 strict verification: non-canonical S', () => {
  it('refuses S + L, which a cofactorless verifier without the S < L check would accept', () => {
    const malleated = malleate(vectors.envelope.signature_hex);
    expect(malleated).not.toBe(vectors.envelope.signature_hex);
    expect(malleated.slice(0, 64)).toBe(vectors.envelope.signature_hex.slice(0, 64));
    expect(verifyObject({ ...envelope, signature: malleated }, publicKey)).toEqual({
      valid: false,
      reason: 'signature_non_canonical',
    });
    expect(
      verifyBytes(canonicalBytes(vectors.envelope.object_without_signature), malleated, publicKey),
    ).toEqual({ valid: false, reason: 'signature_non_canonical' });
    expect(
      nobleVerifies(
        malleated,
        canonicalBytes(vectors.envelope.object_without_signature),
        publicKey,
      ),
    ).toBe(false);
  });

  it('refuses S = L exactly and S with the top bits set', () => {
    const r = vectors.envelope.signature_hex.slice(0, 64);
    const lBytes = Buffer.alloc(32);
    let t = L;
    for (let i = 0; i < 32; i++) {
      lBytes[i] = Number(t & 0xffn);
      t >>= 8n;
    }
    const message = canonicalBytes(vectors.envelope.object_without_signature);
    expect(verifyBytes(message, r + lBytes.toString('hex'), publicKey)).toEqual({
      valid: false,
      reason: 'signature_non_canonical',
    });
    expect(verifyBytes(message, r + 'ff'.repeat(32), publicKey)).toEqual({
      valid: false,
      reason: 'signature_non_canonical',
    });
  });
});

describe('P1 strict verification: weak public keys', () => {
  const smallOrder: [string, string][] = [
    ['identity (0, 1)', '0100000000000000000000000000000000000000000000000000000000000000'],
    ['(0, -1), order 2', 'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'],
    ['y = 0, order 4', '0000000000000000000000000000000000000000000000000000000000000000'],
    [
      'y = 0 with the sign bit, order 4',
      '0000000000000000000000000000000000000000000000000000000000000080',
    ],
    ['order 8', '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05'],
    [
      'order 8 with the sign bit',
      '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
    ],
    ['order 8, the other y', 'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a'],
    [
      'order 8, the other y with the sign bit',
      'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
    ],
  ];
  it.each(smallOrder)('refuses the small-order key %s', (_name, weak) => {
    expect(ed.Point.fromBytes(Buffer.from(weak, 'hex'), false).isSmallOrder()).toBe(true);
    expect(verifyBytes(Buffer.from('message'), vectors.envelope.signature_hex, weak)).toEqual({
      valid: false,
      reason: 'public_key_weak',
    });
    expect(verifyObject(envelope, weak)).toEqual({ valid: false, reason: 'public_key_weak' });
  });

  const nonCanonical: [string, string][] = [
    [
      'y = p (the order-4 point, y = 0)',
      'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
    ],
    [
      'y = p + 1 (the identity)',
      'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
    ],
    [
      'the identity with the sign bit set for x = 0',
      '0100000000000000000000000000000000000000000000000000000000000080',
    ],
    [
      '(0, -1) with the sign bit set for x = 0',
      'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff',
    ],
    [
      'y = p + 3, a point of large order',
      'f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
    ],
  ];
  it.each(nonCanonical)('refuses the non-canonical encoding %s', (_name, weak) => {
    expect(() => ed.Point.fromBytes(Buffer.from(weak, 'hex'), false)).toThrow();
    expect(verifyBytes(Buffer.from('message'), vectors.envelope.signature_hex, weak)).toEqual({
      valid: false,
      reason: 'public_key_weak',
    });
  });

  it('refuses a universal forgery under the identity key, whatever OpenSSL makes of it', () => {
    // With A = identity, [S]B = R + [k]A reduces to [S]B = R: R = B, S = 1 "signs" every message.
    // It satisfies the verification equation as ZIP 215 reads it, so a verifier that admits
    // small-order keys accepts it: OpenSSL before 3.5 does (Node 20 and 22), 3.5 does not (Node 24
    // and 26). The node's refusal must not depend on which one it runs on.
    const identity = '0100000000000000000000000000000000000000000000000000000000000000';
    const forged = Buffer.concat([
      Buffer.from(ed.Point.BASE.toBytes()),
      Buffer.from(`01${'00'.repeat(31)}`, 'hex'),
    ]);
    const message = Buffer.from('pay mallory 1000000');
    expect(ed.verify(forged, message, Buffer.from(identity, 'hex'), { zip215: true })).toBe(true);
    expect(verifyBytes(message, forged.toString('hex'), identity)).toEqual({
      valid: false,
      reason: 'public_key_weak',
    });
    expect(verifyObject({ any: 'thing', signature: forged.toString('hex') }, identity)).toEqual({
      valid: false,
      reason: 'public_key_weak',
    });
  });

  it('still refuses a weak key when asked again (the key cache keeps the verdict)', () => {
    const identity = '0100000000000000000000000000000000000000000000000000000000000000';
    for (let i = 0; i < 3; i++) {
      expect(verifyBytes(Buffer.from('x'), vectors.envelope.signature_hex, identity)).toEqual({
        valid: false,
        reason: 'public_key_weak',
      });
    }
    expect(verifyObject(envelope, publicKey)).toEqual({ valid: true });
    expect(verifyObject(envelope, publicKey)).toEqual({ valid: true });
  });
});

describe('malformed input is refused, never thrown (P1)', () => {
  const sig = vectors.envelope.signature_hex;
  it.each([
    ['uppercase hex', sig.toUpperCase()],
    ['one byte short', sig.slice(0, 126)],
    ['one byte long', `${sig}00`],
    ['an odd length', sig.slice(0, 127)],
    ['non-hex characters', `zz${sig.slice(2)}`],
    ['a 0x prefix', `0x${sig.slice(2)}`],
    ['the empty string', ''],
    ['surrounding whitespace', ` ${sig.slice(1)}`],
  ])('a signature with %s', (_name, bad) => {
    expect(verifyObject({ ...envelope, signature: bad }, publicKey)).toEqual({
      valid: false,
      reason: 'signature_malformed',
    });
    expect(
      verifyBytes(canonicalBytes(vectors.envelope.object_without_signature), bad, publicKey),
    ).toEqual({ valid: false, reason: 'signature_malformed' });
  });

  it.each([
    ['uppercase hex', publicKey.toUpperCase()],
    ['one byte short', publicKey.slice(0, 62)],
    ['one byte long', `${publicKey}00`],
    ['non-hex characters', `zz${publicKey.slice(2)}`],
    ['the empty string', ''],
  ])('a public key with %s', (_name, bad) => {
    expect(verifyObject(envelope, bad)).toEqual({ valid: false, reason: 'public_key_malformed' });
  });

  it('a public key that is not a string', () => {
    expect(verifyBytes(Buffer.from('x'), sig, undefined as unknown as string)).toEqual({
      valid: false,
      reason: 'public_key_malformed',
    });
  });

  it('a signature member that is not a string', () => {
    expect(verifyObject({ ...envelope, signature: 42 }, publicKey)).toEqual({
      valid: false,
      reason: 'signature_malformed',
    });
    expect(verifyObject({ ...envelope, signature: Buffer.from(sig, 'hex') }, publicKey)).toEqual({
      valid: false,
      reason: 'signature_malformed',
    });
    expect(verifyObject({ ...envelope, signature: null }, publicKey)).toMatchObject({
      valid: false,
    });
  });

  it('a missing signature', () => {
    expect(verifyObject(vectors.envelope.object_without_signature, publicKey)).toEqual({
      valid: false,
      reason: 'signature_missing',
    });
  });

  it('a value that is not an object', () => {
    for (const value of [null, undefined, 'text', 42, [envelope]]) {
      expect(verifyObject(value, publicKey)).toEqual({ valid: false, reason: 'not_an_object' });
    }
  });
});
