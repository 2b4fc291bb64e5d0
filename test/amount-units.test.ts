// P23 over the real server and real LMDB: every route that takes an amount, a ceiling, a fee or
// a limit refuses one beyond its asset's unit (a fiat currency's ISO 4217 minor unit, 18 digits
// for a token) with 400 path.core.invalid_request naming the field and the digits allowed, and
// counts nothing. Issue 28 item 4: a EUR consume of 0.001 was answered 200 and counted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Client,
  createCredential,
  removeDir,
  startNode,
  tempDir,
  type Answer,
  type NodeProcess,
} from './support/harness.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const USDC = { rail: 'book', asset_type: 'token', asset_code: 'USDC' };
const COMMIT = `sha256:${'ab'.repeat(32)}`;
const money = (value: string, asset_code = 'EUR', asset_type = 'fiat') => ({
  value,
  asset_type,
  asset_code,
});
const fee = (value: string, asset_code = 'EUR') => ({
  kind: 'operator',
  amount: money(value, asset_code),
  paid_by: 'payer',
});
const inHours = (h: number) => new Date(Date.now() + h * 3_600_000).toISOString();

// P5: identical signing strings inside the window are replays: each call its own timestamp.
let lastStamp = 0;
function stamp(): string {
  lastStamp = Math.max(Date.now(), lastStamp + 1);
  return new Date(lastStamp).toISOString();
}
const post = (c: Client, path: string, body: unknown, idempotencyKey?: string) =>
  c.post(path, body, { timestamp: stamp(), idempotencyKey });
const get = (c: Client, path: string) => c.get(path, { timestamp: stamp() });

/** The P23 refusal: 400 invalid_request, the field named, the digits allowed. */
function expectDigits(res: Answer, field: string, digits: number): void {
  expect(res.status, res.text).toBe(400);
  expect(res.headers.get('content-type')).toContain('application/json');
  expect(res.json.error.code).toBe('path.core.invalid_request');
  expect(res.json.error.detail).toEqual({ field, max_fraction_digits: digits });
  expect(res.json.error.message).toContain(field);
}

function expectStatus(res: Answer, status: number): void {
  expect(res.status, res.text).toBe(status);
}

let node: NodeProcess;
let dataDir: string;
let local: Client;
let beta: Client;
let gamma: Client;
let subject: string;
let addressId: string;
let address: string;

beforeAll(async () => {
  dataDir = tempDir('path-amount-units');
  const own = createCredential(dataDir, 'local', { local: true });
  const b = createCredential(dataDir, 'beta', { local: false });
  const g = createCredential(dataDir, 'gamma', { local: false });
  node = await startNode({ dataDir });
  local = new Client(node.baseUrl, own);
  beta = new Client(node.baseUrl, b);
  gamma = new Client(node.baseUrl, g);
  const s = await post(local, '/subjects', { subject_type: 'legal_entity' });
  expectStatus(s, 201);
  subject = s.json.id;
  const a = await post(local, '/addresses', {
    subject_id: subject,
    profile: 'directory',
    discoverability: 'network',
  });
  expectStatus(a, 201);
  addressId = a.json.id;
  address = a.json.address;
  const target = { ...EUR, account_kind: 'own_ledger', account_ref: 'acct-1', is_default: true };
  expectStatus(await post(local, `/addresses/${addressId}/targets`, target), 201);
});

afterAll(async () => {
  await node?.stop();
  removeDir(dataDir);
});

