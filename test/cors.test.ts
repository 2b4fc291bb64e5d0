// P20 (CORS and HEAD on public routes) over a real node: preflights, CORS headers on the public
// routes of SPEC "Authentication" item 3 (errors included) and on none of the members' routes,
// HEAD for every public GET of the discovery document (the GET's status and headers, no body on
// the wire), 405s that name HEAD and OPTIONS, and a real cross-origin read from Chromium.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './support/browser.js';
import { PREFIX, removeDir, startWithThreeMembers, type ThreeMembers } from './support/harness.js';
import { parseResponses, RawConnection, requestHead, type RawResponse } from './support/raw-http.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '12.50', asset_type: 'fiat', asset_code: 'EUR' };
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
const SIGNED_HEADERS = ['content-type', 'path-version', 'path-key-id', 'path-timestamp', 'path-signature', 'path-idempotency-key'];

let m: ThreeMembers;
let browser: Browser;
let other: Server;
let otherOrigin: string;
const objects = { request: '', revoked: '', instruction: '', receipt: '', address: '' };
let receiptEnvelope: any;

beforeAll(async () => {
  [m, browser] = await Promise.all([startWithThreeMembers('path-cors'), launchChromium()]);
  const { local, anon } = m;
  const subject = await local.post('/subjects', { subject_type: 'legal_entity' });
  const address = await local.post('/addresses', { subject_id: subject.json.id, profile: 'directory', discoverability: 'network' });
  await local.post(`/addresses/${address.json.id}/targets`, { ...EUR, account_kind: 'own_ledger', account_ref: 'acct-eur-1', is_default: true });
  const intent = await local.request('PUT', `/addresses/${address.json.id}/standing-intent`, { body: { accepts: [EUR] } });
  expect(intent.status, intent.text).toBe(200);
  objects.address = address.json.address;
  const request = await local.post('/requests', { accepts: [EUR], address_id: address.json.id, amount: AMOUNT });
  expect(request.status, request.text).toBe(201);
  objects.request = request.json.reference;
  objects.revoked = (await local.post('/requests', { accepts: [EUR] })).json.reference;
  expect((await local.post(`/requests/${objects.revoked}/revoke`)).status).toBe(200);
  const instruction = await anon.post('/instructions', { request: objects.request, via: EUR });
  expect(instruction.status, instruction.text).toBe(201);
  objects.instruction = instruction.json.reference;
  const receipt = await local.post('/receipts', {
    issued_by: 'payee', via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-1' }],
  });
  expect(receipt.status, receipt.text).toBe(201);
  objects.receipt = receipt.json.reference;
  receiptEnvelope = receipt.json;
  other = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end('<!doctype html><title>a wallet elsewhere</title><p>wallet</p>');
  });
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
  otherOrigin = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((r) => (other ? other.close(() => r()) : r()));
  await m?.node.stop();
  if (m) removeDir(m.dataDir);
});

const url = (path: string) => m.node.baseUrl + path;

function expectCors(headers: Headers): void {
  expect(headers.get('access-control-allow-origin')).toBe('*');
  const exposed = (headers.get('access-control-expose-headers') ?? '').split(/,\s*/);
  for (const name of ['path-version', 'path-version-pinned', 'path-request-id', 'path-protocol-version', 'path-idempotent-replayed', 'retry-after']) {
    expect(exposed).toContain(name);
  }
}

function expectNoCors(headers: Headers): void {
  expect(headers.get('access-control-allow-origin')).toBeNull();
  expect(headers.get('access-control-expose-headers')).toBeNull();
}

const preflight = (path: string, method: string, requestHeaders: string) =>
  fetch(url(path), {
    method: 'OPTIONS',
    headers: { origin: 'https://wallet.example', 'access-control-request-method': method, 'access-control-request-headers': requestHeaders },
  });

describe('P20 preflight', () => {
  it('OPTIONS on a public GET route answers 204 with GET and HEAD, the request headers and a max-age, no body', async () => {
    for (const path of ['/.well-known/path-keys', `/path/${objects.request}`, `${PREFIX}/requests/${objects.request}`, `/api/path/genesis/v1/receipts/${objects.receipt}`]) {
      const res = await preflight(path, 'GET', 'path-version');
      expect(res.status, path).toBe(204);
      expectCors(res.headers);
      expect(res.headers.get('access-control-allow-methods')?.split(/,\s*/)).toEqual(['GET', 'HEAD']);
      expect(res.headers.get('access-control-allow-headers')?.split(/,\s*/)).toEqual(expect.arrayContaining(SIGNED_HEADERS));
      expect(Number(res.headers.get('access-control-max-age'))).toBeGreaterThan(0);
      expect(await res.text()).toBe('');
    }
  });

  it('OPTIONS on the public POST receipts.verify allows POST with the P5/P7 headers; a member route gets 405', async () => {
    const res = await preflight(`${PREFIX}/receipts/verify`, 'POST', 'content-type, path-key-id, path-timestamp, path-signature, path-idempotency-key');
    expect(res.status).toBe(204);
    expectCors(res.headers);
    expect(res.headers.get('access-control-allow-methods')).toBe('POST');
    expect(res.headers.get('access-control-allow-headers')?.split(/,\s*/)).toEqual(expect.arrayContaining(SIGNED_HEADERS));
    // A member's route gets no preflight: 405 without CORS; an unknown path 404 (P7).
    const member = await preflight(`${PREFIX}/requests`, 'POST', 'content-type');
    expect(member.status).toBe(405);
    expectNoCors(member.headers);
    expect(member.headers.get('allow')).toBe('POST');
    expect((await member.json()).error.code).toBe('path.core.method_not_allowed');
    const unknown = await preflight('/nowhere', 'GET', 'path-version');
    expect(unknown.status).toBe(404);
    expectNoCors(unknown.headers);
  });
});

