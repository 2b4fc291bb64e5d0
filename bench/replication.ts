// Figure 10 (issue 8): index replication between two nodes on loopback, A (member alpha) and B
// (member beta), with one network pepper and each listed as a member at the other. Identifiers
// are registered at B through its HTTP interface (signed POST /identifiers under load, so B's
// change feed is written as in service) and looked up at A with signed single lookups.
//   catch-up: N identifiers registered at B, between two sentinels, before A follows B; then A
//             lists B as a member and replicates the backlog. Entries per second: the N + 1
//             entries after the first sentinel, over the time between A first finding the first
//             sentinel and A first finding the last one (replication alone, without B's writes).
//   live:     A following, N more registered at B as fast as the load generator goes, then one
//             sentinel; entries per second: N + 1 over the time from the start of that load to A
//             first finding the sentinel (bounded by B's registration rate too, printed beside).
//   lag:      a steady registration rate at B; for sampled identifiers, the time from B's 201 to
//             A's first found answer, polled every `poll_interval_ms` (lag-probe.ts).
// A follower polls its members' feeds every replication_poll_interval_ms (default 250 ms) when it
// is caught up, so the lag includes up to one poll interval by design.
import { randomBytes } from 'node:crypto';
import { DEFAULT_LIMITS } from '../src/config.js';
import type { BenchConfig } from './config.js';
import type { LagJob, LagResult } from './lag-probe.js';
import { addMember, createCredential, removeDir, runLagProbe, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { ms, quantile, rate, type Report } from './report.js';
import { createSubjects, describeRun, registrationPlan, requireAllOk, runSignedLoad } from './signed-load.js';
import { API_PREFIX, expectSigned, type ClientCredential } from './signed-request.js';

const SECTION = '10 replication';
const NODE_ARGS = ['--lookup-budget-base', '1000000000'];

const pause = (msToWait: number) => new Promise<void>((resolve) => { setTimeout(resolve, msToWait); });

interface Side {
  node: RunningServer;
  credential: ClientCredential;
}

async function register(at: Side, subjectId: string, identifier: string): Promise<void> {
  await expectSigned(at.node.baseUrl, at.credential, 'POST', `${API_PREFIX}/identifiers`, { subject_id: subjectId, identifier_type: 'email', identifier }, 201);
}

/** Polls single lookups at `at` until the identifier is found; resolves with performance.now() of the found answer. */
async function foundAt(at: Side, identifier: string, pollMs: number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const answer = await expectSigned<{ found: boolean }>(at.node.baseUrl, at.credential, 'POST', `${API_PREFIX}/sonar/lookup`, { identifier_type: 'email', identifier }, 200);
    const now = performance.now();
    if (answer.found) return now;
    if (now >= deadline) throw new Error(`${identifier} did not arrive at ${at.node.baseUrl} within ${timeoutMs} ms`);
    await pause(pollMs);
  }
}

