// Snapshots encoded a slice at a time decode to exactly the value one `frame` gives, and a
// partition holding a subject of 100,000 identifiers snapshots and recovers to the same state.
import { OrderedMap } from 'immutable';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../clock.js';
import { DEFAULT_LIMITS } from '../config.js';
import { subjectDecider } from '../domain/subject/subject.js';
import { evolveSubject, type SubjectEvent, type SubjectState } from '../domain/subject/state.js';
import { partitionOf } from '../log/log.js';
import { MemoryLog } from '../log/memory-log.js';
import {
  ChecksumError,
  frame,
  framePieces,
  frameRecord,
  packRecords,
  recordCheck,
  unframe,
} from '../log/record.js';
import { headRows } from '../reads/rows.js';
import { newReference } from '../protocol/ids.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import {
  RecoveryError,
  foldPartition,
  frameFolded,
  recordsToReplay,
  unframeFolded,
  type Held,
} from './fold.js';
import { Shard } from './shard.js';
import {
  frameInSlices,
  frameSnapshot,
  snapshotSeq,
  unframeSnapshot,
  type SnapshotBody,
} from './snapshot.js';

const CHILDREN = 100_000;
const EVENTS_PER_RECORD = 1_000;
const signer = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);

function subjectEvents(id: string, identifiers: number): SubjectEvent[] {
  const at = '2026-11-23T12:00:00.000Z';
  const subject = {
    id,
    subject_type: 'natural_person' as const,
    owner: 'alpha',
    external_ref_sealed: null,
    created_at: at,
  };
  const events: SubjectEvent[] = [{ type: 'created', subject }];
  for (let i = 0; i < identifiers; i++) {
    const identifier = {
      id: `idn_${i.toString(16).padStart(32, '0')}`,
      identifier_type: 'email',
      hash: (i * 2654435761).toString(16).padStart(64, '0'),
      discoverability: i % 3 === 0 ? ('private' as const) : ('network' as const),
      verification_method: null,
      verified_at: null,
      created_at: at,
    };
    events.push({ type: 'identifier_added', identifier });
  }
  return events;
}

/** The same children in the same order, read back as a persistent map. */
function expectSameChildren(read: unknown, written: OrderedMap<string, unknown>): void {
  expect(OrderedMap.isOrderedMap(read)).toBe(true);
  expect([...(read as OrderedMap<string, unknown>).entries()]).toEqual([...written.entries()]);
}

const subjectOf = (id: string, identifiers: number) =>
  subjectEvents(id, identifiers).reduce<SubjectState | null>(evolveSubject, null)!;

/** Small states, one of many children, one with a nested persistent map, then small again. */
function mixedBody(seq: number): SnapshotBody {
  const big = subjectOf('sub_big', 5_000);
  const nested = { ...subjectOf('sub_nested', 3), extra: { inner: OrderedMap({ a: 1, b: 2 }) } };
  const aggregates: SnapshotBody['aggregates'] = [];
  for (let i = 0; i < 250; i++) aggregates.push([`rcp_${i}`, 'receipt', { n: i, steps: [i] }]);
  aggregates.push(['sub_big', 'subject', big], ['sub_nested', 'subject', nested]);
  for (let i = 0; i < 20; i++) aggregates.push([`small_${i}`, 'subject', subjectOf(`s${i}`, i)]);
  return { seq, check: checkAt(seq), aggregates };
}

/**
 * The record a snapshot at `seq` is the fold up to (a start finds it where the snapshot says,
 * issue 28; it is not replayed), and its CRC-32, which the snapshot names.
 */
const anchorAt = (seq: number) => frameRecord({ a: 'subject', k: 'anchor', e: [], t: seq }, 0);
const checkAt = (seq: number) => recordCheck(anchorAt(seq));

/** A partition recovered from `snapshot` at `seq` alone: its seq and its states in order. */
async function recoveredFrom(snapshot: Buffer, seq: number, p = 7) {
  const log = new MemoryLog();
  const head = headRows.head(p, { seq, check: checkAt(seq) });
  await log.append([{ partition: p, seq, bytes: anchorAt(seq) }], [head]);
  await log.writeSnapshot(p, snapshot);
  const held = new Map<string, Held>();
  const hold = (type: string, state: unknown) => ({ type, state });
  const folded = foldPartition(log, new Map(), p, { held, hold });
  return { seq: folded.seq, states: [...held] };
}

