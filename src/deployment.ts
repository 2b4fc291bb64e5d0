// The deployment, chosen once at boot (issue 29): embedded (LMDB in the data directory, one
// process holding every partition) or cluster (one PostgreSQL database shared by the operator's
// instances, P22). What differs between the two is decided here and handed to the node as
// values: the store, what the workers' appends are checked against, whether the database
// answers, the claims that cross instances, how the node's change counter is read, and joining
// the other instances once the runtime runs. The node itself (node.ts) asks no question of the
// mode, and nothing outside this module and src/cluster names a lease or a fence (tidy).
import { unpack } from 'msgpackr';
import type { Logger } from 'pino';
import type { ShardPool } from './actors/pool.js';
import type { CommandResult } from './actors/types.js';
import { Hearing, holdsEvent, joinCluster, newInstance, type Joined } from './cluster/instance.js';
import type { Config } from './config.js';
import type { LocalDirectory } from './directory/directory.js';
import type { WebhookDelivery } from './events/delivery.js';
import type { RequestClaims, StoredAnswer } from './http/server.js';
import {
  holdsLog,
  PARTITION_COUNT,
  type Holding,
  type Log,
  type Table,
  type TableWrite,
} from './log/log.js';
import { HeldStoreTables, type StoreTable, type StoreTables } from './log/node-tables.js';
import { openStore } from './log/open.js';
import type { LmdbEnvironment } from './log/lmdb-log.js';
import { PostgresLog } from './log/postgres-log.js';
import type { DatabaseHealth } from './log/unavailable.js';
import { FEED_PARTITION, type FeedWriting } from './network/feed.js';
import { idempotencyRows, replayRows } from './reads/rows.js';
import { CHANGES_KEY, NodeStore } from './store.js';

/** What the node's runtime hands a deployment to join the others (cluster mode). */
export interface JoinParts {
  pool: ShardPool;
  identity: { sealingKey: Buffer; pepper: { hex: string } };
  events: WebhookDelivery;
  afterCommit: (result: CommandResult) => Promise<void> | undefined;
  onFeed: () => Promise<void>;
}

export interface Deployment {
  log: Log;
  tables: StoreTables;
  /** The LMDB environment of the embedded store; null in cluster mode. */
  env: LmdbEnvironment | null;
  /** What the workers' appends are checked against; null: every partition is this process's. */
  holding: Holding | null;
  /** Partitions the pool starts without, taking each when it comes to this instance. */
  startsWithout: readonly number[];
  /** Whether the database answers (`/readyz`); null: nothing is across a network. */
  health: DatabaseHealth | null;
  /** How often the reads were refreshed (public reads loaded before the last one are stale). */
  refreshes: (() => number) | null;
  /** How a request's replay mark and idempotency answer are made its own (P5, P7). */
  claims: RequestClaims;
  /** Writes the network feed (the holder of its partition); null: this process writes it. */
  feedWriting: FeedWriting | null;
  /** Which events this instance delivers; null: every event, as soon as its commit is known. */
  delivers: ((eventId: string) => boolean) | null;
  /**
   * The store's change counter: at once, and without holding the thread; and the store's tables
   * read again once it moved (cluster mode holds them in memory; LMDB reads them in place).
   */
  changes: { now: () => number; load: () => Promise<number>; reload: () => Promise<void> };
  /** Tells the index and the deliveries of other instances' commits, from the pool's start. */
  hear(directory: LocalDirectory, events: WebhookDelivery): void;
  /**
   * The node serves HTTP from now on: its thread reads without waiting on a database (issue 29),
   * which cluster mode makes checked (a synchronous read on it throws).
   */
  serving(): void;
  /** Joins the other instances once the runtime and the network run; null: none to join. */
  join(logger: Logger, parts: JoinParts): Promise<Joined | null>;
}

/** Every partition: where a cluster instance's pool starts, all held elsewhere (P22). */
const ALL_PARTITIONS = Array.from({ length: PARTITION_COUNT }, (_, p) => p);

/** Opens the store of the deployment `config` names, and what comes with it. */
export async function openDeployment(config: Config, logger: Logger): Promise<Deployment> {
  const holding = config.store === null ? null : newInstance();
  const opened = await openStore(config, holding);
  const { log } = opened;
  if (!(log instanceof PostgresLog) || holding === null) {
    const store = new NodeStore(opened.tables);
    await store.ensureLogFormat(() => holdsLog(log));
    return embedded({ ...opened, store, retentionMs: config.limits.idempotency_retention_ms });
  }
  // The front end reads the node's tables from memory, loaded again on a change (issue 29).
  const tables = new HeldStoreTables(opened.tables, (table) => storeTable(log, table));
  const store = new NodeStore(tables);
  await store.ensureLogFormat(() => holdsLog(log));
  // Told of the others' commits before anything is loaded (instance.ts, Hearing).
  const hearing = await Hearing.start(config, logger, log);
  return {
    ...opened,
    tables,
    holding,
    startsWithout: ALL_PARTITIONS,
    health: log.health,
    refreshes: () => log.refreshed,
    claims: claimedInCommits(log, config.limits.idempotency_retention_ms),
    feedWriting: {
      epoch: () => holding.epochs[FEED_PARTITION]!,
      write: (writes, epoch) => log.writeHolding(FEED_PARTITION, writes, epoch),
    },
    delivers: holdsEvent(holding),
    changes: {
      now: () => store.changes(),
      load: async () => {
        const bytes = await log.load('node.meta' as Table, CHANGES_KEY);
        return bytes === undefined ? 0 : (unpack(bytes) as number);
      },
      reload: () => tables.load(),
    },
    hear: (directory, events) => hearing.attach(directory, events),
    serving: () => log.serving(),
    join: (joinLogger, parts) =>
      joinCluster(config, joinLogger, { ...parts, fence: holding, hearing }),
  };
}

