// The scrub (issue 28): every record of every partition checked again in the background, those a
// snapshot covers too, which no start reads. A start checks what it will replay; damage behind a
// snapshot would otherwise go unheard of until the snapshot itself is lost, and the operator is
// to learn that the disk is failing before then. A walk checks each record's checksum and link
// (chain.ts), the partition's snapshot (its checksum, and that its record is in the chain with
// the CRC-32 it names) and its head (that the chain reaches it). The scrub walks a few records at
// a time at a bounded pace (scrub_records_per_second, SCRUB_TURN_MS) on the front end's thread,
// and says each damaged item once. What each step reads it loads first with the log's reads that
// never block the thread (Log.load, loadSnapshot, loadRecords: issue 29), so a slow database
// slows the scrub, never a request. `path-node verify` runs the same walk over a stopped data
// directory at full speed, reading in place (src/cli/verify.ts, logReads).
import { SCRUB_TURN_MS } from '../config.js';
import { PARTITION_COUNT, type Log, type RecordPosition, type StoredRecord } from '../log/log.js';
import { ChecksumError, DamagedRowError, frameHolds } from '../log/record.js';
import { unreachable } from '../log/unavailable.js';
import { headRows, type LogPosition } from '../reads/rows.js';
import { usageRows } from '../domain/connection/usage-rows.js';
import { decodeView } from '../reads/views.js';
import {
  Chain,
  LOG_START,
  headMessage,
  headOf,
  snapshotMessage,
  type ChainFault,
} from './chain.js';
import { snapshotPosition } from './snapshot.js';

/**
 * What a walk reads of a partition: its head (null: none; a damaged row throws DamagedRowError),
 * its snapshot, and its records after a seq, each handed to `decode` and yielded as decoded.
 */
export interface WalkReads {
  head(partition: number): LogPosition | null;
  snapshot(partition: number): Buffer | undefined;
  records<T>(
    partition: number,
    afterSeq: number,
    decode: (bytes: Buffer) => T,
  ): Iterable<{ seq: number; value: T }>;
}

/** A log's reads in place, as they come (the command line's verify, a log on this thread). */
export const logReads = (log: Log): WalkReads => ({
  head: (p) => headOf(log, p),
  snapshot: (p) => log.readSnapshot(p),
  records: (p, afterSeq, decode) => log.replay(p, afterSeq, decode),
});

/**
 * One partition's reads for the scrub, loaded ahead with the log's reads that never block the
 * thread, then walked in place: the head and snapshot as a walk begins, a page of records before
 * each step, the head again before it finishes.
 */
class LoadedReads implements WalkReads {
  private headRow: Buffer | undefined = undefined;
  private snapshotBytes: Buffer | undefined = undefined;
  private page: StoredRecord[] = [];

  constructor(private readonly log: Log) {}

  async loadStart(p: number): Promise<void> {
    [this.headRow, this.snapshotBytes] = await Promise.all([
      this.log.load('heads', headRows.key(p)),
      this.log.loadSnapshot(p),
    ]);
  }

  async loadHead(p: number): Promise<void> {
    this.headRow = await this.log.load('heads', headRows.key(p));
  }

  async loadPage(p: number, afterSeq: number, limit: number): Promise<void> {
    this.page = await this.log.loadRecords(p, afterSeq, limit);
  }

  head(p: number): LogPosition | null {
    return this.headRow === undefined ? null : headRows.read(headRows.key(p), this.headRow);
  }

  snapshot(): Buffer | undefined {
    return this.snapshotBytes;
  }

  *records<T>(_: number, afterSeq: number, decode: (bytes: Buffer) => T) {
    for (const r of this.page) if (r.seq > afterSeq) yield { seq: r.seq, value: decode(r.bytes) };
  }
}

/**
 * One partition walked from its first record to its last. The head and the snapshot are read
 * before any record: each names a record committed before it was read, which the walk then
 * reads (records are never rewritten), so a node appending meanwhile raises no false alarm.
 */