describe('snapshots in slices', () => {
  it('decode to the value one frame gives: small aggregates, large children', async () => {
    const body = mixedBody(123_456);
    const big = body.aggregates.find(([key]) => key === 'sub_big')![2] as SubjectState;
    const sliced = unframe<SnapshotBody>(await frameInSlices(body, 64));
    const whole = unframe<SnapshotBody>(frame(body));
    expect(JSON.stringify(sliced)).toBe(JSON.stringify(whole));
    const decodedBig = sliced.aggregates.find(([key]) => key === 'sub_big')![2] as SubjectState;
    expectSameChildren(decodedBig.identifiers, big.identifiers);
  });

  it('100,000 identifiers: handed over by a helper, snapshotted, recovered: the same', async () => {
    const log = new MemoryLog();
    const key = newReference('sub');
    const events = subjectEvents(key, CHILDREN);
    const p = partitionOf(key);
    let link = 0;
    for (let first = 0, seq = 1; first < events.length; first += EVENTS_PER_RECORD, seq++) {
      const e = events.slice(first, first + EVENTS_PER_RECORD);
      const bytes = frameRecord({ a: 'subject', k: key, e, t: 0 }, link);
      link = recordCheck(bytes);
      await log.append([{ partition: p, seq, bytes }], [headRows.head(p, { seq, check: link })]);
    }
    const shardOver = () =>
      new Shard({
        partitions: [p],
        log,
        deciders: [subjectDecider],
        clock: new SimulatedClock(0),
        member: 'alpha',
        signer: () => signer,
        newId: newReference,
        snapshotEveryRecords: 1_000_000,
        mailboxDepthMax: 16,
        limits: DEFAULT_LIMITS,
        onFatal: (error) => {
          throw error;
        },
      });
    const before = shardOver();
    expect((await before.recover()).records).toBe(Math.ceil(events.length / EVENTS_PER_RECORD));
    // As a recovery helper hands the partition to its shard: framed, then read back.
    const hold = (type: string, state: unknown) => ({ type, state });
    const held = new Map<string, Held>();
    const folded = foldPartition(log, new Map([['subject', subjectDecider]]), p, { held, hold });
    const handed = new Map<string, Held>();
    const read = unframeFolded(await frameFolded(folded, held), p, { held: handed, hold });
    expect(read).toEqual(folded);
    expectSameChildren(
      (handed.get(key)!.state as SubjectState).identifiers,
      (before.stateOf(key) as SubjectState).identifiers,
    );
    await before.snapshotAll();
    const after = shardOver();
    expect(await after.recover()).toEqual({ snapshots: 1, records: 0, aggregates: 1, helped: 0 });
    const was = before.stateOf(key) as SubjectState;
    const now = after.stateOf(key) as SubjectState;
    expect(now.identifiers.size).toBe(CHILDREN);
    expectSameChildren(now.identifiers, was.identifiers);
    expectSameChildren(now.addresses, was.addresses);
    expect({ ...now, identifiers: null, addresses: null }).toEqual({
      ...was,
      identifiers: null,
      addresses: null,
    });
  });
});

describe('stored snapshot forms', () => {
  it('pieces recover what the one-map form of earlier builds does; both are read', async () => {
    const body = mixedBody(98_765);
    const pieces = await recoveredFrom(await frameSnapshot(body, 64), 98_765);
    const oneMap = await recoveredFrom(frame(body), 98_765);
    expect(pieces.seq).toBe(98_765);
    expect(oneMap.seq).toBe(98_765);
    expect(JSON.stringify(pieces.states)).toBe(JSON.stringify(oneMap.states));
    expect(pieces.states.map(([key, held]) => [key, held.type])).toEqual(
      body.aggregates.map(([key, type]) => [key, type]),
    );
    // Children come back as persistent maps from either form.
    const stateOf = (states: [string, Held][], key: string) =>
      states.find(([k]) => k === key)![1].state as SubjectState;
    const big = body.aggregates.find(([key]) => key === 'sub_big')![2] as SubjectState;
    expectSameChildren(stateOf(pieces.states, 'sub_big').identifiers, big.identifiers);
    const nested = stateOf(pieces.states, 'sub_nested') as unknown as {
      extra: { inner: OrderedMap<string, unknown> };
    };
    expectSameChildren(nested.extra.inner, OrderedMap({ a: 1, b: 2 }));
  });

  it('a partition snapshotted with no states still carries its seq', async () => {
    const snapshot = await frameSnapshot({ seq: 42, check: checkAt(42), aggregates: [] });
    expect(await recoveredFrom(snapshot, 42)).toEqual({
      seq: 42,
      states: [],
    });
  });

  it('a snapshot naming no log position, as earlier builds wrote, is refused', async () => {
    const unchained = await frameSnapshot({ seq: 42, aggregates: [] });
    await expect(recoveredFrom(unchained, 42)).rejects.toThrow(
      'the snapshot of partition 7 names no log position',
    );
  });

  it('a damaged byte anywhere in the pieces form refuses the start (P14)', async () => {
    const bytes = await frameSnapshot(mixedBody(5), 64);
    // The checksum, the marker, the first piece's kind and length, the middle, the last byte.
    for (const at of [0, 4, 5, 7, bytes.length >> 1, bytes.length - 1]) {
      const damaged = Buffer.from(bytes);
      damaged[at]! ^= 0x01;
      const read = recoveredFrom(damaged, 5, 9);
      await expect(read).rejects.toBeInstanceOf(RecoveryError);
      await expect(read).rejects.toThrow('snapshot of partition 9 fails its checksum');
    }
  });
});

