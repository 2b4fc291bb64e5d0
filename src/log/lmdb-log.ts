// The log on LMDB (lmdb-js). One environment per data directory holds the log, the snapshots,
// the tables written beside the records (views, outbox, idempotency) and the node's own
// records (credentials, keys: see store.ts).
//
// Durability (P14): lmdb-js resolves a write's promise when its transaction is committed and
// visible; with overlappingSync the fsync comes later. The environment is opened with
// overlappingSync off, so a commit includes its sync, and `append` still waits for `flushed`
// before it resolves: acknowledging on "committed" alone is never enough. Writes that arrive
// while a commit is in progress are batched by lmdb-js into the next transaction: that is the
// group commit.
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  statSync,
  truncateSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  DATA_FILE_AHEAD_BYTES,
  DATA_FILE_AHEAD_CHECK_MS,
  PRIVATE_DIR_MODE,
  READ_SNAPSHOT_HOLD_MS,
} from '../config.js';
import { open, type Database, type RootDatabase, type Transaction } from 'lmdb';
import {
  ReadsInPlace,
  type Log,
  type LogEntry,
  type ScanRange,
  type StoredRecord,
  type Table,
  type TableWrite,
} from './log.js';

export interface LmdbEnvironment {
  root: RootDatabase;
  /** The data file's path. */
  file: string;
  /**
   * How long the check of the data file before it was opened read every page in use (a file that
   * ended before its last page: checkDataFile); null when it read the header alone.
   */
  everyPageReadMs: number | null;
  log: Database<Buffer, [number, number]>;
  snapshots: Database<Buffer, number>;
  tables: Record<Table, Database<Buffer, string>>;
}

export const ENV_FILE = 'node.mdb';
/** LMDB's lock file beside the data file (lmdb-js opens the environment without a subdirectory). */
export const ENV_LOCK_FILE = `${ENV_FILE}-lock`;
const MAX_DATABASES = 32;

export class DataFileError extends Error {
  override name = 'DataFileError';
}

/**
 * Opens the data directory's environment; `readOnly` for a look that must change nothing
 * (`path-node verify`: every table a node of this build writes must exist already); `checked`
 * for a thread whose node checked the data file as it opened it first (checkDataFile, which may
 * read every page in use of a file that ends before its last page).
 */