export class PartitionWalk {
  /** Records walked so far. */
  records = 0;
  private readonly chain: Chain<true>;
  private readonly head: LogPosition | null;
  private readonly snapshot: LogPosition | null;
  /** The head row could not be read (damaged): said once, not compared. */
  private headUnread = false;
  private headReached = false;
  private snapshotReached = false;

  constructor(
    private readonly reads: WalkReads,
    readonly partition: number,
    private readonly found: (fault: ChainFault) => void,
  ) {
    this.head = this.readHead();
    this.snapshot = this.readSnapshot();
    this.chain = new Chain(partition, LOG_START, { anchored: false, read: () => true as const });
  }

  /** Walks up to `records` more records; true once the partition's last is walked. */
  step(records: number): boolean {
    const { chain, partition } = this;
    const steps = this.reads.records(partition, chain.at.seq, chain.decode)[Symbol.iterator]();
    try {
      for (let walked = 0; walked < records; walked++) {
        const step = steps.next();
        if (step.done === true) return true;
        const taken = chain.take(step.value.seq, step.value.value);
        this.records++;
        if (taken.kind === 'fault') this.found(taken.fault);
        this.reached(step.value.seq, taken.kind === 'fault');
      }
      return false;
    } finally {
      // Ends the range's read transaction: none is held from one turn to the next.
      steps.return?.();
    }
  }

  /** Says what the walk, once done, did not find: the snapshot's record, the head's. */
  finish(): void {
    const { partition, chain } = this;
    if (this.snapshot !== null && !this.snapshotReached) {
      const seq = this.snapshot.seq;
      this.found({ item: 'snapshot', partition, seq, message: snapshotMessage(partition, seq) });
    }
    if (this.headUnread) return;
    // No head when the walk began: records written since have one now; a log that has records
    // committed without one has lost it.
    const head = this.head ?? this.readHead();
    if (head === null ? chain.at.seq === 0 : this.head === null || this.headReached) return;
    const message = headMessage(partition, head, chain.at.seq);
    this.found({ item: 'head', partition, seq: head?.seq ?? 0, message });
  }

  /** The seq the walk has reached: its next step reads the records after it. */
  get at(): number {
    return this.chain.at.seq;
  }

  /** Compares the record just walked with the positions the snapshot and the head name. */
  private reached(seq: number, damaged: boolean): void {
    const { at } = this.chain;
    const { snapshot, head, partition } = this;
    if (snapshot !== null && seq === snapshot.seq) {
      this.snapshotReached = true;
      // A damaged record was said already; its CRC-32 is not the snapshot's to judge.
      if (!damaged && at.check !== snapshot.check) {
        this.found({ item: 'snapshot', partition, seq, message: snapshotMessage(partition, seq) });
      }
    }
    if (head !== null && seq === head.seq) {
      this.headReached = damaged || at.check === head.check;
    }
  }

  private readHead(): LogPosition | null {
    try {
      return this.reads.head(this.partition);
    } catch (error) {
      if (!(error instanceof DamagedRowError)) throw error;
      this.headUnread = true;
      this.found({ item: 'head', partition: this.partition, seq: 0, message: error.message });
      return null;
    }
  }

  private readSnapshot(): LogPosition | null {
    const bytes = this.reads.snapshot(this.partition);
    if (bytes === undefined) return null;
    const { partition } = this;
    let message: string;
    try {
      const position = snapshotPosition(bytes);
      if (position.check !== undefined) return { seq: position.seq, check: position.check };
      message = `the snapshot of partition ${partition} names no log position`;
    } catch (error) {
      if (!(error instanceof ChecksumError)) throw error;
      message = `the snapshot of partition ${partition} fails its checksum (damaged at rest)`;
    }
    this.found({ item: 'snapshot', partition, seq: 0, message });
    return null;
  }
}

/**
 * The tables whose rows a pass walks: those whose rows name the log record they were written with
 * (views.ts, rows.ts), and the stored answers (P7), which a start no longer reads whole (a node
 * holds 48 hours of them: about 10 s of a start for each million).
 */
const WALKED = ['views', 'usage', 'idempotency'] as const;
type Walked = (typeof WALKED)[number];

