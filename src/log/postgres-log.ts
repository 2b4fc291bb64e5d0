// The log on PostgreSQL (cluster mode, P22): the same `Log` as LMDB's, so the same runtime, actors
// and deciders run on it. Records are keyed (partition, seq), table rows (table, key), one
// snapshot per partition (postgres-schema.ts).
//
// Durability (P14): an append resolves only once PostgreSQL has reported its commit, on sessions
// that set `synchronous_commit = on` themselves (a server whose default is `off` would otherwise
// acknowledge commits it can still lose). In production a synchronous standby keeps that true
// across the loss of the primary's machine.
//
// Group commit: appends issued while a commit is under way wait and go together in the next one,
// one call of `path_append` (one transaction, one round trip): a command's records and rows land
// together or not at all, and share the commit with every other command of the batch.
//
// Reads are synchronous, as the interface asks (LMDB reads its map in the calling thread): each
// is sent to a reader thread of this log (postgres-reader.ts) and the caller waits for its answer.
// Ranges are read in pages. `peek` answers from a bounded cache of this thread's, dropped (and
// its version bumped) on `refresh`, after this log's own commits and at READ_SNAPSHOT_HOLD_MS:
// the same bound on staleness as LMDB's held read transaction.
//
// Only the workers read so: once the node serves (`serving`), a synchronous read on the main
// thread, the front end's, throws instead of holding it (issue 29); it reads through `load`.
//
// Faults (issue 29): every connection and statement is bounded in time (unavailable.ts,
// connectionSettings), and a synchronous read waits at most DATABASE_READER_WAIT_MS. What fails
// because the database was unreachable, or answered too late, rejects with an UnavailableError
// (a 503 with Retry-After for the client) and is told to `health`; a lost connection is opened
// again by the next statement. A commit so failed is in doubt: it may have landed. The next
// append of its partition must then follow on from what the database holds (path_append refuses
// a hole or an overlap, PN002), so the writer reads its partition again before it goes on.
import { isMainThread } from 'node:worker_threads';
import { pack, unpack } from 'msgpackr';
import type pg from 'pg';
import {
  DATABASE_LISTENER_PING_MS,
  DATABASE_QUERY_TIMEOUT_MS,
  DATABASE_READER_WAIT_MS,
  DATABASE_RETRY_BASE_MS,
  DATABASE_RETRY_MAX_MS,
  DATABASE_SLOWEST_BYTES_PER_MS,
  NOTE_BYTES_MAX,
  READ_SNAPSHOT_HOLD_MS,
} from '../config.js';
import {
  ClaimTakenError,
  NotHeldError,
  NotFollowingError,
  NotWrittenError,
  type Holding,
  type Log,
  type LogEntry,
  type ScanRange,
  type StoredRecord,
  type Table,
  type TableWrite,
} from './log.js';
import { migrate, ROW_BYTES, scanStatement } from './postgres-schema.js';
import { firstOfEach, TurnBatch } from './turn-batch.js';
import type { ReadAnswer, ReadRequest } from './postgres-reader.js';
import type { StoreTable, StoreTables } from './node-tables.js';
import {
  backoffMs,
  connectionSettings,
  currentUrl,
  DatabaseHealth,
  findPrimary,
  UnavailableError,
  unreachable,
} from './unavailable.js';

/** Records read per round trip by `read` and `replay`, rows by `scan`. */
const READ_PAGE = 2_048;
/** `loadRange` without a limit: every row of the range (PostgreSQL's `limit all`). */
const LOAD_ALL = null;
/** Values `peek` keeps between refreshes. */
const PEEK_CACHE_ENTRIES = 10_000;
/**
 * Connections of the writing side: one commit under way, and a snapshot or the node tables' lock
 * (`alone`) beside it.
 */
const WRITE_CONNECTIONS = 2;
/** Connections of the claims' pool (replay marks, idempotency claims), beside the commits. */
const SIDE_CONNECTIONS = 4;
/** The advisory lock under which an instance makes the node's keys (store.ts, ensureSecrets). */
const NODE_TABLES_LOCK = 0x6e6f6465;
/** Every session of the node commits synchronously, whatever the server's default (P14). */
const SESSION_OPTIONS = '-c synchronous_commit=on';
/** Claims commit asynchronously (claim): visible at once, durable a moment later. */
const CLAIM_SESSION_OPTIONS = '-c synchronous_commit=off';

/**
 * node-postgres and synckit, loaded when cluster mode is first used: loading them costs a start
 * about 70 ms, which the embedded node does not pay.
 */
export async function clusterModules() {
  const [{ default: client }, { createSyncFn }] = await Promise.all([
    import('pg'),
    import('synckit'),
  ]);
  return { pg: client, createSyncFn };
}

