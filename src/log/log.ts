// The log: the only durable state of the node. Every accepted change is one record appended to
// its partition; state in memory is a fold of the records (after the last snapshot).
//
// Fault model. The log assumes: a process can die at any instruction (kill -9); the machine can
// lose power, dropping any write not yet flushed; a record can be damaged at rest. It answers:
// `append` resolves only once its records are flushed (durable), never merely committed (P14);
// records of one append land together or not at all; each record carries a checksum checked on
// read, so damage is found, never served. Partitions are fixed (PARTITION_COUNT) so that
// records keep their place whatever the worker count is.

export const PARTITION_COUNT = 256;

export interface LogEntry {
  partition: number;
  seq: number;
  /** A framed record (record.ts). */
  bytes: Buffer;
}

/**
 * The log record a table row reflects: written in that record's commit (a view, a usage row), it
 * can never be ahead of its partition's log; one that is shows records lost (issue 28).
 */
export interface RecordPosition {
  partition: number;
  seq: number;
}

/** Tables written in the same commit as the records that cause them. */
export const TABLES = [
  'views',
  'outbox',
  'idempotency',
  'idempotency_order',
  'directory',
  'deliveries',
  'journal',
  'usage',
  'feed',
  'feed_state',
  'replica',
  'cursors',
  'replay',
  'followups',
  'event_expiry',
  'resends',
  /**
   * Each partition's head: the seq and CRC-32 of its last record, written in the same commit as
   * every append (rows.ts, headRows), so that a start finds a tail taken off the log (issue 28).
   */
  'heads',
  /**
   * Each aggregate's next deadline (an instruction's expiry, a session's `expires_at`), written
   * in the commit that sets or moves it (rows.ts, deadlineRows; issue 33): the schedule kept
   * outside the aggregate, so that one no longer in memory is woken all the same.
   */
  'deadlines',
  /**
   * The state of each aggregate that may leave memory (a decider's `passivates`), written whole
   * in the commit of each of its records (rows.ts, stateRows; issue 33): where it comes back
   * from when it is needed again.
   */
  'states',
  /**
   * The keys each commit that changed the directory changed, keyed by its partition and seq,
   * written in that commit (rows.ts, directoryChangeRows; issue 34), with one row `image` naming
   * the directory image in use: a start takes the image and reads again only the keys changed
   * after its position. Embedded mode only; rows an image covers are deleted once it is durable.
   */
  'directory_changes',
] as const;

export type Table = (typeof TABLES)[number];

export interface ScanRange {
  start?: string;
  end?: string;
  reverse?: boolean;
  limit?: number;
}

/** A keyed write beside the records: `bytes: null` deletes. */
export interface TableWrite {
  table: Table;
  key: string;
  bytes: Buffer | null;
  /**
   * A claim (ms since the epoch): the commit writes this row only if its own time is ahead and
   * its key holds none, or one claimed until a time already past; otherwise the whole commit is
   * refused (ClaimTakenError) and nothing of it is written. What makes a request's replay mark
   * and idempotency answer its own across the instances of a cluster in the commit itself (issue
   * 29). A log of one process, whose single writer checked both before it decided, writes a
   * claim as any row.
   */
  until?: number;
}

export interface StoredRecord {
  seq: number;
  bytes: Buffer;
}

/**
 * The Reads port (issue 29): the table rows kept beside the records (views, idempotency answers,
 * replay marks, usage, journal, directory rows, the outbox and the node's own tables), written in
 * the commit of the records that cause them or on their own (`write`). A thread that serves HTTP
 * reads them only through `load`, `loadRange` and `peek` (in place, or from a cache), which never
 * hold it on a database; the workers, which serve no connection, also read in turn (`get`,
 * `scan`). Its codecs are the runtime's (src/reads/rows.ts) and each aggregate's (its folder).
 */
export interface Reads {
  /** The committed value of a table key (views, idempotency, outbox). */
  get(table: Table, key: string): Buffer | undefined;
  /**
   * The same value handed to `use` as bytes valid only during the call (the next read may
   * overwrite them): a read that keeps nothing of them makes no copy. What `use` returns, or
   * undefined when the key has no value. It sees every commit of this thread and every commit
   * made before this thread's last `refresh`; another thread's later commit may stay unseen
   * until the next refresh (READ_SNAPSHOT_HOLD_MS at most).
   */
  peek<T>(table: Table, key: string, use: (bytes: Buffer, key: string) => T): T | undefined;
  /**
   * A number that changes before `peek` may answer differently: while it holds, a key peeks as
   * the same bytes (or as none), so what was made of them may be used again without a read.
   */
  peekVersion(): number;
  /**
   * `get` that never blocks this thread on a database (issue 29), for the threads that serve
   * HTTP: LMDB answers from its map at once; PostgreSQL on a connection of its own, its failure
   * a rejection (an `UnavailableError` when the database does not answer).
   */
  load(table: Table, key: string): Promise<Buffer | undefined>;
  /** `scan` as `load` is `get`: the rows of the range at once, so give it a `limit`. */
  loadRange(table: Table, range?: ScanRange): Promise<{ key: string; bytes: Buffer }[]>;
  /** Writes table keys outside any record (housekeeping, delivery state); resolves once durable. */
  write(writes: readonly TableWrite[]): Promise<void>;
  /** Makes this thread's next reads see every commit made so far (by any thread). */
  refresh(): void;
  /**
   * Keys and values of a table from `start` (inclusive) to `end`
   * (exclusive), in key order or reversed, at most `limit`.
   */
  scan(table: Table, range?: ScanRange): Iterable<{ key: string; bytes: Buffer }>;
}

