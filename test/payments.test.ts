// SPEC G (payment instructions), H (payment requests) and I (checkout sessions) over the real
// server and real LMDB, with the state tables of "States and transitions" and the status codes
// of P7; P4 (GET /path/{reference}), P9 (references), P11 (webhook URL rules, session events),
// P12 (instruction lifetime). Expiry is exercised by time with short lifetimes.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, createCredential, publishedKey, removeDir, startNode, tempDir, type Answer, type NodeProcess } from './support/harness.js';
import { verifiesWith } from './support/verify.js';
import { sleep, waitFor } from './support/wait.js';
import { readDelivery } from './support/receiver.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const USDC = {
  rail: 'blockchain', asset_type: 'token', asset_code: 'USDC',
  chain: { slug: 'base', caip2: 'eip155:8453', evm: { chain_id: 8453 } }, standard: 'erc20', contract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
};
const KES = { rail: 'mobile_money', asset_type: 'fiat', asset_code: 'KES' };
const AMOUNT = { value: '12.50', asset_type: 'fiat', asset_code: 'EUR' };
const WALLET = '0x2222222222222222222222222222222222222222';
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const ref = (prefix: string) => new RegExp(`^${prefix}_[0-9a-f]{32}$`);

// ---------------------------------------------------------------------------------------------
// a webhook receiver on loopback

interface Delivery { url: string; headers: IncomingHttpHeaders; raw: string; body: any }

interface Receiver { url: string; deliveries: Delivery[]; close(): Promise<void> }

