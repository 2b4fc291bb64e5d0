// SPEC K (connections, mandates, delegations) and "States and transitions: Connection and
// delegation" over the real node and real LMDB; P2/P3 (signed envelopes, consent_digest,
// binds_digest), P5 (distinct signed timestamps for concurrent calls), P7 (codes), P12 (usage
// page), P13 (decimal strings), P14 (kill -9). Project decisions: docs/decisions.md
// "Connections, mandates and delegations".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, createCredential, publishedKey, removeDir, startNode, tempDir, type Answer, type Credential, type NodeProcess } from './support/harness.js';
import { digest, verifiesWith } from './support/verify.js';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const CON = /^con_[0-9a-f]{32}$/;
const DLG = /^dlg_[0-9a-f]{32}$/;
const COMMIT = `sha256:${'ab'.repeat(32)}`;
const OTHER_COMMIT = `sha256:${'cd'.repeat(32)}`;

// P5: identical signing strings inside the window are replays, so every request gets its own
// timestamp (one millisecond apart at least), also when sent at once.
let lastStamp = 0;
function stamp(): string {
  const t = Math.max(Date.now(), lastStamp + 1);
  lastStamp = t;
  return new Date(t).toISOString();
}
const post = (c: Client, path: string, body?: unknown, idempotencyKey?: string) => c.post(path, body, { timestamp: stamp(), idempotencyKey });
const get = (c: Client, path: string) => c.get(path, { timestamp: stamp() });
const inHours = (h: number) => new Date(Date.now() + h * 3_600_000).toISOString();

function expectError(res: Answer, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toContain('application/json');
  expect(res.json.error.code, res.text).toBe(code);
  expect(typeof res.json.error.message).toBe('string');
}

/** Exact decimal (P13) to integer micro-units, independent of the node's arithmetic. */
function micros(text: string): bigint {
  expect(text).toMatch(/^[0-9]+(\.[0-9]{1,6})?$/);
  const [whole, fraction = ''] = text.split('.');
  return BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
}
const sumMicros = (amounts: string[]) => amounts.reduce((s, a) => s + micros(a), 0n);

interface Members { local: Client; beta: Client; gamma: Client; delta: Client }

function members(baseUrl: string, creds: Record<keyof Members, Credential>): Members {
  return {
    local: new Client(baseUrl, creds.local), beta: new Client(baseUrl, creds.beta),
    gamma: new Client(baseUrl, creds.gamma), delta: new Client(baseUrl, creds.delta),
  };
}

function credentialsFor(dir: string): Record<keyof Members, Credential> {
  return {
    local: createCredential(dir, 'local', { local: true }),
    beta: createCredential(dir, 'beta', { local: false }),
    gamma: createCredential(dir, 'gamma', { local: false }),
    delta: createCredential(dir, 'delta', { local: false }),
  };
}

async function newSubject(m: Members): Promise<string> {
  const res = await post(m.local, '/subjects', { subject_type: 'natural_person' });
  expect(res.status, res.text).toBe(201);
  return res.json.id;
}

function connectionBody(subject_id: string, overrides: Record<string, unknown> = {}) {
  return {
    grantee: 'beta', subject_id, capabilities: { payment_request: true }, mode: 'persistent_consent',
    max_single: '10', max_total: '45', currency: 'EUR', expires_at: inHours(2), ...overrides,
  };
}

async function newConnection(m: Members, subject_id: string, overrides: Record<string, unknown> = {}): Promise<any> {
  const res = await post(m.local, '/connect/connections', connectionBody(subject_id, overrides));
  expect(res.status, res.text).toBe(201);
  return res.json;
}

function delegationBody(overrides: Record<string, unknown> = {}) {
  return { delegate: 'gamma', capability: 'payment_request', amount: '5', currency: 'EUR', destination_commitment: COMMIT, expires_at: inHours(1), ...overrides };
}

async function newDelegation(m: Members, connection: string, overrides: Record<string, unknown> = {}): Promise<any> {
  const res = await post(m.local, `/connect/connections/${connection}/delegations`, delegationBody(overrides));
  expect(res.status, res.text).toBe(201);
  return res.json;
}

let opCounter = 0;
const consume = (c: Client, reference: string, amount: string, extra: Record<string, unknown> = {}) =>
  post(c, `/connect/connections/${reference}/consume`, { capability: 'payment_request', amount, currency: 'EUR', operation_ref: `op-${++opCounter}`, ...extra });
const consumeDelegation = (c: Client, reference: string, extra: Record<string, unknown> = {}) =>
  post(c, `/connect/delegations/${reference}/consume`, {
    capability: 'payment_request', amount: '5', currency: 'EUR', destination_commitment: COMMIT, operation_ref: `dop-${++opCounter}`, ...extra,
  });

// ---------------------------------------------------------------------------------------------

let node: NodeProcess;
let dataDir: string;
let m: Members;
let key: string;
let subject: string;
const dirs: string[] = [];

beforeAll(async () => {
  dataDir = tempDir('path-connect');
  dirs.push(dataDir);
  const creds = credentialsFor(dataDir);
  node = await startNode({ dataDir });
  m = members(node.baseUrl, creds);
  key = await publishedKey(node.baseUrl);
  subject = await newSubject(m);
});

afterAll(async () => {
  await node?.stop();
  for (const d of dirs) removeDir(d);
});