/**
 * Cluster mode's fence (P22): the instance appending, and per partition the epoch of its lease
 * (0 where it holds none), shared with every thread of the instance. An append to a partition
 * not held is refused here; one whose lease moved since is refused by the database.
 */
export type Fence = Holding;

export { NotHeldError };

/** Whether the fence's instance holds partition `p` now (a lease of a non-zero epoch). */
export const holds = (fence: Fence, p: number): boolean => fence.epochs[p]! > 0n;

const notHeld = (partition: number) =>
  new NotHeldError(`partition ${partition} is not leased to this instance`);

/** The SQLSTATE path_append raises when a lease has moved (postgres-schema.ts). */
const FENCED_STATE = 'PN001';
/**
 * The SQLSTATE path_append raises when a partition's records would not follow on from its last
 * committed one (postgres-schema.ts): an earlier append whose commit was in doubt did not land.
 */
const GAP_STATE = 'PN002';
/** The SQLSTATE path_append raises when a claim of the commit is another's (postgres-schema.ts). */
const CLAIM_STATE = 'PN003';

/** synckit's words when a synchronous read's thread did not answer within its wait. */
const READER_TIMED_OUT = 'Atomics.wait() failed';

/** A failed commit as the caller should see it: fenced, unavailable, or the error itself. */
function commitError(error: unknown): unknown {
  const { code, detail } = error as { code?: string; detail?: string };
  if (code === FENCED_STATE) return new NotHeldError((error as Error).message);
  if (code === CLAIM_STATE) {
    const cut = (detail ?? '').indexOf(' ');
    return new ClaimTakenError(detail!.slice(0, cut) as Table, detail!.slice(cut + 1));
  }
  if (code === GAP_STATE) {
    // detail: the partition, then `gap` (an earlier append is missing) or `overlap` (one landed
    // that this writer took as failed). Nothing of this one was written.
    const [partition, kind] = (detail ?? '').split(' ');
    return new NotFollowingError(
      kind === 'gap'
        ? `an earlier append of partition ${partition} did not commit`
        : `an earlier append of partition ${partition} committed unseen`,
    );
  }
  if (unreachable(error))
    return new UnavailableError('the database did not confirm the commit', { cause: error });
  return error;
}

