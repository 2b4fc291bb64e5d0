// P11 webhook delivery over the real server, to real receivers on loopback (node:http): signed
// `path.event` objects with Path-Event-Id and the Standard Webhooks headers, the targets of each
// event (SPEC Events), retries with backoff after receiver failures, and nothing lost across a
// SIGTERM restart or a kill -9 (events written to the durable outbox with their cause).
import type { IncomingHttpHeaders } from 'node:http';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, createCredential, publishedKey, removeDir, startNode, tempDir, type Credential, type NodeProcess } from './support/harness.js';
import { verifiesWith } from './support/verify.js';
import { sleep, waitFor } from './support/wait.js';
import { Receiver, type Delivery } from './support/receiver.js';

ed.hashes.sha512 = sha512;

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '40.00', asset_type: 'fiat', asset_code: 'EUR' };
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const RETRY_ENV = { PATH_LIMIT_WEBHOOK_FIRST_RETRY_MS: '200', PATH_LIMIT_WEBHOOK_RETRY_MAX_DELAY_MS: '1000' };

/** A free port below the ephemeral range, so no process listening on port 0 can take it while it is closed. */
async function reservedPort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    const probe = new Receiver();
    try {
      await probe.open(port);
      await probe.close();
      return port;
    } catch {
      // taken: try another
    }
  }
  throw new Error('no free port');
}



/** Checks one delivery as a receiver would: P11 headers, the signed path.event, the Standard Webhooks signature. */
function expectSignedDelivery(d: Delivery, publicKey: string, event: string): void {
  expect(d.method).toBe('POST');
  expect(d.headers['content-type']).toContain('application/json');
  const body = d.body;
  expect(body, d.raw).toMatchObject({ type: 'path.event', event, grammar: 2, protocol_version: '0.2.0' });
  expect(body.id).toMatch(/^evt_[0-9a-f]{32}$/);
  expect(body.created_at).toMatch(RFC3339);
  expect(typeof body.kid).toBe('string');
  expect(body.signed_at).toMatch(RFC3339);
  expect(typeof body.data).toBe('object');
  expect(verifiesWith(body, publicKey)).toBe(true);
  // Path-Event-Id == webhook-id == body id.
  expect(d.headers['path-event-id']).toBe(body.id);
  expect(d.headers['webhook-id']).toBe(body.id);
  // webhook-timestamp: integer seconds, close to now (Standard Webhooks tolerance is 5 minutes).
  const timestamp = String(d.headers['webhook-timestamp']);
  expect(timestamp).toMatch(/^\d+$/);
  expect(Math.abs(Number(timestamp) - d.at / 1000)).toBeLessThan(300);
  expect(standardWebhookVerifies(d.headers, d.raw, publicKey)).toBe(true);
}

/** Standard Webhooks asymmetric scheme: `v1a,<base64 Ed25519 signature over "<id>.<timestamp>.<body>">`. */
function standardWebhookVerifies(headers: IncomingHttpHeaders, raw: string, publicKey: string): boolean {
  const header = String(headers['webhook-signature'] ?? '');
  const message = Buffer.from(`${String(headers['webhook-id'])}.${String(headers['webhook-timestamp'])}.${raw}`, 'utf8');
  const candidates = header.split(' ').filter((s) => s.startsWith('v1a,')).map((s) => Buffer.from(s.slice(4), 'base64'));
  return candidates.some((sig) => sig.length === 64 && ed.verify(sig, message, Buffer.from(publicKey, 'hex'), { zip215: false }));
}

// ---------------------------------------------------------------------------------------------
// the node and its setup

const dirs: string[] = [];

async function bindableRequest(client: Client): Promise<string> {
  const res = await client.post('/requests', { accepts: [EUR], amount: AMOUNT });
  expect(res.status, res.text).toBe(201);
  return res.json.reference;
}

async function openSession(client: Client, webhookUrl: string, extra: Record<string, unknown> = {}) {
  const request = await bindableRequest(client);
  const res = await client.post('/checkout/sessions', {
    request_reference: request, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/cancel', webhook_url: webhookUrl, ...extra,
  });
  expect(res.status, res.text).toBe(201);
  return { request, reference: res.json.reference as string, id: res.json.id as string };
}

async function issueReceipt(client: Client, request?: string): Promise<string> {
  const res = await client.post('/receipts', {
    issued_by: 'payee', ...(request === undefined ? {} : { request }), via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: `BE-${Date.now()}` }],
  });
  expect(res.status, res.text).toBe(201);
  return res.json.reference;
}

// ---------------------------------------------------------------------------------------------

