// Ed25519 keys, signatures over canonical bytes, and strict verification (P1, P2).
// Signing and the final curve check use node:crypto (OpenSSL), the fastest path here; the
// strictness checks OpenSSL does not make (canonical key encoding, small-order keys, S < L)
// are made first, with @noble/ed25519 for the point decoding.
import {
  createPrivateKey,
  createPublicKey,
  sign as nodeSign,
  verify as nodeVerify,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { canonicalBytes } from './canonical.js';
import { PUBLIC_KEY_CACHE_MAX } from '../config.js';
import { sha256Hex } from './digest.js';

ed.hashes.sha512 = sha512;

export const GRAMMAR = 2;
export const PROTOCOL_VERSION = '0.2.0';

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const HEX_32 = /^[0-9a-f]{64}$/;
const HEX_64 = /^[0-9a-f]{128}$/;
/** The group order L of edwards25519, little-endian bytes as they appear in S. */
const GROUP_ORDER = 2n ** 252n + 27742317777372353535851937790883648493n;

export interface SigningKey {
  kid: string;
  publicKeyHex: string;
  privateKey: KeyObject;
}

/** The stable key id (P1): a fingerprint of the public key. */
export function kidOf(publicKeyHex: string): string {
  return `ed25519-${sha256Hex(Buffer.from(publicKeyHex, 'hex')).slice(0, 32)}`;
}

export function signingKeyFromSeed(seedHex: string): SigningKey {
  if (!HEX_32.test(seedHex)) throw new RangeError('seed must be 32 bytes of lowercase hex');
  const privateKey = createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(seedHex, 'hex')]),
    format: 'der',
    type: 'pkcs8',
  });
  // OpenSSL derives the public key in microseconds, where @noble/ed25519 first builds its table
  // of base-point multiples (~100 ms of CPU on each thread that loads a key: every start).
  const publicKeyHex = publicKeyOf(privateKey);
  return { kid: kidOf(publicKeyHex), publicKeyHex, privateKey };
}

/** The raw 32-byte public key of an Ed25519 key object, in hex (its SPKI's last 32 bytes). */
function publicKeyOf(key: KeyObject): string {
  const spki = createPublicKey(key).export({ format: 'der', type: 'spki' });
  return spki.subarray(SPKI_ED25519_PREFIX.length).toString('hex');
}

export function generateSeedHex(): { seedHex: string; publicKeyHex: string } {
  const { privateKey } = generateKeyPairSync('ed25519');
  const seedHex = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(-32).toString('hex');
  return { seedHex, publicKeyHex: publicKeyOf(privateKey) };
}

export function signBytes(message: Uint8Array, key: SigningKey): string {
  return nodeSign(null, message, key.privateKey).toString('hex');
}

/** The envelope members every signed object of grammar 2 carries besides `signature`. */
export function envelopeFields(
  key: SigningKey,
  signedAt: string,
): { grammar: number; protocol_version: string; signed_at: string; kid: string } {
  return {
    grammar: GRAMMAR,
    protocol_version: PROTOCOL_VERSION,
    signed_at: signedAt,
    kid: key.kid,
  };
}

/** Signs an object (P2): the signature covers every member; it is appended as `signature`. */
export function signObject<T extends object>(
  object: T,
  key: SigningKey,
): T & { signature: string } {
  return { ...object, signature: signBytes(canonicalBytes(object), key) };
}

export type VerifyResult = { valid: true } | { valid: false; reason: VerifyFailure };
export type VerifyFailure =
  | 'not_an_object'
  | 'signature_missing'
  | 'signature_malformed'
  | 'public_key_malformed'
  | 'public_key_weak'
  | 'signature_non_canonical'
  | 'signature_invalid';

const publicKeyCache = new Map<string, KeyObject | 'weak'>();

/** A usable public key, or 'weak' for a non-canonical or small-order encoding (P1). */
function publicKeyFor(publicKeyHex: string): KeyObject | 'weak' {
  const cached = publicKeyCache.get(publicKeyHex);
  if (cached !== undefined) return cached;
  let result: KeyObject | 'weak';
  try {
    const point = ed.Point.fromBytes(Buffer.from(publicKeyHex, 'hex'), false);
    result = point.isSmallOrder()
      ? 'weak'
      : createPublicKey({
          key: Buffer.concat([SPKI_ED25519_PREFIX, Buffer.from(publicKeyHex, 'hex')]),
          format: 'der',
          type: 'spki',
        });
  } catch {
    result = 'weak';
  }
  if (publicKeyCache.size >= PUBLIC_KEY_CACHE_MAX)
    publicKeyCache.delete(publicKeyCache.keys().next().value as string);
  publicKeyCache.set(publicKeyHex, result);
  return result;
}

/**
 * Why a public key cannot be used (P1), or null when it can: not 32 bytes of lowercase hex
 * ('malformed'), or a non-canonical or small-order point ('weak'), whose forgeries a cofactorless
 * check would let through. Credentials and members' published keys are refused with this at the
 * door; verifyBytes makes the same check again at verify time.
 */
export function publicKeyFault(publicKeyHex: unknown): 'malformed' | 'weak' | null {
  if (typeof publicKeyHex !== 'string' || !HEX_32.test(publicKeyHex)) return 'malformed';
  return publicKeyFor(publicKeyHex) === 'weak' ? 'weak' : null;
}

function scalarIsCanonical(signature: Buffer): boolean {
  let s = 0n;
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(signature[i]!);
  return s < GROUP_ORDER;
}

/** Strict verification of raw bytes against a hex public key and a hex signature (P1). */
export function verifyBytes(
  message: Uint8Array,
  signatureHex: string,
  publicKeyHex: string,
): VerifyResult {
  if (typeof publicKeyHex !== 'string' || !HEX_32.test(publicKeyHex))
    return { valid: false, reason: 'public_key_malformed' };
  if (typeof signatureHex !== 'string' || !HEX_64.test(signatureHex))
    return { valid: false, reason: 'signature_malformed' };
  const key = publicKeyFor(publicKeyHex);
  if (key === 'weak') return { valid: false, reason: 'public_key_weak' };
  const signature = Buffer.from(signatureHex, 'hex');
  if (!scalarIsCanonical(signature)) return { valid: false, reason: 'signature_non_canonical' };
  return nodeVerify(null, message, key, signature)
    ? { valid: true }
    : { valid: false, reason: 'signature_invalid' };
}

/** Verifies a signed object: the signature over the canonical form without `signature` (P2). */
export function verifyObject(object: unknown, publicKeyHex: string): VerifyResult {
  if (object === null || typeof object !== 'object' || Array.isArray(object))
    return { valid: false, reason: 'not_an_object' };
  const { signature, ...rest } = object as Record<string, unknown>;
  if (signature === undefined) return { valid: false, reason: 'signature_missing' };
  if (typeof signature !== 'string') return { valid: false, reason: 'signature_malformed' };
  return verifyBytes(canonicalBytes(rest), signature, publicKeyHex);
}