export async function runReplication(config: BenchConfig, report: Report): Promise<void> {
  const c = config.replication;
  report.heading(`10. Replication of directory entries from node B to node A`);
  const env = { PATH_PEPPER: randomBytes(32).toString('hex'), PATH_PEPPER_VERSION: 'bench-net-1' };
  const dirs = { A: tempDir('replication-alpha'), B: tempDir('replication-beta') };
  let A: Side | null = null;
  let B: Side | null = null;
  try {
    const credentials = { A: createCredential(dirs.A, 'alpha', true), B: createCredential(dirs.B, 'beta', true) };
    A = { node: await startNodeProcess({ dataDir: dirs.A, member: 'alpha', env, args: NODE_ARGS, timeoutMs: config.child_timeout_ms }), credential: credentials.A };
    B = { node: await startNodeProcess({ dataDir: dirs.B, member: 'beta', env, args: NODE_ARGS, timeoutMs: config.child_timeout_ms }), credential: credentials.B };
    const subjects = await createSubjects(B.node, B.credential, c.subjects);
    // B lists A now (so that it serves A's feed requests once A follows); A lists B later.
    addMember(dirs.B, 'alpha', A.node.baseUrl);
    const registerLoad = { count: c.entries, warmup: 0, connections: c.register.connections };
    report.line(`  A ${A.node.baseUrl} (alpha), B ${B.node.baseUrl} (beta); follower poll interval ${DEFAULT_LIMITS.replication_poll_interval_ms} ms, page ${DEFAULT_LIMITS.replication_page_size} entries`);

    // Catch-up.
    await register(B, subjects[0]!, 'catchup-first@example.org');
    report.line(`  catch-up: ${c.entries} registrations at B, ${c.register.connections} connections, before A follows B`);
    const backlog = await runSignedLoad(config, B.node, { credentials: [B.credential], plan: registrationPlan(subjects, 0), load: registerLoad, idempotency: true });
    describeRun(report, backlog, 'registrations at B');
    requireAllOk(backlog, 'registrations at B');
    await register(B, subjects[0]!, 'catchup-last@example.org');
    const listedAt = performance.now();
    addMember(dirs.A, 'beta', B.node.baseUrl);
    const [firstAt, lastAt] = await Promise.all([
      foundAt(A, 'catchup-first@example.org', c.poll_interval_ms, c.arrival_timeout_ms),
      foundAt(A, 'catchup-last@example.org', c.poll_interval_ms, c.arrival_timeout_ms),
    ]);
    const catchUp = (c.entries + 1) / ((lastAt - firstAt) / 1000);
    report.line(`    A found the first sentinel ${ms(firstAt - listedAt)} ms after \`members add\`, the last ${ms(lastAt - firstAt)} ms after the first`);
    report.add({ section: SECTION, figure: `catch-up: entries/s B -> A (${c.entries} entries)`, value: rate(catchUp) });
    report.add({ section: SECTION, figure: `registrations/s at B (${c.register.connections} connections)`, value: rate(backlog.result.perSecond) });

    // Live.
    report.line(`  live: ${c.entries} more registrations at B with A following`);
    let loadStartedAt = 0;
    const live = await runSignedLoad(config, B.node, {
      credentials: [B.credential], plan: registrationPlan(subjects, c.entries), load: registerLoad, idempotency: true,
      onMeasuring: () => { loadStartedAt = performance.now(); },
    });
    describeRun(report, live, 'registrations at B');
    requireAllOk(live, 'registrations at B');
    await register(B, subjects[0]!, 'live-last@example.org');
    const liveArrived = await foundAt(A, 'live-last@example.org', c.poll_interval_ms, c.arrival_timeout_ms);
    const liveRate = (c.entries + 1) / ((liveArrived - loadStartedAt) / 1000);
    report.line(`    A found the sentinel ${ms(liveArrived - loadStartedAt)} ms after the load started (${ms(live.result.durationMs)} ms of registering at B)`);
    report.add({ section: SECTION, figure: `live: entries/s from B's first registration to A holding the last (${c.entries} entries)`, value: rate(liveRate) });

    // Lag under a steady registration rate.
    const job: LagJob = {
      registerAt: B.node.baseUrl, registrar: B.credential, lookupAt: A.node.baseUrl, looker: A.credential, subjects, domain: 'example.net',
      ratePerSecond: c.lag_rate_per_second, durationSeconds: c.lag_duration_seconds, sampleEvery: c.lag_sample_every, pollMs: c.poll_interval_ms,
      timeoutMs: c.arrival_timeout_ms,
    };
    report.line(`  lag: ${c.lag_rate_per_second} registrations/s at B for ${c.lag_duration_seconds} s; every ${c.lag_sample_every}th polled at A every ${c.poll_interval_ms} ms from B's 201`);
    const lag = await runLagProbe<LagResult>(job, config.child_timeout_ms);
    report.line(`    sent ${lag.sent} at ${rate(lag.sentPerSecond)}/s: ${lag.registered} registered, ${lag.failed} refused; ${lag.lagsMs.length} samples arrived, ${lag.missing} did not`);
    if (lag.failed > 0 || lag.missing > 0 || lag.lagsMs.length === 0) throw new Error(`the lag run lost registrations or samples (${JSON.stringify({ ...lag, lagsMs: lag.lagsMs.length })})`);
    const p50 = quantile(lag.lagsMs, 0.5);
    const p99 = quantile(lag.lagsMs, 0.99);
    report.line(`    lag: min ${ms(Math.min(...lag.lagsMs))} ms, p50 ${ms(p50)} ms, p99 ${ms(p99)} ms, max ${ms(Math.max(...lag.lagsMs))} ms`);
    report.add({ section: SECTION, figure: `lag B 201 -> found at A, ${c.lag_rate_per_second}/s steady (${lag.lagsMs.length} samples): p50 / p99`, value: `${ms(p50)} / ${ms(p99)} ms` });
  } finally {
    await Promise.all([A?.node.stop(), B?.node.stop()]);
    removeDir(dirs.A);
    removeDir(dirs.B);
  }
}
