// Figure 12 (issues 15, 34): bulk lookups by hash. Batches of 500 `identifier_hash` keys (half of
// them in a directory of `hashbatch.index_keys` emails, the rest in no one's) through HTTP: signed
// P5 requests, pre-signed, several connections, autocannon in its own process. The node's CPU per
// key (every thread, from /proc over the load) is set against the floor (issue 34, target 2):
// what one core of this process spends per key on `JSON.parse` of the very same body bytes,
// `Map.get` of each of its keys in a plain `Map` of the directory's keys, and `JSON.stringify` of
// a real answer of the node (its first batch, parsed), measured before and after each load.
//
// With BENCH_BASELINE (another build's dist/src/cli/main.js) the same load also runs against that
// build on the same data directory, in turns (this, baseline, then baseline, this), each load
// against its own floor, so the two ratios are measured side by side.
import { randomBytes } from 'node:crypto';
import type { DirectoryIndex } from '../src/directory/index.js';
import { identifierHash } from '../src/protocol/identifiers.js';
import type { BenchConfig } from './config.js';
import { buildDirectory, NODE_ARGS, pepperEnv } from './lookup.js';
import { aroundLoad, floorText, hashKeyFloorUs, nodeUsPer } from './floors.js';
import { createLocalCredential, removeDir, startNodeProcess, tempDir, type LocalCredential, type RunningServer } from './processes.js';
import { median, ms, rate, ratio, type Report } from './report.js';
import { lookupIdentifiers, plannedRequest, presentEmail, type LookupPlan } from './request-plans.js';
import { describeRun, requireAllOk, runSignedLoad } from './signed-load.js';
import { signedPost } from './signed-request.js';

const SECTION = '12 hashbatch';
/** Issue 34, target 2: the floor's CPU at least half the node's, per key. */
const TARGET = 0.5;
/** Distinct request bodies the floor cycles through (each about 56 KB). */
const FLOOR_BODIES = 256;

/** What batches of hashes against a directory need: its pepper and keys, who asks, what they ask. */
export interface HashLookup {
  pepper: Buffer;
  /** The directory's keys, indexed in this process: the answers are checked against it. */
  index: DirectoryIndex;
  credential: LocalCredential;
  plan: LookupPlan;
}

interface Fixture extends HashLookup {
  dataDir: string;
  /** The directory's keys in a plain Map: the floor's lookups. */
  keys: ReadonlyMap<string, true>;
}

/** Batches of `items` identifier_hash keys, a share `presentShare` of them among the directory's `keys`. */
export function hashBatchPlan(options: { keys: number; items: number; presentShare: number; pepper: Buffer }): LookupPlan {
  const { keys, items, presentShare, pepper } = options;
  return { kind: 'lookup', batch: items, signed: false, presentKeys: keys, presentShare, seed: 0x5eed11, pepperHex: pepper.toString('hex') };
}

/** Asks for the plan's first batch, checks each answer against this process's index, returns the answer text. */
export async function checkedAnswer(node: RunningServer, lookup: HashLookup): Promise<{ text: string; found: number }> {
  const { plan, pepper, index, credential } = lookup;
  const planned = plannedRequest(plan, 0);
  const res = await signedPost(node.baseUrl, credential, planned.target, JSON.parse(planned.body.toString('utf8')));
  if (res.status !== 200) throw new Error(`the check batch answered ${res.status}: ${res.text.slice(0, 300)}`);
  const results = (JSON.parse(res.text) as { results: { found: boolean; identifier_hash: string }[] }).results;
  let found = 0;
  lookupIdentifiers(plan, 0).forEach((identifier, i) => {
    const hash = identifierHash(pepper, 'email', identifier);
    const expected = index.find(hash, 'email') !== null;
    if (results[i]?.identifier_hash !== hash || results[i]?.found !== expected) throw new Error(`hash lookup answer ${i} does not match the directory`);
    if (expected) found++;
  });
  return { text: res.text, found };
}

interface Measured {
  name: string;
  keysPerSecond: number;
  /** µs of one core per key of the floor (floors.ts). */
  floorUs: number;
  /** µs of the node's CPU per key, every thread; null if unread. */
  nodeUs: number | null;
  p50Ms: number;
}

