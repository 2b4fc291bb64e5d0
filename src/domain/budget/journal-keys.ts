// The keys of one lookup call as the front end sends them to the budget aggregate: one packed
// byte string instead of an object per key, so that handing a batch of 500 to a worker copies
// one buffer rather than cloning 500 objects. Per key, KEY_BYTES bytes: the identifier type's
// code, 1 when found (else 0), then the 64 hex digits of its hash (P8: hashes only). The
// aggregate unpacks them into the journal entry, whose stored form is unchanged.
import type { JournalEntry } from '../decider.js';

/** Lookup key types (SPEC D) by code; the order is the packing's and must not change. */
const TYPES = ['phone', 'email', 'bank_account', 'lei', 'reg', 'tax', 'address'] as const;
const CODES = new Map<string, number>(TYPES.map((t, code) => [t, code]));
const HASH_DIGITS = 64;
const KEY_BYTES = 2 + HASH_DIGITS;

/** What the journal keeps of one answer: its type, its hash and whether it was found. */
export interface JournalKey {
  identifier_type: string;
  identifier_hash: string;
  found: boolean;
}

/** The keys packed; throws on a type or hash no lookup can have (a defect of the caller). */
export function packJournalKeys(keys: readonly JournalKey[]): Uint8Array {
  const bytes = new Uint8Array(keys.length * KEY_BYTES);
  for (let k = 0; k < keys.length; k++) {
    const { identifier_type: type, identifier_hash: hash, found } = keys[k]!;
    const code = CODES.get(type);
    if (code === undefined || hash.length !== HASH_DIGITS)
      throw new TypeError('packJournalKeys: not a lookup key');
    const at = k * KEY_BYTES;
    bytes[at] = code;
    bytes[at + 1] = found ? 1 : 0;
    for (let i = 0; i < HASH_DIGITS; i++) bytes[at + 2 + i] = hash.charCodeAt(i);
  }
  return bytes;
}

/** The journal's keys of a packed call, or null when the bytes are not a packing of keys. */
export function unpackJournalKeys(bytes: Uint8Array): JournalEntry['keys'] | null {
  if (bytes.length % KEY_BYTES !== 0) return null;
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  const keys: JournalEntry['keys'] = [];
  for (let at = 0; at < bytes.length; at += KEY_BYTES) {
    const type = TYPES[bytes[at]!];
    const found = bytes[at + 1];
    if (type === undefined || (found !== 0 && found !== 1)) return null;
    for (let i = at + 2; i < at + KEY_BYTES; i++) {
      const c = bytes[i]!;
      if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return null;
    }
    keys.push([type, text.toString('latin1', at + 2, at + KEY_BYTES), found === 1]);
  }
  return keys;
}
