// Figure 5: how long a node takes to start on a long log. The data directory is built directly
// through LmdbLog with framed receipt records as a shard writes them ({a, k, e, t}, keyed
// [partition, seq], seq consecutive per partition, records arriving in random partition order).
// Then the node is started four times, each measured from spawn to its "listening" line (every
// record checked: the node answers) and to its "recovered" line (every partition folded); on
// the first two, signed writes are timed while it folds and once it has:
//   1. on the bare log (pure replay);
//   then, after a kill -9, with the snapshots the node's own policy would have left (one every
//   snapshot_every_records records of a partition) and the records after them to replay;
//   2. after a SIGTERM with no writes in between but the timed ones (below);
//   3. after some signed POSTs and a SIGTERM, whose shutdown snapshots the touched partitions.
import { LmdbLog, openEnvironment } from '../src/log/lmdb-log.js';
import { PARTITION_COUNT, partitionOf, type LogEntry, type TableWrite } from '../src/log/log.js';
import { MemoryLog } from '../src/log/memory-log.js';
import { frameRecord, recordCheck } from '../src/log/record.js';
import { headRows } from '../src/reads/rows.js';
import { LOG_FORMAT } from '../src/store.js';
import { lmdbStoreTables } from '../src/log/node-tables.js';
import { foldPartition, type Held } from '../src/actors/fold.js';
import { frameSnapshot } from '../src/actors/snapshot.js';
import { DEFAULT_LIMITS } from '../src/config.js';
import { DECIDERS } from '../src/domain/index.js';
import { newReference } from '../src/protocol/ids.js';
import type { BenchConfig } from './config.js';
import { postJob, statusText } from './http-post.js';
import {
  freshSigningKey,
  issueReceipt,
  PAYEE_RECEIPT_BODY,
  receiptRecord,
  receiptStateRow,
  type IssuedReceipt,
} from './fixtures.js';
import { API_PREFIX, signedPost, type ClientCredential } from './signed-request.js';
import type { LoadResult } from './load.js';
import {
  anonymousMiB,
  createLocalCredential,
  removeDir,
  residentMiB,
  runLoad,
  startNodeProcess,
  tempDir,
  type RunningServer,
} from './processes.js';
import { ms, rate, type Report } from './report.js';

const TARGET_MS = 3_000;
const TOUCH_CONNECTIONS = 64;
/** Writes timed while a start folds its partitions, at most (figure 5). */
const WARMING_WRITES_MAX = 200;
/** How long after a start's recovered line its memory is read again. */
const SETTLE_MS = 2_000;

/**
 * A receipt like `template` under another reference. Signing a million envelopes would take
 * over a minute on this machine, so records are made from a pool of real signed envelopes with
 * the reference swapped in: the bytes have the size and shape the node writes, but the swapped
 * envelopes' signatures and digests no longer match them. Recovery checks neither (it checks
 * each record's CRC and link, which frameRecord() computes over the final bytes).
 */
function withReference(template: IssuedReceipt, reference: string): IssuedReceipt {
  const envelopeText = template.envelopeText.replace(template.reference, reference);
  const events = template.events.map((event) =>
    event.type === 'issued' ? { ...event, reference, envelope: envelopeText } : event,
  );
  return { reference, envelopeText, events };
}

async function buildLog(
  dataDir: string,
  config: BenchConfig,
): Promise<{ bytes: number; ms: number }> {
  const started = performance.now();
  const env = openEnvironment(dataDir);
  const log = new LmdbLog(env);
  const key = freshSigningKey();
  const now = Date.now();
  const templates = Array.from({ length: config.restart.templates }, () => issueReceipt(key, now));
  const seqs = new Array<number>(PARTITION_COUNT).fill(0);
  const checks = new Array<number>(PARTITION_COUNT).fill(0);
  let bytes = 0;
  try {
    // The layout the node reads (store.ts), recorded as its first start would.
    await lmdbStoreTables(env).transaction((w) => w.put('meta', 'log_format', LOG_FORMAT));
    for (let first = 0; first < config.restart.records; first += config.restart.batch_records) {
      const entries: LogEntry[] = [];
      const states: TableWrite[] = [];
      const last = Math.min(config.restart.records, first + config.restart.batch_records);
      for (let i = first; i < last; i++) {
        const issued = withReference(templates[i % templates.length]!, newReference('rcp'));
        const partition = partitionOf(issued.reference);
        const record = receiptRecord(issued, now - config.restart.records + i);
        const framed = frameRecord(record, checks[partition]!);
        checks[partition] = recordCheck(framed);
        bytes += framed.length;
        entries.push({ partition, seq: ++seqs[partition]!, bytes: framed });
        states.push(receiptStateRow(issued, seqs[partition]!));
      }
      // Each partition's head and each receipt's state in the same commit, as the shard writes them.
      const heads = [...new Set(entries.map((e) => e.partition))].map((p) =>
        headRows.head(p, { seq: seqs[p]!, check: checks[p]! }),
      );
      await log.append(entries, [...heads, ...states]);
    }
  } finally {
    await log.close();
  }
  return { bytes, ms: performance.now() - started };
}

