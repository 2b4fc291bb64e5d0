// Figure 12 (issue 15): bulk lookups by hash. Batches of 500 `identifier_hash` keys (half of them
// in a directory of `hashbatch.index_keys` emails, the rest in no one's) through HTTP: signed P5
// requests, pre-signed, several connections, autocannon in its own process. Keys per second are
// divided by what one core of this process does per second of the work a batch cannot avoid:
// `JSON.parse` of the very same body bytes (decoded from UTF-8), `DirectoryIndex.find` of each
// of its keys on an index of the same size built here, and `JSON.stringify` of a real answer of
// the node (its first batch, parsed). That reference is measured before and after each load.
//
// With BENCH_BASELINE (another build's dist/src/cli/main.js) the same load also runs against that
// build on the same data directory, in turns (this, baseline, then baseline, this), each load
// against its own reference, so the two ratios are measured side by side.
import { randomBytes } from 'node:crypto';
import type { DirectoryIndex } from '../src/directory/index.js';
import { identifierHash } from '../src/protocol/identifiers.js';
import type { BenchConfig } from './config.js';
import { buildDirectory, NODE_ARGS, pepperEnv } from './lookup.js';
import { measureTasks } from './micro.js';
import { createLocalCredential, removeDir, startNodeProcess, tempDir, type LocalCredential, type RunningServer } from './processes.js';
import { median, ms, rate, ratio, type Report } from './report.js';
import { lookupIdentifiers, plannedRequest, type LookupPlan } from './request-plans.js';
import { describeRun, requireAllOk, runSignedLoad } from './signed-load.js';
import { signedPost } from './signed-request.js';

const SECTION = '12 hashbatch';
const TARGET = 0.5;
/** Distinct request bodies the reference cycles through (each about 45 KB). */
const REFERENCE_BODIES = 256;

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

/** Keys per second of JSON.parse(body) + find of each key + JSON.stringify(answer), one core. */
function referenceKeysPerSecond(bodies: readonly Buffer[], answer: unknown, index: DirectoryIndex, timeMs: number): number {
  let next = 0;
  let keys = 0;
  let found = 0;
  const [task] = measureTasks({
    'JSON.parse(body) + find each key + JSON.stringify(answer)': () => {
      const body = JSON.parse(bodies[next++ % bodies.length]!.toString('utf8')) as { items: { identifier_type: string; identifier_hash: string }[] };
      for (const item of body.items) if (index.find(item.identifier_hash, item.identifier_type) !== null) found++;
      keys = body.items.length;
      if (JSON.stringify(answer).length === 0) throw new Error('empty answer');
    },
  }, timeMs);
  if (found === 0) throw new Error('the reference found no key');
  return task!.perSecond * keys;
}

interface Measured {
  name: string;
  keysPerSecond: number;
  reference: number;
  p50Ms: number;
  /** Keys per second of the node's main-thread CPU (its share of a core during the load), or null if unread. */
  keysPerMainCpuSecond: number | null;
}

/** One node (this build or the baseline) on the data directory: one load between two reference readings. */
async function measureBuild(config: BenchConfig, report: Report, fixture: Fixture, side: { name: string; cli?: string }): Promise<Measured> {
  const node = await startNodeProcess({ dataDir: fixture.dataDir, timeoutMs: config.child_timeout_ms, env: pepperEnv(fixture.pepper), args: NODE_ARGS, cli: side.cli });
  try {
    const { load, batch_items: items, floor_time_ms: floorTime } = config.hashbatch;
    const checked = await checkedAnswer(node, fixture);
    const answer = JSON.parse(checked.text) as unknown;
    report.line(`  ${side.name}: listening after ${ms(node.startMs)} ms; first batch checked (${checked.found} of ${items} found, answer ${rate(checked.text.length)} bytes)`);
    const bodies = Array.from({ length: Math.min(REFERENCE_BODIES, load.count) }, (_, i) => plannedRequest(fixture.plan, i).body);
    const before = referenceKeysPerSecond(bodies, answer, fixture.index, floorTime);
    const run = await runSignedLoad(config, node, { credentials: [fixture.credential], plan: fixture.plan, load, idempotency: false });
    const after = referenceKeysPerSecond(bodies, answer, fixture.index, floorTime);
    describeRun(report, run, `${side.name}, hash batches`);
    requireAllOk(run, `${side.name} hash batch lookups`);
    report.line(`    reference, one core: ${rate(before)} keys/s before the load, ${rate(after)} after`);
    const keysPerSecond = run.result.perSecond * items;
    const keysPerMainCpuSecond = run.cpu === null || run.cpu.mainThread <= 0 ? null : keysPerSecond / (run.cpu.mainThread / 100);
    return { name: side.name, keysPerSecond, reference: (before + after) / 2, p50Ms: run.result.latencyP50Ms, keysPerMainCpuSecond };
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
    const fixture: Fixture = { dataDir, pepper, index: built.index, credential, plan };
    const baseline = config.versus.baseline_cli;
    const turns = baseline === null ? [{ name: 'this build' }] : [{ name: 'this build' }, { name: 'baseline', cli: baseline }, { name: 'baseline', cli: baseline }, { name: 'this build' }];
    const measured: Measured[] = [];
    for (const side of turns) measured.push(await measureBuild(config, report, fixture, side));
    const ratios = (name: string) => measured.filter((m) => m.name === name).map((m) => m.keysPerSecond / m.reference);
    // The front end's own cost, free of the load generator's share of the machine's two cores.
    const cpuRatios = (name: string) => measured.filter((m) => m.name === name && m.keysPerMainCpuSecond !== null).map((m) => m.keysPerMainCpuSecond! / m.reference);
    const cpuText = (name: string) => (cpuRatios(name).length === 0 ? 'not read' : ratio(median(cpuRatios(name))));
    const ours = measured.filter((m) => m.name === 'this build');
    const value = median(ratios('this build'));
    report.add({ section: SECTION, figure: `hash batch keys/s through HTTP (p50 ${ms(median(ours.map((m) => m.p50Ms)))} ms a call)`, value: rate(median(ours.map((m) => m.keysPerSecond))) });
    report.add({ section: SECTION, figure: 'reference keys/s: JSON.parse(body) + find + JSON.stringify(answer), one core', value: rate(median(ours.map((m) => m.reference))) });
    report.add({ section: SECTION, figure: 'hash batch HTTP / reference', value: ratio(value), target: { text: `>= ${TARGET}`, met: value >= TARGET } });
    report.add({ section: SECTION, figure: 'keys per second of node main-thread CPU / reference', value: cpuText('this build') });
    if (baseline !== null) {
      report.line(`  baseline: ${baseline}`);
      report.add({ section: SECTION, figure: 'baseline build: hash batch HTTP / reference (same run, in turns)', value: ratio(median(ratios('baseline'))) });
      report.add({ section: SECTION, figure: 'baseline build: keys per second of node main-thread CPU / reference', value: cpuText('baseline') });
    }
  } finally {
    removeDir(dataDir);
  }
}
