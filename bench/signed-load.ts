// Helpers shared by the figures that load a node with pre-signed requests (6-10): running the
// load generator on a plan while the node's CPU is watched, printing what came back, and setting
// up the objects those requests need (subjects, addresses).
import type { BenchConfig, SignedLoad } from './config.js';
import { cpuText, withCpuWatch, type CpuShare } from './cpu.js';
import { statusText } from './http-post.js';
import type { LoadResult, SignedJob } from './load.js';
import { runLoad, type RunningServer } from './processes.js';
import { ms, rate, type Report } from './report.js';
import type { RequestPlan } from './request-plans.js';
import { API_PREFIX, expectSigned, type ClientCredential } from './signed-request.js';

export const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' } as const;

export interface SignedRun {
  result: LoadResult & { warmup: LoadResult | null };
  cpu: CpuShare | null;
}

/** Runs a plan against the node: `load.warmup` requests, then `load.count` measured ones. */
export async function runSignedLoad(config: BenchConfig, node: RunningServer, options: {
  credentials: ClientCredential[]; plan: RequestPlan; load: SignedLoad; idempotency: boolean; onMeasuring?: () => void;
}): Promise<SignedRun> {
  const job: SignedJob = {
    kind: 'signed', baseUrl: node.baseUrl, credentials: options.credentials, plan: options.plan,
    count: options.load.count, warmupCount: options.load.warmup, connections: options.load.connections, idempotency: options.idempotency,
  };
  return withCpuWatch(node.pid, (onMeasuring) => runLoad<SignedRun['result']>(job, config.child_timeout_ms, () => {
    onMeasuring();
    options.onMeasuring?.();
  }));
}

/** Prints the warm-up and measured lines of a run, and a warning when some answers were not 2xx. */
export function describeRun(report: Report, run: SignedRun, what: string): void {
  const { result, cpu } = run;
  if (result.warmup !== null) report.line(`    ${what}, warm-up: ${rate(result.warmup.perSecond)} req/s (${statusText(result.warmup)})`);
  report.line(`    ${what}: ${result.ok} answered 2xx in ${ms(result.durationMs)} ms, ${rate(result.perSecond)} req/s, p50 ${ms(result.latencyP50Ms)} ms, p99 ${ms(result.latencyP99Ms)} ms (${statusText(result)}; errors ${result.errors}, timeouts ${result.timeouts})`);
  if (cpu !== null) report.line(`      ${cpuText(cpu)}`);
  report.load({ figure: what, result });
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    report.line(`    WARNING: ${result.non2xx} non-2xx answers, ${result.errors} errors, ${result.timeouts} timeouts; the rate counts 2xx only`);
  }
}

/** Fails the run when fewer than all measured requests were answered 2xx. */
export function requireAllOk(run: SignedRun, what: string): void {
  const { result } = run;
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(`${what}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts (${statusText(result)})`);
  }
}

/** Creates `count` natural-person subjects (eight at a time) and returns their ids. */
export async function createSubjects(node: RunningServer, credential: ClientCredential, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let first = 0; first < count; first += 8) {
    const batch = Array.from({ length: Math.min(8, count - first) }, () =>
      expectSigned<{ id: string }>(node.baseUrl, credential, 'POST', `${API_PREFIX}/subjects`, { subject_type: 'natural_person' }, 201));
    for (const created of await Promise.all(batch)) ids.push(created.id);
  }
  return ids;
}

/** The plan of identifier registrations: `user<n>@example.com` (from `first`), subjects taken in turn. */
export function registrationPlan(subjects: readonly string[], first = 0, domain = 'example.com'): RequestPlan {
  return {
    kind: 'template', method: 'POST', target: `${API_PREFIX}/identifiers`, first, lists: { subject: subjects },
    body: JSON.stringify({ subject_id: '{subject}', identifier_type: 'email', identifier: `user{n}@${domain}` }),
  };
}