describe('SPEC K connections: creation and reading (P2, P3, P7)', () => {
  it('SPEC K: the local member creates a connection: 201 {reference, grantee, status active, mode, consent_digest, expires_at}', async () => {
    const expires_at = inHours(3);
    const res = await post(m.local, '/connect/connections', connectionBody(subject, { expires_at }));
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.json).sort()).toEqual(['consent_digest', 'expires_at', 'grantee', 'mode', 'reference', 'status']);
    expect(res.json.reference).toMatch(CON);
    expect(res.json).toMatchObject({ grantee: 'beta', status: 'active', mode: 'persistent_consent', expires_at });
    expect(res.json.consent_digest).toMatch(DIGEST);
  });

  it('SPEC K / P7: a non-local member cannot create a connection (403 path.auth.forbidden)', async () => {
    expectError(await post(m.beta, '/connect/connections', connectionBody(subject, { grantee: 'gamma' })), 403, 'path.auth.forbidden');
  });

  it('SPEC K / P2 / P3: grantor and grantee read the signed path.connection; consent is a signed envelope with consent_digest = digest(consent)', async () => {
    const expires_at = inHours(2);
    const created = await newConnection(m, subject, { expires_at, mode: 'per_operation_signature', capabilities: { payment_request: true, refund: false } });
    const reads: any[] = [];
    for (const party of [m.local, m.beta]) {
      const res = await get(party, `/connect/connections/${created.reference}`);
      expect(res.status, res.text).toBe(200);
      expect(verifiesWith(res.json, key)).toBe(true);
      const c = res.json;
      expect(c).toMatchObject({
        type: 'path.connection', reference: created.reference, grantor: 'local', grantee: 'beta', subject_id: subject,
        status: 'active', mode: 'per_operation_signature', capabilities: { payment_request: true, refund: false },
        max_single: '10', max_total: '45', currency: 'EUR', expires_at,
        consumed_total: '0', consumed_operations: 0, remaining_total: '45', revoked_at: null, revoked_by: null,
      });
      expect(verifiesWith(c.consent, key)).toBe(true);
      expect(c.consent_digest).toBe(created.consent_digest);
      expect(digest(c.consent)).toBe(c.consent_digest);
      // the terms are what the consent states
      expect(c.consent).toMatchObject({
        grantor: 'local', grantee: 'beta', subject_id: subject, capabilities: { payment_request: true, refund: false },
        mode: 'per_operation_signature', max_single: '10', max_total: '45', currency: 'EUR', expires_at,
      });
      reads.push(c);
    }
    // the consent is stored as it was, whoever reads it
    expect(reads[1].consent).toEqual(reads[0].consent);
  });

  it('SPEC K / P7: a third member cannot read a connection (403)', async () => {
    const created = await newConnection(m, subject);
    expectError(await get(m.gamma, `/connect/connections/${created.reference}`), 403, 'path.auth.forbidden');
  });

  it('SPEC K: the counters in a read are signed at read (they move with consumption)', async () => {
    const created = await newConnection(m, subject);
    expect((await consume(m.beta, created.reference, '7.5')).status).toBe(200);
    const res = await get(m.local, `/connect/connections/${created.reference}`);
    expect(verifiesWith(res.json, key)).toBe(true);
    expect(res.json).toMatchObject({ consumed_total: '7.5', consumed_operations: 1, remaining_total: '37.5', status: 'active' });
    // tampering with a signed counter breaks the signature
    expect(verifiesWith({ ...res.json, consumed_total: '0' }, key)).toBe(false);
  });
});

