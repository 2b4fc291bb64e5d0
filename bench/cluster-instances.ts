// Several instances of the node on one database (cluster mode, figure 14c-d): starting them on a
// fresh database and waiting until the leases table shows the partitions shared out; a signed
// POST load spread over them with the CPU their processes used; and the time from `kill -9` of
// one instance to its partitions answering again through the others.
import pg from 'pg';
import { PARTITION_COUNT, partitionOf } from '../src/log/log.js';
import { freshDatabase } from '../scripts/throwaway-postgres.js';
import type { BenchConfig } from './config.js';
import { processCpuSeconds } from './cpu.js';
import { PAYEE_RECEIPT_BODY } from './fixtures.js';
import { postJob } from './http-post.js';
import type { LoadResult } from './load.js';
import {
  removeDir,
  runCli,
  runLoad,
  startNodeProcess,
  tempDir,
  type LocalCredential,
  type RunningServer,
} from './processes.js';
import { API_PREFIX, signedPost } from './signed-request.js';

/** The operator's own credential, written to the database (every instance reads it there). */
export function storeCredential(dataDir: string, store: string): LocalCredential {
  const args = ['credentials', 'create', '--data-dir', dataDir, '--store', store];
  const out = JSON.parse(runCli([...args, '--member', 'local', '--local'])) as {
    key_id: string;
    private_key: string;
  };
  return { keyId: out.key_id, seedHex: out.private_key };
}

interface Instances {
  nodes: RunningServer[];
  /** Each node's id in the leases table (its `listening` line's `instance`). */
  ids: string[];
  credential: LocalCredential;
  /** Milliseconds from the last instance's `listening` line to the partitions shared out. */
  sharedMs: number;
  /** The partitions the leases table gives to `instance` now. */
  partitionsOf(instance: string): Promise<Set<number>>;
  /** SIGKILL of one instance: no drain, its leases left to lapse. */
  kill(index: number): Promise<void>;
  /** Stops every instance still running and removes their data directories. */
  stop(): Promise<void>;
}

