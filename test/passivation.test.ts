// Issue 33: aggregates leave memory when idle and come back from their `states` rows, over the
// real server and real LMDB. A node whose aggregates leave memory 300 ms after their last
// command: a receipt, a request, a checkout session and a member's allowance out of memory answer
// as they did in memory (the same bytes), keep the idempotency of their creation and their
// ceilings, and a session's expiry fires while it is out of memory; after a restart nothing of
// them is folded into memory until asked for, and each answers the same.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Client,
  createCredential,
  publishedKey,
  removeDir,
  startNode,
  tempDir,
  type NodeProcess,
} from './support/harness.js';
import { payeeReceipt } from './support/bodies.js';
import { Receiver } from './support/receiver.js';
import { verifiesWith } from './support/verify.js';
import { waitFor } from './support/wait.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const IDLE_MS = 300;
const ENV = {
  PATH_LIMIT_AGGREGATE_IDLE_MS: String(IDLE_MS),
  PATH_LIMIT_PASSIVATION_SWEEP_INTERVAL_MS: '50',
  PATH_LIMIT_PAYEE_CHECK_DAILY_MAX: '2',
  PATH_LIMIT_INSTRUCTION_LIFETIME_MS: '2500',
};

let dataDir: string;
let node: NodeProcess;
let local: Client;
let beta: Client;
let publicKey: string;
const merchant = new Receiver();

async function start(): Promise<void> {
  node = await startNode({ dataDir, workers: 2, args: ['--dev'], env: ENV });
  publicKey = await publishedKey(node.baseUrl);
}

beforeAll(async () => {
  await merchant.open();
  dataDir = tempDir('path-passivation');
  const own = createCredential(dataDir, 'local', { local: true });
  const b = createCredential(dataDir, 'beta', { local: false });
  await start();
  local = new Client(node.baseUrl, own);
  beta = new Client(node.baseUrl, b);
});

afterAll(async () => {
  await node?.stop();
  await merchant.close();
  removeDir(dataDir);
});

/** The node's residency figures, as its metrics say them now. */
async function residency() {
  const text = await (await fetch(`http://127.0.0.1:${node.adminPort}/metrics`)).text();
  const figure = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1]);
  return {
    inMemory: figure('path_aggregates_in_memory'),
    activations: figure('path_aggregate_activations_total'),
    passivations: figure('path_aggregate_passivations_total'),
    budget: figure('path_aggregates_in_memory_max'),
  };
}

/** Waits until the workers hold `count` aggregates at most. */
const heldAtMost = (count: number) =>
  waitFor(`at most ${count} aggregates in memory`, async () => {
    const now = await residency();
    return now.inMemory <= count && now;
  });

/** A checkout session of a new request, its events sent to the merchant receiver. */
async function newSession(extra: Record<string, unknown> = {}) {
  const request = await local.post('/requests', { accepts: [EUR] });
  expect(request.status, request.text).toBe(201);
  const session = await local.post('/checkout/sessions', {
    request_reference: request.json.reference,
    success_url: 'https://shop.example/ok',
    cancel_url: 'https://shop.example/cancel',
    webhook_url: merchant.url(),
    ...extra,
  });
  expect(session.status, session.text).toBe(201);
  return session.json as { id: string; reference: string; expires_at: string };
}

/** A subject with an address taking EUR on the book rail and a payee record: the address. */
async function newPayee(): Promise<{ id: string; address: string }> {
  const subject = await local.post('/subjects', { subject_type: 'natural_person' });
  expect(subject.status, subject.text).toBe(201);
  const address = await local.post('/addresses', {
    subject_id: subject.json.id,
    profile: 'directory',
    discoverability: 'network',
  });
  expect(address.status, address.text).toBe(201);
  const target = await local.post(`/addresses/${address.json.id}/targets`, {
    ...EUR,
    account_kind: 'own_ledger',
    account_ref: 'X',
    is_default: true,
  });
  expect(target.status, target.text).toBe(201);
  const intent = await local.request('PUT', `/addresses/${address.json.id}/standing-intent`, {
    body: { accepts: [EUR] },
  });
  expect(intent.status, intent.text).toBe(200);
  const record = await local.request('PUT', `/subjects/${subject.json.id}/payee-record`, {
    body: { registered_name: 'Anna Maria Rossi', payee_check: 'enabled' },
  });
  expect(record.status, record.text).toBe(200);
  return address.json as { id: string; address: string };
}