interface Pending {
  entries: readonly LogEntry[];
  writes: readonly TableWrite[];
  /** Rows written under the lease of this partition, though no record of it is appended. */
  holding?: number;
  /** The epoch of `holding` the rows were made at: refused at any other (writeHolding). */
  heldAt?: bigint;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** The partitions whose leases a pending commit needs. */
const fencedBy = (p: Pending): number[] => [
  ...p.entries.map((e) => e.partition),
  ...(p.holding === undefined ? [] : [p.holding]),
];

const asBuffer = (bytes: Uint8Array): Buffer =>
  Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** A batch's table writes as `path_append`'s arrays: the last write of a key wins. */
function tableArrays(batch: readonly Pending[]) {
  const last = new Map<string, TableWrite>();
  const claims = new Map<string, TableWrite>();
  for (const p of batch)
    for (const w of p.writes) (w.until === undefined ? last : claims).set(claimKey(w), w);
  const put = { tables: [] as string[], keys: [] as string[], bytes: [] as Buffer[] };
  const del = { tables: [] as string[], keys: [] as string[] };
  for (const w of last.values()) {
    if (w.bytes === null) {
      del.tables.push(w.table);
      del.keys.push(w.key);
    } else {
      put.tables.push(w.table);
      put.keys.push(w.key);
      put.bytes.push(w.bytes);
    }
  }
  const claim = { tables: [] as string[], keys: [] as string[], bytes: [] as Buffer[] };
  const untils: string[] = [];
  for (const w of claims.values()) {
    claim.tables.push(w.table);
    claim.keys.push(w.key);
    claim.bytes.push(w.bytes ?? Buffer.alloc(0));
    untils.push(String(w.until));
  }
  return { put, del, claim: { ...claim, untils } };
}

/**
 * Byte strings as path_split takes them: one buffer, sent as a binary parameter, and each one's
 * length (an array of buffers goes as hexadecimal text, twice the bytes, made and read again).
 */
const joined = (parts: readonly Buffer[]): [Buffer, number[]] => [
  Buffer.concat(parts),
  parts.map((b) => b.length),
];

/**
 * A statement given DATABASE_QUERY_TIMEOUT_MS and a millisecond more for every
 * DATABASE_SLOWEST_BYTES_PER_MS of its byte parameters: a commit carrying a large snapshot is
 * not taken for a database that stopped answering, and a small one still is within seconds.
 */
function timedBySize(text: string, values: unknown[]): pg.QueryConfig {
  let bytes = 0;
  for (const value of values) if (Buffer.isBuffer(value)) bytes += value.length;
  const timeout = DATABASE_QUERY_TIMEOUT_MS + Math.ceil(bytes / DATABASE_SLOWEST_BYTES_PER_MS);
  // node-postgres reads query_timeout from a statement's config as from its client's.
  return { text, values, query_timeout: timeout } as pg.QueryConfig;
}

const claimKey = (w: { table: string; key: string }) => `${w.table}\u0000${w.key}`;

/**
 * Each partition's first seq in a batch, which must follow on from the partition's last record
 * (PN002); the seqs after it in the batch follow on from it, as the writer made them.
 */
function firstSeqs(records: readonly LogEntry[]) {
  const first = new Map<number, number>();
  for (const e of records) if (!first.has(e.partition)) first.set(e.partition, e.seq);
  return { partitions: [...first.keys()], seqs: [...first.values()] };
}

/**
 * A batch's pending appends that can commit together: each partition's records follow on, one
 * after another, from the first the batch has of it (the database checks that first one), and no
 * claim is one an append before it made (only one commit takes a claim). The others are refused
 * at once, nothing of them sent.
 */
function together(batch: Pending[]): Pending[] {
  const claimed = new Set<string>();
  const last = new Map<number, number>();
  return batch.filter((p) => {
    const claims = p.writes.filter((w) => w.until !== undefined);
    const again = claims.find((w) => claimed.has(claimKey(w)));
    if (again !== undefined) {
      p.reject(new ClaimTakenError(again.table, again.key));
      return false;
    }
    const seqs = new Map(last);
    for (const e of p.entries) {
      const before = seqs.get(e.partition);
      if (before !== undefined && e.seq !== before + 1) {
        p.reject(new NotWrittenError(`the records of partition ${e.partition} leave a gap`));
        return false;
      }
      seqs.set(e.partition, e.seq);
    }
    for (const [partition, seq] of seqs) last.set(partition, seq);
    for (const w of claims) claimed.add(claimKey(w));
    return true;
  });
}

export class PostgresLog implements Log {
  private queue: Pending[] = [];
  private committing: Promise<void> | null = null;
  private scheduled = false;
  private readonly cache = new Map<string, Buffer | null>();
  private cacheVersion = 0;
  private cacheTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** The claims' pool, opened once at its first use (a promise: calls may race to it). */
  private claimPool: Promise<pg.Pool> | null = null;
  /** The pool of `load` and `loadRange`, opened once at their first use. */
  private readPool: Promise<pg.Pool> | null = null;

  private constructor(
    private readonly url: string,
    private readonly pool: pg.Pool,
    private readonly reader: (request: ReadRequest) => ReadAnswer,
    private readonly fence: Fence | null,
    /** Whether the database answers, as this log's statements last found (issue 29, /readyz). */
    readonly health: DatabaseHealth,
  ) {}

  /** Connects, brings the schema to this build's version and starts the reader thread. */
  static async open(
    url: string,
    options: { holding?: Holding | null; health?: DatabaseHealth } = {},
  ): Promise<PostgresLog> {
    const { pg, createSyncFn } = await clusterModules();
    await findPrimary(url);
    const pool = new pg.Pool({
      Client: following(pg.Client, url),
      ...connectionSettings(url, SESSION_OPTIONS),
      max: WRITE_CONNECTIONS,
    });
    // An idle connection that fails is dropped by the pool; the next query opens another.
    pool.on('error', () => undefined);
    try {
      const client = await pool.connect();
      try {
        await migrate(client);
      } finally {
        client.release();
      }
    } catch (error) {
      await pool.end();
      throw error;
    }
    const reader = createSyncFn<(request: ReadRequest) => Promise<ReadAnswer>>(
      new URL('./postgres-reader.js', import.meta.url),
      { timeout: DATABASE_READER_WAIT_MS },
    );
    const health = options.health ?? new DatabaseHealth();
    const log = new PostgresLog(url, pool, reader, options.holding ?? null, health);
    try {
      log.ask({ op: 'open', url });
    } catch (error) {
      await pool.end();
      throw error;
    }
    return log;
  }

  /**
   * A failure as this log's callers see it, told to `health`: one of reachability becomes an
   * UnavailableError (a 503 with Retry-After, P7), any other is returned as it is.
   */
  private failure(error: unknown): unknown {
    if (!this.health.failed(error)) return error;
    this.lookForPrimary();
    return error instanceof UnavailableError
      ? error
      : new UnavailableError('the database did not answer', { cause: error });
  }