describe('P11 delivery: signed events, headers and targets', () => {
  let node: NodeProcess;
  let local: Client;
  let beta: Client;
  let publicKey: string;
  const ops = new Receiver();
  const merchant = new Receiver();
  const flaky = new Receiver();

  beforeAll(async () => {
    await Promise.all([ops.open(), merchant.open(), flaky.open()]);
    const dataDir = tempDir('path-webhooks');
    dirs.push(dataDir);
    const own = createCredential(dataDir, 'local', { local: true });
    const b = createCredential(dataDir, 'beta', { local: false });
    node = await startNode({ dataDir, args: ['--dev', '--webhook-urls', ops.url('/ops')], env: RETRY_ENV });
    local = new Client(node.baseUrl, own);
    beta = new Client(node.baseUrl, b);
    publicKey = await publishedKey(node.baseUrl);
  });

  afterAll(async () => {
    await node?.stop();
    await Promise.all([ops.close(), merchant.close(), flaky.close()]);
  });

  it('checkout.session.completed is POSTed to the session webhook_url and the operator endpoint as a signed path.event; Path-Event-Id == webhook-id == id; webhook-signature v1a verifies', async () => {
    const session = await openSession(local, merchant.url('/merchant'));
    const done = await beta.post(`/checkout/sessions/${session.reference}/complete`);
    expect(done.status, done.text).toBe(200);

    const atMerchant = await waitFor('completed at the session webhook_url', () => merchant.of('checkout.session.completed', session.reference)[0]);
    const atOps = await waitFor('completed at the operator endpoint', () => ops.of('checkout.session.completed', session.reference)[0]);
    expect(atMerchant.path).toBe('/merchant');
    expect(atOps.path).toBe('/ops');
    for (const d of [atMerchant, atOps]) {
      expectSignedDelivery(d, publicKey, 'checkout.session.completed');
      expect(d.body.data).toMatchObject({ reference: session.reference, status: 'completed', payer_member: null });
      expect(d.body.data.completed_at).toBe(done.json.completed_at);
    }
    // One event, one stable id, whichever target it reaches.
    expect(atOps.body.id).toBe(atMerchant.body.id);
    expect(atOps.raw).toBe(atMerchant.raw);
    // The checks are not vacuous: a changed body or a changed id fails them.
    expect(standardWebhookVerifies(atOps.headers, atOps.raw.replace('completed', 'completes'), publicKey)).toBe(false);
    expect(standardWebhookVerifies({ ...atOps.headers, 'webhook-id': 'evt_other' }, atOps.raw, publicKey)).toBe(false);
    expect(verifiesWith({ ...atOps.body, event: 'checkout.session.expired' }, publicKey)).toBe(false);
  });

  it('request.paid goes to the operator endpoint, carrying the signed paid request; not to a session webhook_url', async () => {
    const session = await openSession(local, merchant.url('/merchant'));
    const paid = await beta.post(`/requests/${session.request}/paid`);
    expect(paid.status, paid.text).toBe(200);
    const d = await waitFor('request.paid at the operator endpoint', () => ops.of('request.paid', session.request)[0]);
    expectSignedDelivery(d, publicKey, 'request.paid');
    expect(d.body.data).toMatchObject({ type: 'path.request', reference: session.request, status: 'paid' });
    expect(verifiesWith(d.body.data, publicKey)).toBe(true);
    await sleep(300);
    expect(merchant.deliveries.filter((x) => !String(x.body?.event).startsWith('checkout.session.'))).toEqual([]);
  });

  it('receipt.issued goes to the operator endpoint, carrying the signed receipt', async () => {
    const reference = await issueReceipt(local);
    const d = await waitFor('receipt.issued at the operator endpoint', () => ops.of('receipt.issued', reference)[0]);
    expectSignedDelivery(d, publicKey, 'receipt.issued');
    expect(d.body.data).toMatchObject({ type: 'path.receipt', reference, status: 'settled' });
    expect(verifiesWith(d.body.data, publicKey)).toBe(true);
  });

  it('retries after failures: 500, 500, then 200 -> delivered on the 3rd attempt with the same event id and body, with backoff, and not again', async () => {
    flaky.respond = (_d, nth) => (nth <= 2 ? 500 : 200);
    const session = await openSession(local, flaky.url('/flaky'));
    expect((await beta.post(`/checkout/sessions/${session.reference}/complete`)).status).toBe(200);
    const attempts = await waitFor('three attempts', () => {
      const list = flaky.of('checkout.session.completed', session.reference);
      return list.length >= 3 ? list : undefined;
    });
    expect(attempts.map((a) => a.status)).toEqual([500, 500, 200]);
    const id = attempts[0]!.body.id;
    for (const a of attempts) {
      expectSignedDelivery(a, publicKey, 'checkout.session.completed');
      expect(a.headers['webhook-id']).toBe(id);
      expect(a.headers['path-event-id']).toBe(id);
      expect(a.raw).toBe(attempts[0]!.raw);
    }
    // First retry after ~200 ms (jitter 0.8-1.2), the second after about twice that.
    expect(attempts[1]!.at - attempts[0]!.at).toBeGreaterThanOrEqual(150);
    expect(attempts[2]!.at - attempts[1]!.at).toBeGreaterThanOrEqual(300);
    // Acknowledged: no further attempt. The operator endpoint got it once, on its first attempt.
    await sleep(2_000);
    expect(flaky.of('checkout.session.completed', session.reference)).toHaveLength(3);
    expect(ops.of('checkout.session.completed', session.reference)).toHaveLength(1);
  });
});