const expiredEvent = (reference: string) =>
  merchant.deliveries.find(
    (d) => d.body?.event === 'checkout.session.expired' && d.body?.data?.reference === reference,
  );

/** Kept from the first test for the restart's. */
const kept = { receipt: '', receiptText: '', session: '', sessionText: '' };

describe('aggregates out of memory (issue 33)', () => {
  it('a receipt, a request and a checkout session out of memory answer as in memory, and keep their idempotency', async () => {
    const before = await residency();
    expect(before.budget).toBe(1_000_000);
    const issued = await local.post('/receipts', payeeReceipt('7.00'), {
      idempotencyKey: 'passivated-receipt',
    });
    expect(issued.status, issued.text).toBe(201);
    const session = await newSession();
    const read = await local.get(`/checkout/sessions/${session.id}`);
    expect(read.status, read.text).toBe(200);
    const request = await local.post('/requests', { accepts: [EUR] });
    expect(request.status, request.text).toBe(201);
    // Idle past aggregate_idle_ms, every one of them leaves memory.
    const out = await heldAtMost(0);
    expect(out.passivations).toBeGreaterThanOrEqual(before.passivations + 3);
    // Read through its aggregate: brought back from its row, the same bytes.
    const again = await local.get(`/checkout/sessions/${session.id}`);
    expect(again.status, again.text).toBe(200);
    expect(again.text).toBe(read.text);
    // Re-stating the status a receipt holds answers its current envelope: the one issued.
    const restated = await local.post(`/receipts/${issued.json.reference}/transitions`, {
      to: 'settled',
    });
    expect(restated.status, restated.text).toBe(200);
    expect(restated.json).toEqual(issued.json);
    expect((await residency()).activations).toBeGreaterThanOrEqual(before.activations + 2);
    // The creation retried with its key: the stored answer, byte for byte, nothing new made.
    const retried = await local.post('/receipts', payeeReceipt('7.00'), {
      idempotencyKey: 'passivated-receipt',
    });
    expect(retried.status).toBe(201);
    expect(retried.text).toBe(issued.text);
    expect(retried.headers.get('path-idempotent-replayed')).toBe('true');
    // A move decided on the state brought back: signed, and it supersedes the one issued.
    await heldAtMost(0);
    const reversed = await local.post(`/receipts/${issued.json.reference}/transitions`, {
      to: 'reversed',
      reason_code: null,
    });
    expect(reversed.status, reversed.text).toBe(201);
    expect(reversed.json.status).toBe('reversed');
    expect(verifiesWith(reversed.json, publicKey)).toBe(true);
    const twice = await local.post(`/receipts/${issued.json.reference}/transitions`, {
      to: 'settled',
    });
    expect(twice.status).toBe(409);
    // A request revoked out of memory: its state brought back, moved, and its view with it.
    const revoked = await local.post(`/requests/${request.json.reference}/revoke`);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.json).toEqual({ reference: request.json.reference, status: 'revoked' });
    const gone = await new Client(node.baseUrl).get(`/requests/${request.json.reference}`);
    expect(gone.status).toBe(410);
    expect(gone.json.error.code).toBe('path.request.revoked');
    kept.receipt = issued.json.reference as string;
    kept.receiptText = (await local.get(`/receipts/${kept.receipt}`)).text;
    kept.session = session.id;
    kept.sessionText = again.text;
  });

  it("a checkout session's expiry fires while it is out of memory", async () => {
    const session = await newSession({ expires_at: new Date(Date.now() + 2_000).toISOString() });
    await heldAtMost(0);
    expect(Date.parse(session.expires_at)).toBeGreaterThan(Date.now());
    const delivery = await waitFor('checkout.session.expired', () =>
      expiredEvent(session.reference),
    );
    expect(delivery.body.data).toMatchObject({ reference: session.reference, status: 'expired' });
    expect(verifiesWith(delivery.body, publicKey)).toBe(true);
    const read = await local.get(`/checkout/sessions/${session.id}`);
    expect(read.json.status).toBe('expired');
  });

  it('after a restart nothing is folded into memory until asked for; each answers the same, and a deadline due meanwhile fires', async () => {
    const session = await newSession({ expires_at: new Date(Date.now() + 3_000).toISOString() });
    expect(await node.stop()).toBe(0);
    await start();
    local = new Client(node.baseUrl, local.credential!);
    beta = new Client(node.baseUrl, beta.credential!);
    await waitFor(
      'ready',
      async () => (await fetch(`http://127.0.0.1:${node.adminPort}/readyz`)).ok,
    );
    // The receipts, requests and sessions of the first run are on disk, none folded into memory
    // by the start (a follow-up left by the stop may have brought its aggregate back since).
    const recovered = await node.line('recovered');
    expect(recovered.recovery.aggregates).toBe(0);
    const started = await residency();
    const read = await local.get(`/checkout/sessions/${kept.session}`);
    expect(read.text).toBe(kept.sessionText);
    const receipt = await local.post(`/receipts/${kept.receipt}/transitions`, { to: 'reversed' });
    expect(receipt.status).toBe(200);
    expect(receipt.text).toBe(kept.receiptText);
    expect((await residency()).activations).toBeGreaterThanOrEqual(started.activations + 2);
    // Its deadline from its row: the session no command has asked for since the start expires.
    const delivery = await waitFor('checkout.session.expired', () =>
      expiredEvent(session.reference),
    );
    expect(delivery.body.data).toMatchObject({ reference: session.reference, status: 'expired' });
  });

  it("a member's payee-check allowance holds while its budget is out of memory", async () => {
    const address = await newPayee();
    const check = () =>
      beta.post('/payee-check', {
        nonce: `n-${randomBytes(8).toString('hex')}`,
        key: address.address,
        mode: 'display',
      });
    for (let n = 0; n < 2; n++) {
      const answered = await check();
      expect(answered.status, answered.text).toBe(200);
      // The budget leaves memory between checks: its charges come back with it.
      const passivations = (await residency()).passivations;
      await waitFor(
        'the budget to leave memory',
        async () => (await residency()).passivations > passivations,
      );
    }
    const refused = await check();
    expect(refused.status, refused.text).toBe(429);
    expect(refused.json.error.code).toBe('path.finder.budget_exhausted');
  });

  it("an instruction's expiry wakes it out of memory", async () => {
    const address = await newPayee();
    // Subjects stay in memory: those held now, and no more, once the instruction has gone.
    const subjects = (await residency()).inMemory;
    const request = await local.post('/requests', { accepts: [EUR], address_id: address.id });
    expect(request.status, request.text).toBe(201);
    const issued = await new Client(node.baseUrl).post('/instructions', {
      request: request.json.reference,
      via: EUR,
    });
    expect(issued.status, issued.text).toBe(201);
    // Out of memory well before its expiry.
    const out = await waitFor('the instruction to leave memory', async () => {
      const now = await residency();
      return now.inMemory <= subjects && now;
    });
    expect(Date.parse(issued.json.expires_at)).toBeGreaterThan(Date.now());
    // Its deadline, from its row, brings it back with no command asked of it.
    await waitFor('the expiry to bring it back', async () => {
      const now = await residency();
      return now.activations > out.activations;
    });
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(issued.json.expires_at));
    const revoke = await local.post(`/instructions/${issued.json.reference}/revoke`);
    expect(revoke.status, revoke.text).toBe(410);
    expect(revoke.json.error.code).toBe('path.instruction.expired');
  });
});
