// P19: the OpenAPI 3.1 document at /api/path/v1/openapi.json, over a real node. It validates with
// an independent OpenAPI validator; it names every operation of discovery (P4) under its name,
// at its method and path; its request schemas are the ones the node validates with (a body the
// node refuses with 400 fails the document's schema, one it accepts passes); the P5 headers are
// a security scheme, with Path-Version and Path-Idempotency-Key as parameters; the events of
// P11 are its webhooks, and a real delivery conforms. The conformance checker that every
// black-box answer goes through (support/conformance.ts) refuses an answer of the wrong shape.
// A standard linter (@redocly/openapi-core, its recommended rules) finds nothing to report: every
// operation and webhook has an id, a summary and a description, and the licence is named.
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREFIX, removeDir, startNode, startWithThreeMembers, tempDir, type ThreeMembers } from './support/harness.js';
import { checkConformance, Conformance, ConformanceError, conformanceOf } from './support/conformance.js';
import { readDelivery } from './support/receiver.js';
import { waitFor } from './support/wait.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '40.00', asset_type: 'fiat', asset_code: 'EUR' };
const PAYEE_RECEIPT = { issued_by: 'payee', via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'B-1' }] };
const SIGNED = { PathKeyId: [], PathTimestamp: [], PathSignature: [] };

let m: ThreeMembers;
let document: any;
let raw: string;
let hooks: Server;
const deliveries: { headers: IncomingHttpHeaders; body: any }[] = [];