describe('P20 CORS headers on answers', () => {
  it('public GETs carry them, on success and on errors (404, 410, 400 version_unknown)', async () => {
    const cases: [string, number, Record<string, string>?][] = [
      ['/.well-known/path-keys', 200],
      ['/.well-known/path-configuration', 200],
      [`/path/${objects.request}`, 200],
      [`${PREFIX}/requests/${objects.request}`, 200],
      [`${PREFIX}/requests/${objects.revoked}`, 410],
      [`/path/req_${'0'.repeat(32)}`, 404],
      [`${PREFIX}/resolver/${encodeURIComponent(objects.address)}`, 200],
      [`${PREFIX}/requests/${objects.request}`, 400, { 'path-version': '1999-01-01.nothing' }],
    ];
    for (const [path, status, headers] of cases) {
      const res = await fetch(url(path), { headers });
      expect(res.status, path).toBe(status);
      expectCors(res.headers);
    }
  });

  it('the public POST receipts.verify carries them, on a verdict and on a 400; member routes none', async () => {
    const ok = await m.anon.post('/receipts/verify', { envelope: receiptEnvelope, issuer_public_key: m.publicKey });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.json).toEqual({ valid: true });
    expectCors(ok.headers);
    const bad = await m.anon.post('/receipts/verify', undefined, { rawBody: '{"envelope":', headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expectCors(bad.headers);
    // The members' routes carry none, answered or refused.
    const created = await m.local.post('/requests', { accepts: [EUR] });
    expect(created.status).toBe(201);
    expectNoCors(created.headers);
    const refused = await m.anon.post('/requests', { accepts: [EUR] });
    expect(refused.status).toBe(401);
    expectNoCors(refused.headers);
    const listed = await m.local.get(`/checkout/sessions/cs_${'0'.repeat(32)}`);
    expect(listed.status).toBe(404);
    expectNoCors(listed.headers);
  });

  it('405 on a public path names HEAD and OPTIONS in Allow, with CORS; on a member path neither', async () => {
    const put = await fetch(url(`/path/${objects.request}`), { method: 'PUT' });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    expect((await put.json()).error.detail.allowed).toEqual(['GET', 'HEAD', 'OPTIONS']);
    expectCors(put.headers);
    const get = await fetch(url(`${PREFIX}/receipts/verify`));
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST, OPTIONS');
    const member = await fetch(url(`${PREFIX}/requests`), { method: 'DELETE' });
    expect(member.status).toBe(405);
    expect(member.headers.get('allow')).not.toMatch(/HEAD|OPTIONS/);
    expectNoCors(member.headers);
  });
});

/** A HEAD then a GET of the same target on one connection: the HEAD's head, and the GET's answer. */
async function headThenGet(target: string, headers: [string, string][] = []): Promise<{ head: Head; get: RawResponse; between: string }> {
  const connection = await RawConnection.open(m.node.port);
  connection.write(requestHead('HEAD', target, headers) + requestHead('GET', target, headers));
  const text = () => connection.received.toString('latin1');
  const headEnd = () => text().indexOf('\r\n\r\n');
  await connection.until(() => headEnd() >= 0 && parseResponses(text().slice(headEnd() + 4)).length > 0, 5_000);
  connection.destroy();
  const headText = text().slice(0, headEnd());
  const rest = text().slice(headEnd() + 4);
  const [get] = parseResponses(rest);
  if (headEnd() < 0 || get === undefined) throw new Error(`no answers for ${target}: ${text()}`);
  const head = { status: Number(headText.slice(9, 12)), headers: headersOf(headText) };
  return { head, get, between: rest.slice(0, 9) };
}

interface Head { status: number; headers: Record<string, string> }

function headersOf(head: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of head.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    out[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return out;
}

/** Headers that differ from one answer to the next by nature. */
const comparable = (headers: Record<string, string>) => {
  const { date: _date, 'path-request-id': _id, ...rest } = headers;
  return rest;
};

/** Every GET of the discovery document, its parameters filled with this node's objects. */
async function discoveredGets(): Promise<{ operation: string; path: string }[]> {
  const discovery = await (await fetch(url('/.well-known/path-configuration'))).json() as { endpoints: Record<string, { method: string; url: string }> };
  const referenceOf: Record<string, string> = {
    'links.get': objects.request, 'requests.get': objects.request, 'instructions.get': objects.instruction,
    'receipts.get': objects.receipt, 'receipts.transitions': objects.receipt,
  };
  return Object.entries(discovery.endpoints)
    .filter(([, e]) => e.method === 'GET')
    .map(([operation, e]) => ({
      operation,
      path: e.url.slice(m.node.baseUrl.length)
        .replace('{reference}', referenceOf[operation] ?? 'x')
        .replace('{key}', encodeURIComponent(objects.address))
        .replace(/\{[a-z_]+\}/g, 'x'),
    }));
}

describe('P20 HEAD', () => {
  it('every public GET of discovery answers HEAD with its status and headers, Content-Length of its body and no body on the wire', async () => {
    const gets = await discoveredGets();
    const publicOnes: string[] = [];
    for (const { operation, path } of gets) {
      const anonymous = await fetch(url(path));
      await anonymous.arrayBuffer();
      if (anonymous.status === 401) continue; // a member's route: no HEAD (next test)
      publicOnes.push(operation);
      const { head, get, between } = await headThenGet(path);
      expect(between, `${operation}: the GET's answer follows the HEAD's head at once`).toBe('HTTP/1.1 ');
      expect(head.status, operation).toBe(get.status);
      expect(comparable(head.headers), operation).toEqual(comparable(get.headers));
      expect(Number(head.headers['content-length']), operation).toBe(Buffer.byteLength(get.body, 'latin1'));
      expect(get.body.length, operation).toBeGreaterThan(0);
    }
    // SPEC "Authentication" item 3: the public GETs are all among them.
    expect(publicOnes).toEqual(expect.arrayContaining([
      'keys', 'configuration', 'links.get', 'requests.get', 'receipts.get', 'receipts.transitions', 'instructions.get', 'resolver.get', 'commitments.get',
    ]));
  });

  it('HEAD matches its GET for errors (404, 410) and for the page a browser gets', async () => {
    for (const [target, headers, status] of [
      [`/path/req_${'0'.repeat(32)}`, [], 404],
      [`${PREFIX}/requests/${objects.revoked}`, [], 410],
      [`/path/${objects.request}`, [['accept', BROWSER_ACCEPT]], 200],
      [`/path/${objects.revoked}`, [['accept', BROWSER_ACCEPT]], 410],
    ] as [string, [string, string][], number][]) {
      const { head, get, between } = await headThenGet(target, headers);
      expect(between).toBe('HTTP/1.1 ');
      expect(head.status, target).toBe(status);
      expect(get.status, target).toBe(status);
      expect(comparable(head.headers)).toEqual(comparable(get.headers));
      expect(Number(head.headers['content-length'])).toBe(Buffer.byteLength(get.body, 'latin1'));
    }
  });

  it('HEAD on a member GET is 405 without a body or CORS, and Allow names no HEAD', async () => {
    const connection = await RawConnection.open(m.node.port);
    connection.write(requestHead('HEAD', `${PREFIX}/addresses`, []) + requestHead('GET', '/.well-known/path-keys', []));
    const text = () => connection.received.toString('latin1');
    await connection.until(() => text().includes('"member"'), 5_000);
    connection.destroy();
    const headEnd = text().indexOf('\r\n\r\n');
    const head = headersOf(text().slice(0, headEnd));
    expect(text().slice(0, 12)).toBe('HTTP/1.1 405');
    expect(head.allow.split(', ')).toContain('GET');
    expect(head.allow).not.toMatch(/HEAD|OPTIONS/);
    expect(head['access-control-allow-origin']).toBeUndefined();
    expect(text().slice(headEnd + 4, headEnd + 13)).toBe('HTTP/1.1 ');
  });
});

describe('P20 from a browser on another origin', () => {
  it('Chromium reads a link and the keys, and posts receipts.verify, cross-origin; a member route stays closed to it', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${otherOrigin}/`);
    const result = await page.evaluate(async ({ node, reference, envelope, key }) => {
      // Path-Version and a JSON body make these non-simple requests: the browser preflights them.
      const link = await fetch(`${node}/path/${reference}`, { headers: { accept: 'application/json', 'path-version': '2026-11-21.genesis' } });
      const object = await link.json();
      const keys = await (await fetch(`${node}/.well-known/path-keys`)).json();
      const verify = await fetch(`${node}/api/path/v1/receipts/verify`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ envelope, issuer_public_key: key }),
      });
      let member: string;
      try {
        await fetch(`${node}/api/path/v1/addresses`);
        member = 'read';
      } catch (error) {
        member = (error as Error).name;
      }
      return {
        origin: location.origin, type: object.type, reference: object.reference, requestId: link.headers.get('path-request-id'),
        protocol: link.headers.get('path-protocol-version'), keysMember: keys.member, verdict: await verify.json(), member,
      };
    }, { node: m.node.baseUrl, reference: objects.request, envelope: receiptEnvelope, key: m.publicKey });
    expect(result.origin).not.toBe(m.node.baseUrl);
    expect(result).toMatchObject({
      type: 'path.request', reference: objects.request, protocol: '0.2.0', keysMember: 'local', verdict: { valid: true }, member: 'TypeError',
    });
    expect(result.requestId).toMatch(/-/);
    await context.close();
  });
});
