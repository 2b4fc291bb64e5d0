// The HTTP front end over the real server and real LMDB: both API prefixes (P6), version and
// request-id headers (P10), the error envelope and status table (P7), the body limit (P12),
// request authentication (P5), idempotency (P7), the fixed routes (P4) and key rotation (P15).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { open } from 'lmdb';
import { join } from 'node:path';
import * as ed from '@noble/ed25519';
import {
  Client, createCredential, PREFIX, publishedKey, removeDir, runCli, signRequest, startNode, tempDir,
  type Answer, type Credential, type NodeProcess,
} from './support/harness.js';
import { verifiesWith } from './support/verify.js';
import { waitFor } from './support/wait.js';

const GENESIS = '/api/path/genesis/v1';
const API_VERSION = '2026-11-21.genesis';
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const MiB = 1024 * 1024;

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const payee = (extra: Record<string, unknown> = {}) => ({
  issued_by: 'payee', via: EUR, received: { value: '10.50', asset_type: 'fiat', asset_code: 'EUR' },
  rail_references: [{ type: 'book_entry', value: 'BE-1' }], ...extra,
});
const pendingPayer = (extra: Record<string, unknown> = {}) => ({ issued_by: 'payer', via: EUR, ...extra });
const unknownReceipt = 'rcp_' + '0'.repeat(32);

let node: NodeProcess;
let dataDir: string;
let own: Credential;
let beta: Credential;
let local: Client;
let remote: Client;
let anon: Client;
const extraDirs: string[] = [];
const extraNodes: NodeProcess[] = [];

beforeAll(async () => {
  dataDir = tempDir('front-end');
  own = createCredential(dataDir, 'local', { local: true });
  beta = createCredential(dataDir, 'beta', { local: false });
  node = await startNode({ dataDir });
  local = new Client(node.baseUrl, own);
  remote = new Client(node.baseUrl, beta);
  anon = new Client(node.baseUrl);
});

afterAll(async () => {
  await node?.stop();
  for (const n of extraNodes) if (n.process.exitCode === null && n.process.signalCode === null) await n.stop();
  removeDir(dataDir);
  for (const d of extraDirs) removeDir(d);
});

/** A plain request without the harness's conveniences (no signing unless headers say so). */
async function raw(method: string, target: string, init: { headers?: Record<string, string>; body?: Buffer | string } = {}, base = node.baseUrl): Promise<Answer> {
  const res = await fetch(base + target, { method, headers: init.headers, body: init.body });
  const text = await res.text();
  let json: any;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, headers: res.headers, text, json };
}

/** The P7 error envelope, JSON content type, no stack trace, and the P10 headers. */
function expectError(res: Answer, status: number, code: string): any {
  expect({ status: res.status, body: res.text }).toMatchObject({ status });
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.json).toBeTypeOf('object');
  expect(Object.keys(res.json)).toEqual(['error']);
  const error = res.json.error;
  expect(error.code).toBe(code);
  expect(typeof error.message).toBe('string');
  expect(error.message.length).toBeGreaterThan(0);
  for (const k of Object.keys(error)) expect(['code', 'message', 'detail']).toContain(k);
  if ('detail' in error) expect(error.detail).toBeTypeOf('object');
  expectNoStack(res.text);
  expect(res.headers.get('path-version')).toBe(API_VERSION);
  expect(res.headers.get('path-request-id')).toBeTruthy();
  expect(res.headers.get('path-protocol-version')).toBeNull();
  return error;
}

function expectNoStack(text: string): void {
  expect(text).not.toMatch(/\n\s+at\s/);
  expect(text).not.toMatch(/\bat [^\s]+ \(?(file:\/\/|\/)[^)]*:\d+:\d+/);
  expect(text).not.toMatch(/node:internal|\.ts:\d+|\.js:\d+/);
}

function unregistered(): Credential {
  const seed = randomBytes(32);
  return { keyId: 'cred_' + randomBytes(16).toString('hex'), member: 'nobody', seedHex: seed.toString('hex'), publicKeyHex: Buffer.from(ed.getPublicKey(seed)).toString('hex') };
}

