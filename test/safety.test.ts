// Safety over the real node and real LMDB: replays refused across restarts (P5), each
// credential's own share of the replay memory (P5), recovery that refuses damage at rest
// instead of keeping half a commit (P14), and a bound on the commands awaiting a worker (P7).
import { openSync, closeSync, ftruncateSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import { describe, expect, it } from 'vitest';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { damageFirstRow, damageLastRecord } from './support/damage.js';
import { lastPageEnd } from './support/data-file.js';
import { waitFor } from './support/wait.js';
import {
  Client, createCredential, PREFIX, signRequest, startNode, tempDir, type Credential, type NodeProcess,
} from './support/harness.js';
import { partitionOf } from '../src/log/log.js';

const { running, dirs } = cleanedUpAfterEach();

async function boot(dir: string, env?: Record<string, string>): Promise<NodeProcess> {
  const node = await startNode({ dataDir: dir, ...(env === undefined ? {} : { env }) });
  running.push(node);
  return node;
}

interface Setup { dir: string; local: Credential; beta: Credential }

function setup(label: string): Setup {
  const dir = tempDir(label);
  dirs.push(dir);
  return { dir, local: createCredential(dir, 'local', { local: true }), beta: createCredential(dir, 'beta', { local: false }) };
}

async function newConnection(local: Client, maxTotal: string): Promise<string> {
  const subject = await local.post('/subjects', { subject_type: 'natural_person' }, { timestamp: stamp() });
  expect(subject.status, subject.text).toBe(201);
  const created = await local.post('/connect/connections', {
    grantee: 'beta', subject_id: subject.json.id, capabilities: { payment_request: true }, mode: 'persistent_consent',
    max_single: '10', max_total: maxTotal, currency: 'EUR', expires_at: new Date(Date.now() + 7_200_000).toISOString(),
  }, { timestamp: stamp() });
  expect(created.status, created.text).toBe(201);
  return created.json.reference as string;
}

/** One signed consume, frozen: the same bytes and headers every time it is sent. */
function frozenConsume(credential: Credential, reference: string, operation: string) {
  const target = `${PREFIX}/connect/connections/${reference}/consume`;
  const body = Buffer.from(JSON.stringify({ capability: 'payment_request', amount: '10', currency: 'EUR', operation_ref: operation }));
  const headers = { 'content-type': 'application/json', ...signRequest(credential, { method: 'POST', target, timestamp: stamp(), body }) };
  return async (baseUrl: string) => {
    const res = await fetch(baseUrl + target, { method: 'POST', headers, body });
    return { status: res.status, json: await res.json() as any };
  };
}

async function consumedOperations(baseUrl: string, local: Credential, reference: string): Promise<number> {
  const read = await new Client(baseUrl, local).get(`/connect/connections/${reference}`, { timestamp: stamp() });
  expect(read.status, read.text).toBe(200);
  return read.json.consumed_operations as number;
}

describe('P5: a request accepted before a restart is refused after it while fresh', () => {
  it('the same signed consume sent again after a SIGTERM restart and after a kill -9 restart is refused as replayed', async () => {
    const { dir, local, beta } = setup('replay-restart');
    let node = await boot(dir);
    const reference = await newConnection(new Client(node.baseUrl, local), '100');
    const first = frozenConsume(beta, reference, 'op-first');
    expect((await first(node.baseUrl)).status).toBe(200);
    expect((await first(node.baseUrl)).json.error.detail.reason).toBe('replayed');

    expect(await node.stop()).toBe(0);
    node = await boot(dir);
    const afterStop = await first(node.baseUrl);
    expect(afterStop.status).toBe(401);
    expect(afterStop.json.error.detail.reason).toBe('replayed');

    // Accepted by this run, then kill -9: only what the consume's own commit remembered survives.
    const second = frozenConsume(beta, reference, 'op-second');
    expect((await second(node.baseUrl)).status).toBe(200);
    await node.kill9();
    node = await boot(dir);
    for (const replay of [first, second]) {
      const res = await replay(node.baseUrl);
      expect(res.status).toBe(401);
      expect(res.json.error.detail.reason).toBe('replayed');
    }
    expect(await consumedOperations(node.baseUrl, local, reference)).toBe(2);
  });

  it('a request that changed nothing, accepted before an orderly stop, is refused after it', async () => {
    const { dir, local } = setup('replay-read');
    let node = await boot(dir);
    const target = `${PREFIX}/receipts`;
    const body = Buffer.from('{}');
    const headers = { 'content-type': 'application/json', ...signRequest(local, { method: 'POST', target, timestamp: stamp(), body }) };
    const send = async () => (await fetch(node.baseUrl + target, { method: 'POST', headers, body })).json() as Promise<any>;
    expect((await send()).error.code).toBe('path.core.invalid_request');
    expect(await node.stop()).toBe(0);
    node = await boot(dir);
    expect((await send()).error.detail.reason).toBe('replayed');
  });
});

describe('P5: a request that committed nothing is refused after a kill -9', () => {
  it('a move refused 409, kill -9, the move made possible: the same bytes replayed', async () => {
    const { dir, local } = setup('replay-refused-kill');
    let node = await boot(dir);
    const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
    const issued = await new Client(node.baseUrl, local).post(
      '/receipts', { issued_by: 'payer', via: EUR }, { timestamp: stamp() },
    );
    expect(issued.status, issued.text).toBe(201);
    const reference = issued.json.reference as string;
    // A pending receipt cannot be reversed: this run commits nothing, its answer a refusal.
    const target = `${PREFIX}/receipts/${reference}/transitions`;
    const body = Buffer.from(JSON.stringify({ to: 'reversed' }));
    const headers = {
      'content-type': 'application/json',
      ...signRequest(local, { method: 'POST', target, timestamp: stamp(), body }),
    };
    const reverse = async () => {
      const res = await fetch(node.baseUrl + target, { method: 'POST', headers, body });
      return { status: res.status, json: await res.json() as any };
    };
    const refused = await reverse();
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe('path.settlement.transition_invalid');
    // Gone without a word: only what was durable before the answer is taken back.
    await node.kill9();
    node = await boot(dir);
    const settle = { to: 'settled', rail_references: [{ type: 'book_entry', value: 'BE-1' }] };
    const settled = await new Client(node.baseUrl, local).post(
      `/receipts/${reference}/transitions`, settle, { timestamp: stamp() },
    );
    expect(settled.status, settled.text).toBe(201);
    // The same bytes, still fresh, would now reverse the settled receipt: refused as replayed.
    const again = await reverse();
    expect(again.status).toBe(401);
    expect(again.json.error.code).toBe('path.auth.unauthenticated');
    expect(again.json.error.detail.reason).toBe('replayed');
    const read = await new Client(node.baseUrl).get(`/receipts/${reference}`);
    expect(read.json.status).toBe('settled');
  });
});

describe('P5: each credential has its own share of the replay memory', () => {
  it('a member that fills its share is refused with 503 alone; the local member goes on', async () => {
    const { dir, local, beta } = setup('replay-share');
    const share = 150;
    const node = await boot(dir, { PATH_LIMIT_REPLAY_ENTRIES_PER_CREDENTIAL_MAX: String(share) });
    const noisy = new Client(node.baseUrl, beta);
    for (let sent = 0; sent < share; sent += 25) {
      const batch = await Promise.all(Array.from({ length: 25 }, () => noisy.post('/receipts', {}, { timestamp: stamp() })));
      for (const res of batch) expect(res.status, res.text).toBe(400);
    }
    const refused = await noisy.post('/receipts', {}, { timestamp: stamp() });
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe('path.core.unavailable');
    expect(refused.headers.get('retry-after')).toBe('1');
    const own = await new Client(node.baseUrl, local).post('/subjects', { subject_type: 'natural_person' }, { timestamp: stamp() });
    expect(own.status, own.text).toBe(201);
  });
});

async function refusedStart(dir: string): Promise<string> {
  const started = await startNode({ dataDir: dir }).then((node) => node, (e: Error) => e);
  if (!(started instanceof Error)) await started.kill9();
  expect(started, 'the node started on a damaged data directory').toBeInstanceOf(Error);
  return (started as Error).message;
}

describe('P14: recovery never keeps half a commit', () => {
  it('a damaged last record refuses the start, naming its partition and sequence and the way back', async () => {
    const { dir, local, beta } = setup('damaged-tail');
    const node = await boot(dir);
    const reference = await newConnection(new Client(node.baseUrl, local), '20');
    const grantee = new Client(node.baseUrl, beta);
    for (const op of ['op-a', 'op-b']) {
      const res = await grantee.post(`/connect/connections/${reference}/consume`,
        { capability: 'payment_request', amount: '10', currency: 'EUR', operation_ref: op }, { timestamp: stamp() });
      expect(res.status, res.text).toBe(200);
    }
    await node.kill9();
    const partition = partitionOf(reference);
    const seq = await damageLastRecord(dir, partition);
    const message = await refusedStart(dir);
    expect(message).toContain(`log record ${seq} of partition ${partition} fails its checksum`);
    expect(message).toContain('restore the data directory from the latest backup');
  });

  it('a damaged stored answer is found by the scrub and refused when asked for; a damaged directory row refuses the start', async () => {
    const { dir, local } = setup('damaged-rows');
    const node = await boot(dir);
    const client = new Client(node.baseUrl, local);
    const body = { subject_type: 'natural_person' };
    const subject = await client.post('/subjects', body, { timestamp: stamp(), idempotencyKey: 'k-1' });
    expect(subject.status).toBe(201);
    const identifier = await client.post('/identifiers',
      { subject_id: subject.json.id, identifier_type: 'email', identifier: 'row.damage@example.org' }, { timestamp: stamp() });
    expect(identifier.status, identifier.text).toBe(201);
    expect(await node.stop()).toBe(0);

    // A start no longer reads every stored answer (about 10 s a million): the node starts, and
    // the scrub finds the damaged one while it serves (P14: it is never answered from).
    const idempotencyKey = await damageFirstRow(dir, 'idempotency');
    const again = await boot(dir);
    // Its key sent again: refused (an internal error, not run a second time), an answer the
    // OpenAPI document lists (the client checks each answer against it, P19).
    const replayed = await new Client(again.baseUrl, local).post('/subjects', body, { timestamp: stamp(), idempotencyKey: 'k-1' });
    expect(replayed.status).toBe(500);
    expect(replayed.json.error.code).toBe('path.core.internal');
    expect(again.output()).toContain(`"request_id":"${replayed.json.error.detail.request_id}"`);
    const scrubLines = () => again.output().split('\n').filter((l) => l.includes('"msg":"the scrub found damage in the log"'));
    await waitFor('the scrub to find the stored answer', () => scrubLines().length >= 1);
    expect(JSON.parse(scrubLines()[0]!)).toMatchObject({ item: 'row', table: 'idempotency' });
    expect(scrubLines()[0]).not.toContain(idempotencyKey);
    const ready = await fetch(`http://127.0.0.1:${again.adminPort}/readyz`);
    expect(await ready.json()).toEqual({ status: 'degraded' });
    expect(await again.stop()).toBe(0);

    // Mend it by removing the row, then damage the directory.
    const env = open({ path: join(dir, 'node.mdb'), maxDbs: 32, compression: false });
    await env.openDB({ name: 'idempotency', encoding: 'binary' }).remove(idempotencyKey);
    await env.flushed;
    await env.close();
    const directoryKey = await damageFirstRow(dir, 'directory');
    // The orderly stop left a directory image: a start that takes the index whole from it reads
    // no directory row. Without it the index is rebuilt from the rows, and the damage is found.
    rmSync(join(dir, 'directory.image'));
    expect(await refusedStart(dir)).toContain(`table 'directory' row '${directoryKey}' fails its checksum`);
  });

  it('a truncated data file is a clear refusal, not a bus error', async () => {
    const { dir, local } = setup('truncated');
    const node = await boot(dir);
    const client = new Client(node.baseUrl, local);
    await Promise.all(Array.from({ length: 200 }, () => client.post('/subjects', { subject_type: 'natural_person' }, { timestamp: stamp() })));
    expect(await node.stop()).toBe(0);
    // Cut in the middle of the pages in use (the file runs further, a sparse tail a node keeps
    // past its last page: cutting that alone leaves a whole file).
    const file = join(dir, 'node.mdb');
    const fd = openSync(file, 'r+');
    ftruncateSync(fd, Math.floor(lastPageEnd(file) / 2));
    closeSync(fd);
    const message = await refusedStart(dir);
    expect(message).toContain('is truncated');
    expect(message).not.toContain('SIGBUS');
  });
});

describe('P7: commands awaiting a worker are bounded', () => {
  it('past pending_commands_max the node answers 503 with Retry-After, and every other call succeeds', async () => {
    const { dir, local } = setup('pending-bound');
    const node = await boot(dir, { PATH_LIMIT_PENDING_COMMANDS_MAX: '4' });
    const client = new Client(node.baseUrl, local);
    const answers = await Promise.all(Array.from({ length: 120 }, () => client.post('/subjects', { subject_type: 'natural_person' }, { timestamp: stamp() })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 201 && s !== 503)).toEqual([]);
    const refused = answers.filter((a) => a.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.json.error.code).toBe('path.core.unavailable');
      expect(r.headers.get('retry-after')).toBe('1');
    }
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThan(0);
  });
});