describe('SPEC K connections: consume (P7, P13)', () => {
  it('SPEC K: only the grantee consumes (grantor and third member 403); the grantee gets {ok, consumed_total, consumed_operations, remaining_total}', async () => {
    const c = await newConnection(m, subject);
    expectError(await consume(m.local, c.reference, '2'), 403, 'path.auth.forbidden');
    expectError(await consume(m.gamma, c.reference, '2'), 403, 'path.auth.forbidden');
    const res = await consume(m.beta, c.reference, '2');
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ ok: true, consumed_total: '2', consumed_operations: 1, remaining_total: '43' });
  });

  it('P7: a capability not granted (absent or false) or another currency is 403 path.connect.delegation_out_of_scope and moves nothing', async () => {
    const c = await newConnection(m, subject, { capabilities: { payment_request: true, refund: false } });
    expectError(await consume(m.beta, c.reference, '1', { capability: 'refund' }), 403, 'path.connect.delegation_out_of_scope');
    expectError(await consume(m.beta, c.reference, '1', { capability: 'payout' }), 403, 'path.connect.delegation_out_of_scope');
    expectError(await consume(m.beta, c.reference, '1', { currency: 'USD' }), 403, 'path.connect.delegation_out_of_scope');
    const read = await get(m.beta, `/connect/connections/${c.reference}`);
    expect(read.json).toMatchObject({ consumed_total: '0', consumed_operations: 0, remaining_total: '45' });
    expect((await get(m.beta, `/connect/connections/${c.reference}/usage`)).json.usage).toEqual([]);
  });

  it('P7: an amount above max_single is 403 path.connect.delegation_limit_reached; max_single itself passes', async () => {
    const c = await newConnection(m, subject);
    expectError(await consume(m.beta, c.reference, '10.01'), 403, 'path.connect.delegation_limit_reached');
    expectError(await consume(m.beta, c.reference, '11'), 403, 'path.connect.delegation_limit_reached');
    const res = await consume(m.beta, c.reference, '10.00');
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ consumed_total: '10', consumed_operations: 1, remaining_total: '35' });
  });

  it('P7: a consume beyond the remaining total is refused with limit_reached; exactly the remainder still fits', async () => {
    const c = await newConnection(m, subject);
    for (let i = 0; i < 4; i++) expect((await consume(m.beta, c.reference, '10')).status).toBe(200);
    expectError(await consume(m.beta, c.reference, '5.01'), 403, 'path.connect.delegation_limit_reached');
    const last = await consume(m.beta, c.reference, '5');
    expect(last.json).toEqual({ ok: true, consumed_total: '45', consumed_operations: 5, remaining_total: '0' });
    expectError(await consume(m.beta, c.reference, '0.01'), 403, 'path.connect.delegation_limit_reached');
  });

  it('P13: decimal arithmetic is exact: 0.10 + 0.20 = 0.3, remaining 44.7; then 0.01 more', async () => {
    const c = await newConnection(m, subject);
    expect((await consume(m.beta, c.reference, '0.10')).json).toMatchObject({ consumed_total: '0.1', remaining_total: '44.9' });
    const second = await consume(m.beta, c.reference, '0.20');
    expect(second.json).toEqual({ ok: true, consumed_total: '0.3', consumed_operations: 2, remaining_total: '44.7' });
    const third = await consume(m.beta, c.reference, '0.01');
    expect(third.json).toEqual({ ok: true, consumed_total: '0.31', consumed_operations: 3, remaining_total: '44.69' });
    const read = await get(m.local, `/connect/connections/${c.reference}`);
    expect(read.json).toMatchObject({ consumed_total: '0.31', remaining_total: '44.69' });
  });

  it('SPEC K: an amount of zero is refused (400) and moves nothing', async () => {
    const c = await newConnection(m, subject);
    expectError(await consume(m.beta, c.reference, '0.00'), 400, 'path.core.invalid_request');
    expect((await get(m.beta, `/connect/connections/${c.reference}`)).json.consumed_operations).toBe(0);
  });

  it('SPEC K: 45 simultaneous consumes of 1 at max_total 45 plus 5 more: exactly 45 succeed, the rest 403 limit_reached; counters equal the usage log', async () => {
    const c = await newConnection(m, subject);
    const base = Date.now();
    lastStamp = Math.max(lastStamp, base + 60);
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => m.beta.post(`/connect/connections/${c.reference}/consume`,
      { capability: 'payment_request', amount: '1', currency: 'EUR', operation_ref: `burst-${i}` }, { timestamp: new Date(base + i).toISOString() })));
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status !== 200);
    expect(ok.length).toBe(45);
    expect(refused.length).toBe(5);
    for (const r of refused) expectError(r, 403, 'path.connect.delegation_limit_reached');
    // every success saw its own step of the counter: 1, 2, …, 45
    expect(ok.map((a) => Number(a.json.consumed_total)).sort((x, y) => x - y)).toEqual(Array.from({ length: 45 }, (_, i) => i + 1));
    expect(ok.map((a) => a.json.consumed_operations).sort((x, y) => x - y)).toEqual(Array.from({ length: 45 }, (_, i) => i + 1));

    const read = await get(m.beta, `/connect/connections/${c.reference}`);
    expect(read.json).toMatchObject({ consumed_total: '45', consumed_operations: 45, remaining_total: '0' });
    const usage = await get(m.beta, `/connect/connections/${c.reference}/usage?limit=500`);
    expect(usage.status, usage.text).toBe(200);
    expect(usage.json.count).toBe(45);
    expect(usage.json.total).toBe(45);
    expect(usage.json.usage.length).toBe(45);
    expect(sumMicros(usage.json.usage.map((r: any) => r.amount))).toBe(micros('45'));
    const succeeded = answers.map((a, i) => (a.status === 200 ? `burst-${i}` : null)).filter((x) => x !== null).sort();
    expect(usage.json.usage.map((r: any) => r.operation_ref).sort()).toEqual(succeeded);
  });

  it('P7: a consume with Path-Idempotency-Key replays byte for byte without moving counters; another body under the key is 422', async () => {
    const c = await newConnection(m, subject);
    const body = { capability: 'payment_request', amount: '3', currency: 'EUR', operation_ref: 'idem-1' };
    const first = await post(m.beta, `/connect/connections/${c.reference}/consume`, body, 'consume-idem-1');
    expect(first.status, first.text).toBe(200);
    const again = await post(m.beta, `/connect/connections/${c.reference}/consume`, body, 'consume-idem-1');
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('path-idempotent-replayed')).toBe('true');
    expectError(await post(m.beta, `/connect/connections/${c.reference}/consume`, { ...body, amount: '4' }, 'consume-idem-1'), 422, 'path.core.idempotency_conflict');
    const read = await get(m.beta, `/connect/connections/${c.reference}`);
    expect(read.json).toMatchObject({ consumed_total: '3', consumed_operations: 1, remaining_total: '42' });
    expect((await get(m.beta, `/connect/connections/${c.reference}/usage`)).json.total).toBe(1);
  });
});

