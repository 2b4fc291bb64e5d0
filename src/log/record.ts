// Record framing for the log and for snapshots: a CRC-32 of the payload, then the payload
// (msgpack). Every record is checked before it is appended and again when it is read back (P14).
//
// A log record's frame carries one more field, its link: the CRC-32 of its partition's previous
// record (0 for the first), covered by its own CRC-32. A checksum per record finds a damaged
// record but not a missing one; linked, a partition's records are a chain, and a record taken
// out of its middle breaks it (issue 28). Its tail is guarded by the partition's head, a row
// written in the same commit (rows.ts, headRows). Table rows keep the plain frame.
import { crc32 } from 'node:zlib';
import { OrderedMap } from 'immutable';
import { Packr, Unpackr, addExtension } from 'msgpackr';

/** The msgpack extension type of a persistent map (application types are 0 to 127). */
const PERSISTENT_MAP_EXTENSION = 0x50; // tidy: format (a msgpack extension type number)

/**
 * The growing children of an aggregate are persistent ordered maps (src/domain/children.ts).
 * Framed, such a map is its plain entries in order (what its toJSON gives as well); read back, it
 * is a map again, so a recovered aggregate does not convert its children on every read.
 */
addExtension({
  Class: OrderedMap,
  type: PERSISTENT_MAP_EXTENSION,
  write: (map: OrderedMap<string, unknown>) => map.toObject(),
  read: (entries: Record<string, unknown>) => OrderedMap(entries),
});

// copyBuffers: a record may be unframed straight from LMDB's shared read buffer (Log.replay), so
// no decoded value may keep a view of the bytes it came from.
const packr = new Packr({ useRecords: false, moreTypes: false, copyBuffers: true });
// msgpackr records, whose structures each encoding carries inline, decode in half the time of
// plain maps: the states recovery helpers hand to a worker, and the slices of a snapshot
// (snapshot.ts). Such an encoding is only ever read as one (packRecords, readRecords).
const recordsPackr = new Packr({ useRecords: true, moreTypes: false });
const recordsUnpackr = new Unpackr({ useRecords: true, moreTypes: false, copyBuffers: true });
const CHECKSUM_BYTES = 4; // tidy: format (CRC-32)
const LINK_BYTES = 4; // tidy: format (the CRC-32 of the previous record)

export class ChecksumError extends Error {
  override name = 'ChecksumError';
}

/** A table row that fails its checksum: names the table and the key, so an operator can act. */
export class DamagedRowError extends ChecksumError {
  override name = 'DamagedRowError';
  constructor(
    readonly table: string,
    readonly key: string,
  ) {
    super(
      `table '${table}' row '${key}' fails its checksum (damaged at rest); ` +
        'restore the data directory from a backup',
    );
  }
}

export function frame(value: unknown): Buffer {
  return framePayload(packr.pack(value));
}

/** The frame of a value handed to another thread, never stored: read it with unframeHandoff. */
export function frameHandoff(value: unknown): Buffer {
  return framePayload(recordsPackr.pack(value));
}

function framePayload(payload: Buffer): Buffer {
  const out = Buffer.allocUnsafe(CHECKSUM_BYTES + payload.length);
  out.writeUInt32BE(crc32(payload), 0);
  payload.copy(out, CHECKSUM_BYTES);
  return out;
}

/**
 * A log record's frame: CRC-32, link (the CRC-32 of the partition's previous record, 0 for the
 * first), the value's msgpack encoding; the CRC-32 covers link and value.
 */
export function frameRecord(value: unknown, link: number): Buffer {
  const payload = packr.pack(value);
  const out = Buffer.allocUnsafe(CHECKSUM_BYTES + LINK_BYTES + payload.length);
  out.writeUInt32BE(link, CHECKSUM_BYTES);
  payload.copy(out, CHECKSUM_BYTES + LINK_BYTES);
  out.writeUInt32BE(crc32(out.subarray(CHECKSUM_BYTES)), 0);
  return out;
}

/** A framed log record's own CRC-32: what the next record of its partition links to. */
export function recordCheck(bytes: Uint8Array): number {
  return asBuffer(bytes).readUInt32BE(0);
}

