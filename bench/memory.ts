// Figure 18 (issue 33): the node's own memory after writing many receipts. The node keeps every
// aggregate it has touched folded in memory for good, so its memory grows with each receipt it
// writes. For each count of BENCH_MEMORY_COUNTS, and for none (the baseline), a fresh node on a
// fresh data directory (the embedded LMDB store) is sent that many signed durable
// `POST /receipts`, each of which must answer 201, then left idle for the same time (by default
// past the six minutes a signed request is remembered against replays, P5, and past the idle
// time after which an aggregate leaves memory: what is left is what history costs, not the
// working set of the last minutes), and read:
// RssAnon from /proc (the process's own memory, every thread's, without the pages of the mapped
// LMDB file), `path_aggregates_in_memory` from its operator listener, and its CPU seconds since
// it started. The nodes are written to one after another and left running, so that their idle
// times overlap. The target (issue 33): RssAnon after the largest count at most 1.2 times that
// after the smallest, both after the same idle time.
import type { BenchConfig } from './config.js';
import { processCpuSeconds } from './cpu.js';
import { PAYEE_RECEIPT_BODY } from './fixtures.js';
import { statusText } from './http-post.js';
import {
  anonymousMiB,
  BYTES_PER_MIB,
  createLocalCredential,
  memoryFigures,
  metricsText,
  removeDir,
  residentMiB,
  startNodeProcess,
  tempDir,
  type RunningServer,
} from './processes.js';
import { ms, rate, ratio, type Report } from './report.js';
import { fixedPostPlan } from './request-plans.js';
import { requireAllOk, runSignedLoad } from './signed-load.js';
import { API_PREFIX, type ClientCredential } from './signed-request.js';

const SECTION = '18 memory';
const TARGET = 1.2;

/** One node's figures after its receipts and the idle time. */
interface Reading {
  receipts: number;
  anonMiB: number;
  rssMiB: number;
  aggregates: number;
  /** The workers' JavaScript heaps in use and held, the front end's in use, in MiB. */
  workersHeapMiB: number;
  workersHeapHeldMiB: number;
  frontHeapMiB: number;
  /** The front end's memory outside its heap held by JavaScript objects (the replay ring's arrays among it), in MiB. */
  frontExternalMiB: number;
  /** The workers' memory outside their heaps held by JavaScript objects, in MiB. */
  workersExternalMiB: number;
  /** Signed requests of the replay window the front end remembers (P5: six minutes of them). */
  replayEntries: number;
  /** CPU seconds of the node process since it started, every thread, user and system. */
  cpuSeconds: number;
  /** Seconds the loads took, from each one's first request to its last answer. */
  writeSeconds: number;
}

const pause = (msToWait: number) => new Promise<void>((resolve) => { setTimeout(resolve, msToWait); });

async function nodeFigures(node: RunningServer) {
  return memoryFigures(await metricsText(node));
}

/**
 * Sends `receipts` signed durable receipts in loads of at most `batch_requests` (each load's
 * requests are signed 1 ms apart, so a load must end inside the node's timestamp window); fails
 * unless every one is answered 201. Returns the seconds the loads took.
 */
async function writeReceipts(config: BenchConfig, report: Report, node: RunningServer, credential: ClientCredential, receipts: number): Promise<number> {
  const { batch_requests: batch, connections } = config.memory;
  const plan = fixedPostPlan(`${API_PREFIX}/receipts`, PAYEE_RECEIPT_BODY);
  const loads = Math.ceil(receipts / batch);
  let seconds = 0;
  for (let written = 0, n = 1; written < receipts; n++) {
    const count = Math.min(batch, receipts - written);
    const what = `load ${n}/${loads}`;
    const run = await runSignedLoad(config, node, {
      credentials: [credential], plan, load: { count, warmup: 0, connections: Math.min(connections, count) }, idempotency: true,
    });
    const { result } = run;
    requireAllOk(run, what);
    if (result.statusCounts['201'] !== count) throw new Error(`${what}: ${count} sent, answered ${statusText(result)}; each must answer 201`);
    written += count;
    seconds += result.durationMs / 1000;
    report.line(`    ${what}: ${rate(count)} answered 201 in ${ms(result.durationMs)} ms, ${rate(result.perSecond)}/s, p99 ${ms(result.latencyP99Ms)} ms`);
  }
  return seconds;
}

/** A node with its receipts written, idle from `idleFrom` (performance.now()). */
interface Written {
  node: RunningServer;
  dataDir: string;
  receipts: number;
  writeSeconds: number;
  idleFrom: number;
}

/** A fresh node on a fresh directory, and `receipts` receipts written to it; left running. */
async function startAndWrite(config: BenchConfig, report: Report, receipts: number, started: Written[]): Promise<Written> {
  const dataDir = tempDir(`memory-${receipts}`);
  const credential = createLocalCredential(dataDir);
  const node = await startNodeProcess({ dataDir, timeoutMs: config.child_timeout_ms });
  const written: Written = { node, dataDir, receipts, writeSeconds: 0, idleFrom: performance.now() };
  started.push(written);
  if (receipts > 0) {
    report.line(`  ${rate(receipts)} receipts:`);
    written.writeSeconds = await writeReceipts(config, report, node, credential, receipts);
    written.idleFrom = performance.now();
  }
  return written;
}

