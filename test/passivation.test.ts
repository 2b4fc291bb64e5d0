// Issue 33: aggregates leave memory when idle and come back from their `states` rows, over the
// real server and real LMDB. A node whose aggregates leave memory 300 ms after their last
// command: a receipt, a request, a checkout session, a member's allowance, a subject and a
// connection out of memory answer as they did in memory (the same bytes), keep the idempotency
// of their creation and their ceilings, and a session's expiry fires while it is out of memory;
// after a restart nothing of them is folded into memory until asked for, and each answers the
// same. A subject grown past state_row_bytes_max stays in memory, across a kill -9 too.
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
  PATH_LIMIT_PAYEE_CHECK_NAMES_PER_DAY_MAX: '1',
  PATH_LIMIT_STATE_ROW_BYTES_MAX: '4096',
};
const inHours = (h: number) => new Date(Date.now() + h * 3_600_000).toISOString();

let dataDir: string;
let node: NodeProcess;
let local: Client;
let beta: Client;
let gamma: Client;
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
  const g = createCredential(dataDir, 'gamma', { local: false });
  await start();
  local = new Client(node.baseUrl, own);
  beta = new Client(node.baseUrl, b);
  gamma = new Client(node.baseUrl, g);
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
    pinned: figure('path_aggregates_pinned'),
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

/**
 * A subject (`of`, else a new one) with an address taking EUR on the book rail and a payee record:
 * the address.
 */