beforeAll(async () => {
  hooks = createServer((req, res) => {
    void readDelivery(req).then(({ body }) => {
      deliveries.push({ headers: req.headers, body });
      res.statusCode = 200;
      res.end();
    });
  });
  await new Promise<void>((r) => hooks.listen(0, '127.0.0.1', () => r()));
  const hookUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hooks`;
  m = await startWithThreeMembers('openapi', { args: ['--dev', '--webhook-urls', hookUrl] });
  const res = await m.anon.get('/openapi.json');
  expect(res.status, res.text).toBe(200);
  raw = res.text;
  document = res.json;
});

afterAll(async () => {
  await m?.node.stop();
  if (m !== undefined) removeDir(m.dataDir);
  hooks?.closeAllConnections();
  await new Promise<void>((r) => (hooks === undefined ? r() : hooks.close(() => r())));
});

/** Every operation of the document: its id, method and path. */
function operations(): { id: string; method: string; path: string; spec: any }[] {
  const out = [];
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const [method, spec] of Object.entries<any>(item)) out.push({ id: spec.operationId, method: method.toUpperCase(), path, spec });
  }
  return out;
}

const operation = (id: string) => {
  const found = operations().find((o) => o.id === id);
  if (found === undefined) throw new Error(`no operation ${id} in the document`);
  return found;
};

const headerParameters = (id: string): string[] =>
  operation(id).spec.parameters.map((p: any) => (p.$ref === undefined ? p : document.components.parameters[p.$ref.split('/').pop()]))
    .filter((p: any) => p.in === 'header').map((p: any) => p.name);

describe('P19: the document', () => {
  it('is a valid OpenAPI 3.1 document by an independent validator, served as JSON, public, the same bytes each time and under both API prefixes', async () => {
    const verdict = await new Validator().validate(JSON.parse(raw));
    expect(verdict.errors ?? [], JSON.stringify(verdict.errors)).toEqual([]);
    expect(verdict.valid).toBe(true);
    expect(document.openapi).toMatch(/^3\.1\./);
    expect(document.servers.map((server: any) => server.url)).toEqual([m.node.baseUrl]);
    const again = await m.anon.get('/openapi.json');
    expect(again.headers.get('content-type')).toBe('application/json');
    expect(again.text).toBe(raw);
    const genesis = await fetch(`${m.node.baseUrl}/api/path/genesis/v1/openapi.json`);
    expect(await genesis.text()).toBe(raw);
  });

  it('is deterministic: another node with the same settings serves the same bytes, but for its base URL', async () => {
    const dataDir = tempDir('openapi-twin');
    const twin = await startNode({ dataDir });
    try {
      const text = await (await fetch(`${twin.baseUrl}${PREFIX}/openapi.json`)).text();
      expect(text.replaceAll(twin.baseUrl, 'BASE')).toBe(raw.replaceAll(m.node.baseUrl, 'BASE'));
      expect(text).not.toBe(raw);
    } finally {
      await twin.stop();
      removeDir(dataDir);
    }
  });

  it('discovery names it as openapi_url, and every discovery operation is in it under its name, at the same method and path (and no other)', async () => {
    const res = await m.anon.get('/.well-known/path-configuration', { root: true });
    expect(res.status).toBe(200);
    expect(res.json.openapi_url).toBe(`${m.node.baseUrl}${PREFIX}/openapi.json`);
    const endpoints = Object.entries<{ method: string; url: string }>(res.json.endpoints);
    expect(endpoints.length).toBeGreaterThanOrEqual(56);
    const documented = operations();
    for (const [name, { method, url }] of endpoints) {
      const found = documented.find((o) => o.id === name);
      expect(found, name).toBeDefined();
      expect({ name, method: found!.method, url: m.node.baseUrl + found!.path }).toEqual({ name, method, url });
    }
    expect(documented.map((o) => o.id).sort()).toEqual(endpoints.map(([name]) => name).sort());
    expect(res.json.endpoints.openapi).toEqual({ method: 'GET', url: res.json.openapi_url });
    for (const o of documented) {
      const named = [...o.path.matchAll(/\{([a-z_]+)\}/g)].map((x) => x[1]);
      const inPath = o.spec.parameters.filter((p: any) => p.in === 'path');
      expect(inPath.map((p: any) => p.name), o.id).toEqual(named);
      for (const p of inPath) expect(p.description, `${o.id} ${p.name}`).toMatch(/\w/);
    }
  });

  it('P5 headers are three apiKey schemes required together; public operations take none, optional ones either; Path-Version on all, Path-Idempotency-Key on idempotent calls', () => {
    const schemes = document.components.securitySchemes;
    expect(Object.fromEntries(Object.entries<any>(schemes).map(([k, s]) => [k, [s.type, s.in, s.name]]))).toEqual({
      PathKeyId: ['apiKey', 'header', 'Path-Key-Id'],
      PathTimestamp: ['apiKey', 'header', 'Path-Timestamp'],
      PathSignature: ['apiKey', 'header', 'Path-Signature'],
    });
    expect(schemes.PathSignature.description).toContain('path-request-v1');
    for (const id of ['keys', 'configuration', 'links.get', 'openapi', 'requests.get', 'receipts.verify', 'sonar.confirm', 'resolver.get']) {
      expect(operation(id).spec.security, id).toEqual([]);
    }
    for (const id of ['instructions.create', 'payee_check']) expect(operation(id).spec.security, id).toEqual([{}, SIGNED]);
    for (const id of ['requests.create', 'receipts.transition', 'sonar.lookup', 'connections.get', 'directory.feed']) {
      expect(operation(id).spec.security, id).toEqual([SIGNED]);
    }
    for (const o of operations()) expect(headerParameters(o.id), o.id).toContain('Path-Version');
    for (const id of ['requests.create', 'receipts.create', 'receipts.transition', 'connections.consume', 'subjects.create']) {
      expect(headerParameters(id), id).toContain('Path-Idempotency-Key');
    }
    for (const id of ['requests.paid', 'requests.get', 'sonar.lookup']) expect(headerParameters(id), id).not.toContain('Path-Idempotency-Key');
  });

  it('an idempotent operation of the document replays a call with the same key, as the node does (P7)', async () => {
    const key = `openapi-${Date.now()}`;
    const first = await m.local.post('/requests', { accepts: [EUR], amount: AMOUNT }, { idempotencyKey: key });
    const second = await m.local.post('/requests', { accepts: [EUR], amount: AMOUNT }, { idempotencyKey: key });
    expect(first.status).toBe(201);
    expect(second.headers.get('path-idempotent-replayed')).toBe('true');
    expect(operation('requests.create').spec.responses['201'].headers['Path-Idempotent-Replayed']).toBeDefined();
  });

  it('errors: each operation lists the P7 statuses it answers, with the error envelope narrowed to their codes', () => {
    const transition = operation('receipts.transition').spec.responses;
    expect(transition['409'].content['application/json'].schema.allOf[1].properties.error.properties.code.enum)
      .toEqual(['path.core.idempotency_in_progress', 'path.settlement.transition_invalid']);
    expect(Object.keys(transition)).toEqual(expect.arrayContaining(['200', '201', '400', '401', '403', '404', '409', '413', '415', '422', '500', '503']));
    const publicRead = operation('requests.get').spec.responses;
    expect(Object.keys(publicRead).sort()).toEqual(['200', '400', '404', '410', '500', '503']);
    // Any operation may answer 500 path.core.internal (a damaged row, a defect), and only that.
    for (const { spec } of operations())
      expect(spec.responses['500'].content['application/json'].schema.allOf[1].properties.error.properties.code.enum).toEqual(['path.core.internal']);
    expect(document.components.schemas.ErrorEnvelope.required).toEqual(['error']);
    // P20: the link answers a page to browsers, at any status; other operations JSON only.
    const link = operation('links.get').spec.responses;
    for (const status of ['200', '404', '410']) expect(Object.keys(link[status].content), status).toEqual(['application/json', 'text/html']);
    expect(Object.keys(publicRead['200'].content)).toEqual(['application/json']);
  });

  it('webhooks: the events of P11, each a signed path.event with the Standard Webhooks headers; a real delivery conforms to its schema', async () => {
    expect(Object.keys(document.webhooks).sort()).toEqual(['checkout.session.completed', 'checkout.session.expired', 'receipt.issued', 'request.paid']);
    const hook = document.webhooks['receipt.issued'].post;
    expect(hook.parameters.map((p: any) => p.name)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature', 'Path-Event-Id']);
    const issued = await m.local.post('/receipts', PAYEE_RECEIPT);
    expect(issued.status, issued.text).toBe(201);
    const delivery = await waitFor('receipt.issued delivered', () => deliveries.find((d) => d.body?.data?.reference === issued.json.reference));
    const checker = new Conformance(document);
    const validate = checker.webhookValidator('receipt.issued');
    expect(validate(delivery.body), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...delivery.body, data: { reference: issued.json.reference } })).toBe(false);
    expect(delivery.headers['webhook-id']).toBe(delivery.body.id);
  });

  it('webhooks: request.paid and checkout.session.completed deliveries conform; the checkout link answers a path.checkout the client checks', async () => {
    const request = await m.local.post('/requests', { accepts: [EUR], amount: AMOUNT });
    const session = await m.local.post('/checkout/sessions', { request_reference: request.json.reference, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/cancel' });
    expect(session.status, session.text).toBe(201);
    // Through the test client: its answer is checked against links.get's schema on the way.
    const link = await m.anon.get(`/path/${session.json.reference}`, { root: true });
    expect([link.status, link.json.type]).toEqual([200, 'path.checkout']);
    expect((await m.beta.post(`/checkout/sessions/${session.json.reference}/complete`)).status).toBe(200);
    expect((await m.beta.post(`/requests/${request.json.reference}/paid`)).status).toBe(200);
    const checker = new Conformance(document);
    for (const [event, reference] of [['checkout.session.completed', session.json.reference], ['request.paid', request.json.reference]]) {
      const delivery = await waitFor(`${event} delivered`, () => deliveries.find((d) => d.body?.event === event && d.body?.data?.reference === reference));
      const validate = checker.webhookValidator(event!);
      expect(validate(delivery.body), `${event}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });
});