describe('P6 both API prefixes serve the same operations; fixed routes at the root', () => {
  it('P6: a receipt created under /api/path/v1 reads identically under /api/path/genesis/v1, and the reverse', async () => {
    const a = await local.post('/receipts', payee());
    expect(a.status).toBe(201);
    const viaGenesis = await anon.get(`${GENESIS}/receipts/${a.json.reference}`, { root: true });
    const viaV1 = await anon.get(`/receipts/${a.json.reference}`);
    expect(viaGenesis.status).toBe(200);
    expect(viaGenesis.text).toBe(viaV1.text);
    expect(viaGenesis.json).toEqual(a.json);

    const b = await local.post(`${GENESIS}/receipts`, pendingPayer(), { root: true });
    expect(b.status).toBe(201);
    expect(b.json.type).toBe('path.receipt');
    const readB = await anon.get(`/receipts/${b.json.reference}`);
    expect(readB.status).toBe(200);
    expect(readB.json).toEqual(b.json);
  });

  it('P6: transitions (POST and GET) and verify work under the genesis prefix', async () => {
    const issued = (await local.post('/receipts', pendingPayer())).json;
    const moved = await local.post(`${GENESIS}/receipts/${issued.reference}/transitions`, { to: 'settled', rail_references: [{ type: 'book_entry', value: 'g' }] }, { root: true });
    expect(moved.status).toBe(201);
    expect(moved.json.status).toBe('settled');
    const listG = await anon.get(`${GENESIS}/receipts/${issued.reference}/transitions`, { root: true });
    const listV = await anon.get(`/receipts/${issued.reference}/transitions`);
    expect(listG.status).toBe(200);
    expect(listG.text).toBe(listV.text);
    expect(listG.json.transitions).toHaveLength(2);
    const key = await publishedKey(node.baseUrl);
    const verdictG = await anon.post(`${GENESIS}/receipts/verify`, { envelope: moved.json, issuer_public_key: key }, { root: true });
    const verdictV = await anon.post('/receipts/verify', { envelope: moved.json, issuer_public_key: key });
    expect(verdictG.status).toBe(200);
    expect(verdictG.json).toEqual({ valid: true });
    expect(verdictG.text).toBe(verdictV.text);
  });

  it('P6: errors answer identically under both prefixes', async () => {
    const g = await anon.get(`${GENESIS}/receipts/${unknownReceipt}`, { root: true });
    const v = await anon.get(`/receipts/${unknownReceipt}`);
    expectError(g, 404, 'path.core.not_found');
    expect(g.text).toBe(v.text);
    const gu = await anon.post(`${GENESIS}/receipts`, payee(), { root: true });
    expect(expectError(gu, 401, 'path.auth.unauthenticated').detail.reason).toBe('missing');
  });

  it('P6: the three fixed routes sit at the root only, and operation routes only under a prefix', async () => {
    const issued = (await local.post('/receipts', payee())).json;
    expect((await raw('GET', '/.well-known/path-keys')).status).toBe(200);
    expect((await raw('GET', '/.well-known/path-configuration')).status).toBe(200);
    expect((await raw('GET', `/path/${issued.reference}`)).status).toBe(200);
    for (const prefix of [PREFIX, GENESIS]) {
      expectError(await raw('GET', `${prefix}/.well-known/path-keys`), 404, 'path.core.not_found');
      expectError(await raw('GET', `${prefix}/path/${issued.reference}`), 404, 'path.core.not_found');
    }
    expectError(await raw('GET', `/receipts/${issued.reference}`), 404, 'path.core.not_found');
    expectError(await raw('GET', `/api/path/v2/receipts/${issued.reference}`), 404, 'path.core.not_found');
  });
});

describe('P10 versioning headers', () => {
  it('P10: every answer (success, error, fixed, public, authenticated) carries Path-Version and a distinct Path-Request-Id', async () => {
    const issued = (await local.post('/receipts', payee())).json;
    const answers: Answer[] = [
      await local.post('/receipts', payee()),
      await anon.get(`/receipts/${issued.reference}`),
      await anon.get(`/receipts/${issued.reference}/transitions`),
      await raw('GET', '/.well-known/path-keys'),
      await raw('GET', '/.well-known/path-configuration'),
      await raw('GET', `/path/${issued.reference}`),
      await raw('GET', '/no/such/route'),
      await raw('DELETE', `${PREFIX}/receipts`),
      await anon.post('/receipts', payee()),
      await local.post('/receipts', { issued_by: 'nobody' }),
      await anon.get(`/receipts/${unknownReceipt}`),
      await anon.post('/receipts/verify', { envelope: issued, issuer_public_key: 'ab'.repeat(32) }),
    ];
    const ids = new Set<string>();
    for (const a of answers) {
      expect(a.headers.get('path-version')).toBe(API_VERSION);
      expect(a.headers.get('path-version-pinned')).toBe('false');
      const id = a.headers.get('path-request-id');
      // The process's prefix and a count: nothing the access log would have to escape.
      expect(id).toMatch(/^[0-9a-f]{12}-[0-9]+$/);
      ids.add(id!);
    }
    expect(ids.size).toBe(answers.length);
  });

  it('P10: a pinned known version is served and says it was pinned', async () => {
    const issued = (await local.post('/receipts', payee(), { headers: { 'path-version': API_VERSION } }));
    expect(issued.status).toBe(201);
    expect(issued.headers.get('path-version')).toBe(API_VERSION);
    expect(issued.headers.get('path-version-pinned')).toBe('true');
    const read = await anon.get(`/receipts/${issued.json.reference}`, { headers: { 'path-version': API_VERSION } });
    expect(read.status).toBe(200);
    expect(read.json).toEqual(issued.json);
    expect(read.headers.get('path-version-pinned')).toBe('true');
    const keys = await raw('GET', '/.well-known/path-keys', { headers: { 'path-version': API_VERSION } });
    expect(keys.status).toBe(200);
  });

  it('P10: an unknown pinned Path-Version answers 400 path.core.version_unknown listing the served versions', async () => {
    const issued = (await local.post('/receipts', payee())).json;
    for (const pinned of ['2020-01-01.genesis', '2026-11-21', 'latest', '2026-11-21.GENESIS']) {
      const cases = [
        await anon.get(`/receipts/${issued.reference}`, { headers: { 'path-version': pinned } }),
        await local.post('/receipts', payee(), { headers: { 'path-version': pinned } }),
        await raw('GET', '/.well-known/path-configuration', { headers: { 'path-version': pinned } }),
      ];
      for (const res of cases) {
        const error = expectError(res, 400, 'path.core.version_unknown');
        const lists = Object.values(error.detail ?? {}).filter((v) => Array.isArray(v)) as unknown[][];
        expect(lists.some((l) => l.includes(API_VERSION))).toBe(true);
        expect(res.headers.get('path-version')).toBe(API_VERSION);
      }
    }
  });

  it('P10: answers with a signed object carry Path-Protocol-Version 0.2.0; error answers do not', async () => {
    const created = await local.post('/receipts', pendingPayer());
    expect(created.headers.get('path-protocol-version')).toBe('0.2.0');
    const ref = created.json.reference;
    expect((await anon.get(`/receipts/${ref}`)).headers.get('path-protocol-version')).toBe('0.2.0');
    expect((await raw('GET', `/path/${ref}`)).headers.get('path-protocol-version')).toBe('0.2.0');
    const moved = await local.post(`/receipts/${ref}/transitions`, { to: 'failed', reason_code: 'expired' });
    expect(moved.status).toBe(201);
    expect(moved.headers.get('path-protocol-version')).toBe('0.2.0');
    expect((await anon.get(`/receipts/${ref}/transitions`)).headers.get('path-protocol-version')).toBe('0.2.0');
    // errors (expectError asserts the header is absent)
    expectError(await local.post(`/receipts/${ref}/transitions`, { to: 'settled', rail_references: [{ type: 'a', value: 'b' }] }), 409, 'path.settlement.transition_invalid');
    expectError(await anon.get(`/receipts/${unknownReceipt}`), 404, 'path.core.not_found');
    expectError(await local.post('/receipts', { issued_by: 'payee' }), 400, 'path.core.invalid_request');
    expectError(await anon.post('/receipts', payee()), 401, 'path.auth.unauthenticated');
  });
});