  /** A connection lost: the next ones go to the host that takes writes now (a switchover). */
  private lookForPrimary(): void {
    findPrimary(this.url).catch(() => undefined);
  }

  /** Set once the front end serves on this thread: it must not wait on a read from then on. */
  private serves = false;

  /** The node serves HTTP now: a synchronous read on the main thread throws (issue 29). */
  serving(): void {
    this.serves = isMainThread;
  }

  /** One request to the reader thread, waited for; bounded by DATABASE_READER_WAIT_MS. */
  private ask(request: ReadRequest): ReadAnswer {
    if (this.serves) {
      // The table only: a key may name an object.
      const read = 'table' in request ? request.table : request.op;
      throw new Error(`a synchronous read of ${read} on the thread that serves HTTP (issue 29)`);
    }
    let answer: ReadAnswer;
    try {
      answer = this.reader(request);
    } catch (error) {
      const message = error instanceof Error ? error.message : '';
      throw this.failure(
        message.includes(READER_TIMED_OUT)
          ? new UnavailableError('the database did not answer a read in time')
          : error,
      );
    }
    this.health.succeeded();
    return answer;
  }

  append(entries: readonly LogEntry[], writes: readonly TableWrite[]): Promise<void> {
    return this.enqueue({ entries, writes });
  }

