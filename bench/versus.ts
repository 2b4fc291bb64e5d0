// This build against another, side by side: `BENCH_ONLY=versus BENCH_BASELINE=<other checkout>/
// dist/src/cli/main.js npm run bench` (BENCH_CURRENT names another build in place of this one). Both nodes run at once, each in its own process and data
// directory; every round loads one and then the other with the same signed POST /receipts and
// the same public GET, the order swapped each round, and reports this/baseline per round and
// the median (turns.ts). A change's cost (or gain) is that ratio, free of the machine's drift.
import type { BenchConfig } from './config.js';
import { rate, ratio, type Report } from './report.js';
import { inTurns, medianRatio, postReceipts, readReceipt, startSide, stopSides, type Side } from './turns.js';

const SECTION = 'versus';

export async function runVersus(config: BenchConfig, report: Report): Promise<void> {
  report.heading('Versus: this build against a baseline build, in turns');
  const baselineCli = config.versus.baseline_cli;
  if (baselineCli === null) throw new RangeError('BENCH_ONLY=versus needs BENCH_BASELINE: the baseline build\'s dist/src/cli/main.js');
  const sides: Side[] = [];
  try {
    const currentCli = config.versus.current_cli ?? undefined;
    sides.push(await startSide(config, { name: 'this', cli: currentCli }), await startSide(config, { name: 'baseline', cli: baselineCli }));
    report.line(`  this: ${config.versus.current_cli ?? 'this build'}; baseline: ${baselineCli}`);
    report.line(`  ${config.versus.rounds} rounds; POST /receipts ${config.versus.post.count} signed requests at ${config.versus.post.connections} connections; GET of a receipt ${config.versus.get_seconds} s at ${config.versus.get_shape.connections} connections`);
    const stages = [
      async (side: Side) => ({ post: (await postReceipts(config, side, config.versus.post)).result.perSecond }),
      async (side: Side) => ({ get: (await readReceipt(config, side, { seconds: config.versus.get_seconds, shape: config.versus.get_shape })).result.perSecond }),
    ];
    const rounds = await inTurns(config.versus.rounds, [sides[0]!, sides[1]!], stages, (round, a, b) => {
      report.line(`    round ${round + 1}: POST ${rate(a.post!)} / ${rate(b.post!)} = ${ratio(a.post! / b.post!)}; GET ${rate(a.get!)} / ${rate(b.get!)} = ${ratio(a.get! / b.get!)}`);
    });
    report.add({ section: SECTION, figure: 'POST /receipts req/s, this / baseline (median of rounds)', value: ratio(medianRatio(rounds.first, rounds.second, 'post')) });
    report.add({ section: SECTION, figure: 'GET /receipts/{reference} req/s, this / baseline (median of rounds)', value: ratio(medianRatio(rounds.first, rounds.second, 'get')) });
  } finally {
    await stopSides(sides);
  }
}
