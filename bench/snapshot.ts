// Figure 11 (issue 15, stall C): how long a snapshot of a partition holding one large aggregate
// holds up that partition's worker. A subject with 100,000 identifiers (its state made by the
// real `evolveSubject`, children as persistent maps) is snapshotted in this process two ways, in
// alternating rounds: as the shard did before, one synchronous `frame(body)`; and as it does now,
// `frameInSlices(body)` (src/actors/snapshot.ts), which encodes a slice of values at a time and
// lets the event loop run in between. A 1 ms interval timer runs throughout; the worst gap between
// its ticks is the longest the event loop (a worker's commands) waited. Both encodings are
// checked to decode to the body. At 100,000 identifiers the single frame fails outright (msgpackr
// writes an object's size in 16 bits unless told otherwise), so the comparison is also made at
// 60,000, where both ways work.
import { frameInSlices, type SnapshotBody } from '../src/actors/snapshot.js';
import { evolveSubject, type SubjectEvent, type SubjectState } from '../src/domain/subject/state.js';
import { frame, unframe } from '../src/log/record.js';
import type { BenchConfig } from './config.js';
import { median, ms, ratio, type Report } from './report.js';

const SECTION = '11 snapshot';
const PROBE_INTERVAL_MS = 1;

function largeSubject(children: number): SubjectState {
  const at = '2026-11-23T12:00:00.000Z';
  const subject = { id: 'sub_large', subject_type: 'natural_person' as const, owner: 'local', external_ref_sealed: null, created_at: at };
  let state = evolveSubject(null, { type: 'created', subject });
  for (let i = 0; i < children; i++) {
    const event: SubjectEvent = { type: 'identifier_added', identifier: {
      id: `idn_${i.toString(16).padStart(32, '0')}`, identifier_type: 'email', hash: (i * 2654435761).toString(16).padStart(64, '0'),
      discoverability: 'network', verification_method: null, verified_at: null, created_at: at } };
    state = evolveSubject(state, event);
  }
  return state;
}

/** Runs `encode` with a 1 ms timer ticking; the worst gap between ticks and the encoding's duration. */
async function withProbe(encode: () => Buffer | Promise<Buffer>): Promise<{ worstMs: number; totalMs: number; bytes: Buffer }> {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, PROBE_INTERVAL_MS);
  await new Promise((resolve) => setTimeout(resolve, 20));
  const started = performance.now();
  const bytes = await encode();
  const totalMs = performance.now() - started;
  await new Promise((resolve) => setTimeout(resolve, 20));
  clearInterval(timer);
  worst = Math.max(worst, performance.now() - last);
  return { worstMs: worst, totalMs, bytes };
}

/** Worst stall and encoding time of each way, in alternating rounds; `fails` says why a way cannot encode the body. */
async function compare(body: SnapshotBody, rounds: number) {
  const ways = { whole: { worst: [] as number[], total: [] as number[], fails: null as string | null }, sliced: { worst: [] as number[], total: [] as number[], fails: null as string | null } };
  try {
    frame(body);
  } catch (error) {
    ways.whole.fails = (error as Error).message;
  }
  for (let round = 0; round < rounds; round++) {
    const order: (keyof typeof ways)[] = round % 2 === 0 ? ['whole', 'sliced'] : ['sliced', 'whole'];
    for (const way of order) {
      if (ways[way].fails !== null) continue;
      const run = way === 'whole' ? await withProbe(() => frame(body)) : await withProbe(() => frameInSlices(body));
      ways[way].worst.push(run.worstMs);
      ways[way].total.push(run.totalMs);
      if (round === 0 && JSON.stringify(unframe(run.bytes)) !== JSON.stringify(body)) throw new Error(`the ${way} snapshot does not decode to the body`);
    }
  }
  return ways;
}

export async function runSnapshot(config: BenchConfig, report: Report): Promise<void> {
  const { children, rounds } = config.snapshot;
  report.heading(`11. Snapshot of a partition holding one subject of many identifiers`);
  report.line(`  ${rounds} rounds each way, alternating; a ${PROBE_INTERVAL_MS} ms timer's worst gap while the snapshot is encoded`);
  for (const count of children) {
    const body: SnapshotBody = { seq: 1, aggregates: [['sub_large', 'subject', largeSubject(count)]] };
    const ways = await compare(body, rounds);
    const what = `${count.toLocaleString('en-US')} identifiers`;
    if (ways.whole.fails !== null) report.line(`  ${what}: one synchronous frame (before) cannot encode it: ${ways.whole.fails}`);
    const before = ways.whole.fails === null ? median(ways.whole.worst) : null;
    const now = median(ways.sliced.worst);
    report.add({ section: SECTION, figure: `${what}: worst event-loop stall, one frame (before) / in slices (now): ms`, value: `${before === null ? 'fails' : ms(before)} / ${ms(now)}` });
    if (before !== null) report.add({ section: SECTION, figure: `${what}: worst stall now / before`, value: ratio(now / before) });
    report.add({ section: SECTION, figure: `${what}: encoding time before / now: ms`, value: `${ways.whole.fails === null ? ms(median(ways.whole.total)) : 'fails'} / ${ms(median(ways.sliced.total))}` });
  }
}
