// Figure 19 (issue 33): a read and a command on an aggregate that has left memory, against the
// same on one still in memory. One node, started with `aggregate_idle_ms` short
// (BENCH_PASSIVATED_IDLE_MS), is given `count` payee receipts and `count` checkout sessions
// (each on a payment request of its own), then left idle until no aggregate is in memory
// (`path_aggregates_in_memory` 0 on its operator listener). Then, in rounds, as many again are
// made, and each round times one request at a time over loopback, taking turns: the member's
// read of a session (`GET /checkout/sessions/:id`, a read through the aggregate, which brings a
// passivated one back from its `states` row) and a receipt's reversal (`POST
// /receipts/:reference/transitions`, signed and durable), on one out of memory and one just made.
// Every read must answer 200 and every reversal 201. The target (issue 33): each p99 on the
// passivated within 2 ms of the same on the ones in memory.
import { setTimeout as pause } from 'node:timers/promises';
import type { BenchConfig } from './config.js';
import { createLocalCredential, metricOf, metricsText, removeDir, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { PAYEE_RECEIPT_BODY } from './fixtures.js';
import { ms, quantile, rate, type Report } from './report.js';
import { EUR } from './signed-load.js';
import { API_PREFIX, expectSigned, requestSigner, type ClientCredential } from './signed-request.js';

const SECTION = '19 passivated';
const TARGET_MS = 2;

/** What one round makes: receipts to reverse and sessions to read, one of each per pair. */
interface Made {
  receipts: string[];
  sessions: string[];
}

/** Timings of one kind of request, out of memory and in memory, in ms. */
interface Timed {
  passivated: number[];
  active: number[];
}

/** A signed GET (P5: the body hashed is empty); fails unless it answers 200. */
async function signedGet(node: RunningServer, credential: ClientCredential, target: string, stamp: number): Promise<void> {
  const headers = requestSigner(credential)({ method: 'GET', target, timestamp: new Date(stamp).toISOString(), body: Buffer.alloc(0) });
  const res = await fetch(node.baseUrl + target, { headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${target} answered ${res.status}: ${text.slice(0, 300)}`);
}

/** `count` receipts and `count` sessions (each on a request of its own), `parallel` at a time. */
async function make(node: RunningServer, credential: ClientCredential, count: number, parallel: number): Promise<Made> {
  const made: Made = { receipts: [], sessions: [] };
  const one = async () => {
    const receipt = await expectSigned<{ reference: string }>(node.baseUrl, credential, 'POST', `${API_PREFIX}/receipts`, PAYEE_RECEIPT_BODY, 201);
    const request = await expectSigned<{ reference: string }>(node.baseUrl, credential, 'POST', `${API_PREFIX}/requests`, { accepts: [EUR] }, 201);
    const session = await expectSigned<{ id: string }>(node.baseUrl, credential, 'POST', `${API_PREFIX}/checkout/sessions`, {
      request_reference: request.reference, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/cancel',
    }, 201);
    made.receipts.push(receipt.reference);
    made.sessions.push(session.id);
  };
  for (let done = 0; done < count; done += parallel) {
    await Promise.all(Array.from({ length: Math.min(parallel, count - done) }, one));
  }
  return made;
}

/** A figure of the node's operator listener's /metrics, by name. */
async function nodeMetric(node: RunningServer, name: string): Promise<number> {
  return metricOf(await metricsText(node), name);
}

/** Waits until no aggregate is in memory; fails after `timeoutMs`. */
async function allPassivated(node: RunningServer, timeoutMs: number): Promise<void> {
  const until = performance.now() + timeoutMs;
  while ((await nodeMetric(node, 'path_aggregates_in_memory')) > 0) {
    if (performance.now() > until) throw new Error(`aggregates still in memory after ${timeoutMs} ms idle`);
    await pause(250);
  }
}

/** One request timed, in ms. */
async function timed(run: () => Promise<unknown>): Promise<number> {
  const began = performance.now();
  await run();
  return performance.now() - began;
}

/** The pairs of one round, taking turns: which of the two goes first alternates. */
async function round(node: RunningServer, credential: ClientCredential, cold: Made, warm: Made, reads: Timed, commands: Timed): Promise<void> {
  let stamp = Date.now();
  const read = (id: string) => signedGet(node, credential, `${API_PREFIX}/checkout/sessions/${id}`, (stamp = Math.max(Date.now(), stamp + 1)));
  const reverse = (reference: string) => expectSigned(node.baseUrl, credential, 'POST', `${API_PREFIX}/receipts/${reference}/transitions`, { to: 'reversed', reason_code: null }, 201);
  for (let i = 0; i < warm.receipts.length; i++) {
    const order = i % 2 === 0 ? (['passivated', 'active'] as const) : (['active', 'passivated'] as const);
    for (const which of order) {
      const made = which === 'passivated' ? cold : warm;
      reads[which].push(await timed(() => read(made.sessions[i]!)));
    }
    for (const which of order) {
      const made = which === 'passivated' ? cold : warm;
      commands[which].push(await timed(() => reverse(made.receipts[i]!)));
    }
  }
}

function compare(report: Report, what: string, times: Timed): void {
  const p99 = { passivated: quantile(times.passivated, 0.99), active: quantile(times.active, 0.99) };
  const p50 = { passivated: quantile(times.passivated, 0.5), active: quantile(times.active, 0.5) };
  const apart = p99.passivated - p99.active;
  report.line(`  ${what}: p50 ${ms(p50.passivated)} ms out of memory, ${ms(p50.active)} ms in memory; p99 ${ms(p99.passivated)} ms and ${ms(p99.active)} ms (${rate(times.passivated.length)} each)`);
  report.add({ section: SECTION, figure: `${what}: p99 out of memory, in memory`, value: `${ms(p99.passivated)} ms, ${ms(p99.active)} ms` });
  report.add({
    section: SECTION, figure: `${what}: p99 out of memory minus in memory`, value: `${ms(apart)} ms`,
    target: { text: `<= ${TARGET_MS} ms`, met: apart <= TARGET_MS },
  });
}

export async function runPassivated(config: BenchConfig, report: Report): Promise<void> {
  const { count, round_size: roundSize, idle_ms: idleMs, parallel } = config.passivated;
  report.heading('19. A read and a command on an aggregate out of memory, against one in memory (issue 33)');
  report.line(`  one node (aggregate_idle_ms ${idleMs} ms): ${rate(count)} receipts and checkout sessions made, then idle until none is in memory; then rounds of ${rate(roundSize)} made again, each round timing one request at a time, in turns: a session read, a receipt reversed`);
  const dataDir = tempDir('passivated');
  let node: RunningServer | null = null;
  try {
    const credential = createLocalCredential(dataDir);
    node = await startNodeProcess({ dataDir, timeoutMs: config.child_timeout_ms, env: { PATH_LIMIT_AGGREGATE_IDLE_MS: String(idleMs) } });
    const cold = await make(node, credential, count, parallel);
    await allPassivated(node, idleMs * 10 + 10_000);
    const passivations = await nodeMetric(node, 'path_aggregate_passivations_total');
    report.line(`  out of memory: ${rate(passivations)} aggregates let go of`);
    const reads: Timed = { passivated: [], active: [] };
    const commands: Timed = { passivated: [], active: [] };
    for (let first = 0; first < count; first += roundSize) {
      const size = Math.min(roundSize, count - first);
      const warm = await make(node, credential, size, parallel);
      const coldRound: Made = { receipts: cold.receipts.slice(first, first + size), sessions: cold.sessions.slice(first, first + size) };
      await round(node, credential, coldRound, warm, reads, commands);
    }
    // Each session read and each reversal out of memory brought its aggregate back: fewer, and
    // the figure would time something other than what it names.
    const activations = await nodeMetric(node, 'path_aggregate_activations_total');
    // Exactly those: one more is an aggregate timed as in memory that had left it (a round
    // outlasted idle_ms), and the figure would not be what it says.
    if (activations !== 2 * count) throw new Error(`${rate(activations)} activations for ${rate(count)} sessions and ${rate(count)} receipts out of memory: a round outlasted aggregate_idle_ms (make rounds smaller or BENCH_PASSIVATED_IDLE_MS longer)`);
    report.line(`  brought back into memory: ${rate(activations)} activations`);
    compare(report, 'a session read through its aggregate', reads);
    compare(report, 'a receipt reversed (signed, durable)', commands);
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}
