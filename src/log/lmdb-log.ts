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
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { PRIVATE_DIR_MODE } from '../config.js';
import { open, type Database, type RootDatabase } from 'lmdb';
import type { Log, LogEntry, ScanRange, StoredRecord, Table, TableWrite } from './log.js';

export interface LmdbEnvironment {
  root: RootDatabase;
  log: Database<Buffer, [number, number]>;
  snapshots: Database<Buffer, number>;
  tables: Record<Table, Database<Buffer, string>>;
}

export const ENV_FILE = 'node.mdb';
/** LMDB's lock file beside the data file (lmdb-js opens the environment without a subdirectory). */
export const ENV_LOCK_FILE = `${ENV_FILE}-lock`;
const MAX_DATABASES = 32;

export function openEnvironment(dataDir: string): LmdbEnvironment {
  mkdirSync(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const root = open({ path: join(dataDir, ENV_FILE), maxDbs: MAX_DATABASES, compression: false, overlappingSync: false });
  const table = (name: Table) => root.openDB<Buffer, string>({ name, encoding: 'binary' });
  return {
    root,
    log: root.openDB<Buffer, [number, number]>({ name: 'log', encoding: 'binary' }),
    snapshots: root.openDB<Buffer, number>({ name: 'snapshots', encoding: 'binary' }),
    tables: { views: table('views'), outbox: table('outbox'), idempotency: table('idempotency'), directory: table('directory'), deliveries: table('deliveries'), journal: table('journal'), usage: table('usage'),
      feed: table('feed'), feed_state: table('feed_state'), replica: table('replica'), cursors: table('cursors'),
    },
  };
}

export class LmdbLog implements Log {
  constructor(private readonly env: LmdbEnvironment) {}

  async append(entries: readonly LogEntry[], writes: readonly TableWrite[]): Promise<void> {
    const { log, tables, root } = this.env;
    // Writes issued in one event turn are committed in one transaction (lmdb-js eventTurnBatching,
    // on by default): issued together here, a command's records and table rows land together or
    // not at all, and share the commit with every other command of the same turn.
    let last: Promise<boolean> = Promise.resolve(true);
    for (const e of entries) last = log.put([e.partition, e.seq], e.bytes);
    for (const w of writes) last = w.bytes === null ? tables[w.table].remove(w.key) : tables[w.table].put(w.key, w.bytes);
    await last;
    await root.flushed;
  }

  refresh(): void {
    this.env.root.resetReadTxn();
  }

  get(table: Table, key: string): Buffer | undefined {
    return this.env.tables[table].get(key);
  }

  async write(writes: readonly TableWrite[]): Promise<void> {
    await this.append([], writes);
  }

  *scan(table: Table, range: ScanRange = {}): Iterable<{ key: string; bytes: Buffer }> {
    // lmdb-js walks a reversed range from its high end: the bounds swap.
    const bounds = range.reverse ? { start: range.end, end: range.start, reverse: true } : { start: range.start, end: range.end };
    const options = { ...bounds, ...(range.limit === undefined ? {} : { limit: range.limit }), snapshot: false };
    for (const { key, value } of this.env.tables[table].getRange(options)) {
      // The high bound is exclusive either way.
      if (range.reverse && range.end !== undefined && key >= range.end) continue;
      yield { key, bytes: value };
    }
  }

  *read(partition: number, afterSeq: number): Iterable<StoredRecord> {
    for (const { key, value } of this.env.log.getRange({ start: [partition, afterSeq + 1], end: [partition + 1, 0] })) {
      yield { seq: key[1], bytes: value };
    }
  }

  readSnapshot(partition: number): Buffer | undefined {
    return this.env.snapshots.get(partition);
  }

  async writeSnapshot(partition: number, bytes: Buffer): Promise<void> {
    await this.env.snapshots.put(partition, bytes);
    await this.env.root.flushed;
  }

  async discardTail(partition: number, seq: number): Promise<void> {
    await this.env.log.remove([partition, seq]);
    await this.env.root.flushed;
  }

  async close(): Promise<void> {
    await this.env.root.flushed;
    await this.env.root.close();
  }
}