describe('P7 routes, methods and the error envelope', () => {
  it('P7: unknown routes answer 404 path.core.not_found as JSON', async () => {
    for (const target of ['/', '/nope', `${PREFIX}`, `${PREFIX}/nope`, `${PREFIX}/receipts/${unknownReceipt}/transitions/extra`,
      `${GENESIS}/unknown/route`, '/.well-known/other', '/api/path/v1/receipts/']) {
      expectError(await raw('GET', target), 404, 'path.core.not_found');
    }
    expectError(await raw('POST', `${PREFIX}/nope`, { body: '{}', headers: { 'content-type': 'application/json' } }), 404, 'path.core.not_found');
  });

  it('P7: a known route with the wrong method answers 405 path.core.method_not_allowed with Allow', async () => {
    const issued = (await local.post('/receipts', payee())).json;
    const cases: [string, string, string][] = [
      ['DELETE', `${PREFIX}/receipts`, 'POST'],
      ['GET', `${PREFIX}/receipts`, 'POST'],
      ['PUT', `${GENESIS}/receipts/${issued.reference}`, 'GET'],
      ['DELETE', `${PREFIX}/receipts/${issued.reference}/transitions`, 'GET'],
      ['GET', `${PREFIX}/receipts/verify`, 'POST'],
      ['POST', '/.well-known/path-keys', 'GET'],
      ['PUT', '/.well-known/path-configuration', 'GET'],
      ['DELETE', `/path/${issued.reference}`, 'GET'],
    ];
    for (const [method, target, allowed] of cases) {
      const res = await raw(method, target);
      expectError(res, 405, 'path.core.method_not_allowed');
      expect(res.headers.get('allow') ?? '').toContain(allowed);
    }
  });

  it('P7: malformed JSON is 400 path.core.invalid_request naming the field, without a stack trace', async () => {
    for (const rawBody of ['{', '{"issued_by":', 'not json', '[]', '"text"', '42', 'null', '']) {
      const res = await local.request('POST', '/receipts', { rawBody });
      const error = expectError(res, 400, 'path.core.invalid_request');
      expect(typeof error.detail?.field).toBe('string');
    }
    const wrongType = await local.post('/receipts', payee({ via: 'book' }));
    expect(expectError(wrongType, 400, 'path.core.invalid_request').detail.field).toMatch(/via/);
  });
});

describe('P12 body size limit', () => {
  /** A valid receipt body padded with an unknown member to exactly `size` bytes. */
  function bodyOfSize(size: number): Buffer {
    const head = JSON.stringify(payee({ x_pad: '' }));
    const pad = size - Buffer.byteLength(head);
    const text = head.replace('"x_pad":""', `"x_pad":"${'a'.repeat(pad)}"`);
    const buf = Buffer.from(text);
    expect(buf.length).toBe(size);
    return buf;
  }

  it('P12: a signed body of 1 MiB + 1 byte answers 413 path.core.payload_too_large, and the node keeps serving', async () => {
    const res = await local.request('POST', '/receipts', { rawBody: bodyOfSize(MiB + 1) });
    expectError(res, 413, 'path.core.payload_too_large');
    const after = await local.post('/receipts', payee());
    expect(after.status).toBe(201);
    expect((await anon.get(`/receipts/${after.json.reference}`)).status).toBe(200);
    expect(node.process.exitCode).toBeNull();
  });

  it('P12: a chunked body (no Content-Length) over 1 MiB answers 413 too', async () => {
    const body = bodyOfSize(MiB + 1);
    const target = `${PREFIX}/receipts`;
    const headers = { ...signRequest(own, { method: 'POST', target, timestamp: new Date().toISOString(), body }), 'content-type': 'application/json' };
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < body.length; i += 64 * 1024) controller.enqueue(body.subarray(i, i + 64 * 1024));
        controller.close();
      },
    });
    const res = await fetch(node.baseUrl + target, { method: 'POST', headers, body: stream, duplex: 'half' } as RequestInit);
    const text = await res.text();
    expectError({ status: res.status, headers: res.headers, text, json: JSON.parse(text) }, 413, 'path.core.payload_too_large');
    expect((await local.post('/receipts', payee())).status).toBe(201);
  });

  it('P12: larger bodies (2 to 8 MiB, declared Content-Length) also get their 413 answer delivered to the client', async () => {
    // The node may refuse before reading the body, but the client must be able to read the
    // 413: closing the connection at once while the client is still sending makes the kernel
    // reset it and the answer is lost (RFC 9112 9.6: close in stages).
    for (const size of [2 * MiB, 3 * MiB, 4 * MiB, 6 * MiB, 8 * MiB, 2 * MiB, 3 * MiB, 4 * MiB, 6 * MiB, 8 * MiB]) {
      const body = bodyOfSize(size);
      let res: Answer | undefined;
      let failure: unknown;
      try {
        res = await local.request('POST', '/receipts', { rawBody: body });
      } catch (error) {
        failure = error;
      }
      expect(failure === undefined ? null : `${size} bytes: ${(failure as Error).message} ${String((failure as any).cause?.code ?? '')}`).toBeNull();
      expectError(res!, 413, 'path.core.payload_too_large');
    }
    expect((await local.post('/receipts', payee())).status).toBe(201);
  });

  it('P12: a body of exactly 1 MiB is not refused for its size', async () => {
    const res = await local.request('POST', '/receipts', { rawBody: bodyOfSize(MiB) });
    expect(res.status).toBe(201);
  });
});

