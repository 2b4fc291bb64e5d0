// This build against another, side by side: `BENCH_ONLY=versus BENCH_BASELINE=<other checkout>/
// dist/src/cli/main.js npm run bench` (BENCH_CURRENT names another build in place of this one). Both nodes run at once, each in its own process and data
// directory; every round loads one and then the other with the same signed POST /receipts and
// the same public GET, the order swapped each round, and reports this/baseline per round and
// the median. A change's cost (or gain) is that ratio, free of the machine's drift.
import type { BenchConfig } from './config.js';
import { postJob, statusText } from './http-post.js';
import type { LoadResult } from './load.js';
import { createLocalCredential, removeDir, runLoad, startNodeProcess, tempDir, type LocalCredential, type RunningServer } from './processes.js';
import { median, rate, ratio, type Report } from './report.js';
import { API_PREFIX, expectSigned } from './signed-request.js';
import { PAYEE_RECEIPT_BODY } from './fixtures.js';

const SECTION = 'versus';

interface Side { name: string; node: RunningServer; credential: LocalCredential; dir: string; readPath: string }

async function startSide(config: BenchConfig, name: string, cli: string | undefined): Promise<Side> {
  const dir = tempDir(`versus-${name}`);
  const credential = createLocalCredential(dir, cli);
  const node = await startNodeProcess({ dataDir: dir, timeoutMs: config.child_timeout_ms, ...(cli === undefined ? {} : { cli }) });
  const receipt = await expectSigned<{ reference: string }>(node.baseUrl, credential, 'POST', `${API_PREFIX}/receipts`, PAYEE_RECEIPT_BODY, 201);
  return { name, node, credential, dir, readPath: `${API_PREFIX}/receipts/${receipt.reference}` };
}

async function postRate(config: BenchConfig, side: Side): Promise<number> {
  const { count, warmup, connections } = config.versus.post;
  const result = await runLoad<LoadResult>(postJob(side.node, side.credential, { count, warmupCount: warmup, connections }), config.child_timeout_ms);
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${side.name} POST: ${statusText(result)}, errors ${result.errors}`);
  return result.perSecond;
}

async function getRate(config: BenchConfig, side: Side): Promise<number> {
  const { connections, pipelining } = config.versus.get_shape;
  const job = { kind: 'get', url: side.node.baseUrl + side.readPath, connections, pipelining, durationSeconds: config.versus.get_seconds };
  const result = await runLoad<LoadResult>(job, config.child_timeout_ms);
  if (result.non2xx > 0) throw new Error(`${side.name} GET: ${statusText(result)}`);
  return result.perSecond;
}

export async function runVersus(config: BenchConfig, report: Report): Promise<void> {
  report.heading('Versus: this build against a baseline build, in turns');
  const baselineCli = config.versus.baseline_cli;
  if (baselineCli === null) throw new RangeError('BENCH_ONLY=versus needs BENCH_BASELINE: the baseline build\'s dist/src/cli/main.js');
  const sides: Side[] = [];
  try {
    sides.push(await startSide(config, 'this', config.versus.current_cli ?? undefined), await startSide(config, 'baseline', baselineCli));
    const [current, baseline] = sides as [Side, Side];
    report.line(`  this: ${config.versus.current_cli ?? 'this build'}; baseline: ${baselineCli}`);
    report.line(`  ${config.versus.rounds} rounds; POST /receipts ${config.versus.post.count} signed requests at ${config.versus.post.connections} connections; GET of a receipt ${config.versus.get_seconds} s at ${config.versus.get_shape.connections} connections`);
    const ratios = { post: [] as number[], get: [] as number[] };
    for (let round = 0; round < config.versus.rounds; round++) {
      const order = round % 2 === 0 ? [current, baseline] : [baseline, current];
      const rates = new Map<Side, { post: number; get: number }>();
      for (const side of order) rates.set(side, { post: await postRate(config, side), get: 0 });
      for (const side of order) rates.get(side)!.get = await getRate(config, side);
      const a = rates.get(current)!;
      const b = rates.get(baseline)!;
      ratios.post.push(a.post / b.post);
      ratios.get.push(a.get / b.get);
      report.line(`    round ${round + 1}: POST ${rate(a.post)} / ${rate(b.post)} = ${ratio(a.post / b.post)}; GET ${rate(a.get)} / ${rate(b.get)} = ${ratio(a.get / b.get)}`);
    }
    report.add({ section: SECTION, figure: 'POST /receipts req/s, this / baseline (median of rounds)', value: ratio(median(ratios.post)) });
    report.add({ section: SECTION, figure: 'GET /receipts/{reference} req/s, this / baseline (median of rounds)', value: ratio(median(ratios.get)) });
  } finally {
    for (const side of sides) {
      await side.node.stop();
      removeDir(side.dir);
    }
  }
}
