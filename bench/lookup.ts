// Figure 8 (issue 5): lookups against a large directory.
//   a. The directory. Its rows are written straight into a data directory with LmdbLog.write,
//      exactly as a node that registered the identifiers itself would hold them: a `directory`
//      row per key (`${identifier_hash}/idn/${id}` -> frame({t, v})), from which the index is
//      built at start, and the change feed's `feed` and `feed_state` rows for that key (a node
//      appends them when the key enters its directory; without them the start would append one
//      feed entry per key, see the README). The keys are `user<k>@example.com`, hashed with the
//      network pepper the node is given (PATH_PEPPER), so the load generator can ask for them by
//      their clear value. Index memory per key: the node does not report it, so it is read from
//      outside as the difference in anonymous resident memory (RssAnon: heaps, typed arrays,
//      native allocations; not the pages of the mapped LMDB file) between a node started on an
//      empty directory and one started on the full one, divided by the key count; read twice:
//      after a settling pause (what the node keeps as it goes on running: the garbage of its
//      start stays until the old generation fills again), and after a full garbage collection,
//      forced from outside by V8's heap snapshot signal (the snapshot, written to a temporary
//      directory, is discarded). Beside them, the table's own size per key
//      (DirectoryIndex.tableBytes / size) of the same index built in this process.
//   b. Unsigned batch lookups (500 clear identifiers a call, about half of them in the
//      directory), keys per second through HTTP, against what one core of this process does per
//      second of the same work for the same keys: normalise, hash, and look up in an index of
//      the same size.
//   c. Signed batch lookups, keys per second, against the rate at which one core signs a
//      sonar_answer (signObject).
//   d. Single lookups (POST /sonar/lookup) under load: latency p50/p99 and rate; then the same
//      load spread across several member credentials, since each member's lookups are charged
//      to one budget aggregate.
//   f. The start after a kill -9 under write load, its directory image taken while it ran
//      (crash-start.ts; issue 34, target 6).
import { randomBytes } from 'node:crypto';
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { signAnswers } from '../src/domain/budget/budget.js';
import { DirectoryIndex } from '../src/directory/index.js';
import { LmdbLog, openEnvironment } from '../src/log/lmdb-log.js';
import type { TableWrite } from '../src/log/log.js';
import { frame } from '../src/log/record.js';
import { identifierHash, normaliseIdentifier } from '../src/protocol/identifiers.js';
import { isoTime } from '../src/protocol/time.js';
import type { BenchConfig, SignedLoad } from './config.js';
import { freshSigningKey } from './fixtures.js';
import { nodeUsPer } from './floors.js';
import { measureTasks } from './micro.js';
import { runCrashStart } from './crash-start.js';
import { anonymousMiB, createCredential, createLocalCredential, removeDir, residentMiB, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { ms, rate, ratio, type Report } from './report.js';
import { lookupIdentifiers, plannedRequest, presentEmail, type LookupPlan } from './request-plans.js';
import { describeRun, requireAllOk, runSignedLoad, type SignedRun } from './signed-load.js';
import { signedPost, type ClientCredential } from './signed-request.js';

const SECTION = '8 lookup';
/** Issue 34, target 3: raw batches at least 0.9 of the floor (normalise, hash and find alone). */
const UNSIGNED_TARGET = 0.9;
const SIGNED_TARGET = 0.8;
const START_TARGET_MS = 10_000;
/** The node's budget flags: an allowance no run comes near (the flag's maximum). */
export const NODE_ARGS = ['--lookup-budget-base', '1000000000'];
/** The node's environment for a directory built with `pepper`: the network pepper it hashes with. */
export const pepperEnv = (pepper: Buffer): Record<string, string> => ({ PATH_PEPPER: pepper.toString('hex'), PATH_PEPPER_VERSION: 'bench-1' });
/** Digits of a feed sequence number in its key (src/network/feed.ts). */
const FEED_SEQ_DIGITS = 16;

export interface BuiltDirectory {
  /** The same keys in an index built in this process (for the bare cost and the table size). */
  index: DirectoryIndex;
  ms: number;
  hashMs: number;
}

/**
 * Writes the directory of `keys` emails into `dataDir`: hashes first (grouped by their first
 * byte), then each group sorted and written in key order, so that LMDB appends rather than
 * splitting pages at random. Feed sequence numbers follow the same order.
 */
export async function buildDirectory(dataDir: string, pepper: Buffer, keys: number, batchRows: number): Promise<BuiltDirectory> {
  const started = performance.now();
  const index = new DirectoryIndex(keys);
  const holder = index.holderId({ member: 'local', endpoint: '' });
  const groups: string[][] = Array.from({ length: 256 }, () => []);
  for (let k = 0; k < keys; k++) {
    const hash = identifierHash(pepper, 'email', presentEmail(k));
    index.set(hash, 'email', holder, 'network');
    groups[parseInt(hash.slice(0, 2), 16)]!.push(hash);
  }
  const hashMs = performance.now() - started;
  const log = new LmdbLog(openEnvironment(dataDir));
  const directoryRow = frame({ t: 'email', v: 'network' });
  const at = isoTime(Date.now());
  try {
    let seq = 0;
    let writes: TableWrite[] = [];
    for (const group of groups) {
      group.sort();
      for (const hash of group) {
        seq++;
        writes.push(
          { table: 'directory', key: `${hash}/idn/idn_${seq.toString(16).padStart(32, '0')}`, bytes: directoryRow },
          { table: 'feed', key: String(seq).padStart(FEED_SEQ_DIGITS, '0'), bytes: frame({ t: 'email', h: hash, v: 'network', at }) },
          { table: 'feed_state', key: hash, bytes: frame({ v: 'network', seq, t: 'email' }) },
        );
        if (writes.length >= 3 * batchRows) {
          await log.write(writes);
          writes = [];
        }
      }
      group.length = 0;
    }
    if (writes.length > 0) await log.write(writes);
  } finally {
    await log.close();
  }
  return { index, ms: performance.now() - started, hashMs };
}

interface Memory {
  anonMiB: number;
  rssMiB: number;
}

function memoryOf(node: RunningServer): Memory {
  const anonMiB = anonymousMiB(node.pid);
  const rssMiB = residentMiB(node.pid);
  if (anonMiB === null || rssMiB === null) throw new Error('cannot read the node\'s memory from /proc');
  return { anonMiB, rssMiB };
}

const pause = (msToWait: number) => new Promise<void>((resolve) => { setTimeout(resolve, msToWait); });

/** The runtime options of a node whose full garbage collection can be asked for from outside. */
const collectable = (snapshotDir: string) => [`--heapsnapshot-signal=${GC_SIGNAL}`, `--diagnostic-dir=${snapshotDir}`];
const GC_SIGNAL = 'SIGUSR2';
const SNAPSHOT_WAIT_MS = 120_000;

/**
 * Forces a full garbage collection in the node: V8 collects before it writes a heap snapshot.
 * Waits until the snapshot file has stopped growing and the node answers again, then removes it.
 */
async function collectGarbage(node: RunningServer, snapshotDir: string): Promise<void> {
  process.kill(node.pid, GC_SIGNAL);
  const deadline = performance.now() + SNAPSHOT_WAIT_MS;
  let size = -1;
  for (;;) {
    await pause(500);
    const files = readdirSync(snapshotDir).filter((f) => f.endsWith('.heapsnapshot'));
    const current = files.length === 0 ? -1 : statSync(join(snapshotDir, files[0]!)).size;
    if (current > 0 && current === size) break;
    if (performance.now() > deadline) throw new Error('the node wrote no heap snapshot');
    size = current;
  }
  const answered = await fetch(`${node.baseUrl}/.well-known/path-keys`);
  await answered.arrayBuffer();
  for (const f of readdirSync(snapshotDir)) rmSync(join(snapshotDir, f), { force: true });
}

interface Started {
  node: RunningServer;
  /** After the settling pause, and after a full garbage collection. */
  settled: Memory;
  collected: Memory;
}

/** Starts a node, lets it settle, reads its memory, forces a full collection, reads it again. */
async function startAndMeasure(config: BenchConfig, dataDir: string, snapshotDir: string, env: Record<string, string>): Promise<Started> {
  const node = await startNodeProcess({ dataDir, timeoutMs: config.lookup.start_timeout_ms, env, args: NODE_ARGS, runtimeArgs: collectable(snapshotDir) });
  try {
    await pause(config.lookup.settle_ms);
    const settled = memoryOf(node);
    await collectGarbage(node, snapshotDir);
    await pause(config.lookup.settle_ms / 4);
    return { node, settled, collected: memoryOf(node) };
  } catch (error) {
    await node.stop();
    throw error;
  }
}

function memoryText(m: Memory): string {
  return `anonymous ${rate(m.anonMiB)} MiB, resident ${rate(m.rssMiB)} MiB`;
}

function lookupPlan(config: BenchConfig, batch: number | null, signed: boolean, seed: number): LookupPlan {
  return { kind: 'lookup', batch, signed, presentKeys: config.lookup.index_keys, presentShare: config.lookup.present_share, seed };
}

/** Every request of a load: the warm-up ones, the measured ones and the spares. */
const requestsOf = (load: SignedLoad) => load.warmup + load.count + 8 * load.connections;

/** Asks the node for the first batch of the plan and checks every answer against this process's index. */
async function checkAnswers(node: RunningServer, credential: ClientCredential, plan: LookupPlan, pepper: Buffer, index: DirectoryIndex): Promise<{ found: number; of: number }> {
  const planned = plannedRequest(plan, 0);
  const res = await signedPost(node.baseUrl, credential, planned.target, JSON.parse(planned.body.toString('utf8')));
  if (res.status !== 200) throw new Error(`the check batch answered ${res.status}: ${res.text.slice(0, 300)}`);
  const results = (JSON.parse(res.text) as { results: { found: boolean; identifier_hash: string }[] }).results;
  const identifiers = lookupIdentifiers(plan, 0);
  let found = 0;
  results.forEach((r, i) => {
    const hash = identifierHash(pepper, 'email', identifiers[i]!);
    const expected = index.find(hash, 'email') !== null;
    if (r.identifier_hash !== hash || r.found !== expected) throw new Error(`lookup answer ${i} does not match the directory (found ${r.found}, expected ${expected})`);
    if (r.found) found++;
  });
  return { found, of: results.length };
}

/** Keys per second one core normalises, hashes and looks up, over the keys of the plan's requests. */
function bareKeysPerSecond(plan: LookupPlan, requests: number, pepper: Buffer, index: DirectoryIndex, timeMs: number): { perSecond: number; foundShare: number } {
  const batches = Array.from({ length: requests }, (_, i) => lookupIdentifiers(plan, i));
  const keysPerBatch = batches[0]!.length;
  let next = 0;
  let found = 0;
  let asked = 0;
  const [task] = measureTasks({
    'normalise + hash + find, one batch': () => {
      for (const identifier of batches[next++ % batches.length]!) {
        const normalised = normaliseIdentifier('email', identifier);
        if (!normalised.ok) throw new Error('a planned identifier does not normalise');
        if (index.find(identifierHash(pepper, 'email', normalised.value), 'email') !== null) found++;
        asked++;
      }
    },
  }, timeMs);
  return { perSecond: task!.perSecond * keysPerBatch, foundShare: found / asked };
}

/** sonar_answer objects signed per second on one core (signAnswers, as the workers sign them), one at a time. */
function signingRate(timeMs: number): number {
  const key = freshSigningKey();
  const answer = {
    identifier_type: 'email', identifier_hash: randomBytes(32).toString('hex'), found: true, member: 'local', endpoint: 'http://127.0.0.1:40000', nonce: null,
  };
  const [task] = measureTasks({ 'signAnswers(1 sonar_answer)': () => { signAnswers([answer], 'local', isoTime(Date.now()), key); } }, timeMs);
  return task!.perSecond;
}

export async function runLookup(config: BenchConfig, report: Report): Promise<void> {
  const keys = config.lookup.index_keys;
  report.heading(`8. Lookups against a directory of ${rate(keys)} keys`);
  const pepper = randomBytes(32);
  const env = pepperEnv(pepper);
  const emptyDir = tempDir('lookup-empty');
  const fullDir = tempDir('lookup-full');
  const snapshotDir = tempDir('lookup-snapshots');
  let node: RunningServer | null = null;
  try {
    // a. The directory, the start on it, and memory per key.
    createLocalCredential(emptyDir);
    const local = createLocalCredential(fullDir);
    const members = Array.from({ length: config.lookup.single_members }, (_, i) => createCredential(fullDir, `member-${i + 1}`, false));
    const built = await buildDirectory(fullDir, pepper, keys, config.lookup.build_batch_rows);
    const { index } = built;
    report.line(`  built in ${ms(built.ms)} ms (hashing ${ms(built.hashMs)} ms): ${rate(keys)} directory rows and as many feed and feed_state rows, ${rate(keys / (built.ms / 1000))} keys/s`);

    const empty = await startAndMeasure(config, emptyDir, snapshotDir, env);
    await empty.node.stop();
    report.line(`  node on an empty directory: ${memoryText(empty.settled)} ${config.lookup.settle_ms} ms after "listening"; ${memoryText(empty.collected)} after a full collection`);
    const full = await startAndMeasure(config, fullDir, snapshotDir, env);
    node = full.node;
    const announced = node.announcement;
    report.line(`  node on the full directory: listening after ${ms(node.startMs)} ms (recovery_ms ${String(announced.recovery_ms)}, directory_rows ${String(announced.directory_rows)}, directory_keys ${String(announced.directory_keys)})`);
    report.line(`    ${memoryText(full.settled)} ${config.lookup.settle_ms} ms after "listening"; ${memoryText(full.collected)} after a full collection`);
    if (announced.directory_keys !== keys) throw new Error(`the node loaded ${String(announced.directory_keys)} keys, not ${keys}`);
    const perKey = (a: Memory, b: Memory) => `${(((a.anonMiB - b.anonMiB) * 1024 * 1024) / keys).toFixed(1)} bytes`;
    report.add({ section: SECTION, figure: `first start on ${rate(keys)} keys (no image, index rebuilt from the table): ms spawn -> listening`, value: ms(node.startMs) });
    report.add({ section: SECTION, figure: `node memory per key as started (RssAnon difference / keys, ${config.lookup.settle_ms / 1000} s after listening)`, value: perKey(full.settled, empty.settled) });
    report.add({ section: SECTION, figure: 'node memory per key after a full garbage collection (same)', value: perKey(full.collected, empty.collected) });
    report.add({ section: SECTION, figure: `index table per key (DirectoryIndex.tableBytes / size, ${rate(index.tableBytes / 1024 / 1024)} MiB)`, value: `${(index.tableBytes / index.size).toFixed(1)} bytes` });

    // The SIGTERM writes the directory image; the next start takes the index whole from it.
    const stopped = await node.stop();
    node = null;
    report.line(`  SIGTERM: stopped in ${ms(stopped.stopMs)} ms (exit ${stopped.code}), writing the directory image`);
    node = await startNodeProcess({ dataDir: fullDir, timeoutMs: config.lookup.start_timeout_ms, env, args: NODE_ARGS });
    const again = node.announcement;
    report.line(`  restart on the full directory: listening after ${ms(node.startMs)} ms (recovery_ms ${String(again.recovery_ms)}, directory_image ${String(again.directory_image)}, directory_keys ${String(again.directory_keys)})`);
    if (again.directory_image !== 'used' || again.directory_keys !== keys) throw new Error(`the restart did not take the ${keys} keys from the image (${String(again.directory_image)}, ${String(again.directory_keys)} keys)`);
    report.add({ section: SECTION, figure: `start on ${rate(keys)} keys from the directory image (after a SIGTERM): ms spawn -> listening`, value: ms(node.startMs), target: { text: `< ${START_TARGET_MS} ms`, met: node.startMs < START_TARGET_MS } });

    // b. Unsigned batches against the bare in-process cost of the same keys.
    const unsigned = lookupPlan(config, config.lookup.batch_items, false, 0x5eed01);
    const checked = await checkAnswers(node, local, unsigned, pepper, index);
    report.line(`  check: the first batch's ${checked.of} answers match this process's index (${checked.found} found)`);
    const unsignedLoad = config.lookup.unsigned;
    const floorTime = config.lookup.floor_time_ms;
    const bareBefore = bareKeysPerSecond(unsigned, requestsOf(unsignedLoad), pepper, index, floorTime);
    report.line(`  unsigned: ${unsignedLoad.count} batches of ${config.lookup.batch_items} (after ${unsignedLoad.warmup} warm-up), ${unsignedLoad.connections} connections, one member`);
    const unsignedRun = await runSignedLoad(config, node, { credentials: [local], plan: unsigned, load: unsignedLoad, idempotency: false });
    const bareAfter = bareKeysPerSecond(unsigned, requestsOf(unsignedLoad), pepper, index, floorTime);
    describeRun(report, unsignedRun, 'unsigned batches');
    requireAllOk(unsignedRun, 'unsigned batch lookups');
    const bare = (bareBefore.perSecond + bareAfter.perSecond) / 2;
    report.line(`    bare, one core: ${rate(bareBefore.perSecond)} keys/s before the load, ${rate(bareAfter.perSecond)} after (${(100 * bareBefore.foundShare).toFixed(0)} % of the keys found)`);
    const unsignedKeys = unsignedRun.result.perSecond * config.lookup.batch_items;
    report.add({ section: SECTION, figure: `unsigned batch keys/s through HTTP (p50 ${ms(unsignedRun.result.latencyP50Ms)} ms, p99 ${ms(unsignedRun.result.latencyP99Ms)} ms a call)`, value: rate(unsignedKeys) });
    report.add({ section: SECTION, figure: 'bare keys/s: normalise + hash + find, one core', value: rate(bare) });
    report.add({ section: SECTION, figure: 'unsigned HTTP / bare', value: ratio(unsignedKeys / bare), floor: `${rate(bare)} keys/s`, target: { text: `>= ${UNSIGNED_TARGET}`, met: unsignedKeys / bare >= UNSIGNED_TARGET } });
    // Beside the target's rates, the CPU per key, steadier on shared cores (no target: the
    // node may spend a second core where the floor has one).
    const nodeUs = nodeUsPer(unsignedRun.cpu?.processSeconds ?? null, unsignedRun.result.ok * config.lookup.batch_items);
    const bareUs = 1e6 / bare;
    const bareNote = `${bareUs.toFixed(2)} us a key (bare, one core)`;
    report.add({ section: SECTION, figure: 'unsigned batches: node CPU per key, every thread (us)', value: nodeUs === null ? 'not read' : nodeUs.toFixed(2), floor: bareNote });
    report.add({ section: SECTION, figure: 'unsigned batches: bare CPU / node CPU per key', value: nodeUs === null ? 'not read' : ratio(bareUs / nodeUs), floor: bareNote });

    // c. Signed batches against the raw signing rate.
    const signedLoad = config.lookup.signed;
    const signBefore = signingRate(floorTime);
    report.line(`  signed: ${signedLoad.count} batches of ${config.lookup.batch_items} with signed: true (after ${signedLoad.warmup} warm-up), ${signedLoad.connections} connections`);
    const signedRun = await runSignedLoad(config, node, { credentials: [local], plan: lookupPlan(config, config.lookup.batch_items, true, 0x5eed02), load: signedLoad, idempotency: false });
    const signAfter = signingRate(floorTime);
    describeRun(report, signedRun, 'signed batches');
    requireAllOk(signedRun, 'signed batch lookups');
    const signing = (signBefore + signAfter) / 2;
    report.line(`    signObject(sonar_answer), one core: ${rate(signBefore)}/s before the load, ${rate(signAfter)}/s after`);
    const signedKeys = signedRun.result.perSecond * config.lookup.batch_items;
    report.add({ section: SECTION, figure: `signed batch keys/s through HTTP (p50 ${ms(signedRun.result.latencyP50Ms)} ms a call)`, value: rate(signedKeys) });
    report.add({ section: SECTION, figure: 'signObject(sonar_answer)/s, one core', value: rate(signing) });
    report.add({ section: SECTION, figure: 'signed HTTP / signing rate', value: ratio(signedKeys / signing), target: { text: `>= ${SIGNED_TARGET}`, met: signedKeys / signing >= SIGNED_TARGET } });

    // d. Single lookups under load: one member, then several.
    const single = config.lookup.single;
    const singleRun = async (credentials: ClientCredential[], seed: number, what: string): Promise<SignedRun> => {
      report.line(`  ${what}: ${single.count} signed POST /sonar/lookup (after ${single.warmup} warm-up), ${single.connections} connections`);
      const run = await runSignedLoad(config, node!, { credentials, plan: lookupPlan(config, null, false, seed), load: single, idempotency: false });
      describeRun(report, run, what);
      requireAllOk(run, what);
      return run;
    };
    const one = await singleRun([local], 0x5eed03, 'single lookups, one member');
    report.add({ section: SECTION, figure: `single lookup latency under load, one member, ${single.connections} connections: p50 / p99`, value: `${ms(one.result.latencyP50Ms)} / ${ms(one.result.latencyP99Ms)} ms` });
    report.add({ section: SECTION, figure: 'single lookups/s, one member', value: rate(one.result.perSecond) });
    const spread = await singleRun(members, 0x5eed04, `single lookups, ${members.length} members`);
    report.add({ section: SECTION, figure: `same, spread over ${members.length} members: p50 / p99`, value: `${ms(spread.result.latencyP50Ms)} / ${ms(spread.result.latencyP99Ms)} ms` });
    report.add({ section: SECTION, figure: `single lookups/s, ${members.length} members`, value: rate(spread.result.perSecond) });

    // f. A kill -9 under write load, and the start after it (issue 34, target 6).
    const running = node;
    node = null;
    await runCrashStart(config, report, { node: running, dataDir: fullDir, env, args: NODE_ARGS, local, keys });
  } finally {
    await node?.stop();
    removeDir(emptyDir);
    removeDir(fullDir);
    removeDir(snapshotDir);
  }
}