async function startReceiver(): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  const server: Server = createServer((req, res) => {
    void readDelivery(req).then(({ raw, body }) => {
      deliveries.push({ url: req.url ?? '', headers: req.headers, raw, body });
      res.statusCode = 200;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    deliveries,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}



// ---------------------------------------------------------------------------------------------
// nodes

let node: NodeProcess; // --dev, operator webhook endpoint = ops receiver
let strict: NodeProcess; // no --dev, instruction lifetime 1.5 s
const dirs: string[] = [];
let local: Client;
let beta: Client;
let gamma: Client;
let anon: Client;
let strictLocal: Client;
let strictAnon: Client;
let publicKey: string;
let kid: string;
let ops: Receiver;
let merchant: Receiver;

interface Payee { addressId: string; address: string; intentVersion: number }
let payee: Payee;

beforeAll(async () => {
  ops = await startReceiver();
  merchant = await startReceiver();
  const dataDir = tempDir('path-payments');
  const strictDir = tempDir('path-payments-strict');
  dirs.push(dataDir, strictDir);
  const own = createCredential(dataDir, 'local', { local: true });
  const b = createCredential(dataDir, 'beta', { local: false });
  const g = createCredential(dataDir, 'gamma', { local: false });
  const strictOwn = createCredential(strictDir, 'local', { local: true });
  [node, strict] = await Promise.all([
    startNode({ dataDir, args: ['--dev', '--webhook-urls', ops.url] }),
    startNode({ dataDir: strictDir, env: { PATH_LIMIT_INSTRUCTION_LIFETIME_MS: '1500' } }),
  ]);
  local = new Client(node.baseUrl, own);
  beta = new Client(node.baseUrl, b);
  gamma = new Client(node.baseUrl, g);
  anon = new Client(node.baseUrl);
  strictLocal = new Client(strict.baseUrl, strictOwn);
  strictAnon = new Client(strict.baseUrl);
  publicKey = await publishedKey(node.baseUrl);
  const keys = await (await fetch(`${node.baseUrl}/.well-known/path-keys`)).json() as { keys: { kid: string; status: string }[] };
  kid = keys.keys.find((k) => k.status === 'active')!.kid;
  payee = await newPayee(local, [EUR, USDC]);
});

afterAll(async () => {
  await Promise.all([node?.stop(), strict?.stop()]);
  await Promise.all([ops?.close(), merchant?.close()]);
  for (const d of dirs) removeDir(d);
});

// ---------------------------------------------------------------------------------------------
// helpers

function expectError(res: Answer, status: number, code: string, field?: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toContain('application/json');
  expect(res.json?.error?.code, res.text).toBe(code);
  expect(typeof res.json.error.message).toBe('string');
  if (field !== undefined) expect(res.json.error.detail?.field).toBe(field);
}

/** A subject, a directory address, a book EUR target, a blockchain USDC target and a standing intent. */
async function newPayee(client: Client, accepts: unknown[]): Promise<Payee> {
  const subject = await client.post('/subjects', { subject_type: 'legal_entity' });
  expect(subject.status, subject.text).toBe(201);
  const address = await client.post('/addresses', { subject_id: subject.json.id, profile: 'directory', discoverability: 'network' });
  expect(address.status, address.text).toBe(201);
  const eur = await client.post(`/addresses/${address.json.id}/targets`, { ...EUR, account_kind: 'own_ledger', account_ref: 'acct-eur-1', is_default: true });
  expect(eur.status, eur.text).toBe(201);
  const usdc = await client.post(`/addresses/${address.json.id}/targets`, {
    rail: 'blockchain', asset_type: 'token', asset_code: 'USDC', account_kind: 'wallet', account_ref: 'acct-usdc-1', beneficiary_format: 'chain_address', beneficiary: WALLET,
  });
  expect(usdc.status, usdc.text).toBe(201);
  const intent = await client.request('PUT', `/addresses/${address.json.id}/standing-intent`, { body: { accepts } });
  expect(intent.status, intent.text).toBe(200);
  return { addressId: address.json.id, address: address.json.address, intentVersion: intent.json.version };
}

async function newRequest(extra: Record<string, unknown> = {}, client: Client = local, p: Payee = payee): Promise<string> {
  const res = await client.post('/requests', { accepts: [EUR], address_id: p.addressId, amount: AMOUNT, ...extra });
  expect(res.status, res.text).toBe(201);
  return res.json.reference;
}

async function newSession(extra: Record<string, unknown> = {}, client: Client = local) {
  const request = await newRequest();
  const res = await client.post('/checkout/sessions', {
    request_reference: request, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/cancel', webhook_url: merchant.url, ...extra,
  });
  expect(res.status, res.text).toBe(201);
  return { request, session: res.json as { id: string; reference: string; url: string; expires_at: string } };
}

const eventsFor = (r: Receiver, event: string, reference: string) =>
  r.deliveries.filter((d) => d.body?.event === event && d.body?.data?.reference === reference);

// ---------------------------------------------------------------------------------------------

describe('SPEC H payment requests', () => {
  it('POST /requests answers 201 {reference, url -> /path/{reference}, status created, expires_at} (P7, P9)', async () => {
    const expiresAt = new Date(Date.now() + 3600_000).toISOString();
    const res = await local.post('/requests', { accepts: [EUR], address_id: payee.addressId, amount: AMOUNT, order_reference: 'order-7731', expires_at: expiresAt });
    expect(res.status, res.text).toBe(201);
    expect(res.json.reference).toMatch(ref('req'));
    expect(res.json).toEqual({ reference: res.json.reference, url: `${node.baseUrl}/path/${res.json.reference}`, status: 'created', expires_at: expiresAt });
    const open = await local.post('/requests', { accepts: [EUR] });
    expect(open.status, open.text).toBe(201);
    expect(open.json.expires_at).toBeNull();
    expect(open.json.reference).not.toBe(res.json.reference);
  });

  it('needs a member credential to create (401 path.auth.unauthenticated)', async () => {
    expectError(await anon.post('/requests', { accepts: [EUR] }), 401, 'path.auth.unauthenticated');
  });

  it('GET /requests/{reference} is public and serves a signed path.request that verifies against the published key; the url serves it too (P4, principle 1, 3)', async () => {
    const created = await local.post('/requests', { accepts: [EUR], address_id: payee.addressId, amount: AMOUNT, order_reference: 'order-42' });
    const reference = created.json.reference;
    const res = await anon.get(`/requests/${reference}`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('path-protocol-version')).toBe('0.2.0');
    const r = res.json;
    expect(r).toMatchObject({
      type: 'path.request', reference, issuer: 'local', payee: { member: 'local', address: payee.address }, amount: AMOUNT, accepts: [EUR],
      intent_version: payee.intentVersion, order_reference: 'order-42', status: 'created', settled_by: [], expires_at: null,
      grammar: 2, protocol_version: '0.2.0', kid,
    });
    expect(r.signed_at).toMatch(RFC3339);
    expect(verifiesWith(r, publicKey)).toBe(true);
    expect(verifiesWith({ ...r, status: 'paid' }, publicKey)).toBe(false);
    const link = await fetch(created.json.url);
    expect(link.status).toBe(200);
    expect(await link.json()).toEqual(r);
  });

  it('records intent_version: the version of the standing intent in force when the request was bound (SPEC H)', async () => {
    const p = await newPayee(local, [EUR]);
    const first = await newRequest({}, local, p);
    const v2 = await local.request('PUT', `/addresses/${p.addressId}/standing-intent`, { body: { accepts: [EUR, USDC] } });
    expect(v2.json.version).toBe(p.intentVersion + 1);
    const second = await newRequest({ accepts: [USDC] }, local, p);
    expect((await anon.get(`/requests/${first}`)).json.intent_version).toBe(p.intentVersion);
    expect((await anon.get(`/requests/${second}`)).json.intent_version).toBe(p.intentVersion + 1);
  });

  it('accepts not in the standing intent -> 422 path.address.capability_not_accepted (SPEC H, P7, principle 7)', async () => {
    expectError(await local.post('/requests', { accepts: [KES], address_id: payee.addressId }), 422, 'path.address.capability_not_accepted');
    expectError(await local.post('/requests', { accepts: [EUR, { ...EUR, asset_code: 'GBP' }], address_id: payee.addressId }), 422, 'path.address.capability_not_accepted');
    expectError(await local.post('/requests', { accepts: [EUR], address_id: `adr_${'0'.repeat(32)}` }), 404, 'path.core.not_found');
  });

  it('idempotent creation: the same Path-Idempotency-Key replays the original answer and creates no second request (SPEC H, P7)', async () => {
    const key = `idem-req-${Date.now()}`;
    const body = { accepts: [EUR], address_id: payee.addressId, amount: AMOUNT, order_reference: 'idem-1' };
    const first = await local.post('/requests', body, { idempotencyKey: key });
    expect(first.status, first.text).toBe(201);
    const again = await local.post('/requests', body, { idempotencyKey: key });
    expect(again.status).toBe(201);
    expect(again.headers.get('path-idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    expect(again.json.reference).toBe(first.json.reference);
    expectError(await local.post('/requests', { ...body, order_reference: 'idem-2' }, { idempotencyKey: key }), 422, 'path.core.idempotency_conflict');
    const other = await local.post('/requests', body, { idempotencyKey: `${key}-b` });
    expect(other.status).toBe(201);
    expect(other.json.reference).not.toBe(first.json.reference);
  });

  it('created -> paid by any member credential (200 {reference, status: paid}); paid again is 200 and adds no transition; request.paid is delivered once ("States and transitions")', async () => {
    const reference = await newRequest();
    const paid = await beta.post(`/requests/${reference}/paid`);
    expect(paid.status, paid.text).toBe(200);
    expect(paid.json).toEqual({ reference, status: 'paid' });
    const read = await anon.get(`/requests/${reference}`);
    expect(read.status).toBe(200);
    expect(read.json.status).toBe('paid');
    expect(verifiesWith(read.json, publicKey)).toBe(true);

    const again = await gamma.post(`/requests/${reference}/paid`);
    expect(again.status, again.text).toBe(200);
    expect(again.json).toEqual({ reference, status: 'paid' });
    const byIssuer = await local.post(`/requests/${reference}/paid`);
    expect(byIssuer.status).toBe(200);
    // Nothing moved: the signed object is the same bytes as after the first paid.
    expect((await anon.get(`/requests/${reference}`)).text).toBe(read.text);

    await waitFor('request.paid', () => eventsFor(ops, 'request.paid', reference).length > 0);
    // A later event as a sentinel: once it has arrived, a second request.paid would have too.
    const sentinel = await newRequest();
    expect((await beta.post(`/requests/${sentinel}/paid`)).status).toBe(200);
    await waitFor('sentinel request.paid', () => eventsFor(ops, 'request.paid', sentinel).length > 0);
    await sleep(300);
    const delivered = eventsFor(ops, 'request.paid', reference);
    expect(delivered).toHaveLength(1);
    expect(delivered[0]!.body.data.status).toBe('paid');
  });

  it('revoke by a member that is not the issuer -> 403 path.auth.forbidden; the request stays created (P7)', async () => {
    const reference = await newRequest();
    expectError(await beta.post(`/requests/${reference}/revoke`), 403, 'path.auth.forbidden');
    expect((await anon.get(`/requests/${reference}`)).json.status).toBe('created');
  });

  it('created -> revoked by the issuer (200); later reads 410 path.request.revoked; paid on revoked -> 410 ("States and transitions")', async () => {
    const reference = await newRequest();
    const revoked = await local.post(`/requests/${reference}/revoke`);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.json).toEqual({ reference, status: 'revoked' });
    expectError(await anon.get(`/requests/${reference}`), 410, 'path.request.revoked');
    expectError(await anon.get(`/path/${reference}`, { root: true }), 410, 'path.request.revoked');
    expectError(await beta.post(`/requests/${reference}/paid`), 410, 'path.request.revoked');
  });

  it('revoke on a paid request -> 409 path.request.not_open (P7); it stays paid', async () => {
    const reference = await newRequest();
    expect((await beta.post(`/requests/${reference}/paid`)).status).toBe(200);
    expectError(await local.post(`/requests/${reference}/revoke`), 409, 'path.request.not_open');
    expect((await anon.get(`/requests/${reference}`)).json.status).toBe('paid');
  });

  it('unknown references answer 404 path.core.not_found (SPEC Errors)', async () => {
    const unknown = `req_${'a'.repeat(32)}`;
    expectError(await anon.get(`/requests/${unknown}`), 404, 'path.core.not_found');
    expectError(await beta.post(`/requests/${unknown}/paid`), 404, 'path.core.not_found');
  });

  it('created -> expired by the passage of expires_at: GET 410 path.request.expired; paid, revoke, sessions and instructions refused ("States and transitions", P7)', async () => {
    const expiresAt = Date.now() + 1500;
    const reference = await newRequest({ expires_at: new Date(expiresAt).toISOString() });
    const before = await anon.get(`/requests/${reference}`);
    expect(before.status).toBe(200);
    expect(before.json.status).toBe('created');
    await sleep(expiresAt - Date.now() + 150);
    expectError(await anon.get(`/requests/${reference}`), 410, 'path.request.expired');
    expectError(await beta.post(`/requests/${reference}/paid`), 410, 'path.request.expired');
    expectError(await local.post(`/requests/${reference}/revoke`), 410, 'path.request.expired');
    expectError(await local.post('/checkout/sessions', { request_reference: reference, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/c' }), 410, 'path.request.expired');
    expectError(await anon.post('/instructions', { request: reference, via: EUR }), 410, 'path.request.expired');
  });
});

describe('SPEC G payment instructions', () => {
  it('for a request: public (no credential), 201 signed path.instruction, open, single use, expiring instruction_lifetime (5 min, P12) later', async () => {
    const request = await newRequest();
    const res = await anon.post('/instructions', { request, via: EUR });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('path-protocol-version')).toBe('0.2.0');
    const i = res.json;
    expect(i.reference).toMatch(ref('ins'));
    expect(i).toMatchObject({
      type: 'path.instruction', issuer: 'local', payee: { member: 'local', address: payee.address }, request, intent_version: payee.intentVersion,
      via: EUR, amount: AMOUNT, single_use: true, status: 'open', grammar: 2, protocol_version: '0.2.0', kid,
    });
    expect(typeof i.beneficiary.format).toBe('string');
    expect(typeof i.beneficiary.value).toBe('string');
    expect(i).toHaveProperty('payment_reference');
    const lifetime = Date.parse(i.expires_at) - Date.parse(i.signed_at);
    expect(lifetime).toBeGreaterThanOrEqual(300_000 - 1000);
    expect(lifetime).toBeLessThanOrEqual(300_000 + 1000);
    expect(verifiesWith(i, publicKey)).toBe(true);
    const read = await anon.get(`/instructions/${i.reference}`);
    expect(read.status).toBe(200);
    expect(read.json).toEqual(i);
    const link = await anon.get(`/path/${i.reference}`, { root: true });
    expect(link.status).toBe(200);
    expect(link.json).toEqual(i);
  });

  it('the beneficiary comes from the address\'s target for the capability named by via', async () => {
    const request = await newRequest({ accepts: [EUR, USDC] });
    const res = await anon.post('/instructions', { request, via: USDC });
    expect(res.status, res.text).toBe(201);
    expect(res.json.via).toEqual(USDC);
    expect(res.json.beneficiary).toEqual({ format: 'chain_address', value: WALLET });
    expect(verifiesWith(res.json, publicKey)).toBe(true);
  });

  it('via must be one of the request\'s accepts (422 path.address.capability_not_accepted), even if the address accepts it', async () => {
    const request = await newRequest({ accepts: [EUR] });
    expectError(await anon.post('/instructions', { request, via: USDC }), 422, 'path.address.capability_not_accepted');
    expectError(await anon.post('/instructions', { request, via: KES }), 422, 'path.address.capability_not_accepted');
  });

  it('for an address alone a member credential is required (401 without); via must be in the standing intent', async () => {
    expectError(await anon.post('/instructions', { address: payee.address, via: EUR }), 401, 'path.auth.unauthenticated');
    const res = await beta.post('/instructions', { address: payee.address, via: USDC });
    expect(res.status, res.text).toBe(201);
    expect(res.json).toMatchObject({ type: 'path.instruction', request: null, payee: { member: 'local', address: payee.address }, via: USDC, status: 'open', single_use: true });
    expect(res.json.beneficiary).toEqual({ format: 'chain_address', value: WALLET });
    expect(verifiesWith(res.json, publicKey)).toBe(true);
    expectError(await beta.post('/instructions', { address: payee.address, via: KES }), 422, 'path.address.capability_not_accepted');
  });

  it('exactly one of request or address (400 path.core.invalid_request otherwise)', async () => {
    const request = await newRequest();
    expectError(await beta.post('/instructions', { request, address: payee.address, via: EUR }), 400, 'path.core.invalid_request');
    expectError(await beta.post('/instructions', { via: EUR }), 400, 'path.core.invalid_request');
  });

  it('no instruction for a request that is not open: paid -> 409 path.request.not_open, revoked -> 410 path.request.revoked (P7)', async () => {
    const paid = await newRequest();
    await beta.post(`/requests/${paid}/paid`);
    expectError(await anon.post('/instructions', { request: paid, via: EUR }), 409, 'path.request.not_open');
    const revoked = await newRequest();
    await local.post(`/requests/${revoked}/revoke`);
    expectError(await anon.post('/instructions', { request: revoked, via: EUR }), 410, 'path.request.revoked');
  });

  it('open -> revoked by the issuer; another member is refused (403); reads answer 410 path.instruction.revoked', async () => {
    const request = await newRequest();
    const i = (await anon.post('/instructions', { request, via: EUR })).json;
    expectError(await beta.post(`/instructions/${i.reference}/revoke`), 403, 'path.auth.forbidden');
    expect((await anon.get(`/instructions/${i.reference}`)).status).toBe(200);
    const revoked = await local.post(`/instructions/${i.reference}/revoke`);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.json).toMatchObject({ reference: i.reference, status: 'revoked' });
    expectError(await anon.get(`/instructions/${i.reference}`), 410, 'path.instruction.revoked');
    expectError(await anon.get(`/path/${i.reference}`, { root: true }), 410, 'path.instruction.revoked');
  });

  it('open -> used when a receipt names it: reads answer 410 path.instruction.used (docs/decisions.md)', async () => {
    const request = await newRequest();
    const i = (await anon.post('/instructions', { request, via: EUR })).json;
    const receipt = await local.post('/receipts', {
      issued_by: 'payee', request, instruction: i.reference, via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-ins-1' }],
    });
    expect(receipt.status, receipt.text).toBe(201);
    expect(receipt.json.instruction).toBe(i.reference);
    expectError(await anon.get(`/instructions/${i.reference}`), 410, 'path.instruction.used');
    expectError(await local.post(`/instructions/${i.reference}/revoke`), 410, 'path.instruction.used');
  });

  it('open -> expired at expires_at with a short configured lifetime (PATH_LIMIT_INSTRUCTION_LIFETIME_MS=1500): 410 path.instruction.expired (P12)', async () => {
    const p = await newPayee(strictLocal, [EUR]);
    const request = await newRequest({}, strictLocal, p);
    const res = await strictAnon.post('/instructions', { request, via: EUR });
    expect(res.status, res.text).toBe(201);
    const lifetime = Date.parse(res.json.expires_at) - Date.parse(res.json.signed_at);
    expect(lifetime).toBeGreaterThanOrEqual(1500 - 200);
    expect(lifetime).toBeLessThanOrEqual(1500 + 200);
    expect((await strictAnon.get(`/instructions/${res.json.reference}`)).status).toBe(200);
    await sleep(Date.parse(res.json.expires_at) - Date.now() + 150);
    expectError(await strictAnon.get(`/instructions/${res.json.reference}`), 410, 'path.instruction.expired');
    expectError(await strictLocal.post(`/instructions/${res.json.reference}/revoke`), 410, 'path.instruction.expired');
  });
});

describe('SPEC I checkout sessions', () => {
  it('the issuer opens a session: 201 {id, reference, url, status, request_reference, success_url, cancel_url, expires_at}; webhook_url is input only (P7, P9)', async () => {
    const request = await newRequest();
    const res = await local.post('/checkout/sessions', {
      request_reference: request, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/cancel', webhook_url: merchant.url,
    });
    expect(res.status, res.text).toBe(201);
    const s = res.json;
    expect(s.id).toMatch(ref('cs'));
    expect(s.reference).toMatch(ref('chk'));
    expect(s).toEqual({
      id: s.id, reference: s.reference, url: `${node.baseUrl}/path/${s.reference}`, status: 'open', request_reference: request,
      success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/cancel', expires_at: s.expires_at,
    });
    expect(s.expires_at).toMatch(RFC3339);
    expect(res.text).not.toContain(merchant.url);
  });

  it('only a local credential opens a session (another member: 403 path.auth.forbidden)', async () => {
    const request = await newRequest();
    expectError(await beta.post('/checkout/sessions', { request_reference: request, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/c' }), 403, 'path.auth.forbidden');
  });

  it('only while the request is created: paid -> 409 path.request.not_open, revoked -> 410 path.request.revoked (P7)', async () => {
    const paid = await newRequest();
    await beta.post(`/requests/${paid}/paid`);
    expectError(await local.post('/checkout/sessions', { request_reference: paid, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/c' }), 409, 'path.request.not_open');
    const revoked = await newRequest();
    await local.post(`/requests/${revoked}/revoke`);
    expectError(await local.post('/checkout/sessions', { request_reference: revoked, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/c' }), 410, 'path.request.revoked');
  });

  it('webhook_url must be https and not loopback, private or link-local without --dev (P11)', async () => {
    const request = await newRequest({}, strictLocal, await newPayee(strictLocal, [EUR]));
    const open = (webhook_url: string) => strictLocal.post('/checkout/sessions', {
      request_reference: request, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/c', webhook_url,
    });
    for (const url of ['http://127.0.0.1:8099/hooks', 'http://shop.example/hooks', 'https://127.0.0.1/hooks', 'https://localhost/hooks',
      'https://10.0.0.1/hooks', 'https://192.168.1.20/hooks', 'https://169.254.1.1/hooks', 'https://169.254.169.254/latest/meta-data']) {
      expectError(await open(url), 400, 'path.core.invalid_request', 'webhook_url');
    }
    const ok = await open('https://shop.example/hooks');
    expect(ok.status, ok.text).toBe(201);
  });

  it('GET /path/{reference} serves a signed path.checkout that verifies and never carries the merchant-side id or webhook_url (SPEC I, P4)', async () => {
    const { request, session } = await newSession();
    const res = await fetch(session.url);
    expect(res.status).toBe(200);
    const text = await res.text();
    const c = JSON.parse(text);
    expect(c).toMatchObject({ type: 'path.checkout', reference: session.reference, status: 'open', issuer: 'local', kid });
    expect(verifiesWith(c, publicKey)).toBe(true);
    expect(c.request).toMatchObject({ type: 'path.request', reference: request });
    expect(verifiesWith(c.request, publicKey)).toBe(true);
    expect(text).not.toContain(session.id);
    expect(text).not.toContain(merchant.url);
    expect(text).not.toContain('webhook_url');
  });

  it('GET /checkout/sessions/{id}: the issuer reads it; another member gets 404, not 403', async () => {
    const { session } = await newSession();
    const res = await local.get(`/checkout/sessions/${session.id}`);
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({
      id: session.id, reference: session.reference, status: 'open', success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/cancel',
      payer_member: null, attempts: 0, expires_at: session.expires_at, completed_at: null,
    });
    expect(res.text).not.toContain(merchant.url);
    expectError(await beta.get(`/checkout/sessions/${session.id}`), 404, 'path.core.not_found');
    expectError(await local.get(`/checkout/sessions/cs_${'0'.repeat(32)}`), 404, 'path.core.not_found');
  });

  it('attempt takes payer_member from the credential and increments attempts (open -> open)', async () => {
    const { session } = await newSession();
    const first = await beta.post(`/checkout/sessions/${session.reference}/attempt`);
    expect(first.status, first.text).toBe(200);
    expect(first.json).toEqual({ reference: session.reference, attempts: 1 });
    let read = (await local.get(`/checkout/sessions/${session.id}`)).json;
    expect(read).toMatchObject({ payer_member: 'beta', attempts: 1, status: 'open' });
    const second = await gamma.post(`/checkout/sessions/${session.reference}/attempt`);
    expect(second.json).toEqual({ reference: session.reference, attempts: 2 });
    read = (await local.get(`/checkout/sessions/${session.id}`)).json;
    expect(read).toMatchObject({ payer_member: 'gamma', attempts: 2, status: 'open' });
    expectError(await anon.post(`/checkout/sessions/${session.reference}/attempt`), 401, 'path.auth.unauthenticated');
  });

  it('40 parallel completes: exactly one 200, the rest 409 path.checkout.session_not_open; the request is NOT marked paid', async () => {
    const { request, session } = await newSession();
    const base = Date.now();
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) =>
      (i % 2 === 0 ? beta : gamma).post(`/checkout/sessions/${session.reference}/complete`, undefined, { timestamp: new Date(base + i).toISOString() })));
    const winners = answers.filter((a) => a.status === 200);
    expect(winners, answers.map((a) => a.status).join(',')).toHaveLength(1);
    const w = winners[0]!.json;
    expect(w).toEqual({ reference: session.reference, status: 'completed', completed_at: w.completed_at, success_url: 'https://shop.example/ok' });
    expect(w.completed_at).toMatch(RFC3339);
    for (const a of answers.filter((x) => x.status !== 200)) expectError(a, 409, 'path.checkout.session_not_open');

    expect((await anon.get(`/requests/${request}`)).json.status).toBe('created');
    const read = (await local.get(`/checkout/sessions/${session.id}`)).json;
    expect(read).toMatchObject({ status: 'completed', completed_at: w.completed_at });
    const link = await (await fetch(session.url)).json();
    expect(link.status).toBe('completed');
    expect(verifiesWith(link, publicKey)).toBe(true);
    // A completed session is not open: attempt, complete and revoke are refused.
    expectError(await beta.post(`/checkout/sessions/${session.reference}/attempt`), 409, 'path.checkout.session_not_open');
    expectError(await beta.post(`/checkout/sessions/${session.reference}/complete`), 409, 'path.checkout.session_not_open');
    expectError(await local.post(`/checkout/sessions/${session.reference}/revoke`), 409, 'path.checkout.session_not_open');
    // checkout.session.completed reaches the session's webhook_url exactly once.
    await waitFor('checkout.session.completed', () => eventsFor(merchant, 'checkout.session.completed', session.reference).length > 0);
    await sleep(300);
    expect(eventsFor(merchant, 'checkout.session.completed', session.reference)).toHaveLength(1);
  });

  it('open -> revoked by the merchant (local credential); another member 403; then attempt/complete/revoke -> 409', async () => {
    const { session } = await newSession();
    expectError(await beta.post(`/checkout/sessions/${session.reference}/revoke`), 403, 'path.auth.forbidden');
    const res = await local.post(`/checkout/sessions/${session.reference}/revoke`);
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ reference: session.reference, status: 'revoked' });
    expect(res.json.revoked_at).toMatch(RFC3339);
    expect((await local.get(`/checkout/sessions/${session.id}`)).json.status).toBe('revoked');
    expect((await (await fetch(session.url)).json()).status).toBe('revoked');
    expectError(await beta.post(`/checkout/sessions/${session.reference}/attempt`), 409, 'path.checkout.session_not_open');
    expectError(await beta.post(`/checkout/sessions/${session.reference}/complete`), 409, 'path.checkout.session_not_open');
    expectError(await local.post(`/checkout/sessions/${session.reference}/revoke`), 409, 'path.checkout.session_not_open');
  });

  it('open -> expired by the passage of expires_at; checkout.session.expired is delivered to its webhook_url ("States and transitions", P11)', async () => {
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const { request, session } = await newSession({ expires_at: expiresAt });
    expect(session.expires_at).toBe(expiresAt);
    expect((await local.get(`/checkout/sessions/${session.id}`)).json.status).toBe('open');
    await sleep(Date.parse(expiresAt) - Date.now() + 150);
    expect((await local.get(`/checkout/sessions/${session.id}`)).json.status).toBe('expired');
    expectError(await beta.post(`/checkout/sessions/${session.reference}/attempt`), 409, 'path.checkout.session_not_open');
    expectError(await beta.post(`/checkout/sessions/${session.reference}/complete`), 409, 'path.checkout.session_not_open');
    expect((await anon.get(`/requests/${request}`)).json.status).toBe('created');

    const delivery = await waitFor('checkout.session.expired at the session webhook_url',
      () => eventsFor(merchant, 'checkout.session.expired', session.reference)[0]);
    expect(delivery.body).toMatchObject({ type: 'path.event', event: 'checkout.session.expired' });
    expect(delivery.body.data).toMatchObject({ reference: session.reference, status: 'expired' });
    expect(verifiesWith(delivery.body, publicKey)).toBe(true);
    expect((await (await fetch(session.url)).json()).status).toBe('expired');
  });
});
