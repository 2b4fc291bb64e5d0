// Snapshots of a partition encoded a slice at a time. A partition's snapshot is the fold of its
// records up to a seq: the states are captured at once (they are immutable values, children
// included: src/domain/children.ts), then encoded a few thousand values at a time with the event
// loop free in between, so commands of the partition's aggregates, even those of the one being
// encoded, are not held up for the whole encoding. The bytes decode to the same value as
// `frame(body)` (one msgpack map, one checksum): recovery reads snapshots from any build alike.
import { OrderedMap } from 'immutable';
import { SNAPSHOT_SLICE_VALUES } from '../config.js';
import { framePieces, packValue } from '../log/record.js';

export interface SnapshotBody {
  seq: number;
  aggregates: [key: string, type: string, state: unknown][];
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

/** The framed snapshot, encoded `sliceValues` values at a time, yielding between slices. */
export async function frameInSlices(
  body: SnapshotBody,
  sliceValues = SNAPSHOT_SLICE_VALUES,
): Promise<Buffer> {
  const pieces: Buffer[] = [
    header(MSGPACK.mapFix, MSGPACK.map16, MSGPACK.map32, 2),
    packValue('seq'),
    packValue(body.seq),
    packValue('aggregates'),
    header(MSGPACK.arrayFix, MSGPACK.array16, MSGPACK.array32, body.aggregates.length),
  ];
  let small: unknown[] = [];
  const flush = async () => {
    if (small.length === 0) return;
    pieces.push(items(small));
    small = [];
    await nextTurn();
  };
  for (const aggregate of body.aggregates) {
    if (!holdsLargeChildren(aggregate[2], sliceValues)) {
      small.push(aggregate);
      if (small.length >= sliceValues) await flush();
      continue;
    }
    await flush();
    const [key, type, state] = aggregate;
    pieces.push(header(MSGPACK.arrayFix, MSGPACK.array16, MSGPACK.array32, 3), items([key, type]));
    await encodeState(state as Record<string, unknown>, pieces, sliceValues);
  }
  await flush();
  return framePieces(pieces);
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