/**
 * Writes each partition's snapshot where the node's own policy would have left its last one: the
 * partition's records up to the largest multiple of `every` folded as recovery folds them
 * (foldPartition, over a copy of those records alone) and encoded as a shard encodes it. Records
 * after it are left to replay, as after a kill -9.
 */
async function snapshotsAtPolicy(
  dataDir: string,
  every: number,
): Promise<{ states: number; after: number; ms: number }> {
  const started = performance.now();
  const deciders = new Map(DECIDERS.map((d) => [d.type, d] as const));
  const log = new LmdbLog(openEnvironment(dataDir));
  let states = 0;
  let after = 0;
  try {
    for (let p = 0; p < PARTITION_COUNT; p++) {
      const last = log.lastSeq(p);
      const cut = last - (last % every);
      after += last - cut;
      if (cut === 0) continue;
      const upToCut = new MemoryLog();
      // Read to the end: a range iterator left early keeps its read transaction.
      const entries = [...log.read(p, 0)]
        .filter((r) => r.seq <= cut)
        .map((r) => ({ partition: p, ...r }));
      const head = headRows.head(p, { seq: cut, check: recordCheck(entries.at(-1)!.bytes) });
      await upToCut.append(entries, [head]);
      const held = new Map<string, Held>();
      const hold = (type: string, state: unknown) => ({ type, state });
      const folded = foldPartition(upToCut, deciders, p, { held, hold });
      const aggregates = [...held].map(
        ([key, { type, state }]) => [key, type, state] as [string, string, unknown],
      );
      await log.writeSnapshot(
        p,
        await frameSnapshot({ seq: cut, check: folded.check, aggregates }),
      );
      states += held.size;
    }
  } finally {
    await log.close();
  }
  return { states, after, ms: performance.now() - started };
}

/**
 * One start's lines: listening (every record checked: the node answers), then recovered (every
 * partition folded, in the background or for the commands that needed one first). Waits for the
 * latter, so that what the run does next meets a node as it is once warm.
 */
async function started(
  label: string,
  node: RunningServer,
  report: Report,
  writer?: ClientCredential,
): Promise<number> {
  const checked = JSON.stringify(node.announcement.recovery);
  const pagesRead = node.announcement.data_file_every_page_read_ms;
  const walk =
    pagesRead === undefined
      ? 'the data file taken on its header'
      : `every page in use of the data file read in ${String(pagesRead)} ms`;
  report.line(
    `  ${label}: listening after ${ms(node.startMs)} ms from spawn (recovery_ms ${String(node.announcement.recovery_ms)}, ${walk}, checked ${checked})`,
  );
  if (writer !== undefined) report.line(`    ${await writesWhileWarming(node, writer)}`);
  const recovered = await node.recovered;
  // Read at once and again a little later: a helper thread's heap goes only when the thread ends.
  const rss = residentMiB(node.pid);
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const settled = residentMiB(node.pid);
  const anon = anonymousMiB(node.pid);
  const memory =
    rss === null || settled === null || anon === null
      ? ''
      : `; resident ${rate(rss)} MiB, ${rate(settled)} MiB ${SETTLE_MS / 1000} s later, of which ${rate(anon)} MiB not mapped from files`;
  report.line(
    `    every partition folded after ${ms(recovered.ms)} ms from spawn (recovery ${JSON.stringify(recovered.line.recovery)}${memory})`,
  );
  return recovered.ms;
}

/**
 * Signed `POST /receipts` one after another from the listening line until the node says it has
 * folded every partition (at most WARMING_WRITES_MAX): each new receipt's partition is folded
 * first if the warm-up has not reached it. Then as many again on the warm node, for comparison.
 */
