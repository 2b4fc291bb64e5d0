// The node's own tables beside the log's (store.ts keeps credentials, keys, the pepper and the
// members in them): where their rows live in each store, as bytes. In LMDB each is a named
// database of msgpack values; in PostgreSQL, rows of tables named `node.*` (postgres-log.ts).
import type { Database } from 'lmdb';
import type { LmdbEnvironment } from './lmdb-log.js';
import type { TableWrite } from './log.js';

/** The node's own tables, apart from the log's. */
export const STORE_TABLES = ['credentials', 'keys', 'meta', 'external_clients', 'members'] as const;
export type StoreTable = (typeof STORE_TABLES)[number];

/** What one transaction of the store writes: its own rows, and rows of the log's tables. */
export interface StoreWrites {
  put(table: StoreTable, key: string, value: unknown): void;
  remove(table: StoreTable, key: string): void;
  /** A row of one of the log's tables, in the same commit (a request to the running node). */
  row(write: TableWrite): void;
}

/** Where the store's rows are kept: LMDB's named databases, or the cluster's database. */
export interface StoreTables {
  get<T>(table: StoreTable, key: string): T | undefined;
  /** Every value of a table, in key order. */
  values<T>(table: StoreTable): T[];
  /** Makes the next reads see every commit made so far, by any process. */
  refresh(): void;
  /** The writes `change` makes land together, durably, when this resolves. */
  transaction(change: (writes: StoreWrites) => void): Promise<void>;
  /**
   * Runs `action` while no other process runs one through this store: what reads, decides and
   * writes (a first start making the keys) is not raced by another instance doing the same.
   */
  alone<T>(action: () => Promise<T>): Promise<T>;
}

/** The store's tables in an LMDB environment: one named database each, values msgpack. */
export function lmdbStoreTables(env: LmdbEnvironment): StoreTables {
  const open = (name: StoreTable) => env.root.openDB<unknown, string>({ name });
  const dbs = Object.fromEntries(STORE_TABLES.map((t) => [t, open(t)])) as Record<
    StoreTable,
    Database<unknown, string>
  >;
  return {
    get: <T>(table: StoreTable, key: string) => dbs[table].get(key) as T | undefined,
    values: <T>(table: StoreTable) =>
      [...dbs[table].getRange({ snapshot: false })].map(({ value }) => value as T),
    refresh: () => env.root.resetReadTxn(),
    // One node per data directory (P16): its lock keeps other nodes out already.
    alone: (action) => action(),
    // Synchronous on this thread: an asynchronous lmdb-js transaction runs its callback here
    // while its write thread waits, and a process.exit meanwhile (a stop before the node is
    // ready) would wait for that thread for ever. These writes are few (first start, the
    // command line), and durable once `flushed` resolves as before.
    async transaction(change) {
      env.root.transactionSync(() =>
        change({
          put: (table, key, value) => void dbs[table].put(key, value),
          remove: (table, key) => void dbs[table].remove(key),
          row: (w) =>
            void (w.bytes === null
              ? env.tables[w.table].remove(w.key)
              : env.tables[w.table].put(w.key, w.bytes)),
        }),
      );
      await env.root.flushed;
    },
  };
}

/**
 * The store's tables as last loaded, held in memory (cluster mode, issue 29): the front end reads
 * them without a round trip, and they are loaded again (`load`) when its change counter moves.
 * What runs `alone` (the keys made on a first start) reads a load made under the lock, and this
 * node's own writes are applied to the copy once durable.
 */
export class HeldStoreTables implements StoreTables {
  private rows = new Map(STORE_TABLES.map((t) => [t, new Map<string, unknown>()]));
  /** Loads run one after another: a later one never lands before an earlier one. */
  private loading: Promise<void> = Promise.resolve();
  /** Writes applied to the copy: a load they overtook is made again (it may have missed them). */
  private written = 0;

  constructor(
    private readonly tables: StoreTables,
    /** A table's rows, in key order, read without holding the thread. */
    private readonly loadTable: (table: StoreTable) => Promise<Map<string, unknown>>,
  ) {}

  /** Loads every table again; resolves once the copy holds what the database held then. */
  load(): Promise<void> {
    const next = this.loading.then(() => this.loadOnce());
    this.loading = next.catch(() => undefined);
    return next;
  }

  private async loadOnce(): Promise<void> {
    for (;;) {
      const seen = this.written;
      const tables = await Promise.all(STORE_TABLES.map((t) => this.loadTable(t)));
      if (seen !== this.written) continue;
      this.rows = new Map(STORE_TABLES.map((t, n) => [t, tables[n]!]));
      return;
    }
  }

  get<T>(table: StoreTable, key: string): T | undefined {
    return this.rows.get(table)?.get(key) as T | undefined;
  }

  values<T>(table: StoreTable): T[] {
    return [...(this.rows.get(table)?.values() ?? [])] as T[];
  }

  /** Nothing to do: the copy changes only by `load` and this node's own writes. */
  refresh(): void {}

  async transaction(change: (writes: StoreWrites) => void): Promise<void> {
    const applied: ((rows: Map<StoreTable, Map<string, unknown>>) => void)[] = [];
    await this.tables.transaction((w) =>
      change({
        put: (table, key, value) => {
          w.put(table, key, value);
          applied.push((rows) => rows.set(table, withRow(rows.get(table)!, key, value)));
        },
        remove: (table, key) => {
          w.remove(table, key);
          applied.push((rows) => void rows.get(table)!.delete(key));
        },
        row: (write) => w.row(write),
      }),
    );
    for (const apply of applied) apply(this.rows);
    this.written++;
  }

  alone<T>(action: () => Promise<T>): Promise<T> {
    return this.tables.alone(async () => {
      await this.load();
      return action();
    });
  }
}

/** A table's rows with one put: a new key takes its place in key order, as a load reads them. */
function withRow(rows: Map<string, unknown>, key: string, value: unknown): Map<string, unknown> {
  if (rows.has(key)) return rows.set(key, value);
  const sorted = [...rows, [key, value] as const].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return new Map(sorted);
}
