// Recovery of one partition: its snapshot, then the fold of every record after it through the
// deciders' `evolve`. A shard folds the partitions it owns; at start, recovery helper threads
// (recovery-helper.ts) fold some of them on spare cores and hand the states over, encoded in
// slices of snapshot bodies.
import type { AnyDecider } from '../domain/decider.js';
import type { Log } from '../log/log.js';
import { SNAPSHOT_SLICE_VALUES } from '../config.js';
import { frameHandoff, readValue, unframe, unframeHandoff } from '../log/record.js';
import type { LogPosition } from '../reads/rows.js';
import {
  frameInSlices,
  holdsLargeChildren,
  snapshotPosition,
  snapshotSeq,
  unframeSnapshot,
  type SnapshotBody,
  type SnapshotPosition,
} from './snapshot.js';
import { Chain, headOf, LOG_START, type ChainFault } from './chain.js';
import { planted } from './planted.js';

export { damagedRecordMessage } from './chain.js';

export class RecoveryError extends Error {
  override name = 'RecoveryError';
}

/** A log record: the events one command produced for one aggregate. */
export interface LogRecord {
  a: string;
  k: string;
  e: unknown[];
  t: number;
  /**
   * 1: its commit wrote the aggregate's state whole as its `states` row (issue 33), so a fold
   * that does not hold the aggregate already leaves it there, to be read when it is needed.
   */
  w?: 1;
  /**
   * The aggregate's state before this record's events, on the first record after its `states`
   * row stopped being written (an aggregate grown past `state_row_bytes_max`): a fold that does
   * not hold it (it passed over the records its row held) takes it up from here.
   */
  s?: unknown;
}

/** What a fold keeps of one aggregate: a shard's slot, or a helper's plain holder. */
export interface Held {
  type: string;
  state: unknown;
  /** Its state is its `states` row as committed: the last record folded into it wrote that. */
  rowed?: boolean;
}

/**
 * Where a fold puts the states it rebuilds: straight into the map that keeps them (a shard's
 * slots), with no copy of a partition's states made on the way (each would be garbage to move).
 */
export interface FoldInto<H extends Held> {
  held: Map<string, H>;
  hold: (type: string, state: unknown) => H;
  /**
   * Folds the records of aggregates kept as `states` rows too, even of those it does not hold
   * (a replay from the log's start that reads no row: the simulator's check of the rows).
   */
  everything?: boolean;
}

/** A partition as recovered (its states in a FoldInto): up to `seq`, and what was read. */
export interface FoldedPartition {
  seq: number;
  /** The CRC-32 of record `seq` (0 with none): what the partition's next record links to. */
  check: number;
  /** A snapshot was read. */
  snapshot: boolean;
  /** Records replayed after it. */
  records: number;
}

/**
 * Rebuilds one partition from its snapshot and the records after it; `snapshot` is the
 * partition's, if its caller has read it already, or null to replay from the log's start.
 */
export function foldPartition<H extends Held>(
  log: Log,
  deciders: ReadonlyMap<string, AnyDecider>,
  p: number,
  into: FoldInto<H>,
  snapshot: Buffer | null | undefined = log.readSnapshot(p),
): FoldedPartition {
  const steps = foldSteps(log, deciders, p, into, snapshot ?? undefined);
  for (;;) {
    const step = steps.next();
    if (step.done === true) return step.value;
  }
}

/**
 * The same fold spread over event turns: no turn spends more than about `turnMs` on it, so that
 * the thread's other work (commands, their commits) goes on in between. Null once `cancelled`
 * says so between two turns (the records read so far are let go).
 */
