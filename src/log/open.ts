// Where a node keeps its state, opened: the embedded store (LMDB in the data directory), or, in
// cluster mode (P22), the PostgreSQL database every instance of the operator shares. The same
// `Log` and the same node tables (store.ts) either way; only the embedded store has an LMDB
// environment, which what is LMDB's alone (the directory image, backups) reads.
import { LmdbLog, openEnvironment, type LmdbEnvironment } from './lmdb-log.js';
import type { Log } from './log.js';
import { PostgresLog } from './postgres-log.js';
import type { Holding } from './log.js';
import { lmdbStoreTables, type StoreTables } from './node-tables.js';

export interface Place {
  dataDir: string;
  /** Cluster mode's database URL, or null. */
  store: string | null;
}

export interface OpenedStore {
  log: Log;
  tables: StoreTables;
  /** The LMDB environment of the embedded store; null in cluster mode. */
  env: LmdbEnvironment | null;
}

/** Opens the store; in cluster mode the log's appends are checked against `holding`. */
export async function openStore(
  place: Place,
  holding: Holding | null = null,
): Promise<OpenedStore> {
  if (place.store !== null) {
    const log = await PostgresLog.open(place.store, { holding });
    return { log, tables: log.nodeTables(), env: null };
  }
  const env = openEnvironment(place.dataDir);
  return { log: new LmdbLog(env), tables: lmdbStoreTables(env), env };
}

/**
 * A thread's own handle on the log (the actor workers and their recovery helpers), opened after
 * the node's main thread opened and checked the same file; in cluster mode a worker's appends are
 * checked against what its instance holds.
 */
export async function openThreadLog(place: Place, holding: Holding | null = null): Promise<Log> {
  if (place.store === null) return new LmdbLog(openEnvironment(place.dataDir, { checked: true }));
  return PostgresLog.open(place.store, { holding });
}

/**
 * Opens the store for one action and closes it after, whatever the action's outcome: how the
 * command line reads and changes a node's state, whether a node runs on it or not.
 */
export async function withStore<T>(
  place: Place,
  action: (opened: OpenedStore) => T | Promise<T>,
): Promise<T> {
  const opened = await openStore(place);
  try {
    return await action(opened);
  } finally {
    await opened.log.close();
  }
}