describe('SPEC K connections: revocation and expiry ("States and transitions: Connection and delegation", P7)', () => {
  it('revoke by the grantor records revoked_at and revoked_by; the next consume is 410 path.connect.revoked; the usage log remains', async () => {
    const c = await newConnection(m, subject);
    expect((await consume(m.beta, c.reference, '4', { operation_ref: 'before-revoke' })).status).toBe(200);
    const before = Date.now();
    const res = await post(m.local, `/connect/connections/${c.reference}/revoke`, { reason: 'customer asked' });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ reference: c.reference, status: 'revoked', revoked_by: 'local' });
    expect(res.json.revoked_at).toMatch(RFC3339);
    expect(Date.parse(res.json.revoked_at)).toBeGreaterThanOrEqual(before - 1000);
    expectError(await consume(m.beta, c.reference, '1'), 410, 'path.connect.revoked');

    for (const party of [m.local, m.beta]) {
      const read = await get(party, `/connect/connections/${c.reference}`);
      expect(verifiesWith(read.json, key)).toBe(true);
      expect(read.json).toMatchObject({ status: 'revoked', revoked_at: res.json.revoked_at, revoked_by: 'local', consumed_total: '4', consumed_operations: 1 });
      const usage = await get(party, `/connect/connections/${c.reference}/usage`);
      expect(usage.status, usage.text).toBe(200);
      expect(usage.json.usage.map((r: any) => r.operation_ref)).toEqual(['before-revoke']);
    }
  });

  it('revoke by the grantee (renounce) records revoked_by = grantee; consume after is 410; a third member cannot revoke (403)', async () => {
    const c = await newConnection(m, subject);
    expectError(await post(m.gamma, `/connect/connections/${c.reference}/revoke`, {}), 403, 'path.auth.forbidden');
    expect((await consume(m.beta, c.reference, '1')).status).toBe(200);
    const res = await post(m.beta, `/connect/connections/${c.reference}/revoke`);
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ reference: c.reference, status: 'revoked', revoked_by: 'beta' });
    expect(res.json.revoked_at).toMatch(RFC3339);
    expectError(await consume(m.beta, c.reference, '1'), 410, 'path.connect.revoked');
    expect((await get(m.local, `/connect/connections/${c.reference}`)).json).toMatchObject({ status: 'revoked', revoked_by: 'beta', consumed_operations: 1 });
  });

  it('an expired connection refuses consumption with 410 path.connect.expired', async () => {
    const expiresAt = Date.now() + 1500;
    const c = await newConnection(m, subject, { expires_at: new Date(expiresAt).toISOString() });
    expect((await consume(m.beta, c.reference, '1')).status).toBe(200);
    await new Promise((r) => setTimeout(r, expiresAt - Date.now() + 150));
    expectError(await consume(m.beta, c.reference, '1'), 410, 'path.connect.expired');
    const read = await get(m.beta, `/connect/connections/${c.reference}`);
    expect(read.json).toMatchObject({ status: 'expired', consumed_total: '1', consumed_operations: 1 });
  });

  it('a connection cannot be created already expired (400)', async () => {
    expectError(await post(m.local, '/connect/connections', connectionBody(subject, { expires_at: new Date(Date.now() - 60_000).toISOString() })), 400, 'path.core.invalid_request');
  });
});

describe('SPEC K connections: usage log (P12)', () => {
  let c: any;
  const refs: string[] = [];

  beforeAll(async () => {
    c = await newConnection(m, subject, { max_single: '1', max_total: '1000' });
    for (let batch = 0; batch < 7; batch++) {
      const answers = await Promise.all(Array.from({ length: 15 }, (_, i) => {
        const ref = `page-${batch * 15 + i}`;
        return consume(m.beta, c.reference, '0.01', { operation_ref: ref }).then((a) => ({ a, ref }));
      }));
      for (const { a, ref } of answers) {
        expect(a.status, a.text).toBe(200);
        refs.push(ref);
      }
    }
  });

  it('P12: the default page is 100 rows, the most recent, oldest first; total counts the whole log', async () => {
    const all = await get(m.beta, `/connect/connections/${c.reference}/usage?limit=500`);
    expect(all.status, all.text).toBe(200);
    expect(all.json).toMatchObject({ reference: c.reference, count: 105, total: 105 });
    expect(all.json.usage.map((r: any) => r.operation_ref).sort()).toEqual([...refs].sort());
    const times = all.json.usage.map((r: any) => Date.parse(r.occurred_at));
    expect(times).toEqual([...times].sort((x: number, y: number) => x - y));

    const page = await get(m.local, `/connect/connections/${c.reference}/usage`);
    expect(page.status, page.text).toBe(200);
    expect(Object.keys(page.json).sort()).toEqual(['count', 'reference', 'total', 'usage']);
    expect(page.json).toMatchObject({ reference: c.reference, count: 100, total: 105 });
    expect(page.json.usage).toEqual(all.json.usage.slice(5));

    const three = await get(m.beta, `/connect/connections/${c.reference}/usage?limit=3`);
    expect(three.json.count).toBe(3);
    expect(three.json.usage).toEqual(all.json.usage.slice(102));
  });

  it('P12: a usage row has capability, amount, currency, operation_ref, occurred_at', async () => {
    const page = await get(m.beta, `/connect/connections/${c.reference}/usage?limit=1`);
    expect(page.json.usage).toHaveLength(1);
    const row = page.json.usage[0];
    expect(Object.keys(row).sort()).toEqual(['amount', 'capability', 'currency', 'occurred_at', 'operation_ref']);
    expect(row).toMatchObject({ capability: 'payment_request', amount: '0.01', currency: 'EUR' });
    expect(refs).toContain(row.operation_ref);
    expect(row.occurred_at).toMatch(RFC3339);
  });

  it('P12 / P7: limit 501, 0, -1 or not a whole number is 400; 500 is accepted', async () => {
    for (const limit of ['501', '0', '-1', '2.5', 'ten']) {
      expectError(await get(m.beta, `/connect/connections/${c.reference}/usage?limit=${limit}`), 400, 'path.core.invalid_request');
    }
    expect((await get(m.beta, `/connect/connections/${c.reference}/usage?limit=500`)).status).toBe(200);
  });

  it('SPEC K: a third member cannot read the usage log (403)', async () => {
    expectError(await get(m.gamma, `/connect/connections/${c.reference}/usage`), 403, 'path.auth.forbidden');
  });
});

