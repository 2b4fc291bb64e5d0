// The replication lag probe of figure 10, run in its own process so that its timings never wait
// on the benchmark's event loop: `node dist/bench/lag-probe.js JOB_JSON`. It registers identifiers
// at node B at a steady rate (each request sent on its schedule, whether or not the earlier ones
// have been answered) and, for every `sampleEvery`-th one, polls node A with single lookups from
// the moment B answered 201 until A answers found. Prints one JSON line (LagResult) and exits.
import { requestSigner, API_PREFIX, type ClientCredential } from './signed-request.js';

export interface LagJob {
  /** Node B, where identifiers are registered, and its operator's credential. */
  registerAt: string;
  registrar: ClientCredential;
  /** Node A, where they are looked up, and its operator's credential. */
  lookupAt: string;
  looker: ClientCredential;
  subjects: string[];
  /** Registered identifiers are `lag<n>@<domain>`. */
  domain: string;
  ratePerSecond: number;
  durationSeconds: number;
  sampleEvery: number;
  pollMs: number;
  /** Longest wait for one sample to arrive at A. */
  timeoutMs: number;
}

export interface LagResult {
  sent: number;
  registered: number;
  failed: number;
  /** Registrations sent per second, over the sending period. */
  sentPerSecond: number;
  /** Milliseconds from B's 201 to A's first found answer, one per arrived sample. */
  lagsMs: number[];
  /** Samples A had not found when their time ran out. */
  missing: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => { setTimeout(resolve, ms); });

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: lag-probe.js JOB_JSON');
  const job = JSON.parse(raw) as LagJob;
  const signers = { B: requestSigner(job.registrar), A: requestSigner(job.looker) };
  // Every signed call gets its own millisecond, so that no two signing strings are the same.
  let lastStamp = 0;
  const stamp = () => new Date((lastStamp = Math.max(Date.now(), lastStamp + 1))).toISOString();
  const post = async (side: 'A' | 'B', path: string, value: unknown) => {
    const body = Buffer.from(JSON.stringify(value), 'utf8');
    const target = `${API_PREFIX}${path}`;
    const headers = signers[side]({ method: 'POST', target, timestamp: stamp(), body });
    const base = side === 'A' ? job.lookupAt : job.registerAt;
    const res = await fetch(base + target, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
    return { status: res.status, text: await res.text() };
  };

  const total = Math.round(job.ratePerSecond * job.durationSeconds);
  const lags: number[] = [];
  let registered = 0;
  let failed = 0;
  let missing = 0;

  const arrival = async (identifier: string, registeredAt: number) => {
    const deadline = registeredAt + job.timeoutMs;
    for (;;) {
      const res = await post('A', '/sonar/lookup', { identifier_type: 'email', identifier });
      if (res.status !== 200) throw new Error(`lookup at A answered ${res.status}: ${res.text.slice(0, 300)}`);
      if ((JSON.parse(res.text) as { found: boolean }).found) {
        lags.push(performance.now() - registeredAt);
        return;
      }
      if (performance.now() >= deadline) {
        missing++;
        return;
      }
      await sleep(job.pollMs);
    }
  };
  const register = async (n: number) => {
    const identifier = `lag${n}@${job.domain}`;
    const res = await post('B', '/identifiers', { subject_id: job.subjects[n % job.subjects.length], identifier_type: 'email', identifier });
    if (res.status !== 201) {
      failed++;
      return;
    }
    registered++;
    if (n % job.sampleEvery === 0) await arrival(identifier, performance.now());
  };

  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let n = 0; n < total; n++) {
    const due = started + (n * 1000) / job.ratePerSecond;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    inFlight.push(register(n));
  }
  const sendingMs = performance.now() - started;
  await Promise.all(inFlight);
  const result: LagResult = { sent: total, registered, failed, sentPerSecond: (total - 1) / (sendingMs / 1000), lagsMs: lags, missing };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`lag probe: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