describe('P11, P14: nothing is lost across restarts', () => {
  let dataDir: string;
  let own: Credential;
  let beta: Credential;
  let port: number;
  let node: NodeProcess | null = null;
  const receiver = new Receiver();

  const start = async () => {
    node = await startNode({ dataDir, args: ['--dev', '--webhook-urls', `http://127.0.0.1:${port}/ops`], env: RETRY_ENV });
    return { node, local: new Client(node.baseUrl, own), beta: new Client(node.baseUrl, beta) };
  };

  beforeAll(async () => {
    dataDir = tempDir('path-webhooks-restart');
    dirs.push(dataDir);
    own = createCredential(dataDir, 'local', { local: true });
    beta = createCredential(dataDir, 'beta', { local: false });
    port = await reservedPort();
  });

  afterAll(async () => {
    await node?.stop();
    await receiver.close();
  });

  it('events produced while the receiver is down are all delivered after a SIGTERM restart, when it comes up', async () => {
    const first = await start();
    const publicKey = await publishedKey(first.node.baseUrl);
    const merchantUrl = `http://127.0.0.1:${port}/merchant`;
    const session = await openSession(first.local, merchantUrl);
    expect((await first.beta.post(`/checkout/sessions/${session.reference}/complete`)).status).toBe(200);
    const paidRequest = await bindableRequest(first.local);
    expect((await first.beta.post(`/requests/${paidRequest}/paid`)).status).toBe(200);
    const receipt = await issueReceipt(first.local, paidRequest);
    // A session that expires (its tick recorded) before the stop.
    const expiring = await openSession(first.local, merchantUrl, { expires_at: new Date(Date.now() + 800).toISOString() });
    await waitFor('the expiry to be recorded', async () => (await (await fetch(`${first.node.baseUrl}/path/${expiring.reference}`)).json()).status === 'expired');
    await sleep(700); // several failed attempts (connection refused) against the closed port

    expect(await first.node.stop()).toBe(0);
    const second = await start();
    expect(await publishedKey(second.node.baseUrl)).toBe(publicKey);
    await receiver.open(port);

    const expected: [string, string, string][] = [
      ['/merchant', 'checkout.session.completed', session.reference],
      ['/ops', 'checkout.session.completed', session.reference],
      ['/ops', 'request.paid', paidRequest],
      ['/ops', 'receipt.issued', receipt],
      ['/merchant', 'checkout.session.expired', expiring.reference],
      ['/ops', 'checkout.session.expired', expiring.reference],
    ];
    for (const [path, event, reference] of expected) {
      const d = await waitFor(`${event} for ${reference} at ${path}`, () => receiver.acknowledged(event, reference).find((x) => x.path === path));
      expectSignedDelivery(d, publicKey, event);
    }
  });

  it('kill -9 right after producing events while the receiver fails: after the restart they still arrive, with the same ids', async () => {
    receiver.respond = () => 503;
    const running = node ?? (await start()).node;
    const local = new Client(running.baseUrl, own);
    const payer = new Client(running.baseUrl, beta);
    const publicKey = await publishedKey(running.baseUrl);
    const session = await openSession(local, `http://127.0.0.1:${port}/merchant`);
    expect((await payer.post(`/checkout/sessions/${session.reference}/complete`)).status).toBe(200);
    const paidRequest = await bindableRequest(local);
    expect((await payer.post(`/requests/${paidRequest}/paid`)).status).toBe(200);
    const receipt = await issueReceipt(local, paidRequest);
    await running.kill9();
    node = null;

    const failedBefore = receiver.deliveries.filter((d) => d.status === 503).map((d) => ({ id: d.body?.id, raw: d.raw }));
    receiver.respond = () => 200;
    const restarted = await start();
    const expected: [string, string, string][] = [
      ['/merchant', 'checkout.session.completed', session.reference],
      ['/ops', 'checkout.session.completed', session.reference],
      ['/ops', 'request.paid', paidRequest],
      ['/ops', 'receipt.issued', receipt],
    ];
    for (const [path, event, reference] of expected) {
      const d = await waitFor(`${event} for ${reference} at ${path}`, () => receiver.acknowledged(event, reference).find((x) => x.path === path));
      expectSignedDelivery(d, publicKey, event);
    }
    // An event seen (and refused) before the kill arrives afterwards under the same id and body.
    for (const f of failedBefore) {
      expect(receiver.deliveries.some((d) => d.status === 200 && d.body?.id === f.id && d.raw === f.raw), `event ${f.id}`).toBe(true);
    }
    expect(await publishedKey(restarted.node.baseUrl)).toBe(publicKey);
  });
});


afterAll(() => {
  for (const d of dirs) removeDir(d);
});