describe('P19: the document a standard linter reads', () => {
  it("@redocly/openapi-core's recommended rules report no error and no warning", async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({ source: raw, absoluteRef: `${m.node.baseUrl}${PREFIX}/openapi.json`, config });
    const said = problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${(p.location[0] as any)?.pointer}`);
    const warnings = said.filter((line) => line.startsWith('warn'));
    if (warnings.length > 0) console.log(`openapi lint warnings:\n${warnings.join('\n')}`);
    expect(said.filter((line) => line.startsWith('error'))).toEqual([]);
    expect(warnings).toEqual([]);
  });

  it('every operation and webhook has a unique id, a short imperative summary and a description that cites SPEC or PROTOCOL', () => {
    const hooks = Object.entries<any>(document.webhooks).map(([event, item]) => ({ id: item.post.operationId, path: event, spec: item.post }));
    const all = [...operations(), ...hooks];
    expect(all.length).toBeGreaterThanOrEqual(60);
    for (const o of all) {
      expect(o.id, o.path).toMatch(/^[a-z][a-z_.]*$/);
      expect(o.spec.summary, o.id).toMatch(/^[A-Z][^\n]{8,58}[^.\s]$/);
      expect(o.spec.description, o.id).toMatch(/\.$/);
      expect(o.spec.description, o.id).toMatch(/\b(SPEC [A-L]|SPEC [A-Z][a-z]+|P\d{1,2})\b/);
      expect(o.spec.description.length, o.id).toBeGreaterThan(o.spec.summary.length);
    }
    expect(new Set(all.map((o) => o.id)).size).toBe(all.length);
    expect(new Set(all.map((o) => o.spec.summary)).size).toBe(all.length);
    expect(hooks.map((o) => o.id).sort()).toEqual(['webhooks.checkout.session.completed', 'webhooks.checkout.session.expired', 'webhooks.receipt.issued', 'webhooks.request.paid']);
  });

  it("names the node's licence, Apache-2.0, as package.json and LICENSE at the root do, and the node's base URL as its server", () => {
    expect(document.info.license).toEqual({ name: 'Apache License 2.0', identifier: 'Apache-2.0' });
    const root = new URL('../', import.meta.url);
    expect(JSON.parse(readFileSync(new URL('package.json', root), 'utf8')).license).toBe('Apache-2.0');
    const license = readFileSync(new URL('LICENSE', root), 'utf8');
    expect(license).toMatch(/^\s*Apache License\s+Version 2\.0, January 2004\s/);
    expect(license).toContain('END OF TERMS AND CONDITIONS');
    expect(document.servers).toEqual([{ url: m.node.baseUrl, description: expect.stringMatching(/base URL/) }]);
  });
});

describe('P19: the request schemas are the ones that validate', () => {
  /** The node's verdict and the document's on one body. */
  async function both(id: string, send: (body: unknown) => Promise<{ status: number; json: any }>, body: unknown) {
    const checker = (await conformanceOf(m.node.baseUrl))!;
    const validate = checker.requestValidator(id);
    const res = await send(body);
    return { node: res.status, code: res.json?.error?.code, document: validate(body) };
  }

  const cases: [string, (m: ThreeMembers) => (body: unknown) => Promise<any>, unknown[], unknown[]][] = [
    ['requests.create', (x) => (b) => x.local.post('/requests', b),
      [{ accepts: [EUR] }, { accepts: [EUR], amount: AMOUNT, order_reference: 'o-1', x_unknown: true }],
      [{}, { accepts: [] }, { accepts: [EUR], amount: { ...AMOUNT, value: '1,5' } }, { accepts: [EUR], expires_at: 'tomorrow' }, { accepts: 'EUR' }]],
    ['receipts.create', (x) => (b) => x.local.post('/receipts', b),
      [PAYEE_RECEIPT],
      [{ ...PAYEE_RECEIPT, issued_by: 'bank' }, { issued_by: 'payee' }, { ...PAYEE_RECEIPT, via: { rail: 'book' } }, { ...PAYEE_RECEIPT, rail_references: 'B-1' }]],
    ['subjects.create', (x) => (b) => x.local.post('/subjects', b),
      [{ subject_type: 'legal_entity' }, { subject_type: 'natural_person', external_ref: 'crm-1' }],
      [{ subject_type: 'robot' }, { external_ref: 'crm-2' }, { subject_type: 'legal_entity', external_ref: '' }]],
    ['sonar.lookup', (x) => (b) => x.beta.post('/sonar/lookup', b),
      [{ identifier_type: 'email', identifier: 'someone@example.org', nonce: 'n-1' }],
      [{ identifier_type: 'fax', identifier: '123' }, { identifier: 'someone@example.org' }, { identifier_type: 'email', identifier_hash: 'ABC' }]],
    ['receipts.verify', (x) => (b) => x.anon.post('/receipts/verify', b),
      [{ envelope: { type: 'path.receipt' }, issuer_public_key: '00' }],
      [{ envelope: 'x', issuer_public_key: '00' }, { envelope: {} }]],
  ];

  for (const [id, send, accepted, refused] of cases) {
    it(`${id}: bodies the node accepts pass the document's schema; bodies it refuses with 400 fail it`, async () => {
      for (const body of accepted) {
        const verdict = await both(id, send(m), body);
        expect(verdict, JSON.stringify(body)).toMatchObject({ document: true });
        expect(verdict.node, JSON.stringify(body)).toBeLessThan(300);
      }
      for (const body of refused) {
        const verdict = await both(id, send(m), body);
        expect(verdict, JSON.stringify(body)).toEqual({ node: 400, code: 'path.core.invalid_request', document: false });
      }
    });
  }
});