export function openEnvironment(
  dataDir: string,
  options: { readOnly?: boolean; checked?: boolean } = {},
): LmdbEnvironment {
  // A directory that already exists is made private before this by `serve` and the commands
  // (privateDataDir in data-dir.ts, which can log it); here a missing one is made private.
  mkdirSync(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const path = join(dataDir, ENV_FILE);
  let everyPageReadMs: number | null = null;
  if (options.checked !== true && existsSync(path)) {
    const started = performance.now();
    if (checkDataFile(path)) everyPageReadMs = performance.now() - started;
  }
  const readOnly = options.readOnly ?? false;
  const root = open({
    path,
    maxDbs: MAX_DATABASES,
    compression: false,
    overlappingSync: false,
    readOnly,
  });
  const table = (name: Table) => root.openDB<Buffer, string>({ name, encoding: 'binary' });
  return {
    root,
    file: path,
    everyPageReadMs,
    log: root.openDB<Buffer, [number, number]>({ name: 'log', encoding: 'binary' }),
    snapshots: root.openDB<Buffer, number>({ name: 'snapshots', encoding: 'binary' }),
    tables: {
      views: table('views'),
      outbox: table('outbox'),
      idempotency: table('idempotency'),
      idempotency_order: table('idempotency_order'),
      directory: table('directory'),
      deliveries: table('deliveries'),
      journal: table('journal'),
      usage: table('usage'),
      feed: table('feed'),
      feed_state: table('feed_state'),
      replica: table('replica'),
      cursors: table('cursors'),
      replay: table('replay'),
      followups: table('followups'),
      event_expiry: table('event_expiry'),
      resends: table('resends'),
      heads: table('heads'),
      deadlines: table('deadlines'),
      directory_changes: table('directory_changes'),
      states: table('states'),
    },
  };
}

/**
 * Opens the environment for one action and closes it after, whatever the action's outcome: how
 * the command line reads and changes a data directory, whether a node runs on it or not.
 */
export async function withEnvironment<T>(
  dataDir: string,
  action: (env: LmdbEnvironment) => T | Promise<T>,
  options: { readOnly?: boolean } = {},
): Promise<T> {
  const env = openEnvironment(dataDir, options);
  try {
    return await action(env);
  } finally {
    await env.root.close();
  }
}

// LMDB's file header: two meta pages, at page 0 and page 1. Offsets within a meta page of
// the 64-bit layout lmdb-js writes: magic, the page size (kept in the free-page database's pad),
// the roots of the free-page tree and of the main tree, the last page and the transaction id
// (the newer meta page is the current one).
const META_MAGIC = 0xbeefc0de;
const META = {
  magic: 0x18,
  pageSize: 0x30,
  freeRoot: 0x58,
  mainRoot: 0x88,
  lastPage: 0x90,
  txnId: 0x98,
  bytes: 0xa0,
} as const;
// A tree page of that layout: a 24-byte header (its number, a txnid, a pad, its flags at 18, and
// at 20 the end of its node offsets, or an overflow run's page count), then a 16-bit offset per
// node. A node: three 16-bit words (a leaf's data size, or a branch's child page), its flags in
// the third, its key size, then key and data. A leaf's data is a page number when it lies on
// overflow pages, a tree's description (root at byte 40) when it is a named or duplicate tree.
const PAGE = { flags: 18, lower: 20, overflowPages: 20, header: 24 } as const;
const PAGE_BRANCH = 0x01;
const PAGE_LEAF = 0x02;
/** A leaf of fixed-size keys alone, no nodes (duplicates of a fixed size): it points nowhere. */
const PAGE_FIXED_KEYS = 0x20;
const NODE_BIG_DATA = 0x01;
const NODE_TREE = 0x02;
const TREE_ROOT = 40;
const NO_PAGE = 0xffff_ffff_ffff_ffffn;

/**
 * Refuses a data file shorter than its last commit needs. LMDB maps the file and trusts its
 * header: a page past the end of a truncated file is read as a SIGBUS that kills the process
 * with no word said. Checked before the environment is opened (P14: a clear refusal instead).
 * True when the file ended before its last page and every page in use was read to show that none
 * is missing (rare: a node keeps its file past its last page, growDataFile).
 */
export function checkDataFile(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    // An empty file is one LMDB has created but not yet initialised: it writes the header.
    if (size === 0) return false;
    const header = Buffer.alloc(META.bytes);
    const readMeta = (offset: number) => {
      if (readSync(fd, header, 0, META.bytes, offset) < META.bytes) return null;
      if (header.readUInt32LE(META.magic) !== META_MAGIC) return null;
      return {
        pageSize: header.readUInt32LE(META.pageSize),
        lastPage: Number(header.readBigUInt64LE(META.lastPage)),
        txnId: header.readBigUInt64LE(META.txnId),
        roots: [header.readBigUInt64LE(META.freeRoot), header.readBigUInt64LE(META.mainRoot)],
      };
    };
    const first = readMeta(0);
    const pageSizeValid =
      first !== null &&
      first.pageSize >= 512 &&
      first.pageSize <= 65_536 &&
      (first.pageSize & (first.pageSize - 1)) === 0;
    const second = pageSizeValid ? readMeta(first.pageSize) : null;
    if (first === null || second === null) {
      throw new DataFileError(
        `${path} is not a complete LMDB data file (${size} bytes, header ` +
          'unreadable); restore the data directory from the latest backup',
      );
    }
    const current = second.txnId > first.txnId ? second : first;
    const pageSize = first.pageSize;
    const filePages = Math.floor(size / pageSize);
    // LMDB lets a file end before its last page when the pages past the end are free (a page
    // dirtied and freed in one commit is never written): only a page in use may not be missing.
    if (filePages > current.lastPage) return false;
    walkPagesInUse(pagesOf(fd, { path, size, pageSize }), current.roots);
    return true;
  } finally {
    closeSync(fd);
  }
}

