// Issue 31 item 7 over a real node: the public documents (keys, discovery, OpenAPI) and the
// commitments (SPEC E: "cacheable, identical for every caller") carry a strong ETag and
// `Cache-Control: public, no-cache`, and answer If-None-Match with a 304 that has no body and
// keeps the ETag, Cache-Control, Vary and CORS (P20); the large documents are served gzip or
// brotli when asked, each coding decompressing to exactly the uncompressed bytes. Both ways a
// public GET goes (routed natively, and through the route table when a version is pinned, P10)
// and HEAD answer alike. Objects whose state moves (requests, receipts, resolver answers) carry
// neither a validator nor any Cache-Control.
import { request } from 'node:http';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREFIX, removeDir, startWithThreeMembers, type ThreeMembers } from './support/harness.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const USD = { rail: 'book', asset_type: 'fiat', asset_code: 'USD' };
const AMOUNT = { value: '12.50', asset_type: 'fiat', asset_code: 'EUR' };
const PINNED = { 'path-version': '2026-11-21.genesis' };
const DOCUMENTS = [
  '/.well-known/path-keys',
  '/.well-known/path-configuration',
  `${PREFIX}/openapi.json`,
  '/api/path/genesis/v1/openapi.json',
];
/** Long enough to be compressed (config.ts COMPRESSED_DOCUMENT_BYTES_MIN). */
const COMPRESSED = DOCUMENTS.slice(1);

let m: ThreeMembers;
const objects = { addressId: '', address: '', request: '', receipt: '' };

beforeAll(async () => {
  m = await startWithThreeMembers('http-cache');
  const { local } = m;
  const subject = await local.post('/subjects', { subject_type: 'legal_entity' });
  const address = await local.post('/addresses', {
    subject_id: subject.json.id, profile: 'directory', discoverability: 'network',
  });
  objects.addressId = address.json.id;
  objects.address = address.json.address;
  for (const [asset, ref] of [[EUR, 'acct-eur'], [USD, 'acct-usd']] as const) {
    const target = await local.post(`/addresses/${objects.addressId}/targets`, {
      ...asset, account_kind: 'own_ledger', account_ref: ref, is_default: asset === EUR,
    });
    expect(target.status, target.text).toBe(201);
  }
  await setTerms([EUR]);
  const created = await local.post('/requests', { accepts: [EUR], amount: AMOUNT });
  expect(created.status, created.text).toBe(201);
  objects.request = created.json.reference;
  const receipt = await local.post('/receipts', {
    issued_by: 'payee', via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-1' }],
  });
  expect(receipt.status, receipt.text).toBe(201);
  objects.receipt = receipt.json.reference;
});

afterAll(async () => {
  await m?.node.stop();
  if (m) removeDir(m.dataDir);
});

