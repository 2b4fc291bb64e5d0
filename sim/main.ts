// npm run simulate -- [--seed S | --runs N | --minutes M] [--cluster | --scripted | --both]
//                     [--steps K] [--plant BUG] [--first F] [--quiet] [--trace]
// `--cluster` runs three instances with the node's own lease rounds and router; `--scripted`
// runs them with leases the run moves itself, far more often; `--both` runs embedded and cluster.
// Runs the simulator (docs/SIMULATION.md). `--seed` replays one run and prints its trace's digest;
// `--runs` and `--minutes` run seeds one after another (from --first, else a random start that is
// printed). A violation prints its seed, its invariant and the steps before it, and exits 1.
import { parseArgs } from 'node:util';
import { randomInt } from 'node:crypto';
import { PLANTS, type Plant } from '../src/actors/planted.js';
import { simulate, type RunResult } from './simulator.js';

const DEFAULT_STEPS = 1_500;

/** Which deployment a run simulates. */
interface Configuration {
  cluster: boolean;
  scripted: boolean;
}

interface Options {
  seeds: () => number | null;
  configurations: Configuration[];
  steps: number;
  plant: Plant | null;
  quiet: boolean;
  trace: boolean;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      seed: { type: 'string' },
      runs: { type: 'string' },
      minutes: { type: 'string' },
      first: { type: 'string' },
      steps: { type: 'string' },
      cluster: { type: 'boolean', default: false },
      both: { type: 'boolean', default: false },
      scripted: { type: 'boolean', default: false },
      plant: { type: 'string' },
      quiet: { type: 'boolean', default: false },
      trace: { type: 'boolean', default: false },
    },
  });
  const count = (name: string, text: string | undefined, fallback: number) => {
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`--${name} takes a whole number`);
    return n;
  };
  const plant = values.plant ?? null;
  if (plant !== null && !(PLANTS as readonly string[]).includes(plant))
    throw new Error(`--plant takes one of: ${PLANTS.join(', ')}`);
  const first = count('first', values.first, randomInt(1, 2 ** 31));
  let next = first;
  let seeds: () => number | null;
  if (values.seed !== undefined) {
    const seed = count('seed', values.seed, 0);
    let given = false;
    seeds = () => (given ? null : ((given = true), seed));
  } else if (values.minutes !== undefined) {
    const until = Date.now() + Number(values.minutes) * 60_000;
    if (!(Number(values.minutes) > 0)) throw new Error('--minutes takes a positive number');
    console.log(`seeds from ${first}`);
    seeds = () => (Date.now() < until ? next++ : null);
  } else {
    const runs = count('runs', values.runs, 1);
    console.log(`seeds ${first} to ${first + runs - 1}`);
    seeds = () => (next < first + runs ? next++ : null);
  }
  return {
    seeds,
    configurations: values.both
      ? [
          { cluster: false, scripted: false },
          { cluster: true, scripted: false },
        ]
      : [{ cluster: values.cluster || values.scripted, scripted: values.scripted }],
    steps: count('steps', values.steps, DEFAULT_STEPS),
    plant: plant as Plant | null,
    quiet: values.quiet,
    trace: values.trace,
  };
}

/** How a configuration is named in a report, and the flag that replays it. */
const modeOf = (r: RunResult) =>
  r.scripted
    ? { name: 'scripted', flag: ' --scripted' }
    : r.cluster
      ? { name: 'cluster', flag: ' --cluster' }
      : { name: 'embedded', flag: '' };

function report(result: RunResult, ms: number, quiet: boolean): void {
  const mode = modeOf(result).name;
  if (result.violation === null) {
    if (!quiet)
      console.log(
        `seed ${result.seed} ${mode}: ${result.steps} steps, ${Math.round(result.simulatedMs / 1000)} s simulated, ` +
          `${Math.round((result.steps / ms) * 1000)} steps/s, digest ${result.digest}`,
      );
    return;
  }
  console.log(`seed ${result.seed} ${mode}: VIOLATION ${result.violation.invariant}`);
  console.log(`  ${result.violation.detail}`);
  console.log(`  replay: npm run simulate -- --seed ${result.seed}${modeOf(result).flag}`);
  console.log('  the steps before it:');
  for (const line of result.tail) console.log(`    ${line}`);
  console.log(`  digest ${result.digest}`);
}

async function main(): Promise<number> {
  const o = options(process.argv.slice(2));
  let runs = 0;
  let steps = 0;
  let failed = 0;
  const faults: Record<string, number> = {};
  const started = performance.now();
  for (let seed = o.seeds(); seed !== null; seed = o.seeds()) {
    for (const { cluster, scripted } of o.configurations) {
      const t = performance.now();
      const onLine = o.trace ? (line: string) => console.log(`  ${line}`) : undefined;
      const result = await simulate({
        seed,
        cluster,
        scripted,
        steps: o.steps,
        plant: o.plant,
        onLine,
      });
      report(result, performance.now() - t, o.quiet);
      runs++;
      steps += result.steps;
      for (const [name, n] of Object.entries(result.faults)) faults[name] = (faults[name] ?? 0) + n;
      if (result.violation !== null) failed++;
    }
    if (failed > 0) break;
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(
    `${runs} runs, ${steps} steps in ${seconds.toFixed(1)} s: ${Math.round(steps / seconds)} steps/s, ` +
      `${((runs / seconds) * 60).toFixed(1)} runs/min; faults ${Object.entries(faults)
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
  );
  return failed > 0 ? 1 : 0;
}

process.exitCode = await main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : String(error));
  return 2;
});