describe("a snapshot's seq, and what a recovery helper takes (recordsToReplay)", () => {
  it('the seq is read from the first piece alone, which holds no state', async () => {
    const bytes = await frameSnapshot(mixedBody(777), 64);
    expect(snapshotSeq(bytes)).toBe(777);
    const first: SnapshotBody[] = [];
    unframeSnapshot(bytes, (slice) => first.push(slice));
    expect(first[0]).toEqual({ seq: 777, check: checkAt(777), aggregates: [] });
    // The rest replaced by a piece no reader knows, checksum made good: the seq is still read,
    // since nothing after the first piece is.
    const payload = bytes.subarray(4);
    const firstEnd = 1 + 5 + payload.readUInt32BE(2);
    const unknownPiece = Buffer.from([9, 0, 0, 0, 1, 0]);
    const cut = framePieces([payload.subarray(0, firstEnd), unknownPiece]);
    expect(snapshotSeq(cut)).toBe(777);
    expect(() => unframeSnapshot(cut, () => undefined)).toThrow('unknown snapshot piece');
  });

  it("is read from earlier builds' forms: one map, and pieces without the seq piece", () => {
    const body = mixedBody(31);
    expect(snapshotSeq(frame(body))).toBe(31);
    const slice = packRecords({ seq: 31, aggregates: body.aggregates.slice(0, 10) });
    const head = Buffer.alloc(6);
    head[0] = 0xc1;
    head[1] = 0;
    head.writeUInt32BE(slice.length, 2);
    expect(snapshotSeq(framePieces([head, slice]))).toBe(31);
  });

  it('a damaged snapshot fails its checksum', async () => {
    const bytes = await frameSnapshot(mixedBody(5), 64);
    bytes[bytes.length - 1]! ^= 0x01;
    expect(() => snapshotSeq(bytes)).toThrow(ChecksumError);
  });

  it('records to replay: any with no snapshot, any after it; damage counts', async () => {
    const log = new MemoryLog();
    const record = (p: number, seq: number) => ({
      partition: p,
      seq,
      bytes: frame({ a: 'receipt', k: `rcp_${p}_${seq}`, e: [], t: 0 }),
    });
    const snapshotAt = (seq: number) => frameSnapshot({ seq, aggregates: [] });
    // 1 nothing; 2 records; 3 a snapshot of all; 4 a record after it; 5 a snapshot alone;
    // 6 records after a damaged snapshot.
    await log.append(
      [record(2, 1), record(3, 1), record(3, 2), record(4, 1), record(4, 2), record(6, 1)],
      [],
    );
    await log.writeSnapshot(3, await snapshotAt(2));
    await log.writeSnapshot(4, await snapshotAt(1));
    await log.writeSnapshot(5, await snapshotAt(0));
    const damaged = await snapshotAt(0);
    damaged[damaged.length - 1]! ^= 0x01;
    await log.writeSnapshot(6, damaged);
    expect([1, 2, 3, 4, 5, 6].map((p) => recordsToReplay(log, p, log.readSnapshot(p)))).toEqual([
      false,
      true,
      false,
      true,
      false,
      true,
    ]);
  });
});
