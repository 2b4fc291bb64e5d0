// The operator's own listener (P21) and the access log, over a real node: `/metrics` scraped and
// read with a Prometheus text-format parser, `/healthz`, `/readyz` (503 while starting and while
// draining), nothing of it on the public port; one access log line per request with its request
// id, operation, status, duration and member; and no identifier, hash, reference or name in
// any metric or log line.
import { readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, createCredential, startNode, tempDir, type NodeProcess } from './support/harness.js';
import { cleanedUpAfterEach } from './support/lifecycle.js';
import { sleep, waitFor } from './support/wait.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '40.00', asset_type: 'fiat', asset_code: 'EUR' };
const PHONE = '+44 20 7946 0321';
const PHONE_DIGITS = '2079460321';
const NAME = 'Margarethe Quellenberg';

type Family = { name: string; type: string; metrics: { value?: string; labels?: Record<string, string>; count?: string; buckets?: Record<string, string> }[] };

const cleanup = cleanedUpAfterEach();

async function scrape(node: NodeProcess): Promise<{ text: string; families: Map<string, Family> }> {
  const res = await fetch(`http://127.0.0.1:${node.adminPort}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  const text = await res.text();
  const families = new Map((parsePrometheusTextFormat(text) as Family[]).map((f) => [f.name, f]));
  return { text, families };
}

const valueOf = (families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number => {
  const family = families.get(name);
  if (family === undefined) throw new Error(`no metric ${name}`);
  const sample = family.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  if (sample === undefined) throw new Error(`no sample of ${name} with ${JSON.stringify(labels)}`);
  return Number(sample.value ?? sample.count);
};

/** A port free now, for a listener whose port the test must know before the node says it. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe('P21 metrics, health and the access log on a working node', () => {
  let node: NodeProcess;
  let local: Client;
  let beta: Client;
  let reference: string;
  let hash: string;
  let failedRequestId: string;
  const receiver: Server = createServer((_req, res) => { res.statusCode = 200; res.end(); });

  beforeAll(async () => {
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    const hooks = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
    const dataDir = tempDir('path-operator');
    const own = createCredential(dataDir, 'local', { local: true });
    const b = createCredential(dataDir, 'beta', { local: false });
    node = await startNode({ dataDir, args: ['--dev', '--webhook-urls', hooks, '--lookup-budget-base', '1', '--lookup-budget-factor', '0'] });
    local = new Client(node.baseUrl, own);
    beta = new Client(node.baseUrl, b);
    const subject = await local.post('/subjects', { subject_type: 'natural_person' });
    expect((await local.post('/identifiers', { subject_id: subject.json.id, identifier_type: 'phone', identifier: PHONE, discoverability: 'network' })).status).toBe(201);
    const record = await local.request('PUT', `/subjects/${subject.json.id}/payee-record`, { body: { registered_name: NAME, payee_check: 'enabled' } });
    expect(record.status, record.text).toBe(200);
    const created = await local.post('/requests', { accepts: [EUR], amount: AMOUNT, order_reference: 'order-77' });
    reference = created.json.reference;
    expect((await beta.post(`/requests/${reference}/paid`)).status).toBe(200);
    const found = await beta.post('/sonar/lookup', { identifier_type: 'phone', identifier: PHONE });
    expect(found.status, found.text).toBe(200);
    hash = found.json.identifier_hash;
    const refused = await beta.post('/sonar/lookup', { identifier_type: 'phone', identifier: PHONE });
    expect(refused.status).toBe(429);
    const missing = await beta.get('/requests/req_00000000000000000000000000000000');
    expect(missing.status).toBe(404);
    failedRequestId = missing.headers.get('path-request-id')!;
  });

  afterAll(async () => {
    await node.stop();
    await new Promise<void>((r) => receiver.close(() => r()));
  });

  it('/healthz and /readyz answer on the admin port, and none of it is on the public port', async () => {
    const admin = `http://127.0.0.1:${node.adminPort}`;
    expect(node.adminPort).not.toBe(node.port);
    expect(await (await fetch(`${admin}/healthz`)).json()).toEqual({ status: 'alive' });
    const ready = await fetch(`${admin}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
    for (const path of ['/metrics', '/healthz', '/readyz'])
      expect((await fetch(`${node.baseUrl}${path}`)).status).toBe(404);
    expect((await fetch(`${admin}/elsewhere`)).status).toBe(404);
  });

  it('/metrics parses as Prometheus text: requests by operation and status, latency, commits, budget, webhooks, index, replays, process', async () => {
    await waitFor('the request.paid delivery to count', async () => {
      const { families } = await scrape(node);
      return valueOf(families, 'path_webhook_deliveries_total', { outcome: 'delivered' }) >= 1;
    });
    const { families } = await scrape(node);
    expect(valueOf(families, 'path_http_requests_total', { operation: 'requests.create', status: '201' })).toBe(1);
    expect(valueOf(families, 'path_http_requests_total', { operation: 'requests.paid', status: '200' })).toBe(1);
    expect(valueOf(families, 'path_http_requests_total', { operation: 'sonar.lookup', status: '429' })).toBe(1);
    expect(valueOf(families, 'path_http_requests_total', { operation: 'requests.get', status: '404' })).toBe(1);
    // The parser keeps neither the labels nor the count of a labelled histogram's samples.
    const latency = families.get('path_http_request_duration_seconds')!;
    expect(latency.type).toBe('HISTOGRAM');
    expect(Number(latency.metrics[0]?.buckets?.['+Inf'])).toBeGreaterThan(0);
    expect(valueOf(families, 'path_commit_duration_seconds')).toBeGreaterThanOrEqual(4);
    expect(valueOf(families, 'path_commit_commands')).toBeGreaterThanOrEqual(4);
    // Each commit also says how long its first command waited to be decided.
    expect(valueOf(families, 'path_commit_wait_seconds')).toBe(valueOf(families, 'path_commit_commands'));
    expect(valueOf(families, 'path_lookup_budget_refusals_total')).toBe(1);
    expect(valueOf(families, 'path_directory_keys')).toBe(1);
    expect(valueOf(families, 'path_replay_entries')).toBeGreaterThanOrEqual(6);
    expect(valueOf(families, 'path_pending_commands')).toBe(0);
    expect(valueOf(families, 'path_webhook_backlog_events')).toBe(0);
    expect(valueOf(families, 'path_webhook_oldest_undelivered_seconds')).toBe(0);
    expect(families.has('path_replication_lag_entries')).toBe(true);
    expect(valueOf(families, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(valueOf(families, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    // The workers' heaps and the memory their buffers hold outside them (issue 33).
    expect(valueOf(families, 'path_workers_heap_used_bytes')).toBeGreaterThan(0);
    expect(valueOf(families, 'path_workers_external_bytes')).toBeGreaterThan(0);
  });

  it('path_aggregates_in_memory counts the aggregates the workers hold: three new subjects add three (issue 33)', async () => {
    const before = valueOf((await scrape(node)).families, 'path_aggregates_in_memory');
    // The set-up's subject, request and the member's lookup budget at least.
    expect(before).toBeGreaterThanOrEqual(3);
    for (let i = 0; i < 3; i++) expect((await local.post('/subjects', { subject_type: 'legal_entity' })).status).toBe(201);
    expect(valueOf((await scrape(node)).families, 'path_aggregates_in_memory')).toBe(before + 3);
  });

  it('no identifier, hash, reference, name or order reference in any metric', async () => {
    const { text } = await scrape(node);
    for (const secret of [PHONE, PHONE_DIGITS, hash, reference, NAME, 'order-77', 'req_']) expect(text).not.toContain(secret);
  });

  it('the access log: one line per request with id, operation, status, duration and member; never a body, identifier, name or signature', async () => {
    // The access log is written in chunks, at most a second late.
    const lines = await waitFor('the access log lines', () => {
      const all = node.output().split('\n').filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l));
      return all.some((l) => l.request_id === failedRequestId) ? all : undefined;
    });
    const created = lines.find((l) => l.operation === 'requests.create');
    expect(created).toMatchObject({ method: 'POST', status: 201, member: 'local' });
    expect(created.request_id).toMatch(/-/);
    expect(typeof created.duration_ms).toBe('number');
    const refused = lines.find((l) => l.request_id === failedRequestId);
    // A public read is answered without authenticating, so it names no member.
    expect(refused).toMatchObject({ operation: 'requests.get', status: 404, member: null });
    const output = node.output();
    for (const secret of [PHONE, PHONE_DIGITS, NAME, 'order-77']) expect(output).not.toContain(secret);
    expect(output).not.toMatch(/path-signature|"signature"/);
  });
});

describe('P21 readiness follows the node: starting, ready, draining', () => {
  it('/readyz is 503 starting before the node listens, 200 once it does, 503 draining during an orderly stop', async () => {
    const dataDir = tempDir('path-ready');
    cleanup.dirs.push(dataDir);
    createCredential(dataDir, 'local', { local: true });
    // A receiver that never answers: the stop waits for the delivery in flight, so draining lasts.
    const hanging = createServer(() => undefined);
    await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', () => r()));
    const hooks = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/hooks`;
    const adminPort = await freePort();
    const seen: string[] = [];
    let polling = true;
    const poll = (async () => {
      while (polling) {
        try {
          const res = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
          const body = (await res.json()) as { status: string };
          if (seen.at(-1) !== `${res.status} ${body.status}`) seen.push(`${res.status} ${body.status}`);
        } catch {
          // not listening (yet, or any more)
        }
        await sleep(2);
      }
    })();
    const node = await startNode({ dataDir, args: ['--dev', '--webhook-urls', hooks, '--admin-port', String(adminPort)], env: { PATH_LIMIT_WEBHOOK_TIMEOUT_MS: '3000' } });
    cleanup.running.push(node);
    expect(node.adminPort).toBe(adminPort);
    await waitFor('ready', () => seen.includes('200 ready'));
    const own = new Client(node.baseUrl, createCredential(dataDir, 'local2', { local: true }));
    await waitFor('the credential to load', async () => (await own.post('/requests', { accepts: [EUR] })).status === 201);
    const stopped = node.stop();
    await waitFor('draining', () => seen.includes('503 draining'));
    expect(await stopped).toBe(0);
    polling = false;
    await poll;
    hanging.closeAllConnections();
    await new Promise<void>((r) => hanging.close(() => r()));
    expect(seen).toEqual(['503 starting', '200 ready', '503 draining']);
  });

  it('--access-log-sample 0 writes refusals only; a bad value is refused at start', async () => {
    const dataDir = tempDir('path-sample');
    cleanup.dirs.push(dataDir);
    const own = createCredential(dataDir, 'local', { local: true });
    const node = await startNode({ dataDir, args: ['--access-log-sample', '0'] });
    cleanup.running.push(node);
    const local = new Client(node.baseUrl, own);
    expect((await local.post('/requests', { accepts: [EUR] })).status).toBe(201);
    expect((await local.get('/requests/req_00000000000000000000000000000000')).status).toBe(404);
    await node.stop();
    const lines = node.output().split('\n').filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.operation, l.status])).toEqual([['requests.get', 404]]);
    await expect(startNode({ dataDir, args: ['--access-log-sample', '2'] })).rejects.toThrow(/access-log-sample/);
  });
});