describe('SPEC K mandates (schedule, docs/decisions.md)', () => {
  it('a consume past max_per_period in the current period is 403 limit_reached; exactly up to the ceiling passes', async () => {
    const schedule = { interval: `R/${new Date(Date.now() - 1000).toISOString()}/P1M`, max_per_period: '15' };
    const c = await newConnection(m, subject, { schedule });
    expect((await consume(m.beta, c.reference, '10')).status).toBe(200);
    expectError(await consume(m.beta, c.reference, '6'), 403, 'path.connect.delegation_limit_reached');
    const fits = await consume(m.beta, c.reference, '5');
    expect(fits.status, fits.text).toBe(200);
    expect(fits.json).toMatchObject({ consumed_total: '15', consumed_operations: 2, remaining_total: '30' });
    expectError(await consume(m.beta, c.reference, '0.01'), 403, 'path.connect.delegation_limit_reached');
    const read = await get(m.local, `/connect/connections/${c.reference}`);
    expect(verifiesWith(read.json, key)).toBe(true);
    expect(read.json.schedule).toEqual(schedule);
    expect(read.json.consent.schedule).toEqual(schedule);
    expect(read.json.consumed_total).toBe('15');
  });

  it('a mandate whose first period has not begun refuses with 403 path.connect.delegation_out_of_scope', async () => {
    const c = await newConnection(m, subject, { schedule: { interval: `R/${inHours(24)}/P1M`, max_per_period: '15' } });
    expectError(await consume(m.beta, c.reference, '1'), 403, 'path.connect.delegation_out_of_scope');
    expect((await get(m.beta, `/connect/connections/${c.reference}`)).json.consumed_operations).toBe(0);
  });

  it('a mandate past its last repetition refuses with 410 path.connect.expired', async () => {
    const c = await newConnection(m, subject, { schedule: { interval: `R1/${new Date(Date.now() - 2 * 86_400_000).toISOString()}/P1D`, max_per_period: '15' } });
    expectError(await consume(m.beta, c.reference, '1'), 410, 'path.connect.expired');
  });

  it('a malformed schedule is 400 path.core.invalid_request', async () => {
    for (const schedule of [
      { interval: 'every month', max_per_period: '15' },
      { interval: `R/${inHours(1)}/PT1H`, max_per_period: '15' },
      { interval: 'R/2026-02-30T00:00:00Z/P1M', max_per_period: '15' },
      { interval: `R/${inHours(1)}/P1M`, max_per_period: '-1' },
      { interval: `R/${inHours(1)}/P1M` },
    ]) {
      expectError(await post(m.local, '/connect/connections', connectionBody(subject, { schedule })), 400, 'path.core.invalid_request');
    }
  });
});