async function setTerms(accepts: unknown[]): Promise<void> {
  const path = `/addresses/${objects.addressId}/standing-intent`;
  const intent = await m.local.request('PUT', path, { body: { accepts } });
  expect(intent.status, intent.text).toBe(200);
}

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** node:http, which (unlike fetch) sends no Accept-Encoding of its own and decodes nothing. */
function raw(path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request(m.node.baseUrl + path, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const commitment = () => `${PREFIX}/commitments/${encodeURIComponent(objects.address)}`;

describe('validators on the public documents and commitments', () => {
  it('carry a strong ETag and Cache-Control public, no-cache, the same on every request', async () => {
    for (const path of [...DOCUMENTS, commitment()]) {
      const first = await raw(path);
      const second = await raw(path, PINNED);
      expect(first.status, path).toBe(200);
      expect(first.headers.etag, path).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
      expect(first.headers['cache-control'], path).toBe('public, no-cache');
      expect(second.headers.etag, path).toBe(first.headers.etag);
      expect(second.body.equals(first.body), path).toBe(true);
    }
  });

  it('If-None-Match naming the ETag (alone, weak, in a list, or *) answers 304: no body, same ETag and Cache-Control, CORS kept', async () => {
    for (const path of [...DOCUMENTS, commitment()]) {
      const { headers } = await raw(path);
      const etag = headers.etag as string;
      for (const condition of [etag, `W/${etag}`, `"elsewhere", ${etag}`, '*']) {
        for (const [method, extra] of [['GET', {}], ['GET', PINNED], ['HEAD', {}]] as const) {
          const res = await raw(path, { 'if-none-match': condition, ...extra }, method);
          const what = `${method} ${path} ${condition} ${JSON.stringify(extra)}`;
          expect(res.status, what).toBe(304);
          expect(res.body.length, what).toBe(0);
          expect(res.headers.etag, what).toBe(etag);
          expect(res.headers['cache-control'], what).toBe('public, no-cache');
          expect(res.headers['access-control-allow-origin'], what).toBe('*');
          expect(res.headers['content-length'], what).toBeUndefined();
          expect(res.headers['content-type'], what).toBeUndefined();
        }
      }
    }
  });

  it('If-None-Match naming another tag answers 200 with the whole body', async () => {
    for (const path of [...DOCUMENTS, commitment()]) {
      const plain = await raw(path);
      for (const condition of ['"not-this-one"', `"${(plain.headers.etag as string).slice(1, -2)}"`]) {
        const res = await raw(path, { 'if-none-match': condition });
        expect(res.status, path).toBe(200);
        expect(res.body.equals(plain.body), path).toBe(true);
      }
    }
  });

  it('a commitment revalidated after its terms change is answered anew: its ETag moves, the old one gets the new 200', async () => {
    const before = await raw(commitment());
    const signed = JSON.parse(before.body.toString());
    expect(signed.type).toBe('path.address.commitment');
    await setTerms([EUR, USD]);
    const after = await raw(commitment(), { 'if-none-match': before.headers.etag as string });
    expect(after.status).toBe(200);
    expect(after.headers.etag).not.toBe(before.headers.etag);
    const renewed = JSON.parse(after.body.toString());
    expect(renewed.version).toBe(signed.version + 1);
    expect(renewed.commitment).not.toBe(signed.commitment);
    // The signed bytes are the node's, unchanged: a plain read gives the same bytes.
    expect((await raw(commitment())).body.equals(after.body)).toBe(true);
  });
});

describe('compression of the large documents, made once', () => {
  it('gzip and br decompress to exactly the uncompressed bytes, with Content-Encoding, Vary and an ETag of their own', async () => {
    for (const path of COMPRESSED) {
      const plain = await raw(path);
      expect(plain.headers['content-encoding'], path).toBeUndefined();
      expect(plain.headers.vary, path).toBe('Accept-Encoding');
      const tags = new Set([plain.headers.etag]);
      for (const [asked, coding, decode] of [
        ['gzip', 'gzip', gunzipSync],
        ['br', 'br', brotliDecompressSync],
        ['gzip, deflate, br', 'br', brotliDecompressSync],
        ['br;q=0.1, gzip', 'gzip', gunzipSync],
      ] as const) {
        for (const extra of [{}, PINNED]) {
          const res = await raw(path, { 'accept-encoding': asked, ...extra });
          const what = `${path} ${asked} ${JSON.stringify(extra)}`;
          expect(res.status, what).toBe(200);
          expect(res.headers['content-encoding'], what).toBe(coding);
          expect(res.headers.vary, what).toBe('Accept-Encoding');
          expect(res.headers['cache-control'], what).toBe('public, no-cache');
          expect(Number(res.headers['content-length']), what).toBe(res.body.length);
          expect(res.body.length, what).toBeLessThan(plain.body.length);
          expect(decode(res.body).equals(plain.body), what).toBe(true);
          tags.add(res.headers.etag);
        }
      }
      expect(tags.size, path).toBe(3);
    }
  });

  it('the compressed bytes are the same on every request, and the coding\'s ETag revalidates to a 304 with Vary', async () => {
    const path = `${PREFIX}/openapi.json`;
    const first = await raw(path, { 'accept-encoding': 'br' });
    const second = await raw(path, { 'accept-encoding': 'br' });
    expect(second.body.equals(first.body)).toBe(true);
    const again = await raw(path, { 'accept-encoding': 'br', 'if-none-match': first.headers.etag as string });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    expect(again.headers.etag).toBe(first.headers.etag);
    expect(again.headers.vary).toBe('Accept-Encoding');
    // The br tag names the br representation only: asked without a coding, the 200 comes whole.
    const plain = await raw(path, { 'if-none-match': first.headers.etag as string });
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
  });

  it('a HEAD asking for a coding gets the coded representation\'s headers and its Content-Length', async () => {
    const path = '/.well-known/path-configuration';
    for (const coding of ['gzip', 'br']) {
      const get = await raw(path, { 'accept-encoding': coding });
      const head = await raw(path, { 'accept-encoding': coding }, 'HEAD');
      expect(head.status).toBe(200);
      expect(head.body.length).toBe(0);
      expect(head.headers['content-encoding']).toBe(coding);
      expect(head.headers.etag).toBe(get.headers.etag);
      expect(Number(head.headers['content-length'])).toBe(get.body.length);
    }
  });

  it('no Content-Encoding when none is asked or acceptable, and none on the short keys document', async () => {
    for (const asked of [{}, { 'accept-encoding': 'identity' }, { 'accept-encoding': 'deflate' }]) {
      const res = await raw(`${PREFIX}/openapi.json`, asked);
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(JSON.parse(res.body.toString()).openapi).toMatch(/^3\.1\./);
    }
    const keys = await raw('/.well-known/path-keys', { 'accept-encoding': 'gzip, br' });
    expect(keys.headers['content-encoding']).toBeUndefined();
    expect(keys.headers.vary).toBeUndefined();
    expect(JSON.parse(keys.body.toString()).member).toBe('local');
  });
});

describe('objects whose state moves', () => {
  it('carry no validator and no Cache-Control, and If-None-Match: * does not make them 304', async () => {
    const paths = [
      `/path/${objects.request}`,
      `${PREFIX}/requests/${objects.request}`,
      `${PREFIX}/receipts/${objects.receipt}`,
      `/path/${objects.receipt}`,
      `${PREFIX}/resolver/${encodeURIComponent(objects.address)}`,
    ];
    for (const path of paths) {
      for (const extra of [{}, PINNED]) {
        const res = await raw(path, { 'if-none-match': '*', 'accept-encoding': 'gzip, br', ...extra });
        expect(res.status, path).toBe(200);
        expect(res.headers.etag, path).toBeUndefined();
        expect(res.headers['cache-control'], path).toBeUndefined();
        expect(res.headers['content-encoding'], path).toBeUndefined();
        expect(JSON.parse(res.body.toString()).signature, path).toBeDefined();
      }
    }
  });
});