describe('--access-log stdout|FILE|off', () => {
  const requestLines = (text: string) => text.split('\n').filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l));
  // The client's own reads (its OpenAPI fetch) are logged too; the test's request is the 404.
  const refusals = (text: string) => requestLines(text).filter((l) => l.operation === 'requests.get').map((l) => [l.operation, l.status]);

  it('stdout writes the lines beside the log; a file gets them appended (created 0600); off writes none and the metrics still count', async () => {
    const dataDir = tempDir('path-access-log');
    cleanup.dirs.push(dataDir);
    const own = createCredential(dataDir, 'local', { local: true });
    const file = join(dataDir, 'logs-access.log');
    const missing = 'req_00000000000000000000000000000000';
    const oneRun = async (args: string[]) => {
      const node = await startNode({ dataDir, args });
      cleanup.running.push(node);
      expect((await new Client(node.baseUrl, own).get(`/requests/${missing}`)).status).toBe(404);
      const { families } = await scrape(node);
      expect(valueOf(families, 'path_http_requests_total', { operation: 'requests.get', status: '404' })).toBe(1);
      expect(await node.stop()).toBe(0);
      return node.output();
    };

    const onStdout = await oneRun(['--access-log', 'stdout']);
    expect(refusals(onStdout)).toEqual([['requests.get', 404]]);

    const toFile = await oneRun(['--access-log', file]);
    expect(requestLines(toFile)).toEqual([]);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(refusals(readFileSync(file, 'utf8'))).toEqual([['requests.get', 404]]);
    await oneRun(['--access-log', file]);
    expect(refusals(readFileSync(file, 'utf8'))).toHaveLength(2);

    const off = await oneRun(['--access-log', 'off']);
    expect(requestLines(off)).toEqual([]);
    expect(refusals(readFileSync(file, 'utf8'))).toHaveLength(2);

    await expect(startNode({ dataDir, args: ['--access-log', join(dataDir, 'no-such-dir', 'a.log')] }))
      .rejects.toThrow(/--access-log cannot open .*no-such-dir.* \(ENOENT\)/);
  }, 180_000);
});