describe('P5 request authentication', () => {
  const target = `${PREFIX}/receipts`;
  const body = Buffer.from(JSON.stringify(payee()));
  const post = (headers: Record<string, string>, b: Buffer = body) => raw('POST', target, { headers: { 'content-type': 'application/json', ...headers }, body: b });
  const reasonOf = (res: Answer) => expectError(res, 401, 'path.auth.unauthenticated').detail?.reason;

  it('P5: missing: no credential headers at all, or any one of the three missing', async () => {
    expect(reasonOf(await post({}))).toBe('missing');
    for (const drop of ['path-key-id', 'path-timestamp', 'path-signature']) {
      const headers = signRequest(own, { method: 'POST', target, timestamp: new Date().toISOString(), body });
      delete headers[drop];
      expect(reasonOf(await post(headers))).toBe('missing');
    }
  });

  it('P5: unknown_key: a well-signed request under a key id the node does not know; the answer does not echo it', async () => {
    const stranger = unregistered();
    const res = await post(signRequest(stranger, { method: 'POST', target, timestamp: new Date().toISOString(), body }));
    expect(reasonOf(res)).toBe('unknown_key');
    expect(res.text).not.toContain(stranger.keyId);
  });

  it('P5: stale: a timestamp 301 s old or 301 s in the future; 290 s either way is accepted', async () => {
    for (const offset of [-301_000, 301_000]) {
      const res = await local.post('/receipts', payee(), { timestamp: new Date(Date.now() + offset).toISOString() });
      expect(reasonOf(res)).toBe('stale');
    }
    for (const offset of [-290_000, 290_000]) {
      const res = await local.post('/receipts', payee(), { timestamp: new Date(Date.now() + offset).toISOString() });
      expect(res.status).toBe(201);
    }
  });

  it('P5: whole-second and fractional-second timestamps are both valid', async () => {
    const whole = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
    expect(whole).toMatch(/:\d{2}Z$/);
    expect((await local.post('/receipts', payee(), { timestamp: whole })).status).toBe(201);
    expect((await local.post('/receipts', payee(), { timestamp: new Date(Date.now() - 1).toISOString() })).status).toBe(201);
  });

  it('P5: bad_signature: a signature of a different body, a garbage signature, or another credential\'s signature', async () => {
    const timestamp = new Date().toISOString();
    const otherBody = Buffer.from(JSON.stringify(payee({ received: { value: '99.00', asset_type: 'fiat', asset_code: 'EUR' } })));
    expect(reasonOf(await post(signRequest(own, { method: 'POST', target, timestamp, body: otherBody })))).toBe('bad_signature');
    const good = signRequest(own, { method: 'POST', target, timestamp: new Date(Date.now() + 1).toISOString(), body });
    for (const signature of ['zz', 'not-hex-at-all', '00'.repeat(64), 'ab'.repeat(64), good['path-signature']!.slice(0, 126), good['path-signature']!.toUpperCase()]) {
      expect(reasonOf(await post({ ...good, 'path-signature': signature }))).toBe('bad_signature');
    }
    const byBeta = signRequest(beta, { method: 'POST', target, timestamp: new Date(Date.now() + 2).toISOString(), body });
    expect(reasonOf(await post({ ...byBeta, 'path-key-id': own.keyId }))).toBe('bad_signature');
    // Signed for another target (the genesis prefix) but sent to v1.
    const otherTarget = signRequest(own, { method: 'POST', target: `${GENESIS}/receipts`, timestamp: new Date(Date.now() + 3).toISOString(), body });
    expect(reasonOf(await post(otherTarget))).toBe('bad_signature');
  });

  it('P5: the signed target is the path and query exactly as sent', async () => {
    const withQuery = `${target}?note=a%20b&x=1`;
    const ok = await raw('POST', withQuery, { headers: { 'content-type': 'application/json', ...signRequest(own, { method: 'POST', target: withQuery, timestamp: new Date().toISOString(), body }) }, body });
    expect(ok.status).toBe(201);
    // Signed without the query, sent with it: refused.
    const stripped = await raw('POST', withQuery, { headers: { 'content-type': 'application/json', ...signRequest(own, { method: 'POST', target, timestamp: new Date(Date.now() + 1).toISOString(), body }) }, body });
    expect(reasonOf(stripped)).toBe('bad_signature');
  });

  it('P5: replayed: the very same signed request sent twice acts once', async () => {
    const headers = signRequest(own, { method: 'POST', target, timestamp: new Date().toISOString(), body });
    const first = await post(headers);
    expect(first.status).toBe(201);
    const second = await post(headers);
    expect(reasonOf(second)).toBe('replayed');
  });

  it('P5: a credential revoked with the command line while the node runs stops working within ~2 s', async () => {
    const gamma = createCredential(dataDir, 'gamma', { local: false });
    // The running node picks up the new credential too.
    const works = await waitFor('the new credential to be accepted', async () => {
      const res = await local.as(gamma).post('/receipts', payee());
      return res.status === 201 ? res : undefined;
    }, 3000, 100);
    expect(works.status).toBe(201);
    const out = runCli(['credentials', 'revoke', '--data-dir', dataDir, '--key-id', gamma.keyId]);
    expect(out).toContain(gamma.keyId);
    const revokedAt = Date.now();
    const refused = await waitFor('the revoked credential to be refused', async () => {
      const res = await local.as(gamma).post(`/receipts/${unknownReceipt}/transitions`, { to: 'settled' });
      return res.status === 401 ? res : undefined;
    }, 2500, 100);
    expect(Date.now() - revokedAt).toBeLessThan(2600);
    expectError(refused, 401, 'path.auth.unauthenticated');
    expect((await local.as(gamma).post('/receipts', payee())).status).toBe(401);
    // Other credentials are unaffected.
    expect((await local.post('/receipts', payee())).status).toBe(201);
  });

  it('P5: an authenticated non-local member credential moving a receipt is refused 403 path.auth.forbidden, and nothing moves', async () => {
    const issued = (await local.post('/receipts', pendingPayer())).json;
    const res = await remote.post(`/receipts/${issued.reference}/transitions`, { to: 'failed', reason_code: 'expired' });
    expectError(res, 403, 'path.auth.forbidden');
    const list = await anon.get(`/receipts/${issued.reference}/transitions`);
    expect(list.json.status).toBe('pending');
    expect(list.json.transitions).toHaveLength(1);
  });
});

