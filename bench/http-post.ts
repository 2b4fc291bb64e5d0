// Figure 4: signed `POST /receipts` with durability kept (each answer after its record is
// flushed). Every request is signed before the clock starts, in the load generator's process.
// The rate is set against the cost of the two signatures each request needs (one request
// verification, one envelope signature) on one core, measured in this process just before and
// just after the load.
import type { BenchConfig } from './config.js';
import { cpuText, withCpuWatch } from './cpu.js';
import { PAYEE_RECEIPT_BODY } from './fixtures.js';
import type { LoadResult, PostJob } from './load.js';
import { floorLine, measureRequestFloor } from './micro.js';
import { createLocalCredential, removeDir, runLoad, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { ms, rate, ratio, type Report } from './report.js';
import { API_PREFIX, type ClientCredential } from './signed-request.js';

const TARGET_RATIO = 0.6;

export function postJob(node: RunningServer, credential: ClientCredential, options: { count: number; warmupCount: number; connections: number }): PostJob {
  return { kind: 'post', baseUrl: node.baseUrl, target: `${API_PREFIX}/receipts`, credential, body: PAYEE_RECEIPT_BODY, ...options };
}

export function statusText(result: LoadResult): string {
  return Object.entries(result.statusCounts).map(([status, count]) => `${status}: ${count}`).join(', ');
}

export async function runHttpPost(config: BenchConfig, report: Report): Promise<void> {
  report.heading('4. Signed POST /receipts with durable acknowledgement');
  const dataDir = tempDir('post');
  let node: RunningServer | null = null;
  try {
    const credential = createLocalCredential(dataDir);
    const running = await startNodeProcess({ dataDir, timeoutMs: config.child_timeout_ms });
    node = running;
    const { requests, warmup_requests: warmupCount, connections, floor_time_ms: floorTimeMs } = config.post;
    report.line(`  ${requests} requests (after ${warmupCount} warm-up), ${connections} connections, each with its own signature and idempotency key`);

    const floorBefore = measureRequestFloor(floorTimeMs);
    const { result, cpu } = await withCpuWatch(running.pid, (onMeasuring) =>
      runLoad<LoadResult & { warmup: LoadResult | null }>(postJob(running, credential, { count: requests, warmupCount, connections }), config.child_timeout_ms, onMeasuring));
    const floorAfter = measureRequestFloor(floorTimeMs);
    const floor = (floorBefore + floorAfter) / 2;

    if (result.warmup !== null) report.line(`    warm-up: ${rate(result.warmup.perSecond)} req/s (${statusText(result.warmup)})`);
    report.line(`    measured: ${result.ok} answered 2xx in ${ms(result.durationMs)} ms (${statusText(result)}; errors ${result.errors}, timeouts ${result.timeouts})`);
    if (cpu !== null) report.line(`    ${cpuText(cpu)}`);
    report.line(`    ${floorLine(floorBefore, floorAfter)}`);
    report.add({ section: '4 POST', figure: `req/s, ${connections} connections (p50 ${ms(result.latencyP50Ms)} ms, p99 ${ms(result.latencyP99Ms)} ms)`, value: rate(result.perSecond) });
    report.add({ section: '4 POST', figure: 'floor: verify request + sign envelope per s, one core', value: rate(floor) });
    report.add({
      section: '4 POST', figure: 'POST req/s / floor', value: ratio(result.perSecond / floor),
      target: { text: `>= ${TARGET_RATIO}`, met: result.perSecond / floor >= TARGET_RATIO },
    });
    if (result.non2xx > 0 || result.errors > 0) report.line(`    WARNING: ${result.non2xx} non-2xx answers and ${result.errors} errors; the rate counts 2xx only`);
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}
