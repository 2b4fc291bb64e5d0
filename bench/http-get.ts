// Figure 3: public `GET /receipts/{reference}` on the real node against a bare uWebSockets.js
// server that answers the same bytes from a Map. Both run in their own processes, the load
// generator in a third; the two servers are loaded one at a time, in alternating order, and the
// figure is the ratio of the medians. compareWithBare is the same comparison for any public read
// (figures 6 and 7).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchConfig, LoadShape } from './config.js';
import { cpuText, withCpuWatch, type CpuShare } from './cpu.js';
import { PAYEE_RECEIPT_BODY } from './fixtures.js';
import type { GetJob, LoadResult } from './load.js';
import { createLocalCredential, removeDir, runLoad, startBareServer, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { median, ms, rate, ratio, type Report } from './report.js';
import { API_PREFIX, signedPost, type ClientCredential } from './signed-request.js';

const TARGET_RATIO = 0.7;
/** Server CPU per answered request, node over bare on the same bytes: at most this (issue 15). */
const TARGET_CPU_RATIO = 1.15;

/** Issues one receipt through the node and returns the path of its public read. */
async function oneReceipt(node: RunningServer, credential: ClientCredential): Promise<{ path: string }> {
  const created = await signedPost(node.baseUrl, credential, `${API_PREFIX}/receipts`, PAYEE_RECEIPT_BODY);
  if (created.status !== 201) throw new Error(`creating the receipt answered ${created.status}: ${created.text}`);
  const reference = (JSON.parse(created.text) as { reference: string }).reference;
  return { path: `${API_PREFIX}/receipts/${reference}` };
}

function check(result: LoadResult, what: string): LoadResult {
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(`${what}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts (${JSON.stringify(result.statusCounts)})`);
  }
  return result;
}

async function loadShape(config: BenchConfig, report: Report, section: string, servers: { bare: RunningServer; node: RunningServer }, path: string, shape: LoadShape): Promise<void> {
  const job = (server: RunningServer, durationSeconds: number): GetJob =>
    ({ kind: 'get', url: server.baseUrl + path, connections: shape.connections, pipelining: shape.pipelining, durationSeconds });
  const label = `${shape.connections} connections, pipelining ${shape.pipelining}`;
  for (const [name, server] of Object.entries(servers)) check(await runLoad(job(server, config.get.warmup_seconds), config.child_timeout_ms), `${name} warm-up`);

  const rates = { bare: [] as number[], node: [] as number[] };
  const p99 = { bare: [] as number[], node: [] as number[] };
  const cpuUs = { bare: [] as number[], node: [] as number[] };
  for (let round = 0; round < config.get.rounds; round++) {
    for (const name of ['bare', 'node'] as const) {
      const server = servers[name];
      const { result, cpu } = await withCpuWatch(server.pid, (onMeasuring) =>
        runLoad<LoadResult>(job(server, config.get.duration_seconds), config.child_timeout_ms, onMeasuring));
      check(result, `${name} round ${round + 1}`);
      rates[name].push(result.perSecond);
      p99[name].push(result.latencyP99Ms);
      if (cpu !== null) cpuUs[name].push(cpuUsPerRequest(cpu, result.perSecond));
      const where = cpu === null ? '' : `; ${cpuText(cpu)}`;
      report.line(`    ${label}, round ${round + 1}, ${name}: ${rate(result.perSecond)} req/s, p50 ${ms(result.latencyP50Ms)} ms, p99 ${ms(result.latencyP99Ms)} ms${where}`);
    }
  }
  const bare = median(rates.bare);
  const node = median(rates.node);
  report.add({ section, figure: `bare uWS req/s, ${label} (median p99 ${ms(median(p99.bare))} ms)`, value: rate(bare) });
  report.add({ section, figure: `node req/s, ${label} (median p99 ${ms(median(p99.node))} ms)`, value: rate(node) });
  report.add({
    section, figure: `node/bare, ${label}`, value: ratio(node / bare),
    target: { text: `>= ${TARGET_RATIO}`, met: node / bare >= TARGET_RATIO },
  });
  // When the one load generator is the limit, both rates are capped by it and the ratio drifts
  // towards 1; server CPU per answered request is the comparison that does not depend on it.
  if (cpuUs.bare.length > 0 && cpuUs.node.length > 0) {
    const bareUs = median(cpuUs.bare);
    const nodeUs = median(cpuUs.node);
    report.add({ section, figure: `server CPU us per request, bare / node, ${label}`, value: `${bareUs.toFixed(1)} / ${nodeUs.toFixed(1)}` });
    report.add({ section, figure: `CPU efficiency bare us / node us, ${label}`, value: ratio(bareUs / nodeUs) });
    report.add({
      section, figure: `server CPU per request node us / bare us, ${label}`, value: ratio(nodeUs / bareUs),
      target: { text: `<= ${TARGET_CPU_RATIO}`, met: nodeUs / bareUs <= TARGET_CPU_RATIO },
    });
  }
}

/** Microseconds of the server's CPU (all its threads) per answered request. */
function cpuUsPerRequest(cpu: CpuShare, perSecond: number): number {
  return ((cpu.mainThread + cpu.otherThreads) / 100) * 1_000_000 / perSecond;
}

/**
 * The public read at `path` on the node against the bare uWebSockets.js server serving the very
 * bytes the node answers there: both loaded one at a time, alternating, for every shape.
 */
export async function compareWithBare(config: BenchConfig, report: Report, options: { section: string; node: RunningServer; dir: string; path: string; shapes: readonly LoadShape[] }): Promise<void> {
  const { node, path } = options;
  const read = await fetch(node.baseUrl + path);
  const body = await read.text();
  if (read.status !== 200 || read.headers.get('content-type') !== 'application/json') throw new Error(`GET ${path} answered ${read.status}: ${body.slice(0, 300)}`);
  const routesFile = join(options.dir, 'bare-routes.json');
  writeFileSync(routesFile, JSON.stringify({ [path]: body }));
  let bare: RunningServer | null = null;
  try {
    bare = await startBareServer({ routesFile, timeoutMs: config.child_timeout_ms });
    const bareBody = await (await fetch(bare.baseUrl + path)).text();
    if (bareBody !== body) throw new Error('the bare server does not serve the same bytes');
    report.line(`  body: ${Buffer.byteLength(body)} bytes; ${config.get.duration_seconds} s per run, ${config.get.rounds} rounds of bare then node, after a ${config.get.warmup_seconds} s warm-up each`);
    for (const shape of options.shapes) await loadShape(config, report, options.section, { bare, node }, path, shape);
  } finally {
    await bare?.stop();
  }
}

export async function runHttpGet(config: BenchConfig, report: Report): Promise<void> {
  report.heading('3. Public GET /receipts/{reference}: node against a bare uWebSockets.js server');
  const dataDir = tempDir('get');
  let node: RunningServer | null = null;
  try {
    const credential = createLocalCredential(dataDir);
    node = await startNodeProcess({ dataDir, timeoutMs: config.child_timeout_ms });
    const { path } = await oneReceipt(node, credential);
    await compareWithBare(config, report, { section: '3 GET', node, dir: dataDir, path, shapes: config.get.shapes });
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}