  /** Queues a commit's part; it resolves once the commit that takes it is durable. */
  private enqueue(part: Omit<Pending, 'resolve' | 'reject'>): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the PostgreSQL log is closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ ...part, resolve, reject });
      this.schedule();
    });
  }

  /** Commits the queue at the end of this event turn, or once the commit under way is done. */
  private schedule(): void {
    if (this.scheduled || this.committing !== null) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.committing = this.commitQueued().finally(() => {
        this.committing = null;
        if (this.queue.length > 0) this.schedule();
      });
    });
  }

  /**
   * Rows written only while this instance holds `partition` (cluster mode): the write is fenced
   * by that partition's lease as an append to it would be.
   */
  writeHolding(partition: number, writes: readonly TableWrite[], epoch?: bigint): Promise<void> {
    return this.enqueue({
      entries: [],
      writes,
      holding: partition,
      ...(epoch === undefined ? {} : { heldAt: epoch }),
    });
  }

  /** The appends of partitions this instance holds; the others are refused now. */
  private held(batch: Pending[]): Pending[] {
    const fence = this.fence;
    if (fence === null) return batch;
    return batch.filter((p) => {
      let free = fencedBy(p).find((partition) => !holds(fence, partition));
      // Rows made at one epoch of their partition (the feed's, made by its writer since it last
      // resynced) are not written at a later one: the partition left and came back meanwhile.
      if (free === undefined && p.heldAt !== undefined && fence.epochs[p.holding!] !== p.heldAt)
        free = p.holding;
      if (free !== undefined) p.reject(notHeld(free));
      return free === undefined;
    });
  }

  private async commitQueued(): Promise<void> {
    let batch = together(this.held(this.queue));
    this.queue = [];
    while (batch.length > 0) {
      const refused = await this.commitBatch(batch);
      if (refused === null) return;
      batch = this.held(this.refuseTaken(batch, refused));
    }
  }

  /**
   * One call of path_append for a batch; null once it is answered, or the claim that refused it
   * (PN003), whereupon nothing of the batch was written.
   */
  private async commitBatch(batch: Pending[]): Promise<ClaimTakenError | null> {
    const records = batch.flatMap((p) => p.entries);
    const { put, del, claim } = tableArrays(batch);
    const first = firstSeqs(records);
    const fence = this.fence;
    const fenced = fence === null ? [] : [...new Set(batch.flatMap(fencedBy))];
    try {
      const call =
        'select path_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, ' +
        '$16, $17, $18, $19, $20, $21)';
      const values = [
        fence?.holder ?? null,
        fenced,
        fenced.map((p) => String(fence!.epochs[p])),
        first.partitions,
        first.seqs,
        records.map((e) => e.partition),
        records.map((e) => e.seq),
        ...joined(records.map((e) => e.bytes)),
        claim.tables,
        claim.keys,
        ...joined(claim.bytes),
        claim.untils,
        put.tables,
        put.keys,
        ...joined(put.bytes),
        del.tables,
        del.keys,
        notesOf(batch.flatMap((p) => p.writes)),
      ];
      await this.pool.query(timedBySize(call, values));
    } catch (error) {
      const refused = commitError(error);
      // A refusal the database made (fenced, not following on, a claim taken) says it answers.
      if (this.health.failed(error)) this.lookForPrimary();
      else this.health.succeeded();
      if (refused instanceof ClaimTakenError) return refused;
      for (const p of batch) p.reject(refused);
      return null;
    }
    this.health.succeeded();
    // This thread reads its own writes.
    this.forget();
    for (const p of batch) p.resolve();
    return null;
  }

  /**
   * A batch refused for a claim taken: the appends that carried it are refused with it, those of
   * their partitions (whose records may follow on from theirs) as not written, and the rest are
   * what is committed again.
   */
  private refuseTaken(batch: Pending[], taken: ClaimTakenError): Pending[] {
    const key = claimKey(taken);
    const carried = (p: Pending) =>
      p.writes.some((w) => w.until !== undefined && claimKey(w) === key);
    const partitions = new Set(batch.filter(carried).flatMap((p) => fencedBy(p)));
    return batch.filter((p) => {
      if (carried(p)) p.reject(taken);
      else if (fencedBy(p).some((q) => partitions.has(q)))
        p.reject(new NotWrittenError('an append before it in its partition was refused'));
      else return true;
      return false;
    });
  }

  async write(writes: readonly TableWrite[]): Promise<void> {
    await this.append([], writes);
  }

  /**
   * How many times this log was refreshed (the commit fan-out, other instances' notes): a view
   * the front end loaded before the last refresh is loaded again (services.ts, publicView).
   */
  refreshed = 0;

  refresh(): void {
    this.refreshed++;
    this.forget();
  }

  /** Drops what `peek` kept: the next peek of any key asks the database. */
  private forget(): void {
    if (this.cache.size === 0 && this.cacheTimer === null) return;
    this.cache.clear();
    this.cacheVersion++;
    if (this.cacheTimer !== null) clearTimeout(this.cacheTimer);
    this.cacheTimer = null;
  }

  peekVersion(): number {
    return this.cacheVersion;
  }

  get(table: Table, key: string): Buffer | undefined {
    return this.getRow(table, key);
  }

  async load(table: Table, key: string): Promise<Buffer | undefined> {
    const found = await this.readQuery<{ bytes: Buffer }>(ROW_BYTES, [table, key]);
    return found[0]?.bytes;
  }

  async loadRange(table: Table, range: ScanRange = {}): Promise<{ key: string; bytes: Buffer }[]> {
    const [text, values] = scanStatement({
      table,
      start: range.start ?? null,
      startInclusive: true,
      end: range.end ?? null,
      endInclusive: false,
      reverse: range.reverse === true,
      limit: range.limit ?? LOAD_ALL,
    });
    return this.readQuery<{ key: string; bytes: Buffer }>(text, values);
  }

  async loadSnapshot(partition: number): Promise<Buffer | undefined> {
    const sql = 'select bytes from snapshots where partition = $1';
    const found = await this.readQuery<{ bytes: Buffer }>(sql, [partition]);
    return found[0]?.bytes;
  }

  async loadRecords(partition: number, afterSeq: number, limit: number): Promise<StoredRecord[]> {
    const found = await this.readQuery<{ seq: string; bytes: Buffer }>(
      'select seq, bytes from records where partition = $1 and seq > $2 order by seq limit $3',
      [partition, afterSeq, limit],
    );
    return found.map((row) => ({ seq: Number(row.seq), bytes: row.bytes }));
  }

  /** One statement on the reads' sessions: the front end's, which never waits on a thread. */
  private async readQuery<R extends pg.QueryResultRow>(
    sql: string,
    values: unknown[],
  ): Promise<R[]> {
    this.readPool ??= this.openPool(SESSION_OPTIONS);
    return this.sideQuery(await this.readPool, sql, values);
  }

  /** One statement on a pool of its own: its failures told to `health`, and mapped. */
  private async sideQuery<R extends pg.QueryResultRow>(
    pool: pg.Pool,
    sql: string,
    values: unknown[],
  ): Promise<R[]> {
    let rows: R[];
    try {
      rows = (await pool.query<R>(sql, values)).rows;
    } catch (error) {
      throw this.failure(error);
    }
    this.health.succeeded();
    return rows;
  }

  /**
   * Claims a row on its own (TableWrite.until), outside any append: whether this call took it.
   * Only one instance wins a key, here or in an append: what makes the replay mark of a request
   * that committed nothing its own (P5). The mark is visible to every instance once this
   * resolves, and durable a moment later: it commits asynchronously, on sessions of its own, so
   * a request does not wait for a flush of its mark. A crash of the database can lose the marks
   * of its last moments, and with them only the requests that changed nothing durable: a change
   * carries its mark in its own commit, which is synchronous.
   */
  claim(write: TableWrite & { bytes: Buffer; until: number }): Promise<boolean> {
    return this.claims.call(write);
  }

  private readonly claims = new TurnBatch<TableWrite & { bytes: Buffer; until: number }, boolean>(
    async (inputs) => {
      const first = firstOfEach(inputs, claimKey);
      const sent = inputs.filter((_, n) => first[n]);
      const inserted = await this.claimQuery<{ tbl: string; key: string }>(
        'insert into rows (tbl, key, bytes, until) ' +
          'select * from unnest($1::text[], $2::text[], $3::bytea[], $4::bigint[]) ' +
          'on conflict (tbl, key) do update set bytes = excluded.bytes, until = excluded.until ' +
          'where rows.until is not null and ' +
          'rows.until <= (extract(epoch from clock_timestamp()) * 1000)::bigint ' +
          'returning tbl, key',
        [
          sent.map((i) => i.table),
          sent.map((i) => i.key),
          sent.map((i) => i.bytes),
          sent.map((i) => String(i.until)),
        ],
      );
      const won = new Set(inserted.map((r) => claimKey({ table: r.tbl, key: r.key })));
      return inputs.map((i, n) => first[n]! && won.has(claimKey(i)));
    },
  );

  /** One statement on the claims' sessions (committed asynchronously). */
  private async claimQuery<R extends pg.QueryResultRow>(
    sql: string,
    values: unknown[],
  ): Promise<R[]> {
    this.claimPool ??= this.openPool(CLAIM_SESSION_OPTIONS);
    return this.sideQuery(await this.claimPool, sql, values);
  }

  private async openPool(options: string): Promise<pg.Pool> {
    const { pg } = await clusterModules();
    const pool = new pg.Pool({
      ...connectionSettings(this.url, options),
      Client: following(pg.Client, this.url),
      max: SIDE_CONNECTIONS,
    });
    // An idle connection that fails is dropped by the pool; the next query opens another.
    pool.on('error', () => undefined);
    return pool;
  }

  private getRow(table: string, key: string): Buffer | undefined {
    const bytes = this.ask({ op: 'get', table, key }) as Uint8Array | null;
    return bytes === null ? undefined : asBuffer(bytes);
  }

  /**
   * The node's own tables (store.ts) in the same database, as rows of tables named `node.*`
   * beside the log's, values msgpack as in LMDB; a transaction is one commit of this log.
   */
  nodeTables(): StoreTables {
    const named = (table: StoreTable) => `node.${table}`;
    return {
      get: <T>(table: StoreTable, key: string) => {
        const bytes = this.getRow(named(table), key);
        return bytes === undefined ? undefined : (unpack(bytes) as T);
      },
      values: <T>(table: StoreTable) =>
        [...this.scanRows(named(table), {})].map((row) => unpack(row.bytes) as T),
      refresh: () => this.refresh(),
      alone: (action) => this.alone(action),
      transaction: async (change) => {
        const writes: { table: string; key: string; bytes: Buffer | null }[] = [];
        change({
          put: (table, key, value) => writes.push({ table: named(table), key, bytes: pack(value) }),
          remove: (table, key) => writes.push({ table: named(table), key, bytes: null }),
          row: (write) => writes.push(write),
        });
        // The node's tables are rows of the same table as the log's, under names of their own.
        await this.write(writes as TableWrite[]);
      },
    };
  }

  /**
   * Runs `action` under a session lock on a connection of its own. The connection is out of the
   * pool meanwhile, so it needs a listener of its own: a lost connection emits 'error', which
   * would otherwise end the process. A failure drops the connection (and with it the lock).
   */
  private async alone<T>(action: () => Promise<T>): Promise<T> {
    const client = await this.pool.connect().catch((error: unknown) => {
      throw this.failure(error);
    });
    const lost = () => undefined;
    client.on('error', lost);
    let failed: Error | undefined;
    try {
      await client.query('select pg_advisory_lock($1)', [NODE_TABLES_LOCK]);
      try {
        return await action();
      } finally {
        await client.query('select pg_advisory_unlock($1)', [NODE_TABLES_LOCK]);
      }
    } catch (error) {
      failed = error instanceof Error ? error : new Error(String(error));
      throw this.failure(error);
    } finally {
      client.removeListener('error', lost);
      client.release(failed);
    }
  }

  peek<T>(table: Table, key: string, use: (bytes: Buffer, key: string) => T): T | undefined {
    const cacheKey = `${table}\u0000${key}`;
    let bytes = this.cache.get(cacheKey);
    if (bytes === undefined) {
      bytes = this.get(table, key) ?? null;
      if (this.cache.size >= PEEK_CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(cacheKey, bytes);
      if (this.cacheTimer === null) {
        this.cacheTimer = setTimeout(() => this.forget(), READ_SNAPSHOT_HOLD_MS);
        this.cacheTimer.unref();
      }
    }
    return bytes === null ? undefined : use(bytes, key);
  }

  scan(table: Table, range: ScanRange = {}): Iterable<{ key: string; bytes: Buffer }> {
    return this.scanRows(table, range);
  }

  private *scanRows(table: string, range: ScanRange): Iterable<{ key: string; bytes: Buffer }> {
    const reverse = range.reverse === true;
    let left = range.limit ?? Infinity;
    let start = range.start ?? null;
    let startInclusive = true;
    let end = range.end ?? null;
    let endInclusive = false;
    while (left > 0) {
      const limit = Math.min(left, READ_PAGE);
      const rows = this.ask({
        op: 'scan',
        table,
        start,
        startInclusive,
        end,
        endInclusive,
        reverse,
        limit,
      }) as { key: string; bytes: Uint8Array }[];
      for (const row of rows) yield { key: row.key, bytes: asBuffer(row.bytes) };
      left -= rows.length;
      if (rows.length < limit) return;
      // The next page starts after the last key read, in the scan's direction.
      const last = rows[rows.length - 1]!.key;
      if (reverse) [end, endInclusive] = [last, false];
      else [start, startInclusive] = [last, false];
    }
  }

  *read(partition: number, afterSeq: number): Iterable<StoredRecord> {
    let after = afterSeq;
    for (;;) {
      const page = this.ask({ op: 'records', partition, afterSeq: after, limit: READ_PAGE });
      const records = page as { seq: number; bytes: Uint8Array }[];
      for (const r of records) yield { seq: r.seq, bytes: asBuffer(r.bytes) };
      if (records.length < READ_PAGE) return;
      after = records[records.length - 1]!.seq;
    }
  }

  *replay<T>(
    partition: number,
    afterSeq: number,
    decode: (bytes: Buffer) => T,
  ): Iterable<{ seq: number; value: T }> {
    for (const r of this.read(partition, afterSeq)) yield { seq: r.seq, value: decode(r.bytes) };
  }

  lastSeq(partition: number): number {
    return this.ask({ op: 'lastSeq', partition }) as number;
  }

  readSnapshot(partition: number): Buffer | undefined {
    const bytes = this.ask({ op: 'snapshot', partition }) as Uint8Array | null;
    return bytes === null ? undefined : asBuffer(bytes);
  }

  /**
   * Fenced as appends are: an instance that lost the partition must not replace the new owner's
   * snapshot with an older state.
   */
  async writeSnapshot(partition: number, bytes: Buffer): Promise<void> {
    const fence = this.fence;
    if (fence !== null && !holds(fence, partition)) throw notHeld(partition);
    const written = await this.pool
      .query(
        'insert into snapshots (partition, bytes) select $1, $2 ' +
          'where $3::text is null or exists (select 1 from leases ' +
          'where partition = $1 and owner = $3 and epoch = $4 for share) ' +
          'on conflict (partition) do update set bytes = excluded.bytes',
        [
          partition,
          bytes,
          fence?.holder ?? null,
          fence === null ? null : String(fence.epochs[partition]),
        ],
      )
      .catch((error: unknown) => {
        throw this.failure(error);
      });
    if (written.rowCount === 0)
      throw new NotHeldError(`partition ${partition} is no longer leased to this instance`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.committing !== null || this.scheduled) {
      await (this.committing ?? new Promise((resolve) => setImmediate(resolve)));
    }
    this.forget();
    try {
      this.reader({ op: 'close' });
    } catch {
      // A reader that cannot say goodbye to the database has nothing left to close.
    }
    await this.pool.end();
    await (await this.claimPool)?.end();
    await (await this.readPool)?.end();
  }
}

