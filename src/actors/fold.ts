// Recovery of one partition: its snapshot, then the fold of every record after it through the
// deciders' `evolve`. A shard folds the partitions it owns; at start, recovery helper threads
// (recovery-helper.ts) fold some of them on spare cores and hand the states over, encoded as a
// snapshot body is.
import type { AnyDecider } from '../domain/decider.js';
import type { Log } from '../log/log.js';
import { SNAPSHOT_SLICE_VALUES } from '../config.js';
import { ChecksumError, frameHandoff, unframe, unframeHandoff } from '../log/record.js';
import { frameInSlices, holdsLargeChildren, type SnapshotBody } from './snapshot.js';

export class RecoveryError extends Error {
  override name = 'RecoveryError';
}

/** A log record: the events one command produced for one aggregate. */
export interface LogRecord {
  a: string;
  k: string;
  e: unknown[];
  t: number;
}

/** A partition as recovered: its states up to `seq`, and what was read to get them. */
export interface FoldedPartition {
  body: SnapshotBody;
  /** A snapshot was read. */
  snapshot: boolean;
  /** Records replayed after it. */
  records: number;
}

/** Rebuilds one partition from its snapshot and the records after it. */
export function foldPartition(
  log: Log,
  deciders: ReadonlyMap<string, AnyDecider>,
  p: number,
): FoldedPartition {
  const states = new Map<string, { type: string; state: unknown }>();
  let last = 0;
  const snapshot = log.readSnapshot(p);
  if (snapshot !== undefined) {
    const body = unframeOrFail<SnapshotBody>(snapshot, `snapshot of partition ${p}`);
    for (const [key, type, state] of body.aggregates) states.set(key, { type, state });
    last = body.seq;
  }
  // Records are read one at a time (a partition's log is never held whole in memory). An LMDB
  // commit is atomic, so a record that fails its checksum, even the last one, is damage at
  // rest, not a torn write: dropping it would keep the rest of its commit (views, usage rows,
  // idempotent answers) and serve state that no record explains (P14).
  let records = 0;
  for (const { seq, value } of log.replay(p, last, recordOrDamaged)) {
    if (value === DAMAGED) throw new RecoveryError(damagedRecordMessage(p, seq));
    replay(deciders, states, value);
    last = seq;
    records++;
  }
  const aggregates: SnapshotBody['aggregates'] = [];
  for (const [key, { type, state }] of states) aggregates.push([key, type, state]);
  return { body: { seq: last, aggregates }, snapshot: snapshot !== undefined, records };
}

/**
 * A folded partition as bytes, to hand it to another thread: its states in slices, each framed
 * (checked on arrival) as a snapshot body of its own, then the counts. A slice of small states
 * is encoded as msgpackr records, quicker to read than a snapshot's plain maps; an aggregate of
 * many children is encoded as a snapshot is, in pieces (any number of children encodes).
 */
export async function frameFolded(folded: FoldedPartition): Promise<FramedFold> {
  const { seq, aggregates } = folded.body;
  const pieces: FramedFold['pieces'] = [];
  let small: SnapshotBody['aggregates'] = [];
  const flush = () => {
    pieces.push({ records: true, bytes: frameHandoff({ seq, aggregates: small }) });
    small = [];
  };
  for (const aggregate of aggregates) {
    if (holdsLargeChildren(aggregate[2], SNAPSHOT_SLICE_VALUES)) {
      if (small.length > 0) flush();
      pieces.push({ records: false, bytes: await frameInSlices({ seq, aggregates: [aggregate] }) });
    } else {
      small.push(aggregate);
      if (small.length >= SNAPSHOT_SLICE_VALUES) flush();
    }
  }
  // One piece at least: it carries the seq of a partition that has no states.
  if (small.length > 0 || pieces.length === 0) flush();
  return { snapshot: folded.snapshot, records: folded.records, pieces };
}

/** The pieces in order; each read as it was written (msgpackr records or a snapshot's maps). */
export type FramedFold = Omit<FoldedPartition, 'body'> & {
  pieces: { records: boolean; bytes: Uint8Array }[];
};

export function unframeFolded(framed: FramedFold, p: number): FoldedPartition {
  const what = `partition ${p} as a recovery helper folded it`;
  const body: SnapshotBody = { seq: 0, aggregates: [] };
  for (const { records, bytes } of framed.pieces) {
    const slice = unframeOrFail<SnapshotBody>(bytes, what, records ? unframeHandoff : unframe);
    body.seq = slice.seq;
    for (const aggregate of slice.aggregates) body.aggregates.push(aggregate);
  }
  return { snapshot: framed.snapshot, records: framed.records, body };
}

const DAMAGED = Symbol('damaged');

function recordOrDamaged(bytes: Buffer): LogRecord | typeof DAMAGED {
  try {
    return unframe<LogRecord>(bytes);
  } catch (error) {
    if (error instanceof ChecksumError) return DAMAGED;
    throw error;
  }
}

function replay(
  deciders: ReadonlyMap<string, AnyDecider>,
  states: Map<string, { type: string; state: unknown }>,
  record: LogRecord,
): void {
  const decider = deciders.get(record.a);
  if (decider === undefined)
    throw new RecoveryError(`log holds records of an unknown aggregate type '${record.a}'`);
  let slot = states.get(record.k);
  if (slot === undefined) {
    slot = { type: decider.type, state: null };
    states.set(record.k, slot);
  }
  for (const event of record.e) slot.state = decider.evolve(slot.state, event);
}

function unframeOrFail<T>(
  bytes: Uint8Array,
  what: string,
  read: (bytes: Uint8Array) => T = unframe,
): T {
  try {
    return read(bytes);
  } catch (error) {
    throw new RecoveryError(
      `${what} fails its checksum (${(error as Error).message}); refusing to start`,
    );
  }
}

/** What an operator reads when a record is damaged: where, why the node stops, what to do. */
export function damagedRecordMessage(partition: number, seq: number): string {
  return (
    `log record ${seq} of partition ${partition} fails its checksum: the data directory is ` +
    'damaged at rest (a commit is never half-written). The node will not serve state it cannot ' +
    'verify (P14); restore the data directory from the latest backup and start again'
  );
}