/**
 * Grows the data file to DATA_FILE_AHEAD_BYTES past its last page when less than half of that is
 * left, so that a crash leaves a file that ends past its last page (checkDataFile then reads two
 * pages, not every page in use). LMDB lets its file end before its last page (a page dirtied and
 * freed in one commit is never written) and grows it only by writing pages; growing it further
 * is safe only while no commit can write past the new end, so it is done under LMDB's write
 * lock, in a synchronous transaction that writes nothing: it waits at most for the commit under
 * way. The new tail is sparse; LMDB's copy (backups) stops at the last page. True if it grew.
 */
export function growDataFile(env: LmdbEnvironment): boolean {
  const lastPageEnd = () => {
    const { lastPageNumber, pageSize } = env.root.getStats() as EnvironmentStats;
    return (lastPageNumber + 1) * pageSize;
  };
  if (statSync(env.file).size - lastPageEnd() >= DATA_FILE_AHEAD_BYTES / 2) return false;
  return env.root.transactionSync(() => {
    const end = lastPageEnd() + DATA_FILE_AHEAD_BYTES;
    if (statSync(env.file).size >= end) return false;
    truncateSync(env.file, end);
    return true;
  });
}

/** What lmdb-js's getStats says of the environment (its types declare an object). */
interface EnvironmentStats {
  lastPageNumber: number;
  pageSize: number;
}

interface PageSource {
  /** Page `pgno`, valid until the next call; throws when it lies past the end of the file. */
  page(pgno: number): Buffer;
  /** The number of pages of the overflow run at `pgno`, its first and last page in the file. */
  run(pgno: number): number;
}

function pagesOf(fd: number, file: { path: string; size: number; pageSize: number }): PageSource {
  const { path, size, pageSize } = file;
  const filePages = Math.floor(size / pageSize);
  const within = (pgno: number) => {
    if (pgno < filePages) return;
    throw new DataFileError(
      `${path} is truncated: ${size} bytes, but page ${pgno} of its last commit ends at ` +
        `${(pgno + 1) * pageSize}; the node will not read past the end of the file. ` +
        'Restore the data directory from the latest backup',
    );
  };
  // One buffer for every page: the walk is done with a page before it reads the next.
  const page = Buffer.alloc(pageSize);
  const word = Buffer.alloc(4);
  return {
    page(pgno) {
      within(pgno);
      readSync(fd, page, 0, pageSize, pgno * pageSize);
      return page;
    },
    run(pgno) {
      within(pgno);
      readSync(fd, word, 0, 4, pgno * pageSize + PAGE.overflowPages);
      const pages = word.readUInt32LE(0);
      within(pgno + pages - 1);
      return pages;
    },
  };
}

/**
 * Reads every page the trees from `roots` use: every branch and leaf page, and the first and
 * last page of every overflow run, each checked to lie within the file. Run only for a file that
 * ends before its last page, which is rare.
 */
function walkPagesInUse(pages: PageSource, roots: readonly bigint[]): void {
  const pending = roots.filter((root) => root !== NO_PAGE).map(Number);
  while (pending.length > 0) {
    const page = pages.page(pending.pop()!);
    const flags = page.readUInt16LE(PAGE.flags);
    if ((flags & (PAGE_BRANCH | PAGE_LEAF)) === 0 || (flags & PAGE_FIXED_KEYS) !== 0) continue;
    const nodes = page.readUInt16LE(PAGE.lower) >> 1;
    for (let i = 0; i < nodes; i++) {
      const at = PAGE.header + page.readUInt16LE(PAGE.header + 2 * i);
      const [lo, hi, word] = [0, 2, 4].map((offset) => page.readUInt16LE(at + offset)) as [
        number,
        number,
        number,
      ];
      if ((flags & PAGE_BRANCH) !== 0) {
        pending.push(lo + hi * 0x1_0000 + word * 0x1_0000_0000);
        continue;
      }
      const data = at + 8 + page.readUInt16LE(at + 6);
      if ((word & NODE_BIG_DATA) !== 0) pages.run(Number(page.readBigUInt64LE(data)));
      else if ((word & NODE_TREE) !== 0) {
        const root = page.readBigUInt64LE(data + TREE_ROOT);
        if (root !== NO_PAGE) pending.push(Number(root));
      }
    }
  }
}