describe('SPEC K delegations', () => {
  it('the grantor (local) creates a delegation: 201 {reference, delegate, status, binds_digest, expires_at}; a non-local member cannot (403)', async () => {
    const c = await newConnection(m, subject);
    expectError(await post(m.beta, `/connect/connections/${c.reference}/delegations`, delegationBody()), 403, 'path.auth.forbidden');
    const expires_at = inHours(1);
    const res = await post(m.local, `/connect/connections/${c.reference}/delegations`, delegationBody({ expires_at }));
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.json).sort()).toEqual(['binds_digest', 'delegate', 'expires_at', 'reference', 'status']);
    expect(res.json.reference).toMatch(DLG);
    expect(res.json).toMatchObject({ delegate: 'gamma', status: 'active', expires_at });
    expect(res.json.binds_digest).toMatch(DIGEST);
  });

  it('P2 / P3: grantor, parent grantee and delegate read it signed; binds is a signed envelope, binds_digest = digest(binds); a fourth member is refused', async () => {
    const c = await newConnection(m, subject);
    const d = await newDelegation(m, c.reference);
    for (const party of [m.local, m.beta, m.gamma]) {
      const res = await get(party, `/connect/delegations/${d.reference}`);
      expect(res.status, res.text).toBe(200);
      expect(verifiesWith(res.json, key)).toBe(true);
      expect(res.json).toMatchObject({ reference: d.reference, delegate: 'gamma', status: 'active', binds_digest: d.binds_digest, expires_at: d.expires_at });
      expect(verifiesWith(res.json.binds, key)).toBe(true);
      expect(digest(res.json.binds)).toBe(d.binds_digest);
      expect(res.json.binds.binds_to).toEqual({ capability: 'payment_request', amount: '5', currency: 'EUR', destination_commitment: COMMIT });
      expect(res.json.binds).toMatchObject({ delegate: 'gamma', max_total: '5', expires_at: d.expires_at });
      expect(res.json).toMatchObject({ consumed_total: '0', consumed_operations: 0, remaining_total: '5' });
    }
    expectError(await get(m.delta, `/connect/delegations/${d.reference}`), 403, 'path.auth.forbidden');
  });

  it('max_total defaults to amount (one use): 10 simultaneous consumes by the delegate, exactly one succeeds', async () => {
    const c = await newConnection(m, subject);
    const d = await newDelegation(m, c.reference);
    const base = Date.now();
    lastStamp = Math.max(lastStamp, base + 20);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => m.gamma.post(`/connect/delegations/${d.reference}/consume`,
      { capability: 'payment_request', amount: '5', currency: 'EUR', destination_commitment: COMMIT, operation_ref: `once-${i}` },
      { timestamp: new Date(base + i).toISOString() })));
    const ok = answers.filter((a) => a.status === 200);
    expect(ok.length).toBe(1);
    expect(ok[0]!.json).toEqual({ ok: true, consumed_total: '5', consumed_operations: 1, remaining_total: '0', parent_consumed_total: '5', parent_remaining_total: '40' });
    for (const a of answers.filter((x) => x.status !== 200)) expectError(a, 403, 'path.connect.delegation_limit_reached');
    expect((await get(m.gamma, `/connect/delegations/${d.reference}`)).json).toMatchObject({ consumed_total: '5', consumed_operations: 1, remaining_total: '0' });
    expect((await get(m.beta, `/connect/connections/${c.reference}`)).json).toMatchObject({ consumed_total: '5', consumed_operations: 1, remaining_total: '40' });
  });

  it('only the named delegate consumes (parent grantee, grantor, other member: 403)', async () => {
    const c = await newConnection(m, subject);
    const d = await newDelegation(m, c.reference);
    for (const other of [m.beta, m.local, m.delta]) expectError(await consumeDelegation(other, d.reference), 403, 'path.auth.forbidden');
    const res = await consumeDelegation(m.gamma, d.reference);
    expect(res.status, res.text).toBe(200);
    expect(res.json.consumed_operations).toBe(1);
  });

  it('P7: the body must match binds exactly: a smaller amount, another destination, capability or currency is 403 out_of_scope', async () => {
    const c = await newConnection(m, subject, { capabilities: { payment_request: true, refund: true } });
    const d = await newDelegation(m, c.reference);
    for (const change of [{ amount: '4' }, { amount: '6' }, { destination_commitment: OTHER_COMMIT }, { capability: 'refund' }, { currency: 'USD' }]) {
      expectError(await consumeDelegation(m.gamma, d.reference, change), 403, 'path.connect.delegation_out_of_scope');
    }
    expect((await get(m.gamma, `/connect/delegations/${d.reference}`)).json.consumed_operations).toBe(0);
    // the same amount written differently is the same decimal
    const res = await consumeDelegation(m.gamma, d.reference, { amount: '5.00' });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ consumed_total: '5', remaining_total: '0' });
  });

  it('a delegation with max_total 50 above what the parent has left stops at the parent ceiling; both counters agree; rows add destination_commitment', async () => {
    const c = await newConnection(m, subject);
    for (let i = 0; i < 3; i++) expect((await consume(m.beta, c.reference, '10')).status).toBe(200);
    const d = await newDelegation(m, c.reference, { max_total: '50' });
    const base = Date.now();
    lastStamp = Math.max(lastStamp, base + 20);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => m.gamma.post(`/connect/delegations/${d.reference}/consume`,
      { capability: 'payment_request', amount: '5', currency: 'EUR', destination_commitment: COMMIT, operation_ref: `ceiling-${i}` },
      { timestamp: new Date(base + i).toISOString() })));
    const ok = answers.filter((a) => a.status === 200);
    expect(ok.length).toBe(3);
    for (const a of answers.filter((x) => x.status !== 200)) expectError(a, 403, 'path.connect.delegation_limit_reached');
    expect(ok.map((a) => a.json.parent_consumed_total).sort()).toEqual(['35', '40', '45']);
    expect(ok.map((a) => a.json.consumed_total).sort()).toEqual(['10', '15', '5']);
    for (const a of ok) {
      expect(micros(a.json.parent_consumed_total) + micros(a.json.parent_remaining_total)).toBe(micros('45'));
      expect(micros(a.json.consumed_total) + micros(a.json.remaining_total)).toBe(micros('50'));
      expect(micros(a.json.parent_consumed_total) - micros(a.json.consumed_total)).toBe(micros('30'));
    }

    const dRead = await get(m.gamma, `/connect/delegations/${d.reference}`);
    expect(dRead.json).toMatchObject({ consumed_total: '15', consumed_operations: 3, remaining_total: '35', max_total: '50' });
    const cRead = await get(m.beta, `/connect/connections/${c.reference}`);
    expect(cRead.json).toMatchObject({ consumed_total: '45', consumed_operations: 6, remaining_total: '0' });

    const dUsage = await get(m.gamma, `/connect/delegations/${d.reference}/usage`);
    expect(dUsage.status, dUsage.text).toBe(200);
    expect(dUsage.json).toMatchObject({ reference: d.reference, count: 3, total: 3 });
    for (const row of dUsage.json.usage) {
      expect(Object.keys(row).sort()).toEqual(['amount', 'capability', 'currency', 'destination_commitment', 'occurred_at', 'operation_ref']);
      expect(row).toMatchObject({ capability: 'payment_request', amount: '5', currency: 'EUR', destination_commitment: COMMIT });
      expect(row.occurred_at).toMatch(RFC3339);
    }
    const succeeded = answers.map((a, i) => (a.status === 200 ? `ceiling-${i}` : null)).filter((x) => x !== null).sort();
    expect(dUsage.json.usage.map((r: any) => r.operation_ref).sort()).toEqual(succeeded);
    const cUsage = await get(m.beta, `/connect/connections/${c.reference}/usage`);
    expect(cUsage.json.total).toBe(6);
    expect(sumMicros(cUsage.json.usage.map((r: any) => r.amount))).toBe(micros('45'));
    const delegated = cUsage.json.usage.filter((r: any) => r.destination_commitment !== undefined);
    expect(delegated.map((r: any) => r.operation_ref).sort()).toEqual(succeeded);
    expect(delegated.every((r: any) => r.destination_commitment === COMMIT)).toBe(true);
  });

  it('"States and transitions": revoke by grantor, delegate or parent grantee records revoked_by; consume after is 410 path.connect.revoked; a fourth member cannot revoke', async () => {
    const c = await newConnection(m, subject);
    const byGrantor = await newDelegation(m, c.reference, { amount: '1', max_total: '10' });
    const byDelegate = await newDelegation(m, c.reference, { amount: '1', max_total: '10' });
    const byGrantee = await newDelegation(m, c.reference, { amount: '1', max_total: '10' });
    expectError(await post(m.delta, `/connect/delegations/${byGrantor.reference}/revoke`, {}), 403, 'path.auth.forbidden');
    for (const [d, party, name] of [[byGrantor, m.local, 'local'], [byDelegate, m.gamma, 'gamma'], [byGrantee, m.beta, 'beta']] as const) {
      expect((await consumeDelegation(m.gamma, d.reference, { amount: '1' })).status).toBe(200);
      const res = await post(party, `/connect/delegations/${d.reference}/revoke`, { reason: 'done' });
      expect(res.status, res.text).toBe(200);
      expect(res.json).toMatchObject({ reference: d.reference, status: 'revoked', revoked_by: name });
      expect(res.json.revoked_at).toMatch(RFC3339);
      expectError(await consumeDelegation(m.gamma, d.reference, { amount: '1' }), 410, 'path.connect.revoked');
      const read = await get(m.gamma, `/connect/delegations/${d.reference}`);
      expect(verifiesWith(read.json, key)).toBe(true);
      expect(read.json).toMatchObject({ status: 'revoked', revoked_by: name, consumed_total: '1', consumed_operations: 1 });
      const usage = await get(m.gamma, `/connect/delegations/${d.reference}/usage`);
      expect(usage.status, usage.text).toBe(200);
      expect(usage.json.total).toBe(1);
    }
    // the parent connection is untouched by its delegations' revocation
    expect((await get(m.beta, `/connect/connections/${c.reference}`)).json).toMatchObject({ status: 'active', consumed_total: '3' });
  });

  it('a revoked parent makes its delegation refuse with 410 path.connect.revoked', async () => {
    const c = await newConnection(m, subject);
    const d = await newDelegation(m, c.reference, { max_total: '20' });
    expect((await consumeDelegation(m.gamma, d.reference)).status).toBe(200);
    expect((await post(m.beta, `/connect/connections/${c.reference}/revoke`, {})).status).toBe(200);
    expectError(await consumeDelegation(m.gamma, d.reference), 410, 'path.connect.revoked');
    expect((await get(m.gamma, `/connect/delegations/${d.reference}`)).json).toMatchObject({ consumed_total: '5', consumed_operations: 1 });
  });

  it('a delegation cannot outlive its parent (400), must name a granted capability and the parent currency (403 out_of_scope), and max_total may not be below amount (400)', async () => {
    const c = await newConnection(m, subject, { expires_at: inHours(1), capabilities: { payment_request: true, refund: false } });
    const url = `/connect/connections/${c.reference}/delegations`;
    expectError(await post(m.local, url, delegationBody({ expires_at: inHours(2) })), 400, 'path.core.invalid_request');
    const within = { expires_at: inHours(0.5) };
    expectError(await post(m.local, url, delegationBody({ ...within, capability: 'refund' })), 403, 'path.connect.delegation_out_of_scope');
    expectError(await post(m.local, url, delegationBody({ ...within, capability: 'payout' })), 403, 'path.connect.delegation_out_of_scope');
    expectError(await post(m.local, url, delegationBody({ ...within, currency: 'USD' })), 403, 'path.connect.delegation_out_of_scope');
    const below = await post(m.local, url, delegationBody({ ...within, max_total: '4' }));
    expectError(below, 400, 'path.core.invalid_request');
    expect(below.json.error.detail?.field).toBe('max_total');
    expect((await post(m.local, url, delegationBody({ expires_at: inHours(0.5) }))).status).toBe(201);
  });
});