/** `count` instances on `store`, returned once each holds about its share of the partitions. */
async function startInstances(
  config: BenchConfig,
  options: { store: string; count: number; leaseMs?: number },
): Promise<Instances> {
  const { store, count } = options;
  const dirs = Array.from({ length: count }, () => tempDir('cluster-node'));
  const nodes: RunningServer[] = [];
  const killed = new Set<number>();
  const db = new pg.Client({ connectionString: store });
  const stop = async () => {
    await Promise.all(nodes.filter((_, i) => !killed.has(i)).map((node) => node.stop()));
    await db.end().catch(() => undefined);
    for (const dir of dirs) removeDir(dir);
  };
  try {
    const credential = storeCredential(dirs[0]!, store);
    const lease = options.leaseMs === undefined ? [] : ['--lease-ms', String(options.leaseMs)];
    for (const dataDir of dirs) {
      const args = ['--store', store, '--internal-port', '0', ...lease];
      nodes.push(await startNodeProcess({ dataDir, timeoutMs: config.child_timeout_ms, args }));
    }
    const ids = nodes.map((node) => node.announcement.instance as string);
    const listening = performance.now();
    await db.connect();
    await awaitShared(config, db, ids);
    const sharedMs = performance.now() - listening;
    const partitionsOf = async (instance: string) => {
      const rows = await db.query<{ partition: number }>(
        'select partition from leases where owner = $1 and expires_at > now()',
        [instance],
      );
      return new Set(rows.rows.map((row) => row.partition));
    };
    const kill = async (index: number) => {
      killed.add(index);
      await nodes[index]!.kill();
    };
    return { nodes, ids, credential, sharedMs, partitionsOf, kill, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Polls the leases table until every instance holds at least floor(256 / n) - 2 partitions. */
async function awaitShared(config: BenchConfig, db: pg.Client, ids: string[]): Promise<void> {
  const { share_timeout_ms: timeoutMs, share_poll_ms: pollMs } = config.cluster;
  // Two short of the fair share: the last moves of a rebalance may still be under way.
  const least = Math.floor(PARTITION_COUNT / ids.length) - 2;
  const started = performance.now();
  for (;;) {
    const rows = await db.query<{ owner: string; count: string }>(
      'select owner, count(*) from leases where owner is not null and expires_at > now() ' +
        'group by owner',
    );
    const held = new Map(rows.rows.map((row) => [row.owner, Number(row.count)]));
    if (ids.every((id) => (held.get(id) ?? 0) >= least)) return;
    if (performance.now() - started > timeoutMs) {
      const counts = ids.map((id) => held.get(id) ?? 0).join(', ');
      throw new Error(`partitions not shared out within ${timeoutMs} ms: ${counts}`);
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

export interface SpreadRun {
  result: LoadResult;
  /** CPU seconds the instances' processes used during the measured load, all of them together. */
  cpuSeconds: number;
  /** Milliseconds the partitions took to be shared out after the last instance started. */
  sharedMs: number;
}

/** 14c: signed POSTs as in figure 14b, spread round-robin over `count` instances. */
export async function spreadPosts(
  config: BenchConfig,
  adminUrl: string,
  count: number,
): Promise<SpreadRun> {
  const cluster = await startInstances(config, { store: await freshDatabase(adminUrl), count });
  try {
    const { count: requests, warmup, connections } = config.cluster.spread;
    const job = {
      ...postJob(cluster.nodes[0]!, cluster.credential, {
        count: requests,
        warmupCount: warmup,
        connections,
      }),
      baseUrls: cluster.nodes.map((node) => node.baseUrl),
    };
    const cpu = () => cluster.nodes.reduce((sum, node) => sum + processCpuSeconds(node.pid), 0);
    // Read when the measured run starts, after the warm-up.
    const before = { seconds: Number.NaN };
    const result = await runLoad<LoadResult>(job, config.child_timeout_ms, () => {
      before.seconds = cpu();
    });
    return { result, cpuSeconds: cpu() - before.seconds, sharedMs: cluster.sharedMs };
  } finally {
    await cluster.stop();
  }
}

const TARGET = `${API_PREFIX}/receipts`;

function referenceOf(answerText: string): string {
  return (JSON.parse(answerText) as { reference: string }).reference;
}

/**
 * 14d: milliseconds from `kill -9` of one of three instances to the first write acknowledged on
 * one of its partitions, sent again and again through the two survivors in turn.
 */
export async function takeoverMs(config: BenchConfig, adminUrl: string): Promise<number> {
  const { lease_ms: leaseMs, retry_ms: retryMs, timeout_ms: timeoutMs } = config.cluster.takeover;
  const store = await freshDatabase(adminUrl);
  const cluster = await startInstances(config, { store, count: 3, leaseMs });
  try {
    const held = await cluster.partitionsOf(cluster.ids[2]!);
    const survivors = cluster.nodes.slice(0, 2);
    const killedAt = performance.now();
    await cluster.kill(2);
    for (let n = 0; ; n++) {
      const via = survivors[n % survivors.length]!;
      const answer = await signedPost(via.baseUrl, cluster.credential, TARGET, PAYEE_RECEIPT_BODY);
      const elapsedMs = performance.now() - killedAt;
      if (answer.status === 201 && held.has(partitionOf(referenceOf(answer.text))))
        return elapsedMs;
      if (elapsedMs > timeoutMs) {
        throw new Error(
          `no write on the dead instance's partitions within ${timeoutMs} ms: ` +
            `last answer ${answer.status} ${answer.text.slice(0, 300)}`,
        );
      }
      // Refused while the partitions wait for a new owner: again after a pause.
      if (answer.status !== 201) await new Promise((resolve) => setTimeout(resolve, retryMs));
    }
  } finally {
    await cluster.stop();
  }
}