async function writesWhileWarming(node: RunningServer, writer: ClientCredential): Promise<string> {
  let warm = false;
  void node.recovered.then(() => {
    warm = true;
  });
  const timed = async () => {
    const at = performance.now();
    const res = await signedPost(
      node.baseUrl,
      writer,
      `${API_PREFIX}/receipts`,
      PAYEE_RECEIPT_BODY,
    );
    if (res.status !== 201) throw new Error(`a write while warming: ${res.status} ${res.text}`);
    return performance.now() - at;
  };
  const warming: number[] = [];
  while (!warm && warming.length < WARMING_WRITES_MAX) warming.push(await timed());
  await node.recovered;
  const after: number[] = [];
  for (let i = 0; i < warming.length; i++) after.push(await timed());
  const summary = (list: number[]) =>
    `median ${ms(median(list))} ms, max ${ms(Math.max(...list))} ms`;
  return `${warming.length} signed POSTs answered (201) one after another while it folded: ${summary(warming)}; the same count once all folded: ${summary(after)}`;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export async function runRestart(config: BenchConfig, report: Report): Promise<void> {
  const records = config.restart.records;
  report.heading(`5. Restart on a log of ${rate(records)} receipt records`);
  const dataDir = tempDir('restart');
  let node: RunningServer | null = null;
  try {
    const credential = createLocalCredential(dataDir);
    const built = await buildLog(dataDir, config);
    report.line(
      `  built in ${ms(built.ms)} ms: ${rate(built.bytes / 1024 / 1024)} MiB of framed records, ${rate(records / (built.ms / 1000))} records/s`,
    );
    const startNode = () =>
      startNodeProcess({ dataDir, timeoutMs: config.restart.start_timeout_ms });
    const target = (startMs: number) => ({ text: `< ${TARGET_MS} ms`, met: startMs < TARGET_MS });

    node = await startNode();
    const warm = await started('first start', node, report, credential);
    report.add({
      section: '5 restart',
      figure: 'first start, pure replay: ms spawn -> listening',
      value: ms(node.startMs),
      target: target(node.startMs),
    });
    report.add({
      section: '5 restart',
      figure: 'first start, pure replay: ms spawn -> all folded',
      value: ms(warm),
    });
    await node.kill();
    node = null;

    // A node that wrote this log itself would have left a snapshot of each partition every
    // snapshot_every_records records; a kill -9 leaves the records after the last ones to replay.
    const policy = await snapshotsAtPolicy(dataDir, DEFAULT_LIMITS.snapshot_every_records);
    report.line(
      `  kill -9; then the snapshots the node's policy leaves (every ${rate(DEFAULT_LIMITS.snapshot_every_records)} records of a partition): ${rate(policy.states)} states, ${rate(policy.after)} records after them, written in ${ms(policy.ms)} ms`,
    );
    node = await startNode();
    const warmAfterKill = await started(
      'start after a kill -9 between snapshots',
      node,
      report,
      credential,
    );
    report.add({
      section: '5 restart',
      figure: 'start after a kill -9 between snapshots: ms',
      value: ms(node.startMs),
      target: target(node.startMs),
    });
    report.add({
      section: '5 restart',
      figure: 'start after a kill -9 between snapshots: ms -> all folded',
      value: ms(warmAfterKill),
    });
    let stopped = await node.stop();
    node = null;
    report.line(
      `  SIGTERM with no writes since start but the timed ones: stopped in ${ms(stopped.stopMs)} ms (exit ${stopped.code})`,
    );

    node = await startNode();
    await started('second start', node, report);
    report.add({
      section: '5 restart',
      figure: 'second start, after an idle SIGTERM: ms',
      value: ms(node.startMs),
      target: target(node.startMs),
    });

    const touched = await runLoad<LoadResult>(
      postJob(node, credential, {
        count: config.restart.touch_requests,
        warmupCount: 0,
        connections: TOUCH_CONNECTIONS,
      }),
      config.child_timeout_ms,
    );
    report.line(
      `  ${touched.ok} signed POSTs (${statusText(touched)}) to touch the partitions before the next SIGTERM`,
    );
    stopped = await node.stop();
    node = null;
    report.line(
      `  SIGTERM after those writes: stopped in ${ms(stopped.stopMs)} ms (exit ${stopped.code})`,
    );

    node = await startNode();
    await started('third start', node, report);
    report.add({
      section: '5 restart',
      figure: 'third start, after writes + SIGTERM (snapshots): ms',
      value: ms(node.startMs),
      target: target(node.startMs),
    });
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}