/** lmdb-js's getBinaryFast takes the read options of `get`; its types declare only the key. */
interface ReadsInTransaction {
  getBinaryFast(key: string, options: { transaction: Transaction }): Buffer | undefined;
}

export class LmdbLog extends ReadsInPlace implements Log {
  /** The log table read without a copy of each value (replay), opened when first asked for. */
  private replayTable: Database<unknown, [number, number]> | null = null;
  /** The decoder of the replay step under way: lmdb-js calls it inside the iterator's step. */
  private decoding: ((bytes: Buffer) => unknown) | null = null;
  /**
   * The read transaction `peek` reads through, held across event turns. lmdb-js's own reads
   * renew a transaction in every turn they read in and schedule a timer to reset it (about a
   * seventh of a public GET's CPU); this one is renewed only when the thread learns of a commit
   * (`refresh`, and after this thread's own writes) or when it has been held for
   * READ_SNAPSHOT_HOLD_MS, so that LMDB is not kept from reusing the pages it pins for long.
   */
  private held: Transaction | null = null;
  private heldTimer: NodeJS.Timeout | null = null;
  /** Bumped when the held transaction is let go: every peek of one version reads through one. */
  private heldVersion = 0;
  /** When this thread last looked how far its data file runs past its last page. */
  private aheadCheckedAt = -Infinity;

  constructor(private readonly env: LmdbEnvironment) {
    super();
  }

  async append(entries: readonly LogEntry[], writes: readonly TableWrite[]): Promise<void> {
    const { log, tables, root } = this.env;
    // Writes issued in one event turn are committed in one transaction (lmdb-js eventTurnBatching,
    // on by default): issued together here, a command's records and table rows land together or
    // not at all, and share the commit with every other command of the same turn.
    let last: Promise<boolean> = Promise.resolve(true);
    for (const e of entries) last = log.put([e.partition, e.seq], e.bytes);
    for (const w of writes)
      last = w.bytes === null ? tables[w.table].remove(w.key) : tables[w.table].put(w.key, w.bytes);
    await last;
    await root.flushed;
    // This thread reads its own writes (lmdb-js resets its shared read transaction itself).
    this.release();
    this.keepFileAhead();
  }

  /**
   * growDataFile, at most once a DATA_FILE_AHEAD_CHECK_MS (it reads LMDB's statistics). Never
   * fails the append it follows, which is durable already: a file not grown costs only a slower
   * start after a crash (checkDataFile reads every page in use), and the next look tries again.
   */
  private keepFileAhead(): void {
    const now = performance.now();
    if (now - this.aheadCheckedAt < DATA_FILE_AHEAD_CHECK_MS) return;
    this.aheadCheckedAt = now;
    try {
      growDataFile(this.env);
    } catch {
      // Left as LMDB keeps it (see above).
    }
  }

  refresh(): void {
    this.release();
    this.env.root.resetReadTxn();
  }

  /** Lets go of the held read transaction: the next `peek` starts one that sees every commit. */
  private release(): void {
    if (this.held === null) return;
    this.held.done();
    this.held = null;
    this.heldVersion++;
    clearTimeout(this.heldTimer!);
    this.heldTimer = null;
  }

  peekVersion(): number {
    return this.heldVersion;
  }

  private snapshot(): Transaction {
    if (this.held !== null) return this.held;
    this.held = this.env.root.useReadTransaction();
    this.heldTimer = setTimeout(() => this.release(), READ_SNAPSHOT_HOLD_MS);
    // A held snapshot never keeps the process alive.
    this.heldTimer.unref();
    return this.held;
  }

  get(table: Table, key: string): Buffer | undefined {
    return this.env.tables[table].get(key);
  }