describe('P7 idempotency on POST /receipts', () => {
  const key = () => `idem-${randomBytes(8).toString('hex')}`;

  it('P7: same key and same body replays the stored answer byte for byte, marked replayed, creating nothing new', async () => {
    const k = key();
    const first = await local.post('/receipts', payee(), { idempotencyKey: k });
    expect(first.status).toBe(201);
    expect(first.headers.get('path-idempotent-replayed')).not.toBe('true');
    const second = await local.post('/receipts', payee(), { idempotencyKey: k });
    expect(second.status).toBe(201);
    expect(second.text).toBe(first.text);
    expect(second.headers.get('path-idempotent-replayed')).toBe('true');
    expect(second.headers.get('path-protocol-version')).toBe('0.2.0');
    expect(second.headers.get('content-type')).toMatch(/^application\/json/);
    // Under the other prefix it is the same operation: replayed too.
    const third = await local.post(`${GENESIS}/receipts`, payee(), { idempotencyKey: k, root: true });
    expect(third.text).toBe(first.text);
    expect(third.headers.get('path-idempotent-replayed')).toBe('true');
    const list = await anon.get(`/receipts/${first.json.reference}/transitions`);
    expect(list.json.transitions).toHaveLength(1);
  });

  it('P7: same key with a different body answers 422 path.core.idempotency_conflict (also on another operation)', async () => {
    const k = key();
    const first = await local.post('/receipts', pendingPayer(), { idempotencyKey: k });
    expect(first.status).toBe(201);
    expectError(await local.post('/receipts', pendingPayer({ sent: { value: '1', asset_type: 'fiat', asset_code: 'EUR' } }), { idempotencyKey: k }), 422, 'path.core.idempotency_conflict');
    const moved = await local.post(`/receipts/${first.json.reference}/transitions`, { to: 'failed', reason_code: 'expired' }, { idempotencyKey: k });
    expectError(moved, 422, 'path.core.idempotency_conflict');
    expect((await anon.get(`/receipts/${first.json.reference}`)).json.status).toBe('pending');
  });

  it('P7: the same key used by a different member is a different scope', async () => {
    const k = key();
    const mine = await local.post('/receipts', payee(), { idempotencyKey: k });
    const theirs = await remote.post('/receipts', payee(), { idempotencyKey: k });
    expect(mine.status).toBe(201);
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get('path-idempotent-replayed')).not.toBe('true');
    expect(theirs.json.reference).not.toBe(mine.json.reference);
    // Each scope replays its own answer.
    expect((await remote.post('/receipts', payee(), { idempotencyKey: k })).text).toBe(theirs.text);
    expect((await local.post('/receipts', payee(), { idempotencyKey: k })).text).toBe(mine.text);
  });

  it('P7: a validation failure is not stored: a corrected retry with the same key succeeds', async () => {
    const k = key();
    const bad = await local.post('/receipts', { issued_by: 'payee', received: { value: '1', asset_type: 'fiat', asset_code: 'EUR' } }, { idempotencyKey: k });
    expectError(bad, 400, 'path.core.invalid_request');
    const fixed = await local.post('/receipts', payee(), { idempotencyKey: k });
    expect(fixed.status).toBe(201);
    expect(fixed.headers.get('path-idempotent-replayed')).not.toBe('true');
    // A rule checked past the schema (payee receipts are issued settled) is a validation failure too.
    const k2 = key();
    expectError(await local.post('/receipts', payee({ status: 'pending' }), { idempotencyKey: k2 }), 400, 'path.core.invalid_request');
    expect((await local.post('/receipts', payee(), { idempotencyKey: k2 })).status).toBe(201);
    // Malformed JSON under a key, then a good body.
    const k3 = key();
    expectError(await local.request('POST', '/receipts', { rawBody: '{"issued_by":', idempotencyKey: k3 }), 400, 'path.core.invalid_request');
    expect((await local.post('/receipts', payee(), { idempotencyKey: k3 })).status).toBe(201);
  });

  it('P7: an idempotency key over 255 characters answers 400; 255 characters is accepted', async () => {
    const long = await local.post('/receipts', payee(), { idempotencyKey: 'k'.repeat(256) });
    expectError(long, 400, 'path.core.invalid_request');
    const k = 'k'.repeat(247) + randomBytes(4).toString('hex');
    expect(k.length).toBe(255);
    const ok = await local.post('/receipts', payee(), { idempotencyKey: k });
    expect(ok.status).toBe(201);
    expect((await local.post('/receipts', payee(), { idempotencyKey: k })).text).toBe(ok.text);
  });

  it('P7: concurrent in-flight duplicates: one creation, the others in progress or replays of it', async () => {
    const k = key();
    const base = Date.now();
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      local.post('/receipts', pendingPayer(), { idempotencyKey: k, timestamp: new Date(base + i).toISOString() })));
    const references = new Set<string>();
    let fresh = 0;
    for (const a of answers) {
      if (a.status === 201) {
        references.add(a.json.reference);
        if (a.headers.get('path-idempotent-replayed') !== 'true') fresh++;
      } else {
        expectError(a, 409, 'path.core.idempotency_in_progress');
      }
    }
    expect(fresh).toBe(1);
    expect(references.size).toBe(1);
    const again = await local.post('/receipts', pendingPayer(), { idempotencyKey: k });
    expect(again.status).toBe(201);
    expect(again.json.reference).toBe([...references][0]);
    expect(again.headers.get('path-idempotent-replayed')).toBe('true');
  });

  it('P7: a receipt transition under an idempotency key replays its stored 201 byte for byte', async () => {
    const issued = (await local.post('/receipts', pendingPayer())).json;
    const k = key();
    const move = { to: 'settled', rail_references: [{ type: 'book_entry', value: 'idem' }] };
    const first = await local.post(`/receipts/${issued.reference}/transitions`, move, { idempotencyKey: k });
    expect(first.status).toBe(201);
    const again = await local.post(`/receipts/${issued.reference}/transitions`, move, { idempotencyKey: k });
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('path-idempotent-replayed')).toBe('true');
    expect((await anon.get(`/receipts/${issued.reference}/transitions`)).json.transitions).toHaveLength(2);
    // The same key and body on another receipt is a different request.
    const other = (await local.post('/receipts', pendingPayer())).json;
    expectError(await local.post(`/receipts/${other.reference}/transitions`, move, { idempotencyKey: k }), 422, 'path.core.idempotency_conflict');
    expect((await anon.get(`/receipts/${other.reference}`)).json.status).toBe('pending');
  });

  it('P7: the stored answer survives a restart and replays byte for byte', async () => {
    const dir = tempDir('front-end-restart');
    extraDirs.push(dir);
    const cred = createCredential(dir, 'local', { local: true });
    const first = await startNode({ dataDir: dir });
    extraNodes.push(first);
    const k = key();
    const created = await new Client(first.baseUrl, cred).post('/receipts', payee(), { idempotencyKey: k });
    expect(created.status).toBe(201);
    expect(await first.stop()).toBe(0);
    const second = await startNode({ dataDir: dir });
    extraNodes.push(second);
    const replay = await new Client(second.baseUrl, cred).post('/receipts', payee(), { idempotencyKey: k });
    expect(replay.status).toBe(201);
    expect(replay.text).toBe(created.text);
    expect(replay.headers.get('path-idempotent-replayed')).toBe('true');
    expectError(await new Client(second.baseUrl, cred).post('/receipts', pendingPayer(), { idempotencyKey: k }), 422, 'path.core.idempotency_conflict');
    expect(await second.stop()).toBe(0);
  });
});

