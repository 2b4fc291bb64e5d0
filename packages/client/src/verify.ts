// Strict verification of signed objects (P1, P2) with only the object and the issuer's keys
// document (P4): the same checks, in the same order and with the same reasons, as the node's
// own verifier (src/protocol/signing.ts), plus `kid_unknown` when the document has no key by
// that `kid`. Retired keys stay in the document and still verify what they signed (P1).
import { fromLowerHex } from './bytes.js';
import { canonicalBytes } from './canonical.js';
import { ed } from './ed25519.js';
import type { KeyEntry, KeysDocument, VerifyResult } from './types.js';

/** The group order L of edwards25519 (RFC 8032 section 5.1). */
const GROUP_ORDER = 2n ** 252n + 27742317777372353535851937790883648493n;

/** The key of the document named by `kid`, whatever its status, or undefined. */
export function keyByKid(
  keys: KeysDocument | null | undefined,
  kid: unknown,
): KeyEntry | undefined {
  if (typeof kid !== 'string' || keys === null || typeof keys !== 'object') return undefined;
  if (!Array.isArray(keys.keys)) return undefined;
  return keys.keys.find(
    (k) =>
      k !== null &&
      typeof k === 'object' &&
      k.kid === kid &&
      (k.alg === undefined || k.alg === 'Ed25519'),
  );
}

/** S read little-endian from bytes 32..63 is below L (P1: a non-canonical S is refused). */
function scalarIsCanonical(signature: Uint8Array): boolean {
  let s = 0n;
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(signature[i]!);
  return s < GROUP_ORDER;
}

/** A canonical encoding of a point that is not of small order (P1), or false. */
function publicKeyIsStrong(publicKey: Uint8Array): boolean {
  try {
    return !ed.Point.fromBytes(publicKey, false).isSmallOrder();
  } catch {
    return false;
  }
}

/** Strict Ed25519 verification of raw bytes against hex key and signature (P1). */
export function verifyBytes(
  message: Uint8Array,
  signatureHex: unknown,
  publicKeyHex: unknown,
): VerifyResult {
  const publicKey = typeof publicKeyHex === 'string' ? fromLowerHex(publicKeyHex, 32) : null;
  if (publicKey === null) return { valid: false, reason: 'public_key_malformed' };
  const signature = typeof signatureHex === 'string' ? fromLowerHex(signatureHex, 64) : null;
  if (signature === null) return { valid: false, reason: 'signature_malformed' };
  return verifyRaw(message, signature, publicKey);
}

/** The same checks on raw bytes (a webhook's `v1a` signature arrives in base64). */
export function verifyRaw(
  message: Uint8Array,
  signature: Uint8Array,
  publicKey: Uint8Array,
): VerifyResult {
  if (signature.length !== 64) return { valid: false, reason: 'signature_malformed' };
  if (!publicKeyIsStrong(publicKey)) return { valid: false, reason: 'public_key_weak' };
  if (!scalarIsCanonical(signature)) return { valid: false, reason: 'signature_non_canonical' };
  let valid = false;
  try {
    valid = ed.verify(signature, message, publicKey, { zip215: false });
  } catch {
    valid = false;
  }
  return valid ? { valid: true } : { valid: false, reason: 'signature_invalid' };
}

/**
 * Verifies a signed object with the issuer's keys document: the key is the document's key with
 * the object's `kid` (active or retired), and the signature covers the RFC 8785 bytes of the
 * object without its top-level `signature` (P2).
 */
export function verifySigned(object: unknown, keysDocument: KeysDocument): VerifyResult {
  if (object === null || typeof object !== 'object' || Array.isArray(object))
    return { valid: false, reason: 'not_an_object' };
  const { signature, ...rest } = object as Record<string, unknown>;
  if (signature === undefined) return { valid: false, reason: 'signature_missing' };
  if (typeof signature !== 'string') return { valid: false, reason: 'signature_malformed' };
  const key = keyByKid(keysDocument, rest.kid);
  if (key === undefined) return { valid: false, reason: 'kid_unknown' };
  return verifyBytes(canonicalBytes(rest), signature, key.public_key);
}
