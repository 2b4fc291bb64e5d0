// `sha256:` digests over canonical bytes (P3), against the profile's vectors.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DIGEST_PREFIX, digestOf, sha256Hex } from './digest.js';

type Json = Record<string, unknown>;
interface Vectors {
  envelope: {
    object_without_signature: Json;
    signed_object: Json;
    digest_of_signed_object: string;
  };
  transition: { signed_object: Json };
  commitment: { input: Json; canonical_utf8: string; commitment: string };
}
const vectors = JSON.parse(
  readFileSync(new URL('../../../shared/vectors/protocol-vectors.json', import.meta.url), 'utf8'),
) as Vectors;

describe('digestOf (P3)', () => {
  it('reproduces the digest of the signed envelope, signature included', () => {
    expect(digestOf(vectors.envelope.signed_object)).toBe(vectors.envelope.digest_of_signed_object);
  });

  it('the digest covers the signature: without it the digest differs', () => {
    expect(digestOf(vectors.envelope.object_without_signature)).not.toBe(
      vectors.envelope.digest_of_signed_object,
    );
  });

  it('transition.supersedes is the digest of the envelope it replaces', () => {
    expect(vectors.transition.signed_object.supersedes).toBe(
      digestOf(vectors.envelope.signed_object),
    );
  });

  it('reproduces the commitment: the digest of {grammar, address, accepts, limits}', () => {
    const { grammar, address, accepts, limits } = vectors.commitment.input;
    expect(digestOf({ grammar, address, accepts, limits })).toBe(vectors.commitment.commitment);
    expect(digestOf({ limits, accepts, address, grammar })).toBe(vectors.commitment.commitment);
    // independently: SHA-256 of the vector's canonical bytes
    const direct = createHash('sha256')
      .update(Buffer.from(vectors.commitment.canonical_utf8, 'utf8'))
      .digest('hex');
    expect(vectors.commitment.commitment).toBe(`sha256:${direct}`);
  });

  it('is "sha256:" and 64 lowercase hex digits', () => {
    expect(DIGEST_PREFIX).toBe('sha256:');
    expect(digestOf({ a: 1 })).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('does not depend on member order, and changes with any member', () => {
    const reordered = Object.fromEntries(Object.entries(vectors.envelope.signed_object).reverse());
    expect(digestOf(reordered)).toBe(vectors.envelope.digest_of_signed_object);
    expect(digestOf({ ...vectors.envelope.signed_object, x_extra: null })).not.toBe(
      vectors.envelope.digest_of_signed_object,
    );
  });

  it('sha256Hex matches the FIPS 180-2 examples', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('abc')).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    expect(sha256Hex(new Uint8Array([0x61, 0x62, 0x63]))).toBe(sha256Hex('abc'));
  });
});
