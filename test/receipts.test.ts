// SPEC J over the real server and real LMDB: issuance, the state table, supersedes chains,
// transitions list, verification, roles.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, createCredential, publishedKey, removeDir, startNode, tempDir, type NodeProcess } from './support/harness.js';
import { digest, verifiesWith } from './support/verify.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const payee = (extra: Record<string, unknown> = {}) => ({
  issued_by: 'payee', via: EUR, received: { value: '10.50', asset_type: 'fiat', asset_code: 'EUR' },
  rail_references: [{ type: 'book_entry', value: 'BE-1' }], ...extra,
});

let node: NodeProcess;
let dataDir: string;
let local: Client;
let remote: Client;
let publicKey: string;

beforeAll(async () => {
  dataDir = tempDir();
  const own = createCredential(dataDir, 'local', { local: true });
  const other = createCredential(dataDir, 'beta', { local: false });
  node = await startNode({ dataDir });
  local = new Client(node.baseUrl, own);
  remote = new Client(node.baseUrl, other);
  publicKey = await publishedKey(node.baseUrl);
});

afterAll(async () => {
  await node?.stop();
  removeDir(dataDir);
});

describe('issuing receipts', () => {
  it('issues a payee receipt settled, signed, with the node as issuer and payee', async () => {
    const res = await local.post('/receipts', payee({ payer: { member: 'beta' } }));
    expect(res.status).toBe(201);
    expect(res.headers.get('path-protocol-version')).toBe('0.2.0');
    const r = res.json;
    expect(r).toMatchObject({ type: 'path.receipt', issuer: 'local', issued_by: 'payee', status: 'settled', supersedes: null, route: null, grammar: 2, protocol_version: '0.2.0' });
    expect(r.payee).toEqual({ member: 'local' });
    expect(r.payer).toEqual({ member: 'beta' });
    expect(r.reference).toMatch(/^rcp_[0-9a-f]{32}$/);
    expect(verifiesWith(r, publicKey)).toBe(true);
    const read = await new Client(node.baseUrl).get(`/receipts/${r.reference}`);
    expect(read.status).toBe(200);
    expect(read.json).toEqual(r);
  });

  it('keeps unknown members of capabilities, amounts and rail references exactly', async () => {
    const via = { ...EUR, x_vendor: { nested: [1, 'two'] } };
    const received = { value: '1.00', asset_type: 'fiat', asset_code: 'EUR', x_note: 'kept' };
    const rails = [{ type: 'book_entry', value: 'BE-2', x_extra: true }];
    const res = await local.post('/receipts', payee({ via, received, rail_references: rails }));
    expect(res.status).toBe(201);
    expect(res.json.via).toEqual(via);
    expect(res.json.received).toEqual(received);
    expect(res.json.rail_references).toEqual(rails);
    expect(verifiesWith(res.json, publicKey)).toBe(true);
  });

  it('refuses a payee receipt that is not settled, or lacks received or rail references', async () => {
    for (const body of [payee({ status: 'pending' }), payee({ received: undefined }), payee({ rail_references: [] })]) {
      const res = await local.post('/receipts', JSON.parse(JSON.stringify(body)));
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe('path.core.invalid_request');
      expect(typeof res.json.error.detail.field).toBe('string');
    }
  });

  it('issues a payer receipt pending, or failed with a reason code, never settled', async () => {
    const pending = await local.post('/receipts', { issued_by: 'payer', via: EUR, sent: { value: '5', asset_type: 'fiat', asset_code: 'EUR' } });
    expect(pending.status).toBe(201);
    expect(pending.json.status).toBe('pending');
    expect(pending.json.payer).toEqual({ member: 'local' });
    const failed = await local.post('/receipts', { issued_by: 'payer', via: EUR, status: 'failed', reason_code: 'rail_rejected' });
    expect(failed.status).toBe(201);
    expect(failed.json.reason_code).toBe('rail_rejected');
    const noReason = await local.post('/receipts', { issued_by: 'payer', via: EUR, status: 'failed' });
    expect(noReason.status).toBe(400);
    const settled = await local.post('/receipts', { issued_by: 'payer', via: EUR, status: 'settled', rail_references: [{ type: 'x', value: 'y' }], received: { value: '1', asset_type: 'fiat', asset_code: 'EUR' } });
    expect(settled.status).toBe(400);
  });
});