/**
 * The link and the value bytes of a log record whose checksum matches (ChecksumError
 * otherwise): `link` is the CRC-32 of the record it says comes before it.
 */
export function openRecord(bytes: Uint8Array): { link: number; value: Buffer } {
  const body = framedPayload(bytes);
  if (body.length < LINK_BYTES + 1) throw new ChecksumError('record shorter than its frame');
  return { link: body.readUInt32BE(0), value: body.subarray(LINK_BYTES) };
}

/** The value of a framed log record, its checksum checked (ChecksumError otherwise). */
export function unframeRecord<T>(bytes: Uint8Array): T {
  return readValue(openRecord(bytes).value);
}

/** The msgpack encoding of one value, in a buffer of its own (a piece of framePieces). */
export function packValue(value: unknown): Buffer {
  return Buffer.from(packr.pack(value));
}

/**
 * The frame of a payload given in pieces: the same bytes as `frame` of the value whose msgpack
 * encoding is their concatenation (a large value can so be encoded a piece at a time).
 */
export function framePieces(pieces: readonly Uint8Array[]): Buffer {
  let crc = 0;
  for (const piece of pieces) crc = crc32(piece, crc);
  const head = Buffer.allocUnsafe(CHECKSUM_BYTES);
  head.writeUInt32BE(crc, 0);
  return Buffer.concat([head, ...pieces]);
}

export function unframe<T>(bytes: Uint8Array): T {
  return readValue(framedPayload(bytes));
}

/** The msgpackr records encoding of a value, in a buffer of its own (no frame: see readRecords). */
export function packRecords(value: unknown): Buffer {
  return Buffer.from(recordsPackr.pack(value));
}

/** Reads what packRecords wrote, inside a frame whose checksum was checked (framedPayload). */
export function readRecords<T>(payload: Uint8Array): T {
  return recordsUnpackr.unpack(payload) as T;
}

/** Reads what packValue wrote, inside a frame whose checksum was checked (framedPayload). */
export function readValue<T>(payload: Uint8Array): T {
  return packr.unpack(payload) as T;
}

export function unframeHandoff<T>(bytes: Uint8Array): T {
  return readRecords(framedPayload(bytes));
}

/** The payload of a frame whose checksum matches it (ChecksumError otherwise). */
export function framedPayload(bytes: Uint8Array): Buffer {
  const buffer = asBuffer(bytes);
  if (buffer.length < CHECKSUM_BYTES + 1) throw new ChecksumError('record shorter than its frame');
  const payload = buffer.subarray(CHECKSUM_BYTES);
  if (crc32(payload) !== buffer.readUInt32BE(0))
    throw new ChecksumError('record checksum does not match');
  return payload;
}

/** Whether framed bytes hold their checksum (its payload left undecoded). */
export function frameHolds(bytes: Uint8Array): boolean {
  try {
    framedPayload(bytes);
    return true;
  } catch (error) {
    if (error instanceof ChecksumError) return false;
    throw error;
  }
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Unframes a row of a keyed table (P14): damage is reported with the table and the key. */
export function unframeRow<T>(table: string, key: string, bytes: Uint8Array): T {
  try {
    return unframe<T>(bytes);
  } catch (error) {
    if (error instanceof ChecksumError) throw new DamagedRowError(table, key);
    throw error;
  }
}

/**
 * Whether `value` holds more than `max` values (its fields, its children's, all the way down),
 * counted no further than that. Framed, each takes a byte at least: a value that holds more
 * than `max` frames to more than `max` bytes, found so without framing it.
 */
export function holdsMoreValuesThan(value: unknown, max: number): boolean {
  const budget = { left: max };
  const past = (held: unknown): boolean => {
    if (held === null || typeof held !== 'object') return false;
    const inner: Iterable<unknown> = OrderedMap.isOrderedMap(held)
      ? (held as OrderedMap<string, unknown>).values()
      : Array.isArray(held)
        ? held
        : Object.values(held);
    for (const each of inner) if (--budget.left < 0 || past(each)) return true;
    return false;
  };
  return past(value);
}