/**
 * What a commit tells the other instances (P22), on the `path_changes` channel, sent by the
 * database when the commit is: rows changed (their read caches are dropped), the directory keys
 * it changed (their lookup indexes re-read them), the events it put in the outbox (the instance
 * holding each one's partition delivers it).
 */
export type Note =
  { kind: 'changed' } | { kind: 'directory'; hashes: string[] } | { kind: 'events'; ids: string[] };

/** A commit's notes: one `c`, then `d` and `e` lines of keys (several where many). */
function notesOf(writes: readonly TableWrite[]): string[] {
  if (writes.length === 0) return [];
  const hashes = new Set<string>();
  const ids = new Set<string>();
  for (const w of writes) {
    if (w.table === 'directory') hashes.add(w.key.slice(0, w.key.indexOf('/')));
    else if (w.table === 'outbox' && w.bytes !== null) ids.add(w.key);
  }
  return ['c', ...chunked('d', hashes), ...chunked('e', ids)];
}

function chunked(kind: string, keys: Set<string>): string[] {
  const notes: string[] = [];
  let note = '';
  for (const key of keys) {
    if (note.length + key.length + 1 > NOTE_BYTES_MAX) {
      notes.push(note);
      note = '';
    }
    note += (note === '' ? kind : '') + ' ' + key;
  }
  if (note !== '') notes.push(note);
  return notes;
}

