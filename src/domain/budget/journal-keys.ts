// The keys of one lookup call as the front end sends them to the budget aggregate: one packed
// byte string instead of an object per key, so that handing a batch of 500 to a worker moves
// one buffer rather than cloning 500 objects. Per key, KEY_BYTES bytes: the identifier type's
// code, 1 when found (else 0), then the 64 hex digits of its hash (P8: hashes only). The
// aggregate checks them and its journal row spells them out, in the stored form of a journal
// entry (a list of [type, hash, found]), unchanged.

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
export function isPackedKeys(bytes: Uint8Array): boolean {
  if (bytes.length % KEY_BYTES !== 0) return false;
  const hex = HEX;
  let digits = 1;
  for (let at = 0; at < bytes.length; at += KEY_BYTES) {
    if (bytes[at]! >= KEY_TYPES.length || bytes[at + 1]! > FOUND) return false;
    // Four digits a step (HASH_DIGITS is a multiple of four), a verdict per key.
    for (let i = at + 2; i < at + KEY_BYTES; i += 4)
      digits &= hex[bytes[i]!]! & hex[bytes[i + 1]!]! & hex[bytes[i + 2]!]! & hex[bytes[i + 3]!]!;
    if (digits === 0) return false;
  }
  return true;
}

// The msgpack bytes of the parts of a key, as msgpackr writes them (record.ts): an array of
// three, a type name as a fixstr, a hash as a str8, then true or false; as Latin-1 text, each
// character one byte.
const ARRAY_OF_THREE = 0x93;
const STR8 = 0xd9;
const TRUE = 0xc3;
const FALSE = 0xc2;
const bytesText = (bytes: readonly number[]) => String.fromCharCode(...bytes);
/** `[` `type` and the str8 head of the hash, by type code. */
const KEY_OPENINGS = KEY_TYPES.map(
  (type) => bytesText([ARRAY_OF_THREE, 0xa0 | type.length]) + type + bytesText([STR8, HASH_DIGITS]),
);
/** The closing boolean, by the packing's found byte. */
const KEY_CLOSINGS = [bytesText([FALSE]), bytesText([TRUE])];

/** The msgpack header of an array of `count` items, as msgpackr writes it. */
function arrayHeader(count: number): Buffer {
  if (count < 16) return Buffer.from([0x90 | count]);
  const wide = count > 0xffff;
  const header = Buffer.alloc(wide ? 5 : 3);
  header[0] = wide ? 0xdd : 0xdc;
  if (wide) header.writeUInt32BE(count, 1);
  else header.writeUInt16BE(count, 1);
  return header;
}

/**
 * The journal's keys of a packing (checked with isPackedKeys) as msgpack: the very bytes that
 * msgpackr writes for their list of [type, hash, found], made without that list (thousands of
 * small arrays and strings for a batch).
 */
export function packedKeysMsgpack(bytes: Uint8Array): Buffer {
  const count = bytes.length / KEY_BYTES;
  // The packing read as Latin-1 text (one character a byte), its hashes cut from it, and the
  // whole joined and encoded once: cheaper than a copy of each byte or a native copy per part.
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('latin1');
  let out = arrayHeader(count).toString('latin1');
  for (let at = 0; at < bytes.length; at += KEY_BYTES) {
    out += KEY_OPENINGS[bytes[at]!]! + text.slice(at + 2, at + KEY_BYTES);
    out += KEY_CLOSINGS[bytes[at + 1]!]!;
  }
  return Buffer.from(out, 'latin1');
}
