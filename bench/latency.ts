// Figure 8e: the latency of single signed lookups (POST /sonar/lookup) at half the rate the node
// saturates at, on a small directory (100,000 keys, built as figure 8a builds its directory).
// First the saturation rate: the closed-loop load of figure 8d (autocannon, 64 connections, each
// sending its next request when the last is answered). Then the open-loop load of
// paced-load.ts at half that rate: request i due at t0 + i / rate, its latency measured from
// that due time, so a stall of the node shows in every request that fell due during it. Every
// lookup is charged, journalled and signed by the member's budget aggregate, and answered only
// once durable, exactly as in service (the node runs with an allowance no run comes near).
import { randomBytes } from 'node:crypto';
import type { BenchConfig } from './config.js';
import { cpuText, withCpuWatch } from './cpu.js';
import { buildDirectory, NODE_ARGS, pepperEnv } from './lookup.js';
import type { PacedJob, PacedResult } from './paced-load.js';
import { createLocalCredential, metricsText, removeDir, runPacedLoad, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { pacedCommitLatencies, syncedCommitLatencies } from './log-append.js';
import { ms, quantile, rate, type Report } from './report.js';
import type { LookupPlan } from './request-plans.js';
import { describeRun, requireAllOk, runSignedLoad } from './signed-load.js';

const SECTION = '8e latency';
/** Issue 34, target 4: the paced p99 at most this far above the paced commits' p99. */
const P99_OVER_FLOOR_MS = 5;

/** The percentiles of latencies measured at `perSecond`, as a load's row. */
function latenciesOf(latencies: readonly number[], perSecond: number) {
  const q = (p: number) => quantile(latencies, p);
  return { perSecond, latencyP50Ms: q(0.5), latencyP90Ms: q(0.9), latencyP99Ms: q(0.99), latencyP999Ms: q(0.999), latencyMaxMs: q(1) };
}

export async function runLatency(config: BenchConfig, report: Report): Promise<void> {
  const c = config.latency;
  report.heading(`8e. Single lookups on an even schedule at ${c.paced_share} of saturation, directory of ${rate(c.index_keys)} keys`);
  const pepper = randomBytes(32);
  const env = pepperEnv(pepper);
  const dataDir = tempDir('latency');
  let node: RunningServer | null = null;
  try {
    const local = createLocalCredential(dataDir);
    await buildDirectory(dataDir, pepper, c.index_keys, config.lookup.build_batch_rows);
    node = await startNodeProcess({ dataDir, timeoutMs: config.lookup.start_timeout_ms, env, args: NODE_ARGS });
    const plan = (seed: number): LookupPlan => ({ kind: 'lookup', batch: null, signed: false, presentKeys: c.index_keys, presentShare: config.lookup.present_share, seed });

    report.line(`  saturation: ${c.saturation.count} signed POST /sonar/lookup (after ${c.saturation.warmup} warm-up), ${c.saturation.connections} connections, closed loop`);
    const saturated = await runSignedLoad(config, node, { credentials: [local], plan: plan(0x5eed11), load: c.saturation, idempotency: false });
    describeRun(report, saturated, 'closed loop');
    requireAllOk(saturated, 'single lookups at saturation');
    const saturation = saturated.result.perSecond;

    const paced = Math.max(1, Math.round(saturation * c.paced_share));
    const job: PacedJob = {
      baseUrl: node.baseUrl, credentials: [local], plan: plan(0x5eed12), rate: paced,
      warmup: Math.round(paced * c.paced_warmup_seconds), count: Math.round(paced * c.paced_seconds), connections: c.paced_connections, drainMs: 10_000,
    };
    report.line(`  paced: ${job.count} lookups at ${rate(paced)}/s (after ${job.warmup} warm-up on the same schedule), ${job.connections} keep-alive connections, latency from each request's due time`);
    const before = await nodeBuckets(node);
    const { result, cpu } = await withCpuWatch(node.pid, (onMeasuring) => runPacedLoad<PacedResult>(job, config.child_timeout_ms, onMeasuring));
    const during = subtractBuckets(await nodeBuckets(node), before);
    const statuses = Object.entries(result.statusCounts).map(([s, n]) => `${s}: ${n}`).join(', ');
    report.line(`    answered ${result.answered} of ${job.count} (${statuses}) in ${ms(result.durationMs)} ms; p50 ${ms(result.latencyP50Ms)} ms, p99 ${ms(result.latencyP99Ms)} ms, p99.9 ${ms(result.latencyP999Ms)} ms, max ${ms(result.latencyMaxMs)} ms`);
    report.line(`    the generator's own lateness in sending: p50 ${ms(result.sendLagP50Ms)} ms, p99 ${ms(result.sendLagP99Ms)} ms`);
    if (cpu !== null) report.line(`      ${cpuText(cpu)}`);
    report.line(`    the node's own view of the paced run (warm-up included): lookups from arrival to answer, ${slowText(during.lookups, 'answered')}`);
    report.line(`      durable commits by duration, ${slowText(during.commits, 'commits')}`);
    report.line(`      each commit's first command waiting to be decided behind the commits before it, ${slowText(during.waits, 'commits')}`);
    if (result.ok !== job.count) throw new Error(`paced lookups: ${job.count - result.ok} of ${job.count} not answered 2xx (${statuses}; ${result.unanswered} unanswered)`);

    // The disk's floor, measured right after on the same disk: a lookup is answered once its
    // charge is durable, and one that falls due during a commit waits for that commit and its own.
    const commits = await syncedCommitLatencies(c.floor_commits, c.floor_gap_ms);
    report.line(`    the disk's floor: ${c.floor_commits} synced LMDB commits of one record, each alone: p50 ${ms(quantile(commits, 0.5))} ms, p99 ${ms(quantile(commits, 0.99))} ms, p99.9 ${ms(quantile(commits, 0.999))} ms`);
    report.add({ section: SECTION, figure: 'one synced commit alone, same disk just after: p50 / p99', value: `${ms(quantile(commits, 0.5))} / ${ms(quantile(commits, 0.99))} ms` });
    // Issue 34, target 4: the same disk's synced commits paced at the very rate of the lookups.
    const pacedCommits = await pacedCommitLatencies(job.count, paced);
    const floorP99 = quantile(pacedCommits, 0.99);
    report.line(`    the disk's floor paced: ${job.count} records due at ${rate(paced)}/s, those due during a commit in the next: p50 ${ms(quantile(pacedCommits, 0.5))} ms, p99 ${ms(floorP99)} ms, p99.9 ${ms(quantile(pacedCommits, 0.999))} ms`);
    report.load({ figure: `synced commits paced at ${rate(paced)}/s (the floor)`, result: latenciesOf(pacedCommits, paced) });
    report.load({ figure: `single signed lookups paced at ${rate(paced)}/s`, result: { ...result, perSecond: result.ok / (result.durationMs / 1000) } });

    report.add({ section: SECTION, figure: `single lookups/s at saturation, closed loop, ${c.saturation.connections} connections (p99 ${ms(saturated.result.latencyP99Ms)} ms)`, value: rate(saturation) });
    report.add({ section: SECTION, figure: `paced at ${rate(paced)}/s (${c.paced_share} of saturation): p50 / p99 / p99.9`, value: `${ms(result.latencyP50Ms)} / ${ms(result.latencyP99Ms)} / ${ms(result.latencyP999Ms)} ms` });
    report.add({
      section: SECTION, figure: `paced p99 at ${c.paced_share} of saturation`, value: `${ms(result.latencyP99Ms)} ms`,
      target: { text: `< ${c.p99_target_ms} ms`, met: result.latencyP99Ms < c.p99_target_ms },
    });
    const over = result.latencyP99Ms - floorP99;
    report.add({
      section: SECTION, figure: 'paced p99 over the paced commits\' p99', value: `${ms(over)} ms`, floor: `${ms(floorP99)} ms (synced commits at ${rate(paced)}/s)`,
      target: { text: `< ${P99_OVER_FLOOR_MS} ms`, met: over < P99_OVER_FLOOR_MS },
    });
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}

// A lookup due while a commit is under way waits for it and then for its own, so one slow commit
// of the disk delays every lookup that falls due during it: at this rate a 50 ms commit alone
// holds back about 1 % of the run. The node's own histograms, read before and after the paced
// run on the operator's listener, say where its time went: each commit's duration (append to
// synced, path_commit_duration_seconds), how long each commit's first command waited to be
// decided behind the commits before it (path_commit_wait_seconds), and each lookup from its
// arrival to its answer (path_http_request_duration_seconds), which the disk's floor measured
// alone rarely shows.
const HISTOGRAMS = {
  commits: { name: 'path_commit_duration_seconds', label: null },
  waits: { name: 'path_commit_wait_seconds', label: null },
  lookups: { name: 'path_http_request_duration_seconds', label: 'operation="sonar.lookup"' },
} as const;
const SLOW_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1];

type Histogram = keyof typeof HISTOGRAMS;
type Buckets = Record<Histogram, Map<number, number>>;
const HISTOGRAM_NAMES = Object.keys(HISTOGRAMS) as Histogram[];

/** Each histogram's cumulative counts by upper bound in seconds (`+Inf` as Infinity). */
async function nodeBuckets(node: RunningServer): Promise<Buckets> {
  const text = await metricsText(node);
  const read = ({ name, label }: { name: string; label: string | null }) => {
    const buckets = new Map<number, number>();
    const start = `${name}_bucket{`;
    for (const line of text.split('\n')) {
      if (!line.startsWith(start)) continue;
      const labels = line.slice(start.length, line.indexOf('}')).split(',');
      if (label !== null && !labels.includes(label)) continue;
      const bound = labels.find((l) => l.startsWith('le='))!.slice('le="'.length, -1);
      buckets.set(bound === '+Inf' ? Infinity : Number(bound), Number(line.slice(line.lastIndexOf(' ') + 1)));
    }
    if (!buckets.has(Infinity)) throw new Error(`the node's /metrics has no ${name} histogram${label === null ? '' : ` with ${label}`}`);
    return buckets;
  };
  return Object.fromEntries(HISTOGRAM_NAMES.map((h) => [h, read(HISTOGRAMS[h])])) as Buckets;
}

function subtractBuckets(after: Buckets, before: Buckets): Buckets {
  const less = (h: Histogram) => new Map([...after[h]].map(([le, n]) => [le, n - (before[h].get(le) ?? 0)]));
  return Object.fromEntries(HISTOGRAM_NAMES.map((h) => [h, less(h)])) as Buckets;
}

/** How many of a histogram's observations lay over each of SLOW_SECONDS. */
function slowText(during: Map<number, number>, what: string): string {
  const total = during.get(Infinity)!;
  const over = SLOW_SECONDS.map((le) => `over ${ms(le * 1000)} ms: ${total - (during.get(le) ?? 0)}`);
  return `${total} ${what}; ${over.join(', ')}`;
}