/** A table of the node's own (store.ts), as its rows are named in the cluster's database. */
async function storeTable(log: PostgresLog, table: StoreTable): Promise<Map<string, unknown>> {
  const rows = await log.loadRange(`node.${table}` as Table);
  return new Map(rows.map(({ key, bytes }) => [key, unpack(bytes)]));
}

/** One process, every partition its own: no claim crosses a network, nothing to join. */
function embedded(opened: {
  log: Log;
  tables: StoreTables;
  env: LmdbEnvironment | null;
  store: NodeStore;
  retentionMs: number;
}): Deployment {
  const { log, tables, env, store } = opened;
  return {
    log,
    tables,
    env,
    holding: null,
    startsWithout: [],
    health: null,
    refreshes: null,
    claims: claimedInProcess(log, opened.retentionMs),
    feedWriting: null,
    delivers: null,
    changes: {
      now: () => store.changes(),
      load: async () => store.changes(),
      reload: async () => undefined,
    },
    hear: () => undefined,
    serving: () => undefined,
    join: async () => null,
  };
}

/** The stored answer of a scope still within its retention (P7) at `now`, or none. */
const answerWithin =
  (retentionMs: number, now: () => number) =>
  (scope: string, bytes: Buffer | undefined): StoredAnswer | undefined => {
    if (bytes === undefined) return undefined;
    const entry = idempotencyRows.read(scope, bytes);
    return entry.at + retentionMs < now() ? undefined : entry;
  };

/** What embedded mode's claims use of the log: reads in place, and a durable write. */
export type ProcessClaimsLog = Pick<Log, 'get' | 'load' | 'write'>;

/**
 * Embedded mode: one process checks a request before its run, the stored answer read in place
 * and the mark in its authenticator's memory, and its command's commit writes both. A call whose
 * commits wrote neither (a refusal) has its mark written on its own, durable before it is
 * answered, so that the next start takes it back even after a kill -9 (P5; node.ts restores
 * the `replay` table). A read's (GET, HEAD) stays in memory: replayed after a kill -9 it changes
 * nothing, and a durable write would cost every signed read more than its own work. Its answer
 * needs no second look: no other call of its scope ran meanwhile (server.ts keeps a scope in
 * flight), and none other wrote its mark, which memory held first.
 */
export function claimedInProcess(
  log: ProcessClaimsLog,
  retentionMs: number,
  now: () => number = Date.now,
): RequestClaims {
  const answer = answerWithin(retentionMs, now);
  return {
    stored: (scope) => answer(scope, log.get('idempotency', scope)),
    settle: (mark, _scope, read) =>
      mark === undefined || read
        ? null
        : log.write([replayRows.mark(mark)]).then(() => ({ replayed: false, stored: undefined })),
    taken: async (scope) => answer(scope, await log.load('idempotency', scope)),
  };
}

/** What cluster mode's claims use of the database: a read, and a claim of a row (P22). */
export interface CommitClaimsLog {
  load: Log['load'];
  /** Writes the row unless another holds it until a time not yet past; false: another's. */
  claim(write: TableWrite & { bytes: Buffer; until: number }): Promise<boolean>;
}

/**
 * Cluster mode (issue 29): nothing is asked of the database before a request runs; its command's
 * commit claims the replay mark and the idempotency answer in the commit's one round trip. A call
 * that committed neither claims its mark and reads its scope's answer on its own (two statements
 * sent at once, on two pools), so that a replay to another instance, or a call of a key another
 * instance has answered, is told apart before it is answered.
 */
export function claimedInCommits(
  log: CommitClaimsLog,
  retentionMs: number,
  now: () => number = Date.now,
): RequestClaims {
  const answer = answerWithin(retentionMs, now);
  const stored = async (scope: string) => answer(scope, await log.load('idempotency', scope));
  return {
    stored: () => undefined,
    settle: async (mark, scope) => {
      const [first, found] = await Promise.all([
        mark === undefined ? true : log.claim(replayRows.claim(mark)),
        scope === undefined ? undefined : stored(scope),
      ]);
      return { replayed: !first, stored: found };
    },
    taken: stored,
  };
}
