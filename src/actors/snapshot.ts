// Snapshots of a partition encoded a slice at a time. A partition's snapshot is the fold of its
// records up to a seq: the states are captured at once (they are immutable values, children
// included: src/domain/children.ts), then encoded a few thousand values at a time with the event
// loop free in between, so commands of the partition's aggregates, even those of the one being
// encoded, are not held up for the whole encoding.
//
// Two stored forms, both one frame (one checksum over the payload), told apart by the payload's
// first byte. The first form, which builds before 2026-11-24 wrote and which is still read, is
// one msgpack map {seq, aggregates}. The form written now (`frameSnapshot`) is a marker byte no
// msgpack value starts with, then pieces: slices of small states as msgpackr records (whose
// structures each piece carries inline), read in about half the time of plain maps, which is
// most of a start from snapshots; and an aggregate of many children alone in a piece of the
// first form, encoded a slice at a time.
import { OrderedMap } from 'immutable';
import { SNAPSHOT_SLICE_VALUES } from '../config.js';
import {
  framedPayload,
  framePieces,
  packRecords,
  packValue,
  readRecords,
  readValue,
} from '../log/record.js';

export interface SnapshotBody {
  seq: number;
  /**
   * The CRC-32 of record `seq` (0 with none): the first record after the snapshot must link to
   * it (record.ts), so a start knows the snapshot and the log it resumes are one chain. Absent in
   * the slices handed between threads, which are never stored.
   */
  check?: number;
  aggregates: [key: string, type: string, state: unknown][];
}

/** The log position a stored snapshot is the fold up to; `check` undefined if it names none. */
export interface SnapshotPosition {
  seq: number;
  check: number | undefined;
}

const MSGPACK = {
  fixMax: 15, // tidy: format (msgpack fixmap and fixarray hold up to 15)
  mapFix: 0x80, // tidy: format (msgpack type bytes)
  map16: 0xde, // tidy: format
  map32: 0xdf, // tidy: format
  arrayFix: 0x90, // tidy: format
  array16: 0xdc, // tidy: format
  array32: 0xdd, // tidy: format
  u16Max: 0xffff, // tidy: format
} as const;

/**
 * What msgpackr writes before a persistent map's entries (its extension tag, record.ts): an
 * empty map's encoding less that of an empty object.
 */
const MAP_TAG = packValue(OrderedMap()).subarray(0, -packValue({}).length);

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** msgpack's "never used" type byte: a payload of the first form never starts with it. */
const PIECES_MARKER = 0xc1; // tidy: format (a msgpack type byte)
/** What a piece holds: a slice of states as msgpackr records, or a body of the first form. */
const PIECE = { records: 0, value: 1 } as const;
const PIECE_HEADER_BYTES = 5; // tidy: format (its kind, then its length in 32 bits)

/**
 * The framed snapshot in the form written now (the module header): slices of `sliceValues`
 * states, the event loop free between them. The first piece holds no state, only the seq, so
 * that the seq is read without the states (snapshotSeq); a reader takes it as an empty slice.
 */
export async function frameSnapshot(
  body: SnapshotBody,
  sliceValues = SNAPSHOT_SLICE_VALUES,
): Promise<Buffer> {
  const seq = body.seq;
  const pieces: Buffer[] = [Buffer.from([PIECES_MARKER])];
  const add = (kind: number, bytes: Buffer) => {
    const head = Buffer.alloc(PIECE_HEADER_BYTES);
    head[0] = kind;
    head.writeUInt32BE(bytes.length, 1);
    pieces.push(head, bytes);
  };
  add(PIECE.records, packRecords({ seq, ...checkOf(body), aggregates: [] }));
  for await (const slice of slicesOf(body.aggregates, sliceValues)) {
    if (slice.small !== null) {
      add(PIECE.records, packRecords({ seq, aggregates: slice.small }));
      continue;
    }
    const large = await bodyPieces({ seq, aggregates: [slice.large] }, sliceValues);
    add(PIECE.value, Buffer.concat(large));
  }
  return framePieces(pieces);
}

/** The `check` field of a body that names one (none is written for one that does not). */
const checkOf = (body: SnapshotBody) => (body.check === undefined ? {} : { check: body.check });

const positionOf = (body: SnapshotBody): SnapshotPosition => ({
  seq: body.seq,
  check: body.check,
});

/**
 * Reads a stored snapshot of either form: its checksum checked first (ChecksumError), then each
 * slice of states handed to `take` in order. Returns the position it is the fold up to.
 */
export function unframeSnapshot(
  bytes: Uint8Array,
  take: (slice: SnapshotBody) => void,
): SnapshotPosition {
  const payload = framedPayload(bytes);
  if (payload[0] !== PIECES_MARKER) {
    const body = readValue<SnapshotBody>(payload);
    take(body);
    return positionOf(body);
  }
  let position: SnapshotPosition | undefined;
  for (let at = 1; at < payload.length;) {
    const { slice, end } = pieceAt(payload, at);
    take(slice);
    // The first piece names the position; the slices after it repeat the seq alone.
    position ??= positionOf(slice);
    at = end;
  }
  if (position === undefined) throw new Error('snapshot without a piece');
  return position;
}

/**
 * The position a stored snapshot is the fold up to, its checksum checked (ChecksumError): read
 * from its first piece alone, which holds no state in snapshots written since the seq piece came
 * in (frameSnapshot); of an older one, the first slice of states is read for it.
 */
export function snapshotPosition(bytes: Uint8Array): SnapshotPosition {
  const payload = framedPayload(bytes);
  if (payload[0] !== PIECES_MARKER) return positionOf(readValue<SnapshotBody>(payload));
  return positionOf(pieceAt(payload, 1).slice);
}