/**
 * The Log port (issue 29): the records of 256 partitions keyed (partition, seq) and one snapshot
 * of each, as bytes, positions and checksums; nothing of the domain. One store holds both ports,
 * so that an append's records and its rows land in one commit, or neither does.
 */
export interface Log extends Reads {
  /** Appends records and their table writes in one commit; resolves once durable. */
  append(entries: readonly LogEntry[], writes: readonly TableWrite[]): Promise<void>;
  /** `readSnapshot` as `load` is `get` (the scrub, on the front end's thread). */
  loadSnapshot(partition: number): Promise<Buffer | undefined>;
  /** Up to `limit` records of a partition with seq > afterSeq, in order, as `load` is `get`. */
  loadRecords(partition: number, afterSeq: number, limit: number): Promise<StoredRecord[]>;
  /** Records of a partition with seq > afterSeq, in order. */
  read(partition: number, afterSeq: number): Iterable<StoredRecord>;
  /** The seq of a partition's last record (0 with none), read without walking the partition. */
  lastSeq(partition: number): number;
  /**
   * The same records, each handed to `decode` as bytes valid only during the call (recovery
   * reads millions: no copy of each); yields what `decode` made of them.
   */
  replay<T>(
    partition: number,
    afterSeq: number,
    decode: (bytes: Buffer) => T,
  ): Iterable<{ seq: number; value: T }>;
  readSnapshot(partition: number): Buffer | undefined;
  /** Resolves once the snapshot is durable. */
  writeSnapshot(partition: number, bytes: Buffer): Promise<void>;
  close(): Promise<void>;
}

/**
 * The reads that never block, for a log that reads in place (LMDB's map, memory): its
 * synchronous reads, answered at once. A log on a network implements them itself.
 */
export abstract class ReadsInPlace {
  abstract get(table: Table, key: string): Buffer | undefined;
  abstract scan(table: Table, range?: ScanRange): Iterable<{ key: string; bytes: Buffer }>;
  abstract readSnapshot(partition: number): Buffer | undefined;
  abstract read(partition: number, afterSeq: number): Iterable<StoredRecord>;

  /** `read` with each record decoded as it comes (a log that decodes in place does better). */
  *replay<T>(
    partition: number,
    afterSeq: number,
    decode: (bytes: Buffer) => T,
  ): Iterable<{ seq: number; value: T }> {
    for (const r of this.read(partition, afterSeq)) yield { seq: r.seq, value: decode(r.bytes) };
  }

  async load(table: Table, key: string): Promise<Buffer | undefined> {
    return this.get(table, key);
  }

  async loadRange(table: Table, range?: ScanRange): Promise<{ key: string; bytes: Buffer }[]> {
    return [...this.scan(table, range)];
  }

  async loadSnapshot(partition: number): Promise<Buffer | undefined> {
    return this.readSnapshot(partition);
  }

  async loadRecords(partition: number, afterSeq: number, limit: number): Promise<StoredRecord[]> {
    const records: StoredRecord[] = [];
    for (const r of this.read(partition, afterSeq)) {
      if (records.length >= limit) break;
      records.push({ seq: r.seq, bytes: Buffer.from(r.bytes) });
    }
    return records;
  }
}

/** Whether the log holds anything: a record or a snapshot of some partition. */
export function holdsLog(log: Log): boolean {
  for (let p = 0; p < PARTITION_COUNT; p++)
    if (log.lastSeq(p) > 0 || log.readSnapshot(p) !== undefined) return true;
  return false;
}

/**
 * An append or snapshot refused because its partition is not (or no longer) held by this writer
 * (cluster mode, P22): another instance holds it now. Nothing of it was written.
 */
export class NotHeldError extends Error {
  override name = 'NotHeldError';
}

/**
 * An append refused, nothing of it written, because a claim it carried (TableWrite.until) was
 * another commit's: `table` and `key` name that claim.
 */
export class ClaimTakenError extends Error {
  override name = 'ClaimTakenError';
  constructor(
    readonly table: Table,
    readonly key: string,
  ) {
    super(`a claim of table ${table} is another commit's`);
  }
}

/**
 * An append refused, nothing of it written, for want of what went before it: an append of the
 * same partition ahead of it was refused, or did not land (its commit in doubt), so its records
 * no longer follow on. Deciding its commands again, on the partition as the log holds it, is safe.
 */
export class NotWrittenError extends Error {
  override name = 'NotWrittenError';
}

/**
 * NotWrittenError because the log's records of a partition are not what the writer took them to
 * be (PN002: an append in doubt landed unseen, or one taken as written did not): nothing was
 * written, and the writer must read the partition again before it appends to it.
 */
export class NotFollowingError extends NotWrittenError {
  override name = 'NotFollowingError';
}

/**
 * The partitions a writer holds, shared with every thread of its instance: per partition the
 * epoch it holds it at (0 where it holds none), which the log checks its appends against. Made
 * and kept by the deployment (src/cluster in cluster mode; none embedded).
 */
export interface Holding {
  holder: string;
  epochs: BigInt64Array;
}

/** Stable partition of an aggregate key (FNV-1a over UTF-16 code units). */
export function partitionOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % PARTITION_COUNT;
}