describe('P4 fixed routes', () => {
  it('P4: /.well-known/path-keys lists the keys with their JWK members', async () => {
    const res = await raw('GET', '/.well-known/path-keys');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const doc = res.json;
    expect(doc.member).toBe('local');
    expect(Array.isArray(doc.keys)).toBe(true);
    expect(doc.keys.length).toBeGreaterThanOrEqual(1);
    expect(doc.keys.filter((k: any) => k.status === 'active')).toHaveLength(1);
    const kids = new Set<string>();
    for (const k of doc.keys) {
      expect(typeof k.kid).toBe('string');
      expect(k.kid.length).toBeGreaterThan(0);
      kids.add(k.kid);
      expect(k.alg).toBe('Ed25519');
      expect(k.public_key).toMatch(/^[0-9a-f]{64}$/);
      expect(k.kty).toBe('OKP');
      expect(k.crv).toBe('Ed25519');
      expect(k.x).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(k.x, 'base64url').toString('hex')).toBe(k.public_key);
      expect(['active', 'retired']).toContain(k.status);
      expect(k.created_at).toMatch(RFC3339);
      if (k.status === 'active') expect(k.retired_at).toBeNull();
      else expect(k.retired_at).toMatch(RFC3339);
    }
    expect(kids.size).toBe(doc.keys.length);
    // The active key verifies what the node signs.
    const issued = (await local.post('/receipts', payee())).json;
    const active = doc.keys.find((k: any) => k.status === 'active');
    expect(issued.kid).toBe(active.kid);
    expect(verifiesWith(issued, active.public_key)).toBe(true);
  });

  it('P4: /.well-known/path-configuration has the discovery members, working absolute endpoint URLs, and no reserved profile', async () => {
    const res = await raw('GET', '/.well-known/path-configuration');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const doc = res.json;
    expect(doc.member).toBe('local');
    expect(doc.base_url).toBe(node.baseUrl);
    expect(doc.protocol_version).toBe('0.2.0');
    expect(doc.grammar).toBe(2);
    expect(Array.isArray(doc.api_versions)).toBe(true);
    expect(doc.api_versions[0]).toBe(API_VERSION);
    expect([...doc.api_versions].sort().reverse()).toEqual(doc.api_versions);
    expect(doc.keys_url).toBe(`${node.baseUrl}/.well-known/path-keys`);
    const keysViaUrl = await fetch(doc.keys_url);
    expect(keysViaUrl.status).toBe(200);
    expect(await keysViaUrl.text()).toBe((await raw('GET', '/.well-known/path-keys')).text);
    expect(Array.isArray(doc.profiles)).toBe(true);
    for (const p of doc.profiles) {
      expect(typeof p).toBe('string');
      expect(p.toLowerCase()).not.toContain('gateway');
      expect(p.toLowerCase()).not.toContain('reconciliation');
    }
    expect(typeof doc.lookup_journal_retention_days).toBe('number');
    expect(doc.lookup_journal_retention_days).toBeGreaterThan(0);
    expect(doc.external_url === null || typeof doc.external_url === 'string').toBe(true);
    expect('external_url' in doc).toBe(true);
    expect(typeof doc.pepper_version).toBe('string');
    expect(doc.pepper_version.length).toBeGreaterThan(0);

    // endpoints: every operation with method and absolute URL under base_url.
    expect(doc.endpoints).toBeTypeOf('object');
    const entries = Object.entries(doc.endpoints) as [string, { method: string; url: string }][];
    expect(entries.length).toBeGreaterThanOrEqual(5);
    for (const [name, e] of entries) {
      expect(typeof name).toBe('string');
      expect(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).toContain(e.method);
      expect(new URL(e.url).origin).toBe(new URL(doc.base_url).origin);
      expect(e.url.startsWith(doc.base_url)).toBe(true);
    }
    const find = (method: string, suffix: string) => entries.find(([, e]) => e.method === method && e.url.endsWith(suffix))?.[1];
    const create = find('POST', '/receipts');
    const get = find('GET', '/receipts/{reference}');
    const transitions = find('GET', '/receipts/{reference}/transitions');
    const move = find('POST', '/receipts/{reference}/transitions');
    const verify = find('POST', '/receipts/verify');
    const link = find('GET', '/path/{reference}');
    for (const e of [create, get, transitions, move, verify, link]) expect(e).toBeDefined();
    expect(find('GET', '/.well-known/path-keys')).toBeDefined();
    expect(find('GET', '/.well-known/path-configuration')).toBeDefined();

    // The URLs actually work: create through the published URL, then read through each GET.
    const createPath = new URL(create!.url).pathname;
    const created = await local.post(createPath, pendingPayer(), { root: true });
    expect(created.status).toBe(201);
    const ref = created.json.reference;
    const got = await fetch(get!.url.replace('{reference}', ref));
    expect(got.status).toBe(200);
    expect(JSON.parse(await got.text())).toEqual(created.json);
    expect((await fetch(transitions!.url.replace('{reference}', ref))).status).toBe(200);
    expect((await fetch(link!.url.replace('{reference}', ref))).status).toBe(200);
    const moved = await local.post(new URL(move!.url.replace('{reference}', ref)).pathname, { to: 'failed', reason_code: 'expired' }, { root: true });
    expect(moved.status).toBe(201);
    const verdict = await fetch(verify!.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ envelope: moved.json, issuer_public_key: await publishedKey(node.baseUrl) }) });
    expect(await verdict.json()).toEqual({ valid: true });
    // Every published (method, URL) pair is a route: never 405, and never the node's own
    // "no such route" answer (a 404 for an unknown object behind a real route is fine).
    const noRoute = (await raw('GET', `${PREFIX}/definitely/not/a/route`)).text;
    for (const [, e] of entries) {
      const path = new URL(e.url.replaceAll('{reference}', ref).replace(/\{[a-z_]+\}/g, 'x')).pathname;
      const res2 = await raw(e.method, path);
      expect(res2.status, `${e.method} ${e.url}`).not.toBe(405);
      if (res2.status === 404) expect(res2.text, `${e.method} ${e.url}`).not.toBe(noRoute);
    }
  });

  it('P4/P8: the pepper itself appears in no published document, answer or log line', async () => {
    const env = open({ path: join(dataDir, 'node.mdb'), maxDbs: 16, readOnly: true });
    let pepperHex: string;
    try {
      const meta = env.openDB<any, string>({ name: 'meta' });
      pepperHex = meta.get('pepper').hex;
    } finally {
      await env.close();
    }
    expect(pepperHex).toMatch(/^[0-9a-f]{64}$/);
    const config = await raw('GET', '/.well-known/path-configuration');
    expect(config.json.pepper_version).not.toBe(pepperHex);
    const issued = await local.post('/receipts', payee());
    const texts = [config.text, (await raw('GET', '/.well-known/path-keys')).text, issued.text, (await raw('GET', `/path/${issued.json.reference}`)).text,
      (await raw('GET', '/nope')).text, node.output()];
    const b64 = Buffer.from(pepperHex, 'hex').toString('base64');
    const b64url = Buffer.from(pepperHex, 'hex').toString('base64url');
    for (const t of texts) {
      expect(t.toLowerCase()).not.toContain(pepperHex);
      expect(t).not.toContain(b64);
      expect(t).not.toContain(b64url);
    }
  });

  it('P4: GET /path/{reference} answers the same signed envelope as GET /receipts/{reference}; unknown answers 404', async () => {
    const issued = (await local.post('/receipts', pendingPayer())).json;
    const viaLink = await raw('GET', `/path/${issued.reference}`);
    const viaReceipts = await anon.get(`/receipts/${issued.reference}`);
    expect(viaLink.status).toBe(200);
    expect(viaLink.text).toBe(viaReceipts.text);
    expect(viaLink.json).toEqual(issued);
    expect(verifiesWith(viaLink.json, await publishedKey(node.baseUrl, issued.kid))).toBe(true);
    // After a move, the link answers the current statement.
    const moved = (await local.post(`/receipts/${issued.reference}/transitions`, { to: 'failed', reason_code: 'expired' })).json;
    const after = await raw('GET', `/path/${issued.reference}`);
    expect(after.json).toEqual(moved);
    expect(after.text).toBe((await anon.get(`/receipts/${issued.reference}`)).text);
    for (const ref of [unknownReceipt, 'req_' + '0'.repeat(32), 'hello', 'rcp_xyz']) {
      expectError(await raw('GET', `/path/${ref}`), 404, 'path.core.not_found');
    }
  });
});

