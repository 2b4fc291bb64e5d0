// An open-loop load generator, run in its own process: `node dist/bench/paced-load.js JOB_JSON`.
// Request i is due at t0 + i / rate, whatever happened to the ones before it, and its latency is
// measured from that due time to the last byte of its answer: a request that waits for a free
// connection, or is sent late because the generator's timer fired late, counts that wait
// (no coordinated omission). autocannon, by contrast, sends the next request of a connection
// only when the previous one is answered, so a stall of the server hides the requests that
// would have arrived during it.
// Every request is signed before t0 (P5: each its own timestamp), serialised to bytes, and
// written whole on one of a pool of keep-alive connections opened before t0; one request at a
// time on a connection (no pipelining). Answers are read with a minimal HTTP/1.1 parser
// (status line, Content-Length; the node answers every request here with a length). Prints
// one JSON line (PacedResult) and exits.
import { connect, type Socket } from 'node:net';
import { MEASURING_LINE } from './processes.js';
import { quantile } from './report.js';
import { plannedRequest, type RequestPlan } from './request-plans.js';
import { requestSigner, type ClientCredential } from './signed-request.js';

export interface PacedJob {
  baseUrl: string;
  /** Taken in turn, request by request; none: the requests go unsigned (public reads). */
  credentials: ClientCredential[];
  plan: RequestPlan;
  /** Requests per second, on an even schedule. */
  rate: number;
  /** Sent on the same schedule before the measured ones, not counted. */
  warmup: number;
  count: number;
  connections: number;
  /** After the last request is due, how long its answers may still take before the run fails. */
  drainMs: number;
}

/** The payment networks' bar for an answer (issue 34, target 5: at most 1 % over it). */
const ONE_SECOND_MS = 1_000;

export interface PacedResult {
  /** Measured requests answered, and of those with a 2xx status. */
  answered: number;
  ok: number;
  statusCounts: Record<string, number>;
  /** Measured requests not answered within the drain time. */
  unanswered: number;
  rate: number;
  /** From the first measured request's due time to the last measured answer. */
  durationMs: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencyP999Ms: number;
  latencyMaxMs: number;
  /** Answers that took longer than a second from their due time (the payment networks' bar). */
  overOneSecond: number;
  /** How late the generator wrote requests after their due time (its own share of latency). */
  sendLagP50Ms: number;
  sendLagP99Ms: number;
}

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length: *(\d+)/i;

/** One keep-alive connection: at most one request on it at a time. */
class Connection {
  private pending: Buffer = Buffer.alloc(0);
  private onAnswer: ((status: number) => void) | null = null;

  constructor(readonly socket: Socket, onError: (error: Error) => void) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('error', onError);
    // The server closes a connection idle for its timeout: one waited on must say so, not hang.
    socket.on('close', () => { if (this.onAnswer !== null) onError(new Error('a connection closed before its answer')); });
  }

  send(bytes: Buffer, onAnswer: (status: number) => void): void {
    this.onAnswer = onAnswer;
    this.socket.write(bytes);
  }

  private read(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const end = this.pending.indexOf(HEADER_END);
    if (end < 0) return;
    const head = this.pending.toString('latin1', 0, end);
    const length = Number(CONTENT_LENGTH.exec(head)?.[1] ?? 0);
    if (this.pending.length < end + 4 + length) return;
    if (this.pending.length > end + 4 + length) throw new Error('bytes after an answer nobody asked for');
    this.pending = Buffer.alloc(0);
    const status = Number(head.slice(9, 12));
    const done = this.onAnswer;
    this.onAnswer = null;
    done?.(status);
  }
}

function openConnections(url: URL, count: number, onError: (error: Error) => void): Promise<Connection[]> {
  return Promise.all(Array.from({ length: count }, () => new Promise<Connection>((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) }, () => resolve(new Connection(socket, onError)));
    socket.once('error', reject);
  })));
}

