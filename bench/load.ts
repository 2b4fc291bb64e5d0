// The load generator, run in its own process so that it never shares an event loop with a server
// under test: `node dist/bench/load.js JOB_JSON`. Prints one JSON line (LoadResult) and exits.
//   get:  autocannon for a fixed duration against one URL.
//   post:   signed `POST`s (P5), every one signed before the clock starts, each with its own
//           timestamp and idempotency key so that none is a replay; sent by autocannon with a
//           fixed request count, after a warm-up batch.
//   signed: the same for any plan of distinct requests (request-plans.ts): bodies and paths that
//           differ request by request, several credentials taken in turn.
// A signed load may name several nodes (`baseUrls`, cluster instances): its connections are then
// spread over them round-robin, connection i to node i mod n.
import { createRequire } from 'node:module';
import { MEASURING_LINE } from './processes.js';
import { fixedPostPlan, plannedRequest, type RequestPlan } from './request-plans.js';
import { requestSigner, type ClientCredential } from './signed-request.js';

export interface GetJob {
  kind: 'get';
  url: string;
  connections: number;
  pipelining: number;
  durationSeconds: number;
  /** Sent on every request (an `Accept-Encoding`, figure 3's coded documents). */
  headers?: Record<string, string>;
}

export interface PostJob {
  kind: 'post';
  baseUrl: string;
  /** Several nodes in place of `baseUrl`, the connections spread over them round-robin. */
  baseUrls?: string[];
  target: string;
  credential: ClientCredential;
  body: unknown;
  count: number;
  warmupCount: number;
  connections: number;
}

export interface SignedJob {
  kind: 'signed';
  baseUrl: string;
  /** Several nodes in place of `baseUrl`, the connections spread over them round-robin. */
  baseUrls?: string[];
  /** Taken in turn, request by request. */
  credentials: ClientCredential[];
  plan: RequestPlan;
  count: number;
  warmupCount: number;
  connections: number;
  /** Send a `Path-Idempotency-Key` (its own for every request). */
  idempotency: boolean;
}

export type LoadJob = GetJob | PostJob | SignedJob;

export interface LoadResult {
  /** Answers with a 2xx status. */
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCounts: Record<string, number>;
  durationMs: number;
  /** 2xx answers per second of the measured run. */
  perSecond: number;
  latencyP50Ms: number;
  latencyP90Ms: number;
  latencyP99Ms: number;
  latencyP999Ms: number;
  latencyMaxMs: number;
}

/** The part of autocannon's options and result this generator uses (it ships no types). */
interface AutocannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: Buffer;
  setupRequest?: (request: AutocannonRequest) => AutocannonRequest;
}
interface AutocannonOptions {
  /** Several URLs: connection i goes to url[i mod n]. */
  url: string | string[];
  connections: number;
  pipelining?: number;
  duration?: number;
  amount?: number;
  /** Milliseconds between autocannon's samples (default 1000). */
  sampleInt?: number;
  method?: string;
  headers?: Record<string, string>;
  requests?: AutocannonRequest[];
}
interface AutocannonResult {
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  statusCodeStats: Record<string, { count: number }>;
  latency: { p50: number; p90: number; p99: number; p99_9: number; max: number };
}

const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as (options: AutocannonOptions) => Promise<AutocannonResult>;

/** Signed requests made beyond the count: autocannon builds one ahead on each connection. */
const SPARE_REQUESTS_PER_CONNECTION = 4;
/**
 * autocannon reports a run of a fixed request count only at its next sample tick after the last
 * answer, so with its default one-second samples such a run's measured duration is rounded up to
 * whole seconds (a 2.1 s run reads 3 s). Fixed-count runs sample every 10 ms instead.
 */
const FIXED_COUNT_SAMPLE_MS = 10;

async function measure(options: AutocannonOptions): Promise<LoadResult> {
  const started = performance.now();
  const result = await autocannon(options);
  const durationMs = performance.now() - started;
  const statusCounts: Record<string, number> = {};
  for (const [status, { count }] of Object.entries(result.statusCodeStats)) statusCounts[status] = count;
  return {
    ok: result['2xx'], non2xx: result.non2xx, errors: result.errors, timeouts: result.timeouts, statusCounts,
    durationMs, perSecond: result['2xx'] / (durationMs / 1000), latencyP50Ms: result.latency.p50, latencyP90Ms: result.latency.p90,
    latencyP99Ms: result.latency.p99, latencyP999Ms: result.latency.p99_9, latencyMaxMs: result.latency.max,
  };
}

function runGet(job: GetJob): Promise<LoadResult> {
  process.stdout.write(`${MEASURING_LINE}\n`);
  return measure({ url: job.url, connections: job.connections, pipelining: job.pipelining, duration: job.durationSeconds, ...(job.headers === undefined ? {} : { headers: job.headers }) });
}

interface SignedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

function signAll(job: SignedJob, count: number): SignedRequest[] {
  const signers = job.credentials.map((c) => requestSigner(c));
  const base = Date.now();
  const requests: SignedRequest[] = [];
  for (let i = 0; i < count; i++) {
    const planned = plannedRequest(job.plan, i);
    // One millisecond apart: every signing string differs, and all stay inside the 300 s window.
    const timestamp = new Date(base + i).toISOString();
    const idempotencyKey = job.idempotency ? `bench-${base.toString(36)}-${i}` : undefined;
    const headers = signers[i % signers.length]!({ method: planned.method, target: planned.target, timestamp, idempotencyKey, body: planned.body });
    requests.push({ method: planned.method, path: planned.target, headers: { 'content-type': 'application/json', ...headers }, body: planned.body });
  }
  return requests;
}

/** A fixed POST body to one path, as figure 4 sends it. */
function signedJobOf(job: PostJob): SignedJob {
  return {
    kind: 'signed', baseUrl: job.baseUrl, credentials: [job.credential], count: job.count, warmupCount: job.warmupCount, connections: job.connections,
    baseUrls: job.baseUrls,
    idempotency: true, plan: fixedPostPlan(job.target, job.body),
  };
}

async function runSigned(job: SignedJob): Promise<LoadResult & { warmup: LoadResult | null }> {
  const spare = SPARE_REQUESTS_PER_CONNECTION * job.connections;
  const signed = signAll(job, job.warmupCount + job.count + 2 * spare);
  let next = 0;
  const request: AutocannonRequest = {
    // Past the end it wraps around: the node then refuses replays, which shows as non-2xx.
    setupRequest: (r) => {
      const s = signed[next++ % signed.length]!;
      return { ...r, method: s.method, path: s.path, headers: { ...s.headers }, body: s.body };
    },
  };
  const bases = job.baseUrls ?? [job.baseUrl];
  const path = signed[0]!.path;
  const url = bases.length === 1 ? bases[0]! + path : bases.map((base) => base + path);
  const warmup = job.warmupCount > 0
    ? await measure({ url, connections: Math.min(job.connections, job.warmupCount), amount: job.warmupCount, sampleInt: FIXED_COUNT_SAMPLE_MS, requests: [request] })
    : null;
  next = job.warmupCount + spare;
  process.stdout.write(`${MEASURING_LINE}\n`);
  const measured = await measure({ url, connections: job.connections, amount: job.count, sampleInt: FIXED_COUNT_SAMPLE_MS, requests: [request] });
  return { ...measured, warmup };
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: load.js JOB_JSON');
  const job = JSON.parse(raw) as LoadJob;
  const result = job.kind === 'get' ? await runGet(job) : await runSigned(job.kind === 'post' ? signedJobOf(job) : job);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`load generator: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
