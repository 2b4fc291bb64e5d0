// The keys of one lookup call as the front end sends them to the budget aggregate: one packed
// byte string instead of an object per key, so that handing a batch of 500 to a worker copies
// one buffer rather than cloning 500 objects. Per key, KEY_BYTES bytes: the identifier type's
// code, 1 when found (else 0), then the 64 hex digits of its hash (P8: hashes only). The
// aggregate unpacks them into the journal entry, whose stored form is unchanged.
import type { JournalEntry } from '../decider.js';

/** Lookup key types (SPEC D) by code; the order is the packing's and must not change. */
export const KEY_TYPES = [
  'phone',
  'email',
  'bank_account',
  'lei',
  'reg',
  'tax',
  'address',
] as const;

const CODES = new Map<string, number>(KEY_TYPES.map((t, code) => [t, code]));
const HASH_DIGITS = 64;
const KEY_BYTES = 2 + HASH_DIGITS;

/** What the journal keeps of one answer: its type, its hash and whether it was found. */
export interface JournalKey {
  identifier_type: string;
  identifier_hash: string;
  found: boolean;
}

/** The first two bytes of a key, by `code * 2 + found`, as Latin-1 text. */
const HEADS = Array.from({ length: KEY_TYPES.length * 2 }, (_, i) =>
  String.fromCharCode(i >> 1, i & 1),
);
/** Any number of packed keys, as Latin-1 text. */
const PACKED = new RegExp(
  `^(?:[\\x00-\\x0${KEY_TYPES.length - 1}][\\x00\\x01][0-9a-f]{${HASH_DIGITS}})*$`,
);

/** The keys packed; throws on a type or hash no lookup can have (a defect of the caller). */
export function packJournalKeys(keys: readonly JournalKey[]): Uint8Array {
  let text = '';
  for (const { identifier_type: type, identifier_hash: hash, found } of keys) {
    const code = CODES.get(type);
    if (code === undefined || hash.length !== HASH_DIGITS)
      throw new TypeError('packJournalKeys: not a lookup key');
    text += HEADS[code * 2 + (found ? 1 : 0)]! + hash;
  }
  return Buffer.from(text, 'latin1');
}

/** The journal's keys of a packed call, or null when the bytes are not a packing of keys. */
export function unpackJournalKeys(bytes: Uint8Array): JournalEntry['keys'] | null {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('latin1');
  if (!PACKED.test(text)) return null;
  const keys: JournalEntry['keys'] = [];
  for (let at = 0; at < text.length; at += KEY_BYTES) {
    const head = text.charCodeAt(at + 1);
    keys.push([KEY_TYPES[text.charCodeAt(at)]!, text.slice(at + 2, at + KEY_BYTES), head === 1]);
  }
  return keys;
}
