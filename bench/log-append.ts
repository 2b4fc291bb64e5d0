// Figure 2: durable appends to the LMDB log (P14: an append resolves once flushed). Many
// appenders in flight share group commits; one appender awaiting each append shows what one
// commit with its sync costs. Records are real framed receipt records.
import { LmdbLog, openEnvironment, type LmdbEnvironment } from '../src/log/lmdb-log.js';
import { PARTITION_COUNT, type Log, type LogEntry } from '../src/log/log.js';
import { frame } from '../src/log/record.js';
import type { BenchConfig } from './config.js';
import { freshSigningKey, issueReceipt, receiptRecord } from './fixtures.js';
import { removeDir, tempDir } from './processes.js';
import { ms, quantile, rate, type Report } from './report.js';

interface AppendRun {
  perSecond: number;
  latenciesMs: number[];
}

export type Append = (entry: LogEntry) => Promise<void>;

/**
 * `records` appends of one record each, `inFlight` at a time; each appender awaits its own. Each
 * partition's records follow on from its last (`nextSeq` holds each one's next, and moves on):
 * the cluster's log refuses a commit that leaves a gap (issue 29).
 */
export async function appendMany(append: Append, bytes: Buffer, records: number, inFlight: number, nextSeq: number[]): Promise<AppendRun> {
  const latenciesMs: number[] = [];
  let next = 0;
  const appender = async () => {
    while (next < records) {
      const i = next++;
      const partition = i % PARTITION_COUNT;
      const entry = { partition, seq: nextSeq[partition]!++, bytes };
      const started = performance.now();
      await append(entry);
      latenciesMs.push(performance.now() - started);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(inFlight, records) }, appender));
  return { perSecond: records / ((performance.now() - started) / 1000), latenciesMs };
}

/** Each partition's next seq in a fresh log. */
export const firstSeqs = (): number[] => Array.from({ length: PARTITION_COUNT }, () => 1);

/**
 * Runs `measure` on a fresh LMDB log in a directory of its own, with the framed bytes of a
 * receipt's record to append (the largest record a commit of a lookup comes near), then closes
 * and removes the log.
 */
async function onFreshLog<T>(prefix: string, measure: (log: LmdbLog, bytes: Buffer) => Promise<T>): Promise<T> {
  const dir = tempDir(prefix);
  const log = new LmdbLog(openEnvironment(dir));
  try {
    const now = Date.now();
    return await measure(log, frame(receiptRecord(issueReceipt(freshSigningKey(), now), now)));
  } finally {
    await log.close();
    removeDir(dir);
  }
}

/**
 * The disk's floor for anything answered once durable: `count` appends of one record, each
 * awaited alone with `gapMs` between them (no group commit to share), in a fresh LMDB log.
 */
export function syncedCommitLatencies(count: number, gapMs: number): Promise<number[]> {
  return onFreshLog('commit-floor', async (log, bytes) => {
    const latenciesMs: number[] = [];
    for (let seq = 1; seq <= count; seq++) {
      const started = performance.now();
      await log.append([{ partition: 0, seq, bytes }], []);
      latenciesMs.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, gapMs));
    }
    return latenciesMs;
  });
}

/**
 * The disk's floor for answers paced as a load is (issue 34, target 4): `count` records falling
 * due at `perSecond`, an even schedule, in a fresh LMDB log; every record due while a commit is
 * under way goes into the next one (as the node groups what waits), and each record's latency
 * runs from its due time to its commit.
 */
export function pacedCommitLatencies(count: number, perSecond: number): Promise<number[]> {
  return onFreshLog('commit-paced', async (log, bytes) => {
    const latenciesMs: number[] = [];
    const start = performance.now() + 20;
    const due = (i: number) => start + (i * 1000) / perSecond;
    let seq = 0;
    for (let next = 0; next < count;) {
      const wait = due(next) - performance.now();
      if (wait > 0) {
        await new Promise((resolve) => (wait > 2 ? setTimeout(resolve, wait - 1) : setImmediate(resolve)));
        continue;
      }
      const at = performance.now();
      const batch: number[] = [];
      for (; next < count && due(next) <= at; next++) batch.push(due(next));
      await log.append(batch.map(() => ({ partition: 0, seq: ++seq, bytes })), []);
      const done = performance.now();
      for (const d of batch) latenciesMs.push(done - d);
    }
    return latenciesMs;
  });
}