  /**
   * lmdb-js's getBinaryFast copies the value into one buffer it keeps for every read of the
   * thread (or, for a large value, hands a view of the map itself) instead of a new Buffer per
   * read. That buffer is longer than the value: lmdb-js sets its `length` property to the
   * value's size, but the methods that read the array itself (`equals`, `compare`, `subarray`
   * without an end) see all of it. `use` is handed a view cut to the value.
   */
  peek<T>(table: Table, key: string, use: (bytes: Buffer, key: string) => T): T | undefined {
    const source = this.env.tables[table] as unknown as ReadsInTransaction;
    const shared = source.getBinaryFast(key, { transaction: this.snapshot() });
    if (shared === undefined) return undefined;
    const size = shared.length;
    const exact =
      shared.byteLength === size && Buffer.isBuffer(shared)
        ? shared
        : Buffer.from(shared.buffer, shared.byteOffset, size);
    return use(exact, key);
  }

  async write(writes: readonly TableWrite[]): Promise<void> {
    await this.append([], writes);
  }

  *scan(table: Table, range: ScanRange = {}): Iterable<{ key: string; bytes: Buffer }> {
    // lmdb-js walks a reversed range from its high end: the bounds swap.
    const bounds = range.reverse
      ? { start: range.end, end: range.start, reverse: true }
      : { start: range.start, end: range.end };
    const options = {
      ...bounds,
      ...(range.limit === undefined ? {} : { limit: range.limit }),
      snapshot: false,
    };
    for (const { key, value } of this.env.tables[table].getRange(options)) {
      // The high bound is exclusive either way.
      if (range.reverse && range.end !== undefined && key >= range.end) continue;
      yield { key, bytes: value };
    }
  }

  *read(partition: number, afterSeq: number): Iterable<StoredRecord> {
    for (const { key, value } of this.env.log.getRange({
      start: [partition, afterSeq + 1],
      end: [partition + 1, 0],
    })) {
      yield { seq: key[1], bytes: value };
    }
  }

  override *replay<T>(
    partition: number,
    afterSeq: number,
    decode: (bytes: Buffer) => T,
  ): Iterable<{ seq: number; value: T }> {
    // A decoder that copies lets lmdb-js hand it the value in its shared read buffer. (lmdb-js
    // takes an encoder for a named database too; its types declare one on the root only.)
    const options = {
      name: 'log',
      encoder: {
        encode: (value: unknown) => value as Buffer,
        decode: (bytes: Buffer, size: number) => this.decoding!(bytes.subarray(0, size)),
      },
    };
    this.replayTable ??= this.env.root.openDB<unknown, [number, number]>(options);
    const range = this.replayTable.getRange({
      start: [partition, afterSeq + 1],
      end: [partition + 1, 0],
    });
    const steps = range[Symbol.iterator]();
    try {
      for (;;) {
        this.decoding = decode;
        const step = steps.next();
        if (step.done === true) return;
        yield { seq: step.value.key[1], value: step.value.value as T };
      }
    } finally {
      // A replay left early (a fold cancelled, damage found) ends its read transaction too.
      steps.return?.();
    }
  }

  lastSeq(partition: number): number {
    return lastRecord(this.env, partition)?.seq ?? 0;
  }

  readSnapshot(partition: number): Buffer | undefined {
    return this.env.snapshots.get(partition);
  }

  async writeSnapshot(partition: number, bytes: Buffer): Promise<void> {
    await this.env.snapshots.put(partition, bytes);
    await this.env.root.flushed;
    this.keepFileAhead();
  }

  async close(): Promise<void> {
    await this.env.root.flushed;
    this.release();
    await this.env.root.close();
  }
}

/** A partition's last record, read without walking the partition. */
export function lastRecord(
  env: LmdbEnvironment,
  partition: number,
): { seq: number; bytes: Buffer } | undefined {
  const last = env.log.getRange({
    start: [partition + 1, 0],
    end: [partition, 0],
    reverse: true,
    limit: 1,
  });
  for (const { key, value } of last) if (key[0] === partition) return { seq: key[1], bytes: value };
  return undefined;
}
