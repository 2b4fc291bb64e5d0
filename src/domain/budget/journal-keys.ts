// The keys of one lookup call as the front end sends them to the budget aggregate: one packed
// byte string instead of an object per key, so that handing a batch of 500 to a worker moves
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

/** 1 for the byte values of lowercase hex digits. */
const HEX = new Uint8Array(256);
for (const c of Buffer.from('0123456789abcdef', 'latin1')) HEX[c] = 1;
const FOUND = 1;
/** The first two bytes of a key, by `code * 2 + found`, as Latin-1 text. */
const HEADS = Array.from({ length: KEY_TYPES.length * 2 }, (_, i) =>
  String.fromCharCode(i >> 1, i & 1),
);

/**
 * The keys packed, in a buffer of their own (never a slice of Node's shared pool), so that the
 * caller may transfer it to a worker; throws on a type or hash no lookup can have (a defect of
 * the caller).
 */
export function packJournalKeys(keys: readonly JournalKey[]): Uint8Array<ArrayBuffer> {
  let text = '';
  for (const { identifier_type: type, identifier_hash: hash, found } of keys) {
    const code = CODES.get(type);
    if (code === undefined || hash.length !== HASH_DIGITS)
      throw new TypeError('packJournalKeys: not a lookup key');
    text += HEADS[code * 2 + (found ? FOUND : 0)]! + hash;
  }
  // One write of the whole text: cheaper than a write per key.
  const bytes = Buffer.allocUnsafeSlow(text.length);
  bytes.write(text, 'latin1');
  return bytes;
}

/** Whether the bytes are a packing of keys: whole keys, known codes, 0 or 1, hex digits. */
function isPacking(bytes: Uint8Array): boolean {
  if (bytes.length % KEY_BYTES !== 0) return false;
  for (let at = 0; at < bytes.length; at += KEY_BYTES) {
    if (bytes[at]! >= KEY_TYPES.length || bytes[at + 1]! > FOUND) return false;
    for (let i = at + 2; i < at + KEY_BYTES; i++) if (HEX[bytes[i]!] !== 1) return false;
  }
  return true;
}

/** The journal's keys of a packed call, or null when the bytes are not a packing of keys. */
export function unpackJournalKeys(bytes: Uint8Array): JournalEntry['keys'] | null {
  if (!isPacking(bytes)) return null;
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('latin1');
  const keys: JournalEntry['keys'] = [];
  for (let at = 0; at < bytes.length; at += KEY_BYTES) {
    const type = KEY_TYPES[bytes[at]!]!;
    keys.push([type, text.slice(at + 2, at + KEY_BYTES), bytes[at + 1] === FOUND]);
  }
  return keys;
}