/**
 * A row that fails its checksum, or that names a record beyond the end of its partition's log:
 * written in that record's commit, it shows records lost from the log. `key` is for the operator's
 * own command (verify); a log line names the table, partition and seq only.
 */
export interface RowFault {
  item: 'row';
  table: Walked;
  key: string;
  partition: number | null;
  seq: number | null;
  message: string;
}

export type Damage = ChainFault | RowFault;

/**
 * The rows of the walked tables in key order, a few at a time, each against its checksum, and a
 * positioned one against the log too: its record must not be beyond its partition's last. A row
 * is read before the partition's last seq, and its record was committed with it, so appends
 * meanwhile raise no false alarm. Each partition's last seq is read again only when a row names
 * a later record.
 */
export class RowWalk {
  rows = 0;
  private table = 0;
  private after: string | undefined = undefined;
  private readonly lastSeqs = new Map<number, number>();

  constructor(
    private readonly log: Log,
    private readonly found: (fault: RowFault) => void,
  ) {}

  /** Walks up to `rows` more rows; true once every walked table is walked. */
  step(rows: number): boolean {
    while (rows > 0 && this.table < WALKED.length) {
      const table = WALKED[this.table]!;
      let walked = 0;
      const range = { ...(this.after === undefined ? {} : { start: this.after }), limit: rows + 1 };
      for (const { key, bytes } of this.log.scan(table, range)) {
        if (key === this.after) continue;
        const fault = this.fault(table, key, bytes);
        if (fault !== null) this.found(fault);
        this.after = key;
        this.rows++;
        if (++walked >= rows) break;
      }
      rows -= walked;
      if (rows > 0) {
        this.table++;
        this.after = undefined;
      }
    }
    return this.table >= WALKED.length;
  }

  private fault(table: Walked, key: string, bytes: Buffer): RowFault | null {
    const damaged = { item: 'row' as const, table, key, partition: null, seq: null };
    const message = `a row of table '${table}' fails its checksum (damaged at rest)`;
    if (table === 'idempotency') return frameHolds(bytes) ? null : { ...damaged, message };
    const position = positionOf(table, key, bytes);
    if (position === null) return { ...damaged, message };
    const { partition, seq } = position;
    if (partition < PARTITION_COUNT && seq <= this.lastSeq(partition, seq)) return null;
    return { item: 'row', table, key, partition, seq, message: aheadMessage(table, position) };
  }

  /** The partition's last seq as known, read again if `seq` is beyond it. */
  private lastSeq(partition: number, seq: number): number {
    const known = this.lastSeqs.get(partition);
    if (known !== undefined && seq <= known) return known;
    const last = this.log.lastSeq(partition);
    this.lastSeqs.set(partition, last);
    return last;
  }
}

function positionOf(table: 'views' | 'usage', key: string, bytes: Buffer): RecordPosition | null {
  if (table === 'views') return decodeView(bytes)?.position ?? null;
  try {
    return usageRows.position(key, bytes);
  } catch (error) {
    if (error instanceof DamagedRowError) return null;
    throw error;
  }
}

function aheadMessage(table: string, { partition, seq }: RecordPosition): string {
  return (
    `a row of table '${table}' was written with log record ${seq} of partition ${partition}, ` +
    'beyond the end of its log: records are missing from the log, the data directory is ' +
    'damaged at rest; restore it from the latest backup'
  );
}

export interface ScrubOptions {
  log: Log;
  /**
   * Whether a pass walks the rows of the walked tables too: the embedded node's are all its
   * own; in cluster mode they are shared by every instance, and not walked (README).
   */
  rows: boolean;
  /** The partitions a pass walks: all, or in cluster mode those this instance holds (P22). */
  partitions: () => readonly number[];
  recordsPerSecond: number;
  passPauseMs: number;
  /** Told once of each damaged item, the first time a pass finds it. */
  onDamage: (fault: Damage) => void;
  /** Told when a pass has walked every partition. */
  onPass: (pass: { partitions: number; records: number; rows: number; damaged: number }) => void;
  /** The walk failed (not damage: the log could not be read); the scrub has stopped. */
  onError: (error: unknown) => void;
}

