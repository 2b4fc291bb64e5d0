// Issue 15 target 2: a command costs the same whether its aggregate holds 10 or 100,000
// children. Identifier registrations on ONE subject over signed HTTP, measured in bands as the
// subject grows: 1k-2k held, 2k-4k, 4k-6k. A decider whose `evolve` copies the growing map costs
// O(n) per command, and the rate falls with each band; the target is 4k-6k at least 0.9 of 1k-2k.
import type { BenchConfig } from './config.js';
import { createLocalCredential, removeDir, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { rate, ratio, type Report } from './report.js';
import { createSubjects, describeRun, registrationPlan, requireAllOk, runSignedLoad } from './signed-load.js';

const SECTION = '13 growth';
const TARGET = 0.9;

export async function runGrowth(config: BenchConfig, report: Report): Promise<void> {
  report.heading('13. Registrations on one subject as it grows');
  const dataDir = tempDir('growth');
  let node: RunningServer | null = null;
  try {
    const local = createLocalCredential(dataDir);
    node = await startNodeProcess({ dataDir, timeoutMs: config.child_timeout_ms });
    const [subject] = await createSubjects(node, local, 1);
    const { band, connections } = config.growth;
    const rates: number[] = [];
    // Bands: [band, 2 band) after a warm-up of `band`, then [2 band, 4 band), then [4 band, 6 band).
    const bands = [
      { first: 0, warmup: band, count: band, what: `${band}-${2 * band} held` },
      { first: 2 * band, warmup: 0, count: 2 * band, what: `${2 * band}-${4 * band} held` },
      { first: 4 * band, warmup: 0, count: 2 * band, what: `${4 * band}-${6 * band} held` },
    ];
    for (const b of bands) {
      const run = await runSignedLoad(config, node, {
        credentials: [local], plan: registrationPlan([subject!], b.first, 'growth.example'),
        load: { count: b.count, warmup: b.warmup, connections }, idempotency: false,
      });
      describeRun(report, run, b.what);
      requireAllOk(run, b.what);
      rates.push(run.result.perSecond);
      report.add({ section: SECTION, figure: `registrations/s on one subject, ${b.what}`, value: rate(run.result.perSecond) });
    }
    const held = rates[2]! / rates[0]!;
    report.add({
      section: SECTION, figure: `${bands[2]!.what} / ${bands[0]!.what}`, value: ratio(held),
      target: { text: `>= ${TARGET}`, met: held >= TARGET },
    });
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}