/** Every request of the run as the bytes written on the wire, signed before the clock starts. */
function serialiseAll(job: PacedJob, host: string): Buffer[] {
  const signers = job.credentials.map((c) => requestSigner(c));
  const base = Date.now();
  const out: Buffer[] = [];
  for (let i = 0; i < job.warmup + job.count; i++) {
    const planned = plannedRequest(job.plan, i);
    // One millisecond apart: every signing string differs, and all stay inside the 300 s window.
    const timestamp = new Date(base + i).toISOString();
    const headers = signers.length === 0 ? {} : signers[i % signers.length]!({ method: planned.method, target: planned.target, timestamp, body: planned.body });
    const lines = [`${planned.method} ${planned.target} HTTP/1.1`, `host: ${host}`, 'content-type: application/json', `content-length: ${planned.body.length}`,
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
    out.push(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), planned.body]));
  }
  return out;
}

async function run(job: PacedJob): Promise<PacedResult> {
  const url = new URL(job.baseUrl);
  const requests = serialiseAll(job, url.host);
  let failure: Error | null = null;
  const connections = await openConnections(url, job.connections, (error) => { failure ??= error; });
  const total = requests.length;
  const interval = 1000 / job.rate;
  const sentAt = new Float64Array(total);
  const doneAt = new Float64Array(total).fill(NaN);
  const status = new Uint16Array(total);
  const free = [...connections];
  const waiting: number[] = [];
  let next = 0;
  let answered = 0;
  let t0 = 0;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => { finish = resolve; });

  const dispatch = (i: number, connection: Connection): void => {
    sentAt[i] = performance.now();
    connection.send(requests[i]!, (code) => {
      doneAt[i] = performance.now();
      status[i] = code;
      if (++answered === total) finish();
      const queued = waiting.shift();
      if (queued === undefined) free.push(connection);
      else dispatch(queued, connection);
    });
  };
  // Fires at each due time (as closely as timers allow) and writes every request now due.
  const tick = (): void => {
    const now = performance.now();
    while (next < total && t0 + next * interval <= now) {
      if (next === job.warmup) process.stdout.write(`${MEASURING_LINE}\n`);
      // Oldest free first: every connection stays in use, none idles into the server's timeout.
      const connection = free.shift();
      if (connection === undefined) waiting.push(next);
      else dispatch(next, connection);
      next++;
    }
    if (next < total) setTimeout(tick, Math.max(0, t0 + next * interval - performance.now()));
  };
  t0 = performance.now() + 50;
  setTimeout(tick, 50);
  const deadline = (total / job.rate) * 1000 + job.drainMs + 100;
  await Promise.race([finished, new Promise<void>((resolve) => { setTimeout(resolve, deadline).unref(); })]);
  for (const c of connections) c.socket.destroy();
  if (failure !== null) throw failure;
  return summarise(job, { sentAt, doneAt, status, t0, interval });
}

function summarise(job: PacedJob, r: { sentAt: Float64Array; doneAt: Float64Array; status: Uint16Array; t0: number; interval: number }): PacedResult {
  const latencies: number[] = [];
  const lags: number[] = [];
  const statusCounts: Record<string, number> = {};
  let ok = 0;
  let last = 0;
  for (let i = job.warmup; i < job.warmup + job.count; i++) {
    const due = r.t0 + i * r.interval;
    if (Number.isNaN(r.doneAt[i]!)) continue;
    latencies.push(r.doneAt[i]! - due);
    lags.push(r.sentAt[i]! - due);
    statusCounts[r.status[i]!] = (statusCounts[r.status[i]!] ?? 0) + 1;
    if (r.status[i]! >= 200 && r.status[i]! < 300) ok++;
    last = Math.max(last, r.doneAt[i]!);
  }
  if (latencies.length === 0) throw new Error('no measured request was answered');
  const sorted = latencies.sort((a, b) => a - b);
  return {
    answered: latencies.length, ok, statusCounts, unanswered: job.count - latencies.length, rate: job.rate,
    durationMs: last - (r.t0 + job.warmup * r.interval),
    latencyP50Ms: quantile(sorted, 0.5), latencyP99Ms: quantile(sorted, 0.99), latencyP999Ms: quantile(sorted, 0.999), latencyMaxMs: sorted[sorted.length - 1]!,
    overOneSecond: sorted.filter((l) => l > ONE_SECOND_MS).length,
    sendLagP50Ms: quantile(lags, 0.5), sendLagP99Ms: quantile(lags, 0.99),
  };
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('usage: paced-load.js JOB_JSON');
  const result = await run(JSON.parse(raw) as PacedJob);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`paced load generator: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