export async function foldInTurns<H extends Held>(
  log: Log,
  deciders: ReadonlyMap<string, AnyDecider>,
  p: number,
  into: FoldInto<H>,
  options: { turnMs: number; cancelled: () => boolean; now?: () => number },
): Promise<FoldedPartition | null> {
  const now = options.now ?? (() => performance.now());
  const steps = foldSteps(log, deciders, p, into, log.readSnapshot(p));
  let turn = now();
  try {
    for (;;) {
      const step = steps.next();
      if (step.done === true) return step.value;
      if (now() - turn < options.turnMs) continue;
      await nextTurn();
      if (options.cancelled()) return null;
      turn = now();
    }
  } finally {
    // Ends the records' iteration, and with it its read transaction, if the fold stopped early.
    steps.return(undefined as never);
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Records replayed between two looks at the clock (foldInTurns). */
const FOLD_STEP_RECORDS = 256; // tidy: format (a look at the clock every few hundred µs)

/** A partition's fold, pausing after every FOLD_STEP_RECORDS records replayed. */
function* foldSteps<H extends Held>(
  log: Log,
  deciders: ReadonlyMap<string, AnyDecider>,
  p: number,
  into: FoldInto<H>,
  snapshot: Buffer | undefined,
): Generator<void, FoldedPartition> {
  let from = LOG_START;
  if (snapshot !== undefined) {
    const take = (slice: SnapshotBody) => {
      for (const [key, type, state] of slice.aggregates) into.held.set(key, into.hold(type, state));
    };
    from = positionOrFail(
      p,
      unframeOrFail(snapshot, `snapshot of partition ${p}`, (bytes) =>
        unframeSnapshot(bytes, take),
      ),
    );
  }
  // Records are read one at a time (a partition's log is never held whole in memory). An LMDB
  // commit is atomic, so a record that fails its checksum, even the last one, is damage at
  // rest, not a torn write: dropping it would keep the rest of its commit (views, usage rows,
  // idempotent answers) and serve state that no record explains (P14). So is a record that
  // does not link to the one before it (chain.ts).
  const chain = new Chain(p, from, { anchored: true, read: readValue<LogRecord> });
  let records = 0;
  for (const { seq, value } of log.replay(p, chain.after, chain.decode)) {
    const taken = chain.take(seq, value);
    if (taken.kind === 'fault') throw new RecoveryError(taken.fault.message);
    if (taken.kind === 'anchor') continue;
    replay(deciders, into, taken.value);
    records++;
    if (records % FOLD_STEP_RECORDS === 0) yield;
  }
  failOn(chain.end(headOf(log, p)));
  return { ...chain.at, snapshot: snapshot !== undefined, records };
}

/** The position a snapshot names; one that names none was written before the chain. */
function positionOrFail(p: number, position: SnapshotPosition): LogPosition {
  if (position.check !== undefined) return { seq: position.seq, check: position.check };
  throw new RecoveryError(
    `the snapshot of partition ${p} names no log position: an earlier build wrote this data ` +
      'directory, and this build cannot read it (its log is not chained: issue 28)',
  );
}

function failOn(fault: ChainFault | null): void {
  if (fault !== null) throw new RecoveryError(fault.message);
}

/** What checking partitions found: snapshots, and records after them, that verify. */
export interface Checked {
  snapshots: number;
  records: number;
}

/** Checks each partition `next` claims, one after another, until it gives none. */
export function checkPartitions(log: Log, next: () => number | undefined): Checked {
  const checked: Checked = { snapshots: 0, records: 0 };
  for (let p = next(); p !== undefined; p = next()) {
    const partition = checkPartition(log, p);
    if (partition.snapshot) checked.snapshots++;
    checked.records += partition.records;
  }
  return checked;
}

/**
 * Checks one partition as a start must before the node answers anyone (P14): its snapshot's
 * checksum, the snapshot's own record, every record's checksum and link after it, and the head
 * against the last record (chain.ts), without decoding a state or a record (the fold comes later:
 * foldPartition). Damage refuses the start with the message the fold would give. It reads one
 * head row per partition, never the views: their positions are the scrub's (scrub.ts).
 */
function checkPartition(log: Log, p: number): Omit<FoldedPartition, 'seq' | 'check'> {
  const snapshot = log.readSnapshot(p);
  const from =
    snapshot === undefined
      ? LOG_START
      : positionOrFail(p, unframeOrFail(snapshot, `snapshot of partition ${p}`, snapshotPosition));
  const chain = new Chain(p, from, { anchored: true, read: () => true });
  let records = 0;
  for (const { seq, value } of log.replay(p, chain.after, chain.decode)) {
    const taken = chain.take(seq, value);
    if (taken.kind === 'fault') throw new RecoveryError(taken.fault.message);
    if (taken.kind === 'record') records++;
  }
  failOn(chain.end(headOf(log, p)));
  return { snapshot: snapshot !== undefined, records };
}

/**
 * A partition has records to replay: any, with no snapshot; any after its snapshot's seq
 * (`snapshot` is the partition's, as read). A snapshot that cannot be read counts as having
 * them, so that the fold which reads it refuses the start with the message every damaged
 * snapshot gives.
 */
export function recordsToReplay(log: Log, p: number, snapshot: Buffer | undefined): boolean {
  const last = log.lastSeq(p);
  if (last === 0) return false;
  if (snapshot === undefined) return true;
  try {
    return last > snapshotSeq(snapshot);
  } catch {
    return true;
  }
}

/**
 * A folded partition as bytes, to hand it to another thread: its states in slices, each framed
 * (checked on arrival) as a snapshot body of its own, then the counts. A slice of small states
 * is encoded as msgpackr records, quicker to read than a snapshot's plain maps; an aggregate of
 * many children is encoded as a snapshot is, in pieces (any number of children encodes).
 */
export async function frameFolded(
  folded: FoldedPartition,
  held: ReadonlyMap<string, Held>,
): Promise<FramedFold> {
  const seq = folded.seq;
  const pieces: FramedFold['pieces'] = [];
  let small: SnapshotBody['aggregates'] = [];
  const flush = () => {
    pieces.push({ records: true, bytes: frameHandoff({ seq, aggregates: small }) });
    small = [];
  };
  for (const [key, { type, state }] of held) {
    if (holdsLargeChildren(state, SNAPSHOT_SLICE_VALUES)) {
      if (small.length > 0) flush();
      const bytes = await frameInSlices({ seq, aggregates: [[key, type, state]] });
      pieces.push({ records: false, bytes });
    } else {
      small.push([key, type, state]);
      if (small.length >= SNAPSHOT_SLICE_VALUES) flush();
    }
  }
  // One piece at least: it carries the seq of a partition that has no states.
  if (small.length > 0 || pieces.length === 0) flush();
  return { check: folded.check, snapshot: folded.snapshot, records: folded.records, pieces };
}

/** The pieces in order; each read as it was written (msgpackr records or a snapshot's maps). */
export type FramedFold = Omit<FoldedPartition, 'seq'> & {
  pieces: { records: boolean; bytes: Uint8Array }[];
};

/** Reads a partition a helper folded into the map that keeps its states. */
export function unframeFolded<H extends Held>(
  framed: FramedFold,
  p: number,
  into: FoldInto<H>,
): FoldedPartition {
  const what = `partition ${p} as a recovery helper folded it`;
  let seq = 0;
  for (const { records, bytes } of framed.pieces) {
    const slice = unframeOrFail<SnapshotBody>(bytes, what, records ? unframeHandoff : unframe);
    seq = slice.seq;
    for (const [key, type, state] of slice.aggregates) into.held.set(key, into.hold(type, state));
  }
  return { seq, check: framed.check, snapshot: framed.snapshot, records: framed.records };
}

function replay<H extends Held>(
  deciders: ReadonlyMap<string, AnyDecider>,
  into: FoldInto<H>,
  record: LogRecord,
): void {
  const decider = deciders.get(record.a);
  if (decider === undefined)
    throw new RecoveryError(`log holds records of an unknown aggregate type '${record.a}'`);
  let slot = into.held.get(record.k);
  if (slot === undefined) {
    // Its row holds this record's state or a later one: it stays there until needed.
    if (record.w === 1 && into.everything !== true) return;
    // The decider's own type string: one for all its aggregates, not one per record.
    slot = into.hold(decider.type, null);
    into.held.set(record.k, slot);
    // A replay of everything folds it from its first record instead, and so checks this.
    if (record.s !== undefined && into.everything !== true && !planted('ignore-state-before'))
      slot.state = record.s;
  }
  for (const event of record.e) slot.state = decider.evolve(slot.state, event);
  slot.rowed = record.w === 1;
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