describe('P15 keys rotate while the node runs', () => {
  it('P15/P1: rotation publishes a new active key and retires the old one; old receipts verify with the retired key, new ones carry the new kid', async () => {
    const dir = tempDir('front-end-rotate');
    extraDirs.push(dir);
    const cred = createCredential(dir, 'local', { local: true });
    const n = await startNode({ dataDir: dir });
    extraNodes.push(n);
    const client = new Client(n.baseUrl, cred);
    const before = await client.post('/receipts', payee());
    expect(before.status).toBe(201);
    const pendingBefore = (await client.post('/receipts', pendingPayer())).json;
    const oldDoc = await (await fetch(`${n.baseUrl}/.well-known/path-keys`)).json() as any;
    expect(oldDoc.keys).toHaveLength(1);
    const oldKey = oldDoc.keys[0];
    expect(before.json.kid).toBe(oldKey.kid);

    const printed = JSON.parse(runCli(['keys', 'rotate', '--data-dir', dir]));
    expect(typeof printed.kid).toBe('string');
    expect(printed.kid).not.toBe(oldKey.kid);

    const doc = await waitFor('the keys document to list two keys', async () => {
      const d = await (await fetch(`${n.baseUrl}/.well-known/path-keys`)).json() as any;
      return d.keys.length === 2 ? d : undefined;
    }, 3000, 100);
    const active = doc.keys.filter((k: any) => k.status === 'active');
    const retired = doc.keys.filter((k: any) => k.status === 'retired');
    expect(active).toHaveLength(1);
    expect(retired).toHaveLength(1);
    expect(active[0].kid).toBe(printed.kid);
    expect(active[0].retired_at).toBeNull();
    expect(retired[0].kid).toBe(oldKey.kid);
    expect(retired[0].public_key).toBe(oldKey.public_key);
    expect(retired[0].retired_at).toMatch(RFC3339);
    expect(Date.parse(retired[0].retired_at)).toBeGreaterThanOrEqual(Date.parse(retired[0].created_at));

    // The receipt issued before still verifies with the retired key, found by its kid.
    const oldReceipt = (await client.get(`/receipts/${before.json.reference}`)).json;
    expect(oldReceipt).toEqual(before.json);
    const retiredPub = await publishedKey(n.baseUrl, oldReceipt.kid);
    expect(retiredPub).toBe(oldKey.public_key);
    expect(verifiesWith(oldReceipt, retiredPub)).toBe(true);
    expect((await client.post('/receipts/verify', { envelope: oldReceipt, issuer_public_key: retiredPub })).json).toEqual({ valid: true });

    // A receipt issued after carries the new kid and verifies with the new key only.
    const after = await client.post('/receipts', payee());
    expect(after.status).toBe(201);
    expect(after.json.kid).toBe(printed.kid);
    const newPub = await publishedKey(n.baseUrl, after.json.kid);
    expect(newPub).toBe(active[0].public_key);
    expect(verifiesWith(after.json, newPub)).toBe(true);
    expect(verifiesWith(after.json, retiredPub)).toBe(false);
    // Moving a receipt issued before rotation signs the new statement under the new key; the
    // first statement in its chain stays verifiable with the retired key.
    const moved = await client.post(`/receipts/${pendingBefore.reference}/transitions`, { to: 'failed', reason_code: 'expired' });
    expect(moved.status).toBe(201);
    expect(moved.json.kid).toBe(printed.kid);
    expect(verifiesWith(moved.json, newPub)).toBe(true);
    const chain = (await client.get(`/receipts/${pendingBefore.reference}/transitions`)).json.transitions;
    expect(chain[0].envelope.kid).toBe(oldKey.kid);
    expect(verifiesWith(chain[0].envelope, retiredPub)).toBe(true);
    expect(await n.stop()).toBe(0);
  });
});