/** The seq a stored snapshot is the fold up to (snapshotPosition). */
export function snapshotSeq(bytes: Uint8Array): number {
  return snapshotPosition(bytes).seq;
}

/** The piece of a payload in the form written now that starts at `at`, and where it ends. */
function pieceAt(payload: Buffer, at: number): { slice: SnapshotBody; end: number } {
  if (at + PIECE_HEADER_BYTES > payload.length) throw new Error('snapshot piece cut short');
  const kind = payload[at]!;
  const end = at + PIECE_HEADER_BYTES + payload.readUInt32BE(at + 1);
  if (end > payload.length) throw new Error('snapshot piece cut short');
  const piece = payload.subarray(at + PIECE_HEADER_BYTES, end);
  if (kind !== PIECE.records && kind !== PIECE.value) throw new Error('unknown snapshot piece');
  const slice =
    kind === PIECE.records ? readRecords<SnapshotBody>(piece) : readValue<SnapshotBody>(piece);
  return { slice, end };
}

/**
 * The framed snapshot in the first form (one msgpack map), encoded `sliceValues` values at a
 * time, yielding between slices.
 */
export async function frameInSlices(
  body: SnapshotBody,
  sliceValues = SNAPSHOT_SLICE_VALUES,
): Promise<Buffer> {
  return framePieces(await bodyPieces(body, sliceValues));
}

/** The msgpack encoding of `body` (one map) in pieces, yielding between slices. */
async function bodyPieces(body: SnapshotBody, sliceValues: number): Promise<Buffer[]> {
  const named = body.check === undefined ? [] : [packValue('check'), packValue(body.check)];
  const pieces: Buffer[] = [
    header(MSGPACK.mapFix, MSGPACK.map16, MSGPACK.map32, 2 + named.length / 2),
    packValue('seq'),
    packValue(body.seq),
    ...named,
    packValue('aggregates'),
    header(MSGPACK.arrayFix, MSGPACK.array16, MSGPACK.array32, body.aggregates.length),
  ];
  for await (const slice of slicesOf(body.aggregates, sliceValues)) {
    if (slice.small !== null) {
      pieces.push(items(slice.small));
      continue;
    }
    const [key, type, state] = slice.large;
    pieces.push(header(MSGPACK.arrayFix, MSGPACK.array16, MSGPACK.array32, 3), items([key, type]));
    await encodeState(state as Record<string, unknown>, pieces, sliceValues);
  }
  return pieces;
}

type Aggregate = SnapshotBody['aggregates'][number];

/**
 * The aggregates in order: runs of up to `sliceValues` small states, the event loop free after
 * each run is taken, and each state of many children (holdsLargeChildren) alone.
 */
async function* slicesOf(
  aggregates: readonly Aggregate[],
  sliceValues: number,
): AsyncGenerator<{ small: Aggregate[]; large: null } | { small: null; large: Aggregate }> {
  let small: Aggregate[] = [];
  for (const aggregate of aggregates) {
    const large = holdsLargeChildren(aggregate[2], sliceValues);
    if (small.length > 0 && (large || small.length >= sliceValues)) {
      yield { small, large: null };
      small = [];
      await nextTurn();
    }
    if (large) yield { small: null, large: aggregate };
    else small.push(aggregate);
  }
  if (small.length > 0) {
    yield { small, large: null };
    await nextTurn();
  }
}

/** A plain state with a persistent map of more children than one slice. */
export function holdsLargeChildren(state: unknown, sliceValues: number): boolean {
  if (
    state === null ||
    typeof state !== 'object' ||
    Object.getPrototypeOf(state) !== Object.prototype
  )
    return false;
  return Object.values(state).some((v) => OrderedMap.isOrderedMap(v) && v.size > sliceValues);
}

/** A state field by field; its large children maps entry by entry, a slice at a time. */
async function encodeState(
  state: Record<string, unknown>,
  pieces: Buffer[],
  sliceValues: number,
): Promise<void> {
  const fields = Object.entries(state);
  pieces.push(header(MSGPACK.mapFix, MSGPACK.map16, MSGPACK.map32, fields.length));
  for (const [name, value] of fields) {
    pieces.push(packValue(name));
    if (!OrderedMap.isOrderedMap(value)) {
      pieces.push(packValue(value));
      continue;
    }
    const map = value as OrderedMap<string, unknown>;
    pieces.push(MAP_TAG, header(MSGPACK.mapFix, MSGPACK.map16, MSGPACK.map32, map.size));
    let slice: unknown[] = [];
    for (const [childKey, child] of map) {
      slice.push(childKey, child);
      if (slice.length < 2 * sliceValues) continue;
      pieces.push(items(slice));
      slice = [];
      await nextTurn();
    }
    if (slice.length > 0) pieces.push(items(slice));
  }
}

/** The encodings of `values` one after another: an array's encoding without its header. */
function items(values: unknown[]): Buffer {
  const packed = packValue(values);
  const first = packed[0]!;
  const skip = first === MSGPACK.array16 ? 3 : first === MSGPACK.array32 ? 5 : 1;
  return packed.subarray(skip);
}

/** A msgpack map or array header for `count` entries. */
function header(fix: number, of16: number, of32: number, count: number): Buffer {
  if (count <= MSGPACK.fixMax) return Buffer.from([fix | count]);
  if (count <= MSGPACK.u16Max) {
    const out = Buffer.alloc(3);
    out[0] = of16;
    out.writeUInt16BE(count, 1);
    return out;
  }
  const out = Buffer.alloc(5);
  out[0] = of32;
  out.writeUInt32BE(count, 1);
  return out;
}