function readNote(payload: string): Note | null {
  const [kind, ...keys] = payload.split(' ');
  if (kind === 'c') return { kind: 'changed' };
  if (kind === 'd') return { kind: 'directory', hashes: keys };
  if (kind === 'e') return { kind: 'events', ids: keys };
  return null;
}

/**
 * node-postgres's client for a pool of `url`'s database: each one made to the host that takes
 * writes when it is made (unavailable.ts, currentUrl), so a pool follows a switchover.
 */
function following(Client: typeof pg.Client, url: string): typeof pg.Client {
  return class extends Client {
    constructor(config?: pg.ClientConfig) {
      super({ ...config, connectionString: currentUrl(url) });
    }
  };
}

/** The notes' listener: the current connection, reopened when it is lost. */
export interface NoteListener {
  close(): Promise<void>;
}

/** What the notes' listener tells its user. */
export interface NoteHandlers {
  note: (note: Note) => void;
  /** The connection was lost and is back: notes sent meanwhile are lost. Once per return. */
  gap: () => void;
  /** Told each failure of reachability and each return. */
  health?: DatabaseHealth;
  /** The longest wait between two attempts to open a lost connection (DATABASE_RETRY_MAX_MS). */
  retryMaxMs?: number;
}

/** A connection listening to the notes; `lose` told if it fails or ends. */
async function listening(
  client: pg.Client,
  on: NoteHandlers,
  lose: (client: pg.Client) => void,
): Promise<pg.Client> {
  client.on('notification', (n) => {
    const note = readNote(n.payload ?? '');
    if (note !== null) on.note(note);
  });
  client.on('error', () => lose(client));
  client.on('end', () => lose(client));
  try {
    await client.connect();
    await client.query('listen path_changes');
  } catch (error) {
    void client.end().catch(() => undefined);
    throw error;
  }
  return client;
}

