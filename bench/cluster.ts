// Figure 14 (issue 16): cluster mode's store beside the embedded one, on a throwaway PostgreSQL
// started for the run (fsync and synchronous_commit on, as in production). Each pair is measured
// in turns, `rounds` times, and the figure is the median of each side:
//   a. durable appends: the PostgreSQL log against the LMDB log, many appenders in flight (group
//      commit) and one appender awaiting each append (one commit's round trip and sync);
//   b. signed durable POST /receipts: one node instance on PostgreSQL against the embedded node.
// Then several instances on one database (cluster-instances.ts):
//   c. signed POSTs spread round-robin over one, two and three instances, in turns;
//   d. the time from `kill -9` of one of three instances to its partitions answering again;
//   e. the cores one database serves: (c)'s CPU per write times (a)'s commits per second.
import { availableParallelism } from 'node:os';
import { LmdbLog, openEnvironment } from '../src/log/lmdb-log.js';
import { PostgresLog } from '../src/log/postgres-log.js';
import { checkpoint, freshDatabase, startPostgres } from '../scripts/throwaway-postgres.js';
import { spreadPosts, storeCredential, takeoverMs } from './cluster-instances.js';
import type { BenchConfig } from './config.js';
import { postJob, statusText } from './http-post.js';
import { durableAppends, type AppendFigures } from './log-append.js';
import type { LoadResult } from './load.js';
import {
  createLocalCredential,
  removeDir,
  runLoad,
  startNodeProcess,
  tempDir,
  type LocalCredential,
} from './processes.js';
import { median, ms, rate, ratio, type Report } from './report.js';

async function lmdbAppends(config: BenchConfig): Promise<AppendFigures> {
  const dir = tempDir('cluster-lmdb');
  const log = new LmdbLog(openEnvironment(dir));
  try {
    return await durableAppends(log, config);
  } finally {
    await log.close();
    removeDir(dir);
  }
}

async function postgresAppends(adminUrl: string, config: BenchConfig): Promise<AppendFigures> {
  const log = await PostgresLog.open(await freshDatabase(adminUrl));
  try {
    return await durableAppends(log, config);
  } finally {
    await log.close();
  }
}

/** Signed POSTs against one node: embedded (store null) or one instance on the database. */
async function posts(config: BenchConfig, store: string | null): Promise<LoadResult> {
  const dataDir = tempDir(store === null ? 'cluster-embedded' : 'cluster-instance');
  const where = store === null ? [] : ['--store', store];
  try {
    const credential: LocalCredential =
      store === null ? createLocalCredential(dataDir) : storeCredential(dataDir, store);
    const node = await startNodeProcess({
      dataDir,
      timeoutMs: config.child_timeout_ms,
      args: where,
    });
    try {
      const { count, warmup, connections } = config.cluster.post;
      return await runLoad<LoadResult>(
        postJob(node, credential, { count, warmupCount: warmup, connections }),
        config.child_timeout_ms,
      );
    } finally {
      await node.stop();
    }
  } finally {
    removeDir(dataDir);
  }
}

const SECTION = '14 cluster';