/** One node (this build or the baseline) on the data directory: one load between two floor readings. */
async function measureBuild(config: BenchConfig, report: Report, fixture: Fixture, side: { name: string; cli?: string }): Promise<Measured> {
  const node = await startNodeProcess({ dataDir: fixture.dataDir, timeoutMs: config.child_timeout_ms, env: pepperEnv(fixture.pepper), args: NODE_ARGS, cli: side.cli });
  try {
    const { load, batch_items: items, floor_time_ms: floorTime } = config.hashbatch;
    const checked = await checkedAnswer(node, fixture);
    const answer = JSON.parse(checked.text) as unknown;
    report.line(`  ${side.name}: listening after ${ms(node.startMs)} ms; first batch checked (${checked.found} of ${items} found, answer ${rate(checked.text.length)} bytes)`);
    const bodies = Array.from({ length: Math.min(FLOOR_BODIES, load.count) }, (_, i) => plannedRequest(fixture.plan, i).body);
    const { floor, loaded: run } = await aroundLoad(() => hashKeyFloorUs(bodies, answer, fixture.keys, floorTime),
      () => runSignedLoad(config, node, { credentials: [fixture.credential], plan: fixture.plan, load, idempotency: false }));
    describeRun(report, run, `${side.name}, hash batches`);
    requireAllOk(run, `${side.name} hash batch lookups`);
    report.line(`    ${floorText('JSON.parse + Map.get of each key + JSON.stringify, per key', floor)}`);
    const nodeUs = nodeUsPer(run.cpu?.processSeconds ?? null, run.result.ok * items);
    return { name: side.name, keysPerSecond: run.result.perSecond * items, floorUs: floor.us, nodeUs, p50Ms: run.result.latencyP50Ms };
  } finally {
    await node.stop();
  }
}

export async function runHashBatch(config: BenchConfig, report: Report): Promise<void> {
  const { index_keys: keys, batch_items: items, load } = config.hashbatch;
  report.heading(`12. Bulk lookups by hash against a directory of ${rate(keys)} keys`);
  const dataDir = tempDir('hashbatch');
  try {
    const pepper = randomBytes(32);
    const credential = createLocalCredential(dataDir);
    const built = await buildDirectory(dataDir, pepper, keys, config.lookup.build_batch_rows);
    report.line(`  directory built in ${ms(built.ms)} ms; ${load.count} batches of ${items} identifier_hash keys (after ${load.warmup} warm-up), ${load.connections} connections, one member`);
    const plan = hashBatchPlan({ keys, items, presentShare: config.hashbatch.present_share, pepper });
    // The floor's directory: a plain Map of the same keys.
    const plainKeys = new Map<string, true>();
    for (let k = 0; k < keys; k++) plainKeys.set(identifierHash(pepper, 'email', presentEmail(k)), true);
    const fixture: Fixture = { dataDir, pepper, index: built.index, keys: plainKeys, credential, plan };
    const baseline = config.versus.baseline_cli;
    const turns = baseline === null ? [{ name: 'this build' }] : [{ name: 'this build' }, { name: 'baseline', cli: baseline }, { name: 'baseline', cli: baseline }, { name: 'this build' }];
    const measured: Measured[] = [];
    for (const side of turns) measured.push(await measureBuild(config, report, fixture, side));
    const ours = measured.filter((m) => m.name === 'this build');
    const cpuRatios = (name: string) => measured.filter((m) => m.name === name && m.nodeUs !== null).map((m) => m.floorUs / m.nodeUs!);
    const value = cpuRatios('this build').length === 0 ? null : median(cpuRatios('this build'));
    const floorUs = median(ours.map((m) => m.floorUs));
    const floorNote = `${floorUs.toFixed(2)} us a key (JSON.parse + Map.get + JSON.stringify, one core)`;
    report.add({ section: SECTION, figure: `hash batch keys/s through HTTP (p50 ${ms(median(ours.map((m) => m.p50Ms)))} ms a call)`, value: rate(median(ours.map((m) => m.keysPerSecond))), floor: `${rate(1e6 / floorUs)} keys/s` });
    const nodeUs = ours.flatMap((m) => (m.nodeUs === null ? [] : [m.nodeUs]));
    report.add({ section: SECTION, figure: 'node CPU per key, every thread (us)', value: nodeUs.length === 0 ? 'not read' : median(nodeUs).toFixed(2), floor: floorNote });
    report.add({ section: SECTION, figure: 'floor CPU / node CPU per key', value: value === null ? 'not read' : ratio(value), floor: floorNote, target: { text: `>= ${TARGET}`, met: value !== null && value >= TARGET } });
    if (baseline !== null) {
      report.line(`  baseline: ${baseline}`);
      const theirs = cpuRatios('baseline');
      report.add({ section: SECTION, figure: 'baseline build: floor CPU / node CPU per key (same run, in turns)', value: theirs.length === 0 ? 'not read' : ratio(median(theirs)) });
    }
  } finally {
    removeDir(dataDir);
  }
}