describe('SPEC K durability (P14): kill -9 while consumes are in flight', () => {
  it('every acknowledged consume is reflected after restart; counters equal the usage log for the connection and its delegation', async () => {
    const dir = tempDir('path-connect-crash');
    dirs.push(dir);
    const creds = credentialsFor(dir);
    const first = await startNode({ dataDir: dir });
    let restarted: NodeProcess | null = null;
    try {
      const a = members(first.baseUrl, creds);
      const subj = await newSubject(a);
      const c = await newConnection(a, subj, { max_single: '10', max_total: '100000' });
      const d = await newDelegation(a, c.reference, { amount: '1', max_total: '100000' });
      const idemBody = { capability: 'payment_request', amount: '2', currency: 'EUR', operation_ref: 'durable-idem' };
      const idem = await post(a.beta, `/connect/connections/${c.reference}/consume`, idemBody, 'durable-idem-key');
      expect(idem.status, idem.text).toBe(200);

      const acked = new Map<string, string>([['durable-idem', '2']]);
      const ackedDelegated = new Set<string>();
      const unanswered = new Set<string>();
      const answeredOtherwise: number[] = [];
      let issued = 0;
      let stop = false;
      const writer = (delegated: boolean, cap: number) => async () => {
        while (!stop && issued < cap) {
          const n = issued++;
          const ref = `${delegated ? 'd' : 'c'}-${n}`;
          const amount = delegated ? '1' : '1.25';
          const request = delegated
            ? consumeDelegation(a.gamma, d.reference, { amount, operation_ref: ref })
            : consume(a.beta, c.reference, amount, { operation_ref: ref });
          let res: Answer;
          try {
            res = await request;
          } catch {
            unanswered.add(ref); // the process died with this request: it was never acknowledged
            return;
          }
          if (res.status === 200) {
            acked.set(ref, amount);
            if (delegated) ackedDelegated.add(ref);
          } else answeredOtherwise.push(res.status);
        }
      };
      const writers = [
        ...Array.from({ length: 6 }, () => writer(false, 400)()),
        ...Array.from({ length: 3 }, () => writer(true, 400)()),
      ];
      const deadline = Date.now() + 10_000;
      while (acked.size < 80 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      await first.kill9();
      stop = true;
      await Promise.all(writers);
      expect(acked.size).toBeGreaterThanOrEqual(80);
      expect(ackedDelegated.size).toBeGreaterThan(0);
      expect(answeredOtherwise).toEqual([]);
      expect(issued).toBeLessThan(400); // the loop was still running when the node died

      restarted = await startNode({ dataDir: dir });
      const b = members(restarted.baseUrl, creds);
      const restartedKey = await publishedKey(restarted.baseUrl);
      const conn = await get(b.beta, `/connect/connections/${c.reference}`);
      expect(conn.status, conn.text).toBe(200);
      expect(verifiesWith(conn.json, restartedKey)).toBe(true);
      const usage = await get(b.beta, `/connect/connections/${c.reference}/usage?limit=500`);
      expect(usage.status, usage.text).toBe(200);
      const rows: any[] = usage.json.usage;
      expect(rows.length).toBe(usage.json.total);
      const inLog = new Map(rows.map((r) => [r.operation_ref as string, r.amount as string]));
      expect(inLog.size).toBe(rows.length);

      // every acknowledged consume is there, with its amount
      for (const [ref, amount] of acked) expect(inLog.get(ref), ref).toBe(amount);
      // anything else in the log was in flight when the node died (committed, answer lost)
      const extra = [...inLog.keys()].filter((ref) => !acked.has(ref));
      for (const ref of extra) expect(unanswered.has(ref), ref).toBe(true);
      // counters equal the log
      expect(conn.json.consumed_operations).toBe(rows.length);
      expect(micros(conn.json.consumed_total)).toBe(sumMicros(rows.map((r) => r.amount)));
      expect(micros(conn.json.consumed_total)).toBe(sumMicros([...acked.values()]) + sumMicros(extra.map((ref) => inLog.get(ref)!)));
      expect(micros(conn.json.consumed_total) + micros(conn.json.remaining_total)).toBe(micros('100000'));

      // the delegation: its counters, its log and the parent's delegated rows agree
      const del = await get(b.gamma, `/connect/delegations/${d.reference}`);
      expect(del.status, del.text).toBe(200);
      const dUsage = await get(b.gamma, `/connect/delegations/${d.reference}/usage?limit=500`);
      const dRows: any[] = dUsage.json.usage;
      expect(dRows.length).toBe(dUsage.json.total);
      for (const ref of ackedDelegated) expect(dRows.some((r) => r.operation_ref === ref), ref).toBe(true);
      expect(del.json.consumed_operations).toBe(dRows.length);
      expect(micros(del.json.consumed_total)).toBe(sumMicros(dRows.map((r) => r.amount)));
      const parentDelegated = rows.filter((r) => r.destination_commitment !== undefined);
      expect(parentDelegated.map((r) => r.operation_ref).sort()).toEqual(dRows.map((r) => r.operation_ref).sort());

      // the idempotent answer survives the restart and still moves nothing
      const replay = await post(b.beta, `/connect/connections/${c.reference}/consume`, idemBody, 'durable-idem-key');
      expect(replay.status).toBe(200);
      expect(replay.text).toBe(idem.text);
      expect(replay.headers.get('path-idempotent-replayed')).toBe('true');

      // and the node goes on from the recovered counters
      const next = await consume(b.beta, c.reference, '0.5');
      expect(next.status, next.text).toBe(200);
      expect(next.json.consumed_operations).toBe(rows.length + 1);
      expect(micros(next.json.consumed_total)).toBe(micros(conn.json.consumed_total) + micros('0.5'));
    } finally {
      if (restarted !== null) await restarted.stop();
      else if (first.process.exitCode === null && first.process.signalCode === null) await first.kill9();
    }
  });
});
