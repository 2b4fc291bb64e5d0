// Figure 11 (issue 15, stall C): how long a snapshot of a partition holding one large aggregate
// holds up that partition's worker. A subject with 100,000 identifiers (its state made by the
// real `evolveSubject`, children as persistent maps) is snapshotted in this process two ways, in
// alternating rounds: as the shard did before, one synchronous `frame(body)`; and as it does now,
// `frameInSlices(body)` (src/actors/snapshot.ts), which encodes a slice of values at a time and
// lets the event loop run in between. A 1 ms interval timer runs throughout; the worst gap between
// its ticks is the longest the event loop (a worker's commands) waited. Both encodings are
// checked to decode to the same value.
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

export async function runSnapshot(config: BenchConfig, report: Report): Promise<void> {
  const { children, rounds } = config.snapshot;
  report.heading(`11. Snapshot of a partition holding one subject of ${children.toLocaleString('en-US')} identifiers`);
  const body: SnapshotBody = { seq: 1, aggregates: [['sub_large', 'subject', largeSubject(children)]] };
  const whole = { worst: [] as number[], total: [] as number[] };
  const sliced = { worst: [] as number[], total: [] as number[] };
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? ['whole', 'sliced'] : ['sliced', 'whole'];
    for (const way of order) {
      const run = way === 'whole' ? await withProbe(() => frame(body)) : await withProbe(() => frameInSlices(body));
      const into = way === 'whole' ? whole : sliced;
      into.worst.push(run.worstMs);
      into.total.push(run.totalMs);
      if (round === 0 && JSON.stringify(unframe(run.bytes)) !== JSON.stringify(unframe(frame(body)))) throw new Error(`the ${way} snapshot does not decode to the body`);
    }
  }
  report.line(`  ${rounds} rounds each, alternating; a ${PROBE_INTERVAL_MS} ms timer's worst gap while the snapshot is encoded`);
  report.add({ section: SECTION, figure: 'worst event-loop stall, one synchronous frame (before): ms, median of rounds', value: ms(median(whole.worst)) });
  report.add({ section: SECTION, figure: 'worst event-loop stall, encoded in slices (now): ms, median of rounds', value: ms(median(sliced.worst)) });
  report.add({ section: SECTION, figure: 'worst stall now / before', value: ratio(median(sliced.worst) / median(whole.worst)) });
  report.add({ section: SECTION, figure: 'snapshot encoding time before / now: ms', value: `${ms(median(whole.total))} / ${ms(median(sliced.total))}` });
}