async function newPayee(of?: string): Promise<{ id: string; address: string }> {
  let subject = of;
  if (subject === undefined) {
    const made = await local.post('/subjects', { subject_type: 'natural_person' });
    expect(made.status, made.text).toBe(201);
    subject = made.json.id as string;
  }
  const address = await local.post('/addresses', {
    subject_id: subject,
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
  const record = await local.request('PUT', `/subjects/${subject}/payee-record`, {
    body: { registered_name: 'Anna Maria Rossi', payee_check: 'enabled' },
  });
  expect(record.status, record.text).toBe(200);
  return address.json as { id: string; address: string };
}

/** A signed answer without what its signing at read time adds. */
const unsigned = ({ signed_at, signature, ...rest }: Record<string, unknown>) => {
  expect([typeof signed_at, typeof signature]).toEqual(['string', 'string']);
  return rest;
};

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
    gamma = new Client(node.baseUrl, gamma.credential!);
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
    const request = await local.post('/requests', { accepts: [EUR], address_id: address.id });
    expect(request.status, request.text).toBe(201);
    const issued = await new Client(node.baseUrl).post('/instructions', {
      request: request.json.reference,
      via: EUR,
    });
    expect(issued.status, issued.text).toBe(201);
    // Out of memory well before its expiry.
    const out = await heldAtMost(0);
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
  it('a subject and a connection out of memory answer as in memory, keep their idempotency and refuse past their ceilings', async () => {
    const before = await residency();
    const created = await local.post(
      '/subjects',
      { subject_type: 'legal_entity' },
      { idempotencyKey: 'passivated-subject' },
    );
    expect(created.status, created.text).toBe(201);
    const subject = created.json.id as string;
    const address = await newPayee(subject);
    const listed = await local.get(`/addresses?subject_id=${subject}`);
    expect(listed.status, listed.text).toBe(200);
    const terms = {
      grantee: 'beta',
      subject_id: subject,
      capabilities: { payment_request: true },
      mode: 'persistent_consent',
      max_single: '10',
      max_total: '25',
      currency: 'EUR',
      expires_at: inHours(2),
    };
    const connection = await local.post('/connect/connections', terms, {
      idempotencyKey: 'passivated-connection',
    });
    expect(connection.status, connection.text).toBe(201);
    const reference = connection.json.reference as string;
    const read = await local.get(`/connect/connections/${reference}`);
    expect(read.status, read.text).toBe(200);
    await heldAtMost(0);
    // Read through their aggregates, brought back from their rows: the same bytes (a
    // connection's answer is signed as it is read, with the time of reading).
    expect((await local.get(`/addresses?subject_id=${subject}`)).text).toBe(listed.text);
    const again = await local.get(`/connect/connections/${reference}`);
    expect(verifiesWith(again.json, publicKey)).toBe(true);
    expect(unsigned(again.json)).toEqual(unsigned(read.json));
    expect((await residency()).activations).toBeGreaterThanOrEqual(before.activations + 2);
    // Their creations retried with their keys: the stored answers, byte for byte.
    for (const [path, body, key, first] of [
      ['/subjects', { subject_type: 'legal_entity' }, 'passivated-subject', created],
      ['/connect/connections', terms, 'passivated-connection', connection],
    ] as const) {
      await heldAtMost(0);
      const retried = await local.post(path, body, { idempotencyKey: key });
      expect(retried.text).toBe(first.text);
      expect(retried.headers.get('path-idempotent-replayed')).toBe('true');
    }
    // The connection's total, charged with it out of memory between every two charges.
    const consume = (amount: string) =>
      beta.post(`/connect/connections/${reference}/consume`, {
        capability: 'payment_request',
        amount,
        currency: 'EUR',
        operation_ref: `op-${randomBytes(6).toString('hex')}`,
      });
    for (const amount of ['10', '10']) {
      await heldAtMost(0);
      const charged = await consume(amount);
      expect(charged.status, charged.text).toBe(200);
    }
    await heldAtMost(0);
    const over = await consume('10');
    expect(over.status, over.text).toBe(403);
    expect(over.json.error.code).toBe('path.connect.delegation_limit_reached');
    await heldAtMost(0);
    expect((await consume('5')).status).toBe(200);
    await heldAtMost(0);
    expect((await consume('0.01')).status).toBe(403);
    // The subject's own allowance (P12): one distinct name a day for a requester and address,
    // its count kept while the subject is out of memory.
    const verify = (name: string) =>
      gamma.post('/payee-check', {
        nonce: `n-${randomBytes(8).toString('hex')}`,
        key: address.address,
        mode: 'verify',
        name,
      });
    const first = await verify('Anna Maria Rossi');
    expect(first.status, first.text).toBe(200);
    await heldAtMost(0);
    const second = await verify('Someone Else');
    expect(second.status, second.text).toBe(429);
    expect(second.json.error.code).toBe('path.finder.budget_exhausted');
    expect(second.json.error.message).toMatch(/different names/);
  });

  it('a subject grown past state_row_bytes_max stays in memory; after a kill -9 it answers the same and goes on', async () => {
    const subject = await local.post('/subjects', { subject_type: 'natural_person' });
    expect(subject.status, subject.text).toBe(201);
    const id = subject.json.id as string;
    const addresses: string[] = [];
    const grow = async (from: number, to: number) => {
      for (let n = from; n < to; n++) {
        const added = await local.post('/identifiers', {
          subject_id: id,
          identifier_type: 'email',
          identifier: `grown${n}@passivation.example`,
          discoverability: 'network',
        });
        expect(added.status, added.text).toBe(201);
        if (n % 10 === 0) {
          const address = await local.post('/addresses', {
            subject_id: id,
            profile: 'directory',
            discoverability: 'network',
          });
          expect(address.status, address.text).toBe(201);
          addresses.push(address.json.id as string);
        }
      }
    };
    // Out of memory between the first commits, while its row is within the bound.
    await grow(0, 3);
    await heldAtMost(0);
    await grow(3, 40);
    // Past 4 KiB: every other aggregate leaves memory, it stays.
    const held = await heldAtMost(1);
    expect(held).toMatchObject({ inMemory: 1, pinned: 1 });
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 3));
    expect(await residency()).toMatchObject({ inMemory: 1, pinned: 1 });
    const listed = await local.get(`/addresses?subject_id=${id}`);
    expect(listed.json.addresses.map((a: { id: string }) => a.id)).toEqual(addresses);
    // A kill -9: the start folds it back into memory (its row stopped), and nothing else.
    await node.kill9();
    await start();
    local = new Client(node.baseUrl, local.credential!);
    beta = new Client(node.baseUrl, beta.credential!);
    const recovered = await node.line('recovered');
    expect(recovered.recovery.aggregates).toBe(1);
    expect(await residency()).toMatchObject({ inMemory: 1, pinned: 1 });
    expect((await local.get(`/addresses?subject_id=${id}`)).text).toBe(listed.text);
    await grow(40, 42);
    const found = await beta.post('/sonar/lookup/batch', {
      items: Array.from({ length: 42 }, (_, n) => ({
        identifier_type: 'email',
        identifier: `grown${n}@passivation.example`,
      })),
    });
    expect(found.status, found.text).toBe(200);
    expect(found.json.results.every((r: { found: boolean }) => r.found)).toBe(true);
    expect((await local.get(`/addresses?subject_id=${id}`)).json.addresses).toHaveLength(
      addresses.length,
    );
  });
});
