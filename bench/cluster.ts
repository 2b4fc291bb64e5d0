// Figure 14 (issue 16): cluster mode's store beside the embedded one, on a throwaway PostgreSQL
// started for the run (fsync and synchronous_commit on, as in production). Each pair is measured
// in turns, `rounds` times, and the figure is the median of each side:
//   a. durable appends: the PostgreSQL log against the LMDB log, many appenders in flight (group
//      commit) and one appender awaiting each append (one commit's round trip and sync);
//   b. signed durable POST /receipts: one node instance on PostgreSQL against the embedded node.
import { LmdbLog, openEnvironment } from '../src/log/lmdb-log.js';
import { PostgresLog } from '../src/log/postgres-log.js';
import { freshDatabase, startPostgres } from '../scripts/throwaway-postgres.js';
import type { BenchConfig } from './config.js';
import { postJob, statusText } from './http-post.js';
import { durableAppends, type AppendFigures } from './log-append.js';
import type { LoadResult } from './load.js';
import {
  createLocalCredential,
  removeDir,
  runCli,
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
      store === null
        ? createLocalCredential(dataDir)
        : (() => {
            const out = JSON.parse(
              runCli([
                'credentials',
                'create',
                '--data-dir',
                dataDir,
                ...where,
                '--member',
                'local',
                '--local',
              ]),
            ) as { key_id: string; private_key: string };
            return { keyId: out.key_id, seedHex: out.private_key };
          })();
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

export async function runCluster(config: BenchConfig, report: Report): Promise<void> {
  report.heading('14. Cluster store: PostgreSQL beside LMDB (issue 16), in turns');
  const server = await startPostgres();
  try {
    const lmdb: AppendFigures[] = [];
    const postgres: AppendFigures[] = [];
    for (let round = 1; round <= config.cluster.rounds; round++) {
      lmdb.push(await lmdbAppends(config));
      postgres.push(await postgresAppends(server.url, config));
      report.line(
        `  round ${round}: appends in flight LMDB ${rate(lmdb.at(-1)!.many)}/s (${lmdb.at(-1)!.manyLatency}), PostgreSQL ${rate(postgres.at(-1)!.many)}/s (${postgres.at(-1)!.manyLatency})`,
      );
      report.line(
        `    one appender LMDB ${rate(lmdb.at(-1)!.single)}/s (${lmdb.at(-1)!.singleLatency}), PostgreSQL ${rate(postgres.at(-1)!.single)}/s (${postgres.at(-1)!.singleLatency})`,
      );
    }
    const m = (figures: AppendFigures[], pick: (f: AppendFigures) => number) =>
      median(figures.map(pick));
    const inFlight = config.log.concurrent_in_flight;
    report.add({
      section: '14 cluster',
      figure: `durable appends/s, ${inFlight} in flight: LMDB / PostgreSQL`,
      value: `${rate(m(lmdb, (f) => f.many))} / ${rate(m(postgres, (f) => f.many))}`,
    });
    report.add({
      section: '14 cluster',
      figure: `  PostgreSQL / LMDB, ${inFlight} in flight`,
      value: ratio(m(postgres, (f) => f.many) / m(lmdb, (f) => f.many)),
    });
    report.add({
      section: '14 cluster',
      figure: 'durable appends/s, one appender: LMDB / PostgreSQL',
      value: `${rate(m(lmdb, (f) => f.single))} / ${rate(m(postgres, (f) => f.single))}`,
    });
    report.add({
      section: '14 cluster',
      figure: '  PostgreSQL / LMDB, one appender',
      value: ratio(m(postgres, (f) => f.single) / m(lmdb, (f) => f.single)),
    });

    const embedded: number[] = [];
    const instance: number[] = [];
    for (let round = 1; round <= config.cluster.rounds; round++) {
      const e = await posts(config, null);
      const i = await posts(config, await freshDatabase(server.url));
      embedded.push(e.perSecond);
      instance.push(i.perSecond);
      report.line(
        `  round ${round}: signed POST /receipts embedded ${rate(e.perSecond)}/s (p99 ${ms(e.latencyP99Ms)} ms; ${statusText(e)}), one instance on PostgreSQL ${rate(i.perSecond)}/s (p99 ${ms(i.latencyP99Ms)} ms; ${statusText(i)})`,
      );
    }
    const connections = config.cluster.post.connections;
    report.add({
      section: '14 cluster',
      figure: `signed POST /receipts/s, ${connections} connections: embedded / one instance on PostgreSQL`,
      value: `${rate(median(embedded))} / ${rate(median(instance))}`,
    });
    report.add({
      section: '14 cluster',
      figure: '  one instance on PostgreSQL / embedded',
      value: ratio(median(instance) / median(embedded)),
    });
  } finally {
    server.stop();
  }
}
