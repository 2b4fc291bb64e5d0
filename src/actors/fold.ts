// Recovery of one partition: its snapshot, then the fold of every record after it through the
// deciders' `evolve`. A shard folds the partitions it owns; at start, recovery helper threads
// (recovery-helper.ts) fold some of them on spare cores and hand the states over, encoded as a
// snapshot body is.
import type { AnyDecider } from '../domain/decider.js';
import type { Log } from '../log/log.js';
import { ChecksumError, unframe } from '../log/record.js';
import { frameInSlices, type SnapshotBody } from './snapshot.js';

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
 * A folded partition as bytes, to hand it to another thread: its body framed as a snapshot is
 * (checked on arrival, and an aggregate of any number of children encodes), then the counts.
 */
export async function frameFolded(folded: FoldedPartition): Promise<FramedFold> {
  return { ...folded, body: await frameInSlices(folded.body) };
}

export type FramedFold = Omit<FoldedPartition, 'body'> & { body: Uint8Array };

export function unframeFolded(framed: FramedFold, p: number): FoldedPartition {
  const body = unframeOrFail<SnapshotBody>(
    framed.body,
    `partition ${p} as a recovery helper folded it`,
  );
  return { ...framed, body };
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
    slot = { type: record.a, state: null };
    states.set(record.k, slot);
  }
  for (const event of record.e) slot.state = decider.evolve(slot.state, event);
}

function unframeOrFail<T>(bytes: Uint8Array, what: string): T {
  try {
    return unframe<T>(bytes);
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