describe('P19: the conformance check every black-box answer goes through', () => {
  it('refuses an answer of the wrong shape, a status the operation does not list, and an error code its status does not list', async () => {
    const issued = await m.local.post('/receipts', PAYEE_RECEIPT);
    const target = `${PREFIX}/receipts/${issued.json.reference}`;
    const real = await m.anon.get(`/receipts/${issued.json.reference}`);
    const answer = { method: 'GET', target, status: 200, contentType: 'application/json', text: real.text };
    await checkConformance(m.node.baseUrl, answer);
    const { issuer: _issuer, ...withoutIssuer } = real.json;
    await expect(checkConformance(m.node.baseUrl, { ...answer, text: JSON.stringify(withoutIssuer) })).rejects.toThrow(/receipts\.get .*answered 200 .*issuer/);
    await expect(checkConformance(m.node.baseUrl, { ...answer, text: JSON.stringify({ ...real.json, status: 'lost' }) })).rejects.toThrow(ConformanceError);
    await expect(checkConformance(m.node.baseUrl, { ...answer, target: `/api/path/genesis/v1/receipts/${issued.json.reference}`, text: '{"reference":1}' })).rejects.toThrow(/receipts\.get/);
    await expect(checkConformance(m.node.baseUrl, { ...answer, status: 418 })).rejects.toThrow(/answered 418, a status the OpenAPI document does not list/);
    await checkConformance(m.node.baseUrl, { ...answer, headers: real.headers });
    const withoutVersion = new Headers(real.headers);
    withoutVersion.delete('path-version');
    await expect(checkConformance(m.node.baseUrl, { ...answer, headers: withoutVersion })).rejects.toThrow(/without the header Path-Version/);
    const created = { method: 'POST', target: `${PREFIX}/subjects`, status: 201, contentType: 'application/json', text: JSON.stringify({ id: `sub_${'0'.repeat(32)}`, subject_type: 'legal_entity', created_at: '2026-11-21T12:00:00Z' }) };
    await checkConformance(m.node.baseUrl, { ...created, requestBody: '{"subject_type":"legal_entity"}' });
    await expect(checkConformance(m.node.baseUrl, { ...created, requestBody: '{"subject_type":"robot"}' })).rejects.toThrow(/subjects\.create .*to a body its OpenAPI request schema refuses/);
    const wrongCode = JSON.stringify({ error: { code: 'path.settlement.transition_invalid', message: 'no' } });
    await expect(checkConformance(m.node.baseUrl, { method: 'POST', target: `${PREFIX}/requests/req_0/paid`, status: 409, contentType: 'application/json', text: wrongCode })).rejects.toThrow(/requests\.paid/);
  });

  it('leaves alone what no operation describes: an unknown path, a method the path does not take, HEAD, a page that is not JSON', async () => {
    const unknown = await m.anon.get('/no-such-route');
    expect(unknown.status).toBe(404);
    const notFound = { status: 404, contentType: 'application/json', text: unknown.text };
    await checkConformance(m.node.baseUrl, { ...notFound, method: 'GET', target: `${PREFIX}/no-such-route` });
    await checkConformance(m.node.baseUrl, { ...notFound, method: 'DELETE', target: `${PREFIX}/requests` });
    await checkConformance(m.node.baseUrl, { method: 'HEAD', target: `${PREFIX}/openapi.json`, status: 200, contentType: 'application/json', text: '' });
    await checkConformance(m.node.baseUrl, { method: 'GET', target: '/path/req_0', status: 200, contentType: 'text/html; charset=utf-8', text: '<!doctype html>' });
  });
});
