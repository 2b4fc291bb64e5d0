// Canonical bytes (P2) and digests (P3) for the client: RFC 8785 from the `canonicalize` package,
// the same package the node uses (src/protocol/canonical.ts), and SHA-256 from @noble/hashes.
import canonicalize from 'canonicalize';
import { sha256 } from '@noble/hashes/sha2.js';
import { toHex, utf8 } from './bytes.js';

/** The package is CommonJS whose `module.exports` is the function; its types say `default`. */
const serialize = canonicalize as unknown as (value: unknown) => string | undefined;

export const DIGEST_PREFIX = 'sha256:';

/** The RFC 8785 (JCS) serialisation of a value; throws for a value with no JSON form. */
export function canonicalJson(value: unknown): string {
  const text = serialize(value);
  if (text === undefined) throw new TypeError('value has no JSON form');
  return text;
}

export function canonicalBytes(value: unknown): Uint8Array {
  return utf8(canonicalJson(value));
}

export function sha256Hex(data: Uint8Array): string {
  return toHex(sha256(data));
}

/**
 * `sha256:` and the lowercase hex SHA-256 of the canonical bytes of the whole object (P3): for
 * an envelope, its `signature` included. `supersedes`, `commitment`, `consent_digest` and
 * `binds_digest` are all this.
 */
export function digestOf(value: unknown): string {
  return DIGEST_PREFIX + sha256Hex(canonicalBytes(value));
}