/** 14a: durable appends, LMDB beside PostgreSQL; returns PostgreSQL's median rate in flight. */
async function appendFigures(config: BenchConfig, report: Report, adminUrl: string) {
  const lmdb: AppendFigures[] = [];
  const postgres: AppendFigures[] = [];
  report.line('  a. durable appends, a fresh LMDB log and a fresh PostgreSQL log, in turns:');
  for (let round = 1; round <= config.cluster.rounds; round++) {
    const l = await lmdbAppends(config);
    const p = await postgresAppends(adminUrl, config);
    lmdb.push(l);
    postgres.push(p);
    report.line(
      `  round ${round}: appends in flight LMDB ${rate(l.many)}/s (${l.manyLatency}), ` +
        `PostgreSQL ${rate(p.many)}/s (${p.manyLatency})`,
    );
    report.line(
      `    one appender LMDB ${rate(l.single)}/s (${l.singleLatency}), ` +
        `PostgreSQL ${rate(p.single)}/s (${p.singleLatency})`,
    );
  }
  const m = (figures: AppendFigures[], pick: (f: AppendFigures) => number) =>
    median(figures.map(pick));
  const inFlight = config.log.concurrent_in_flight;
  report.add({
    section: SECTION,
    figure: `durable appends/s, ${inFlight} in flight: LMDB / PostgreSQL`,
    value: `${rate(m(lmdb, (f) => f.many))} / ${rate(m(postgres, (f) => f.many))}`,
  });
  report.add({
    section: SECTION,
    figure: `  PostgreSQL / LMDB, ${inFlight} in flight`,
    value: ratio(m(postgres, (f) => f.many) / m(lmdb, (f) => f.many)),
  });
  report.add({
    section: SECTION,
    figure: 'durable appends/s, one appender: LMDB / PostgreSQL',
    value: `${rate(m(lmdb, (f) => f.single))} / ${rate(m(postgres, (f) => f.single))}`,
  });
  report.add({
    section: SECTION,
    figure: '  PostgreSQL / LMDB, one appender',
    value: ratio(m(postgres, (f) => f.single) / m(lmdb, (f) => f.single)),
  });
  return m(postgres, (f) => f.many);
}

/** 14b: signed POSTs against the embedded node and one instance on the database, in turns. */
async function postFigures(config: BenchConfig, report: Report, adminUrl: string): Promise<void> {
  const embedded: number[] = [];
  const instance: number[] = [];
  report.line('  b. signed POST /receipts, the embedded node and one instance, in turns:');
  for (let round = 1; round <= config.cluster.rounds; round++) {
    const e = await posts(config, null);
    // The database flushed what the figures before wrote: the instance pays for its own writes.
    await checkpoint(adminUrl);
    const i = await posts(config, await freshDatabase(adminUrl));
    embedded.push(e.perSecond);
    instance.push(i.perSecond);
    report.line(
      `  round ${round}: signed POST /receipts embedded ${rate(e.perSecond)}/s ` +
        `(p99 ${ms(e.latencyP99Ms)} ms; ${statusText(e)}), one instance on PostgreSQL ` +
        `${rate(i.perSecond)}/s (p99 ${ms(i.latencyP99Ms)} ms; ${statusText(i)})`,
    );
  }
  const connections = config.cluster.post.connections;
  report.add({
    section: SECTION,
    figure:
      `signed POST /receipts/s, ${connections} connections: ` +
      'embedded / one instance on PostgreSQL',
    value: `${rate(median(embedded))} / ${rate(median(instance))}`,
  });
  report.add({
    section: SECTION,
    figure: '  one instance on PostgreSQL / embedded',
    value: ratio(median(instance) / median(embedded)),
  });
}

/** The instances' CPU seconds per acknowledged signed POST with `instances` of them (14c). */
interface CpuPerPost {
  instances: number;
  seconds: number;
}

/**
 * 14c: the signed POST load spread over 1, 2, 3 instances on a fresh database each, the order
 * reversed every other round; returns the median CPU per write of each count.
 */