/** A node's figures once it has been idle `idle_ms`; then it is stopped and its directory removed. */
async function readWhenIdle(config: BenchConfig, written: Written): Promise<Reading> {
  const { node, dataDir, receipts, writeSeconds } = written;
  try {
    await pause(Math.max(0, written.idleFrom + config.memory.idle_ms - performance.now()));
    // Memory first: the scrape itself allocates, in the front end and in the workers.
    const anonMiB = anonymousMiB(node.pid);
    const rssMiB = residentMiB(node.pid);
    if (anonMiB === null || rssMiB === null) throw new Error('cannot read the node\'s memory from /proc');
    const cpuSeconds = processCpuSeconds(node.pid);
    return { receipts, anonMiB, rssMiB, ...(await nodeFigures(node)), cpuSeconds, writeSeconds };
  } finally {
    await node.stop();
    removeDir(dataDir);
  }
}

const mib = (value: number) => value.toFixed(1);

function readingText(reading: Reading): string {
  return `RssAnon ${mib(reading.anonMiB)} MiB (VmRSS ${mib(reading.rssMiB)} MiB), ${rate(reading.aggregates)} aggregates in memory, workers' heaps ${mib(reading.workersHeapMiB)} MiB in use of ${mib(reading.workersHeapHeldMiB)} MiB held and ${mib(reading.workersExternalMiB)} MiB external, front end's ${mib(reading.frontHeapMiB)} MiB in use and ${mib(reading.frontExternalMiB)} MiB external, ${rate(reading.replayEntries)} requests remembered against replays, ${reading.cpuSeconds.toFixed(1)} CPU s since start`;
}

export async function runMemory(config: BenchConfig, report: Report): Promise<void> {
  const { counts, idle_ms: idleMs, connections, batch_requests: batch } = config.memory;
  const idle = `${idleMs / 1000} s idle`;
  report.heading('18. The node\'s own memory after writing receipts (issue 33)');
  report.line(`  a fresh node for each count: signed durable POST /receipts over ${connections} connections, in loads of at most ${rate(batch)}, then ${idle}; an empty node for the baseline. The nodes are written to one after another and left running: each idles from its own last answer, beside the others`);
  const started: Written[] = [];
  const reads: Promise<Reading>[] = [];
  try {
    // Each node is read on its own timer, idle_ms after its last answer, while the next is written.
    for (const receipts of [0, ...counts]) {
      const written = await startAndWrite(config, report, receipts, started);
      const read = readWhenIdle(config, written);
      // Seen by Promise.all below; meanwhile a failure is not an unhandled rejection.
      read.catch(() => undefined);
      reads.push(read);
    }
    const [empty, ...readings] = await Promise.all(reads);
    report.line(`  empty node, ${idle} after listening: ${readingText(empty!)}`);
    report.add({ section: SECTION, figure: `RssAnon of an empty node, ${idle}`, value: `${mib(empty!.anonMiB)} MiB` });
    for (const reading of readings) addReading(report, reading, empty!, idle);
    if (readings.length < 2) return;
    const first = readings[0]!;
    const last = readings[readings.length - 1]!;
    const grown = last.anonMiB / first.anonMiB;
    report.add({
      section: SECTION, figure: `RssAnon after ${rate(last.receipts)} / after ${rate(first.receipts)} receipts, ${idle}`, value: ratio(grown),
      target: { text: `<= ${TARGET}`, met: grown <= TARGET },
    });
  } finally {
    // Every node, read or not (a write failed): stop is idempotent, and a reading still waiting
    // then fails, seen by nobody.
    for (const { node, dataDir } of started) {
      await node.stop();
      removeDir(dataDir);
    }
  }
}

function addReading(report: Report, reading: Reading, empty: Reading, idle: string): void {
  const { receipts } = reading;
  const cpuPerReceipt = ((reading.cpuSeconds - empty.cpuSeconds) * 1000) / receipts;
  report.line(`  ${rate(receipts)} receipts, after ${idle}: ${readingText(reading)}; written at ${rate(receipts / reading.writeSeconds)}/s, ${cpuPerReceipt.toFixed(3)} CPU ms per receipt`);
  const perReceipt = ((reading.anonMiB - empty.anonMiB) * BYTES_PER_MIB) / receipts;
  report.add({ section: SECTION, figure: `RssAnon after ${rate(receipts)} receipts, ${idle}`, value: `${mib(reading.anonMiB)} MiB` });
  report.add({ section: SECTION, figure: `aggregates in memory after ${rate(receipts)} receipts`, value: rate(reading.aggregates) });
  report.add({ section: SECTION, figure: `RssAnon growth per receipt over the empty node, ${rate(receipts)} receipts`, value: `${rate(perReceipt)} bytes` });
}