export function latencyText(latencies: readonly number[]): string {
  return `p50 ${ms(quantile(latencies, 0.5))} ms, p99 ${ms(quantile(latencies, 0.99))} ms`;
}

/** The same commit as LmdbLog.append, acknowledged on the transaction's own promise. */
function commitOnly(env: LmdbEnvironment): Append {
  return (entry) => env.root.transaction(() => { env.log.put([entry.partition, entry.seq], entry.bytes); }).then(() => undefined);
}

export interface AppendFigures {
  many: number;
  single: number;
  manyLatency: string;
  singleLatency: string;
  /** The record appended, framed. */
  bytes: Buffer;
  /** The first seq the run left unused in each partition. */
  /** Each partition's next seq after the run. */
  nextSeq: number[];
}

/** One log's run: a warm-up, then appends in flight, then one at a time; the seq after them. */
export async function durableAppends(log: Log, config: BenchConfig): Promise<AppendFigures> {
  const now = Date.now();
  const bytes = frame(receiptRecord(issueReceipt(freshSigningKey(), now), now));
  const {
    concurrent_in_flight: inFlight,
    concurrent_records: records,
    single_records: single,
  } = config.log;
  const append = (entry: { partition: number; seq: number; bytes: Buffer }) =>
    log.append([entry], []);
  const seq = firstSeqs();
  const warm = Math.min(records, 2_000);
  await appendMany(append, bytes, warm, inFlight, seq);
  const many = await appendMany(append, bytes, records, inFlight, seq);
  const one = await appendMany(append, bytes, single, 1, seq);
  return {
    many: many.perSecond,
    single: one.perSecond,
    manyLatency: latencyText(many.latenciesMs),
    singleLatency: latencyText(one.latenciesMs),
    bytes,
    nextSeq: seq,
  };
}

export async function runLogAppend(config: BenchConfig, report: Report): Promise<void> {
  report.heading('2. Log append with durable acknowledgement (LmdbLog over LMDB in a temp dir)');
  const dir = tempDir('log');
  const env = openEnvironment(dir);
  const log = new LmdbLog(env);
  try {
    const { concurrent_in_flight: inFlight, concurrent_records: records, single_records: single } = config.log;
    const durable = await durableAppends(log, config);
    const { bytes } = durable;
    const seq = durable.nextSeq;
    report.line(`  record: ${bytes.length} bytes framed; ${records} records with ${inFlight} in flight; ${single} one at a time`);
    report.add({ section: '2 log', figure: `records/s, ${inFlight} appenders in flight (${durable.manyLatency})`, value: rate(durable.many) });
    report.add({ section: '2 log', figure: `single appender, each awaited: mean latency ms (${durable.singleLatency})`, value: ms(1000 / durable.single) });
    report.add({ section: '2 log', figure: 'single appender records/s', value: rate(durable.single) });

    // Contrast: the same commits acknowledged on the transaction promise alone (with
    // overlappingSync off, LMDB's commit includes its sync), to show what `await flushed` adds.
    const committed = await appendMany(commitOnly(env), bytes, records, inFlight, seq);
    report.add({ section: '2 log', figure: `contrast: ${inFlight} in flight, acknowledged on commit only (${latencyText(committed.latenciesMs)})`, value: rate(committed.perSecond) });
    const oneCommitted = await appendMany(commitOnly(env), bytes, single, 1, seq);
    report.add({ section: '2 log', figure: 'contrast: single appender, commit only: mean latency ms', value: ms(1000 / oneCommitted.perSecond) });
  } finally {
    await log.close();
    removeDir(dir);
  }
}