async function spreadFigures(
  config: BenchConfig,
  report: Report,
  adminUrl: string,
): Promise<CpuPerPost[]> {
  const counts = config.cluster.instances;
  const rates = new Map<number, number[]>(counts.map((n) => [n, []]));
  const cpu = new Map<number, number[]>(counts.map((n) => [n, []]));
  report.line(
    `  c. signed POST /receipts spread round-robin over ${counts.join(', ')} instances on one ` +
      'database (a fresh one each), in turns:',
  );
  for (let round = 1; round <= config.cluster.rounds; round++) {
    const order = round % 2 === 1 ? counts : [...counts].reverse();
    for (const n of order) {
      await checkpoint(adminUrl);
      const { result, cpuSeconds, sharedMs } = await spreadPosts(config, adminUrl, n);
      rates.get(n)!.push(result.perSecond);
      cpu.get(n)!.push(cpuSeconds / result.ok);
      report.line(
        `  round ${round}, ${n} instance${n === 1 ? '' : 's'}: ${rate(result.perSecond)}/s ` +
          `(p99 ${ms(result.latencyP99Ms)} ms; ${statusText(result)}; errors ${result.errors}), ` +
          `instances' CPU ${ms((1000 * cpuSeconds) / result.ok)} ms a request` +
          (n === 1 ? '' : `; partitions shared out ${ms(sharedMs)} ms after the last start`),
      );
    }
  }
  const medians = counts.map((n) => median(rates.get(n)!));
  report.add({
    section: SECTION,
    figure:
      `signed POST /receipts/s, ${config.cluster.spread.connections} connections round-robin: ` +
      `${counts.join(' / ')} instances on one database`,
    value: medians.map(rate).join(' / '),
  });
  for (let i = 1; i < counts.length; i++) {
    report.add({
      section: SECTION,
      figure: `  ${counts[i]} instances / ${counts[0]}`,
      value: ratio(medians[i]! / medians[0]!),
    });
  }
  return counts.map((n) => ({ instances: n, seconds: median(cpu.get(n)!) }));
}

/** 14d: kill -9 of one of three instances to its partitions answering again, in rounds. */
async function takeoverFigure(config: BenchConfig, report: Report, adminUrl: string) {
  const { rounds, lease_ms: leaseMs } = config.cluster.takeover;
  report.line(
    `  d. kill -9 of one of three instances (--lease-ms ${leaseMs}), then POST /receipts ` +
      "through the survivors until one lands on the dead instance's partitions:",
  );
  const times: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    times.push(await takeoverMs(config, adminUrl));
    report.line(`  round ${round}: answered again ${ms(times.at(-1)!)} ms after the kill`);
  }
  report.add({
    section: SECTION,
    figure: 'kill -9 of one of 3 instances to its partitions answering again: ms / lease ms',
    value: `${rate(median(times))} / ${rate(leaseMs)}`,
  });
}

/** 14e: the cores one database serves, from (c)'s CPU per write and (a)'s commit rate. */
function modelFigures(
  config: BenchConfig,
  report: Report,
  commitsPerSecond: number,
  cpu: CpuPerPost[],
): void {
  const counts = cpu.map((c) => c.instances).join(' / ');
  report.line(
    "  e. cores per database = commits/s x CPU seconds per write. CPU: the instances' " +
      'processes (utime + stime from /proc) over the measured part of (c), per 2xx answer; ' +
      'commits/s: (a), PostgreSQL with many appends in flight.',
  );
  report.line(
    '     The model assumes one commit share per write (a write claims its replay mark and ' +
      "idempotency answer in its own commit; the database's own CPU is left out).",
  );
  report.line(
    `     This machine has ${availableParallelism()} cores, so more instances cannot add CPU ` +
      'here: (c) shows what spreading the load costs, not what the database can take.',
  );
  report.add({
    section: SECTION,
    figure: `CPU ms per signed POST, the instances' processes: ${counts} instances`,
    value: cpu.map((c) => ms(1000 * c.seconds)).join(' / '),
  });
  report.add({
    section: SECTION,
    figure: `database commits/s (a: PostgreSQL, ${config.log.concurrent_in_flight} in flight)`,
    value: rate(commitsPerSecond),
  });
  report.add({
    section: SECTION,
    figure: `cores one database serves = commits/s x CPU s per POST: ${counts} instances`,
    value: cpu.map((c) => (commitsPerSecond * c.seconds).toFixed(1)).join(' / '),
  });
}

export async function runCluster(config: BenchConfig, report: Report): Promise<void> {
  report.heading('14. Cluster store (issue 16): PostgreSQL beside LMDB, instances on one database');
  const server = await startPostgres();
  try {
    const commitsPerSecond = await appendFigures(config, report, server.url);
    await postFigures(config, report, server.url);
    const cpu = await spreadFigures(config, report, server.url);
    await takeoverFigure(config, report, server.url);
    modelFigures(config, report, commitsPerSecond, cpu);
  } finally {
    server.stop();
  }
}