describe('P23: connections, consumes and delegations (SPEC K)', () => {
  const connection = (overrides: Record<string, unknown> = {}) => ({
    grantee: 'beta',
    subject_id: subject,
    capabilities: { payment_request: true },
    mode: 'persistent_consent',
    max_single: '10',
    max_total: '45',
    currency: 'EUR',
    expires_at: inHours(2),
    ...overrides,
  });
  const connect = async (overrides: Record<string, unknown> = {}): Promise<string> => {
    const res = await post(local, '/connect/connections', connection(overrides));
    expectStatus(res, 201);
    return res.json.reference;
  };
  let op = 0;
  const consume = (reference: string, amount: string, currency = 'EUR', key?: string) =>
    post(
      beta,
      `/connect/connections/${reference}/consume`,
      { capability: 'payment_request', amount, currency, operation_ref: `op-${++op}` },
      key,
    );
  /** The counters and the usage log: what a consume would have moved. */
  const usageOf = async (reference: string) => {
    const read = await get(beta, `/connect/connections/${reference}`);
    const usage = await get(beta, `/connect/connections/${reference}/usage`);
    const { consumed_total, consumed_operations, remaining_total } = read.json;
    return { consumed_total, consumed_operations, remaining_total, rows: usage.json.usage };
  };

  it('issue 28: EUR consumes of 0.001 and 0.0000000000000000000001: 400, not counted', async () => {
    const c = await connect();
    expectStatus(await consume(c, '2.50'), 200);
    const before = await usageOf(c);
    expect(before).toMatchObject({ consumed_total: '2.5', consumed_operations: 1 });
    for (const amount of ['0.001', '0.0000000000000000000001', '1.000']) {
      expectDigits(await consume(c, amount), 'amount', 2);
    }
    expect(await usageOf(c)).toEqual(before);
  });

  it('the refusal is not kept under its idempotency key: a corrected retry reuses it', async () => {
    const c = await connect();
    expectDigits(await consume(c, '0.001', 'EUR', 'consume-k1'), 'amount', 2);
    const corrected = await consume(c, '0.01', 'EUR', 'consume-k1');
    expectStatus(corrected, 200);
    expect(corrected.json).toMatchObject({ consumed_total: '0.01', consumed_operations: 1 });
  });

  it('a connection with a ceiling beyond its currency is refused, naming it', async () => {
    const refused = async (overrides: Record<string, unknown>, field: string, digits: number) =>
      expectDigits(await post(local, '/connect/connections', connection(overrides)), field, digits);
    await refused({ max_single: '10.001' }, 'max_single', 2);
    await refused({ max_total: '45.000' }, 'max_total', 2);
    const schedule = { interval: `R/${new Date().toISOString()}/P1M`, max_per_period: '15.001' };
    await refused({ schedule }, 'schedule.max_per_period', 2);
    await refused({ currency: 'JPY', max_single: '1.5', max_total: '100' }, 'max_single', 0);
    await refused({ currency: 'BHD', max_total: '45.0001' }, 'max_total', 3);
  });

  it('JPY: "1.5" is refused and "15" counted; BHD: "1.005" is counted', async () => {
    const yen = await connect({ currency: 'JPY', max_single: '100', max_total: '1000' });
    expectDigits(await consume(yen, '1.5', 'JPY'), 'amount', 0);
    expectDigits(await consume(yen, '15.0', 'JPY'), 'amount', 0);
    const counted = await consume(yen, '15', 'JPY');
    expectStatus(counted, 200);
    expect(counted.json).toMatchObject({ consumed_total: '15', consumed_operations: 1 });
    const dinar = await connect({ currency: 'BHD', max_single: '10.5', max_total: '45.125' });
    const fils = await consume(dinar, '1.005', 'BHD');
    expectStatus(fils, 200);
    expect(fils.json).toMatchObject({ consumed_total: '1.005', remaining_total: '44.12' });
    expectDigits(await consume(dinar, '1.0005', 'BHD'), 'amount', 3);
  });

  it('a delegation binds amounts of its currency; its consume is held to them', async () => {
    const c = await connect();
    const delegation = (overrides: Record<string, unknown>) => ({
      delegate: 'gamma',
      capability: 'payment_request',
      amount: '5',
      currency: 'EUR',
      destination_commitment: COMMIT,
      expires_at: inHours(1),
      ...overrides,
    });
    const cut = (overrides: Record<string, unknown>) =>
      post(local, `/connect/connections/${c}/delegations`, delegation(overrides));
    expectDigits(await cut({ amount: '5.001' }), 'amount', 2);
    expectDigits(await cut({ max_total: '10.000' }), 'max_total', 2);
    const made = await cut({ max_total: '10' });
    expectStatus(made, 201);
    const spend = (amount: string) =>
      post(gamma, `/connect/delegations/${made.json.reference}/consume`, {
        capability: 'payment_request',
        amount,
        currency: 'EUR',
        destination_commitment: COMMIT,
        operation_ref: `dop-${++op}`,
      });
    // "5.000" is the decimal the delegation binds, but not a spelling of euros.
    expectDigits(await spend('5.000'), 'amount', 2);
    const read = await get(gamma, `/connect/delegations/${made.json.reference}`);
    expect(read.json).toMatchObject({ consumed_total: '0', consumed_operations: 0 });
    const paid = await spend('5.00');
    expectStatus(paid, 200);
    expect(paid.json).toMatchObject({ consumed_total: '5', parent_consumed_total: '5' });
  });
});

