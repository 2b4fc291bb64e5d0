// Canonical bytes (P2) and digests (P3) for the client: its own RFC 8785 (JCS) serialisation,
// so that the package needs nothing beyond @noble, and SHA-256 from @noble/hashes. The node's
// tests hold it to the node's canonical form (src/protocol/canonical.ts), RFC 8785's test data
// and the profile's vectors.
import { sha256 } from '@noble/hashes/sha2.js';
import { toHex, utf8 } from './bytes.js';

export const DIGEST_PREFIX = 'sha256:';

/** What JSON leaves out of an object and writes as null in an array. */
const absent = (value: unknown) =>
  value === undefined || typeof value === 'function' || typeof value === 'symbol';

/** A value as JSON sees it: what its `toJSON` gives, when it has one (a Date, for one). */
function prepared(value: unknown): unknown {
  const toJson = (value as { toJSON?: unknown } | null)?.toJSON;
  return typeof toJson === 'function' ? toJson.call(value) : value;
}

/**
 * RFC 8785: numbers as ECMAScript writes them (section 3.2.2.3, which `JSON.stringify` is),
 * strings with JSON's escapes (3.2.2.2), object members sorted by their names' UTF-16 code units
 * (3.2.3, which is what `Array.prototype.sort` compares), no whitespace. `value` is prepared and
 * not absent.
 */
function serialise(value: unknown): string {
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new TypeError(`${value} has no JSON form`);
  }
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    const items = value.map(prepared);
    return `[${items.map((item) => (absent(item) ? 'null' : serialise(item))).join(',')}]`;
  }
  const members: string[] = [];
  for (const name of Object.keys(value).sort()) {
    const member = prepared((value as Record<string, unknown>)[name]);
    if (!absent(member)) members.push(`${JSON.stringify(name)}:${serialise(member)}`);
  }
  return `{${members.join(',')}}`;
}

/** The RFC 8785 (JCS) serialisation of a value; throws for a value with no JSON form. */
export function canonicalJson(value: unknown): string {
  const top = prepared(value);
  if (absent(top)) throw new TypeError('value has no JSON form');
  return serialise(top);
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
