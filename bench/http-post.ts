// Figure 4: signed `POST /receipts` with durability kept (each answer after its record is
// flushed). Every request is signed before the clock starts, in the load generator's process.
// The node's CPU per write (every thread, from /proc) is set against the floor (issue 34, target
// 1): node:crypto's verify of the request's signature and sign of the envelope on one core of
// this process, measured just before and just after the load (floors.ts).
import type { BenchConfig } from './config.js';
import { cpuText, withCpuWatch } from './cpu.js';
import { PAYEE_RECEIPT_BODY } from './fixtures.js';
import type { LoadResult, PostJob } from './load.js';
import { aroundLoad, floorText, nodeUsPer, signedEnvelopeBytes, signedWriteFloorUs } from './floors.js';
import { createLocalCredential, removeDir, runLoad, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { ms, rate, ratio, type Report } from './report.js';
import { API_PREFIX, type ClientCredential } from './signed-request.js';

const SECTION = '4 POST';
/** Issue 34, target 1: the floor's CPU at least half the node's, per signed durable write. */
const TARGET_RATIO = 0.5;

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

    const { floor, loaded } = await aroundLoad(() => signedWriteFloorUs(floorTimeMs), () => withCpuWatch(running.pid, (onMeasuring) =>
      runLoad<LoadResult & { warmup: LoadResult | null }>(postJob(running, credential, { count: requests, warmupCount, connections }), config.child_timeout_ms, onMeasuring)));
    const { result, cpu } = loaded;

    if (result.warmup !== null) report.line(`    warm-up: ${rate(result.warmup.perSecond)} req/s (${statusText(result.warmup)})`);
    report.line(`    measured: ${result.ok} answered 2xx in ${ms(result.durationMs)} ms (${statusText(result)}; errors ${result.errors}, timeouts ${result.timeouts})`);
    if (cpu !== null) report.line(`    ${cpuText(cpu)}`);
    report.line(`    ${floorText(`node:crypto verify of the request + sign of ${signedEnvelopeBytes()} envelope bytes`, floor)}`);
    report.load({ section: SECTION, figure: `signed POST /receipts, ${connections} connections`, result });
    const nodeUs = nodeUsPer(cpu?.processSeconds ?? null, result.ok);
    const floorNote = `${floor.us.toFixed(0)} us (node:crypto verify + sign, one core)`;
    report.add({ section: SECTION, figure: 'node CPU per write, every thread (us)', value: nodeUs === null ? 'not read' : nodeUs.toFixed(0), floor: floorNote });
    report.add({
      section: SECTION, figure: 'floor CPU / node CPU per write', value: nodeUs === null ? 'not read' : ratio(floor.us / nodeUs), floor: floorNote,
      target: { text: `>= ${TARGET_RATIO}`, met: nodeUs !== null && floor.us / nodeUs >= TARGET_RATIO },
    });
    // Beside it, the throughput against what one core does of the floor alone (no target).
    report.add({ section: SECTION, figure: 'POST req/s / floor writes per s of one core', value: ratio(result.perSecond * floor.us / 1e6), floor: `${rate(1e6 / floor.us)}/s` });
    if (result.non2xx > 0 || result.errors > 0) report.line(`    WARNING: ${result.non2xx} non-2xx answers and ${result.errors} errors; the rate counts 2xx only`);
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}