/**
 * Passes over the log, one after another with a pause between them, each a few records every
 * SCRUB_TURN_MS. Damage found stays counted for the life of the process: a damaged disk does not
 * mend itself, and what it damaged is restored from a backup with the node stopped.
 */
export class Scrub {
  private readonly damaged = new Map<string, Damage>();
  private timer: NodeJS.Timeout | null = null;
  private queue: number[] = [];
  private walk: PartitionWalk | null = null;
  private readonly loaded: LoadedReads;
  private rowWalk: RowWalk | null = null;
  private pass = { partitions: 0, records: 0, rows: 0 };
  private stopped = false;

  constructor(private readonly options: ScrubOptions) {
    this.loaded = new LoadedReads(options.log);
  }

  /** Damaged items found so far (records, snapshots, heads). */
  get damagedCount(): number {
    return this.damaged.size;
  }

  start(): void {
    this.begin();
    this.later(0);
  }

  private begin(): void {
    this.queue = [...this.options.partitions()];
    this.pass = { partitions: 0, records: 0, rows: 0 };
    this.rowWalk = this.options.rows ? new RowWalk(this.options.log, (f) => this.found(f)) : null;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private later(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => this.turn(), ms);
    // The scrub never keeps the process alive.
    this.timer.unref();
  }

  /**
   * One turn's walk. A database that does not answer (cluster mode) pauses the scrub where it
   * is, to go on after a pass's pause; any other failure stops it.
   */
  private turn(): void {
    const budget = Math.max(1, Math.round(this.options.recordsPerSecond / turnsPerSecond));
    this.walkFor(budget).then(
      (more) => (more ? this.later(SCRUB_TURN_MS) : this.passEnded()),
      (error: unknown) => {
        if (unreachable(error)) return this.later(this.options.passPauseMs);
        this.stop();
        this.options.onError(error);
      },
    );
  }

  /**
   * Walks up to `budget` records (a partition begun counts as one), then rows; false once the
   * pass ends.
   */
  private async walkFor(budget: number): Promise<boolean> {
    let begun = false;
    while (budget > 0) {
      if (this.walk === null) {
        // One partition begun per turn at most: beginning one reads its head and snapshot, a
        // round trip in cluster mode, where a pass of empty partitions would otherwise read them
        // all in one turn.
        if (begun) return true;
        const p = this.queue[0];
        if (p === undefined) return this.walkRows(budget);
        await this.loaded.loadStart(p);
        this.queue.shift();
        this.walk = new PartitionWalk(this.loaded, p, (fault) => this.found(fault));
        begun = true;
        budget--;
      }
      const walk = this.walk;
      await this.loaded.loadPage(walk.partition, walk.at, budget);
      const before = walk.records;
      const done = walk.step(budget);
      budget -= walk.records - before;
      this.pass.records += walk.records - before;
      if (done) {
        await this.loaded.loadHead(walk.partition);
        this.walk.finish();
        this.walk = null;
        this.pass.partitions++;
      }
    }
    return true;
  }

  /** Walks up to `budget` rows; false once every one is walked (or none is to be). */
  private walkRows(budget: number): boolean {
    if (this.rowWalk === null) return false;
    const before = this.rowWalk.rows;
    const done = this.rowWalk.step(budget);
    this.pass.rows += this.rowWalk.rows - before;
    return !done;
  }

  private passEnded(): void {
    this.options.onPass({ ...this.pass, damaged: this.damaged.size });
    this.begin();
    this.later(this.options.passPauseMs);
  }

  private found(fault: Damage): void {
    const key =
      fault.item === 'row'
        ? `row/${fault.table}/${fault.key}`
        : `${fault.item}/${fault.partition}/${fault.seq}`;
    if (this.damaged.has(key)) return;
    this.damaged.set(key, fault);
    this.options.onDamage(fault);
  }
}

const turnsPerSecond = 1000 / SCRUB_TURN_MS;
