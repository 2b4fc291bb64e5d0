// The benchmark suite's entry (`npm run bench`): runs each section in turn and prints every
// figure, then a summary table. Ratios are measured side by side in the same run, because the
// machine is shared and absolute rates move from run to run. See bench/README.md.
import { availableParallelism, cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadBenchConfig, type BenchConfig, type SectionName } from './config.js';
import { runClientSize } from './client-size.js';
import { runCluster } from './cluster.js';
import { runConsume } from './consume.js';
import { runGrowth } from './growth.js';
import { runHttpGet } from './http-get.js';
import { runHashBatch } from './hashbatch.js';
import { runHttpPost } from './http-post.js';
import { runLogAppend } from './log-append.js';
import { runLatency } from './latency.js';
import { runLookup } from './lookup.js';
import { runMemory } from './memory.js';
import { runMicro } from './micro.js';
import { runNodes } from './nodes.js';
import { runPassivated } from './passivated.js';
import { runSoak } from './soak.js';
import { cleanupAll } from './processes.js';
import { runReplication } from './replication.js';
import { Report } from './report.js';
import { resultsDir } from './report-files.js';
import { runRequests } from './requests.js';
import { runResolver } from './resolver.js';
import { runRestart } from './restart.js';
import { runSnapshot } from './snapshot.js';
import { runStart } from './start.js';
import { runVersus } from './versus.js';

/** bench/results in the source tree (this file runs from dist/bench). */
const RESULTS_ROOT = fileURLToPath(new URL('../../bench/results', import.meta.url));

const SECTIONS: Record<SectionName, (config: BenchConfig, report: Report) => void | Promise<void>> = {
  micro: runMicro,
  log: runLogAppend,
  get: runHttpGet,
  post: runHttpPost,
  restart: runRestart,
  resolver: runResolver,
  requests: runRequests,
  lookup: runLookup,
  latency: runLatency,
  consume: runConsume,
  growth: runGrowth,
  snapshot: runSnapshot,
  replication: runReplication,
  hashbatch: runHashBatch,
  cluster: runCluster,
  start: runStart,
  client: (_config, report) => runClientSize(report),
  nodes: runNodes,
  memory: runMemory,
  passivated: runPassivated,
  soak: runSoak,
  versus: runVersus,
};

async function main(): Promise<void> {
  const config = loadBenchConfig();
  const report = new Report();
  const title = `path-node benchmarks${config.quick ? ' (BENCH_QUICK: smoke sizes, figures not meaningful)' : ''}`;
  const now = new Date();
  const machine = `node ${process.version}, ${availableParallelism()} cores (${cpus()[0]?.model ?? 'unknown cpu'}), ${now.toISOString()}`;
  report.line(`# ${title}`);
  report.line(machine);
  const started = performance.now();
  for (const [name, run] of Object.entries(SECTIONS) as [SectionName, (typeof SECTIONS)[SectionName]][]) {
    if (config.sections.has(name)) await run(config, report);
  }
  report.printSummary();
  const total = `total ${((performance.now() - started) / 1000).toFixed(0)} s`;
  process.stdout.write(`\n${total}\n`);
  const { dir, commit } = resultsDir(RESULTS_ROOT, now);
  const files = report.writeFiles(dir, { title, meta: [machine, `commit ${commit}`, `sections: ${[...config.sections].join(', ')}`, total] });
  process.stdout.write(`report: ${files.html} and ${files.markdown}\n`);
}

// Children and temp dirs are removed by each section; these catch an interrupted run.
process.on('exit', cleanupAll);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    cleanupAll();
    process.exit(130);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