/**
 * Listens to every commit's notes. A notification sent while the connection was down is lost:
 * `gap` is told once it is back, so that what the notes keep current can be read whole again.
 *
 * One loop opens a lost connection again: a loss (an error, an end, a ping past its time) starts
 * it once, and each failed attempt waits longer, with full jitter. The connection only listens,
 * so a ping every DATABASE_LISTENER_PING_MS finds one lost without a word (a blackhole).
 */
export async function listenToNotes(url: string, on: NoteHandlers): Promise<NoteListener> {
  const { pg } = await clusterModules();
  const retry = {
    baseMs: DATABASE_RETRY_BASE_MS,
    maxMs: Math.min(on.retryMaxMs ?? DATABASE_RETRY_MAX_MS, DATABASE_RETRY_MAX_MS),
  };
  let closed = false;
  let client: pg.Client | null = null;
  let timer: NodeJS.Timeout | null = null;
  let attempts = 0;
  const open = async () => {
    await findPrimary(url);
    return listening(new pg.Client(connectionSettings(url)), on, lose);
  };
  const lose = (lost: pg.Client) => {
    if (client !== lost) return;
    client = null;
    void lost.end().catch(() => undefined);
    if (closed) return;
    on.health?.failed(new UnavailableError("the notes' connection was lost"));
    later();
  };
  /** The next step of the one loop: an attempt while lost, else a ping. */
  const later = () => {
    if (closed || timer !== null) return;
    const waitMs = client === null ? backoffMs(attempts++, retry) : DATABASE_LISTENER_PING_MS;
    timer = setTimeout(step, waitMs);
    timer.unref();
  };
  const step = () => {
    timer = null;
    if (client !== null) return ping(client);
    open().then(
      (next) => {
        if (closed) return void next.end().catch(() => undefined);
        client = next;
        attempts = 0;
        on.health?.succeeded();
        later();
        on.gap();
      },
      (error: unknown) => {
        on.health?.failed(error);
        later();
      },
    );
  };
  const ping = (current: pg.Client) => {
    current.query('select 1').then(later, () => lose(current));
  };
  client = await open();
  later();
  return {
    async close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      const last = client;
      client = null;
      await last?.end().catch(() => undefined);
    },
  };
}