describe('moving receipts', () => {
  it('walks pending -> settled -> reversed with a supersedes chain; earlier envelopes stay valid', async () => {
    const issued = (await local.post('/receipts', { issued_by: 'payer', via: EUR })).json;
    const settled = await local.post(`/receipts/${issued.reference}/transitions`, { to: 'settled', rail_references: [{ type: 'book_entry', value: 'late' }] });
    expect(settled.status).toBe(201);
    expect(settled.json.status).toBe('settled');
    expect(settled.json.supersedes).toBe(digest(issued));
    expect(settled.json.rail_references).toEqual([{ type: 'book_entry', value: 'late' }]);
    expect(settled.json.route).toBeNull();
    const reversed = await local.post(`/receipts/${issued.reference}/transitions`, { to: 'reversed' });
    expect(reversed.status).toBe(201);
    expect(reversed.json.supersedes).toBe(digest(settled.json));
    const list = await new Client(node.baseUrl).get(`/receipts/${issued.reference}/transitions`);
    expect(list.status).toBe(200);
    expect(list.json.status).toBe('reversed');
    expect(list.json.transitions.map((t: any) => [t.from, t.to])).toEqual([[null, 'pending'], ['pending', 'settled'], ['settled', 'reversed']]);
    expect(list.json.transitions[0].envelope).toEqual(issued);
    for (const t of list.json.transitions) expect(verifiesWith(t.envelope, publicKey)).toBe(true);
    expect((await new Client(node.baseUrl).get(`/receipts/${issued.reference}`)).json).toEqual(reversed.json);
  });

  it('re-stating the current state answers the current envelope and appends nothing', async () => {
    const issued = (await local.post('/receipts', payee())).json;
    const again = await local.post(`/receipts/${issued.reference}/transitions`, { to: 'settled' });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(issued);
    const list = await local.get(`/receipts/${issued.reference}/transitions`);
    expect(list.json.transitions).toHaveLength(1);
  });

  it('refuses every move outside the table with path.settlement.transition_invalid', async () => {
    const settled = (await local.post('/receipts', payee())).json;
    const toFailed = await local.post(`/receipts/${settled.reference}/transitions`, { to: 'failed', reason_code: 'expired' });
    expect(toFailed.status).toBe(409);
    expect(toFailed.json.error.code).toBe('path.settlement.transition_invalid');
    const failed = (await local.post('/receipts', { issued_by: 'payer', via: EUR, status: 'failed', reason_code: 'expired' })).json;
    for (const to of ['settled', 'reversed']) {
      const res = await local.post(`/receipts/${failed.reference}/transitions`, { to, rail_references: [{ type: 'a', value: 'b' }] });
      expect(res.status).toBe(409);
      expect(res.json.error.code).toBe('path.settlement.transition_invalid');
    }
    const pending = (await local.post('/receipts', { issued_by: 'payer', via: EUR })).json;
    const toReversed = await local.post(`/receipts/${pending.reference}/transitions`, { to: 'reversed' });
    expect(toReversed.json.error.code).toBe('path.settlement.transition_invalid');
    const noReason = await local.post(`/receipts/${pending.reference}/transitions`, { to: 'failed' });
    expect(noReason.status).toBe(400);
  });

  it('only a credential of the issuing member may move a receipt', async () => {
    const issued = (await local.post('/receipts', { issued_by: 'payer', via: EUR })).json;
    const res = await remote.post(`/receipts/${issued.reference}/transitions`, { to: 'failed', reason_code: 'expired' });
    expect(res.status).toBe(403);
    expect(res.json.error.code).toBe('path.auth.forbidden');
  });

  it('answers 404 for an unknown receipt, on read and on move', async () => {
    const ref = 'rcp_' + '0'.repeat(32);
    expect((await local.get(`/receipts/${ref}`)).status).toBe(404);
    expect((await local.post(`/receipts/${ref}/transitions`, { to: 'settled' })).status).toBe(404);
    expect((await local.get('/receipts/not-a-reference')).json.error.code).toBe('path.core.not_found');
  });

  it('16 parallel identical transitions append exactly one', async () => {
    const issued = (await local.post('/receipts', { issued_by: 'payer', via: EUR })).json;
    // Each call is signed on its own (distinct timestamps): identical signing strings would be replays (P5).
    const base = Date.now();
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) =>
      local.post(`/receipts/${issued.reference}/transitions`, { to: 'failed', reason_code: 'rail_unavailable' }, { timestamp: new Date(base + i).toISOString() })));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(15);
    const created = answers.find((a) => a.status === 201)!.json;
    for (const a of answers) expect(a.json).toEqual(created);
    const list = await local.get(`/receipts/${issued.reference}/transitions`);
    expect(list.json.transitions).toHaveLength(2);
  });
});

describe('verifying receipts', () => {
  it('answers valid for a receipt and its key, and names the failure otherwise', async () => {
    const issued = (await local.post('/receipts', payee())).json;
    const pub = new Client(node.baseUrl);
    expect((await pub.post('/receipts/verify', { envelope: issued, issuer_public_key: publicKey })).json).toEqual({ valid: true });
    const tampered = { ...issued, received: { ...issued.received, value: '99.00' } };
    const bad = (await pub.post('/receipts/verify', { envelope: tampered, issuer_public_key: publicKey })).json;
    expect(bad.valid).toBe(false);
    expect(typeof bad.reason).toBe('string');
    const wrongKey = (await pub.post('/receipts/verify', { envelope: issued, issuer_public_key: 'ab'.repeat(32) })).json;
    expect(wrongKey.valid).toBe(false);
    const unsigned = { ...issued };
    delete unsigned.signature;
    expect((await pub.post('/receipts/verify', { envelope: unsigned, issuer_public_key: publicKey })).json.valid).toBe(false);
  });

  it('verifies unknown members of the envelope as signed, and refuses them when altered', async () => {
    const issued = (await local.post('/receipts', payee({ via: { ...EUR, x_future: { a: 1 } } }))).json;
    const pub = new Client(node.baseUrl);
    expect((await pub.post('/receipts/verify', { envelope: issued, issuer_public_key: publicKey })).json.valid).toBe(true);
    const altered = { ...issued, via: { ...issued.via, x_future: { a: 2 } } };
    expect((await pub.post('/receipts/verify', { envelope: altered, issuer_public_key: publicKey })).json.valid).toBe(false);
    const added = { ...issued, x_added: 'not signed' };
    expect((await pub.post('/receipts/verify', { envelope: added, issuer_public_key: publicKey })).json.valid).toBe(false);
  });
});