describe('P23: standing intents, requests, instructions and receipts (SPEC C, G, H, J)', () => {
  it("a standing intent's fees and ceilings are held to their asset's unit", async () => {
    const put = (accepts: unknown[]) =>
      local.request('PUT', `/addresses/${addressId}/standing-intent`, {
        body: { accepts },
        timestamp: stamp(),
      });
    const withFee = { ...EUR, fees: [fee('0.25'), fee('0.255')] };
    expectDigits(await put([EUR, withFee]), 'accepts.1.fees.1.amount.value', 2);
    const ceiling = { ...EUR, limits: { max_single: money('1000.5', 'JPY') } };
    expectDigits(await put([ceiling]), 'accepts.0.limits.max_single.value', 0);
    const tokenAmount = money(`0.${'1'.repeat(19)}`, 'USDC', 'token');
    const tokenFee = { ...USDC, fees: [{ ...fee('0'), amount: tokenAmount }] };
    expectDigits(await put([EUR, tokenFee]), 'accepts.1.fees.0.amount.value', 18);
    const fine = {
      ...EUR,
      fees: [fee('0.25'), fee('0.125', 'BHD')],
      limits: { max_single: money('1000') },
    };
    expectStatus(await put([fine, USDC]), 200);
  });

  it('a request: its amount and each capability it accepts', async () => {
    const create = (body: Record<string, unknown>) =>
      post(local, '/requests', { accepts: [EUR], ...body });
    expectDigits(await create({ amount: money('12.505') }), 'amount.value', 2);
    expectDigits(await create({ amount: money('12.500') }), 'amount.value', 2);
    expectDigits(await create({ amount: money('1.5', 'JPY') }), 'amount.value', 0);
    const withFee = { ...EUR, fees: [fee('0.001')] };
    expectDigits(await create({ accepts: [withFee] }), 'accepts.0.fees.0.amount.value', 2);
    const token = money(`1.${'0'.repeat(18)}`, 'USDC', 'token');
    for (const amount of [money('15', 'JPY'), money('1.005', 'BHD'), money('12.50'), token]) {
      const res = await create({ amount });
      expectStatus(res, 201);
      const object = await get(local, `/requests/${res.json.reference}`);
      expect(object.json.amount).toEqual(amount);
    }
  });

  it('an instruction: its amount and the fees of via', async () => {
    const issue = (body: Record<string, unknown>) =>
      post(beta, '/instructions', { address, via: EUR, ...body });
    expectDigits(await issue({ amount: money('12.505') }), 'amount.value', 2);
    const via = { ...EUR, fees: [fee('0.100')] };
    expectDigits(await issue({ via }), 'via.fees.0.amount.value', 2);
    const issued = await issue({ amount: money('12.50') });
    expectStatus(issued, 201);
    expect(issued.json.amount).toEqual(money('12.50'));
  });

  it('a receipt: what was sent and received, its fees and the amounts of via', async () => {
    const receipt = (extra: Record<string, unknown>) =>
      post(local, '/receipts', {
        issued_by: 'payee',
        via: EUR,
        received: money('10.50'),
        rail_references: [{ type: 'book_entry', value: `BE-${stamp()}` }],
        ...extra,
      });
    expectDigits(await receipt({ received: money('10.505') }), 'received.value', 2);
    expectDigits(await receipt({ sent: money('10.500') }), 'sent.value', 2);
    expectDigits(await receipt({ fees: [fee('0.25'), fee('0.001')] }), 'fees.1.amount.value', 2);
    const via = { ...EUR, limits: { max_single: money('100.5', 'KRW') } };
    expectDigits(await receipt({ via }), 'via.limits.max_single.value', 0);
    const settled = await receipt({ received: money('1.005', 'BHD'), fees: [fee('0.25')] });
    expectStatus(settled, 201);
    expect(settled.json.received).toEqual(money('1.005', 'BHD'));
  });
});
