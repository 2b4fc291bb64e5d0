// Issue 11, items 7, 8 and 9, over the real command line and the real node:
//   7  P1: small-order and non-canonical public keys are refused when added (credentials,
//      external clients) and ignored in members' published key documents.
//   8  P5, P7, P15, SPEC I: messages that help (allowed values of a closed set, expected forms in
//      words, a malformed Path-Timestamp named as such, --help, discovery's parameter names).
//   9  P17, P12: a batch lookup answers a key that does not normalise at its index, uncharged.
// Signatures are checked with test/support/verify.ts, independently of the node's own code.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as ed from '@noble/ed25519';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLI, Client, PREFIX, removeDir, runCli, signRequest, startNode, startWithThreeMembers, tempDir,
  type Answer, type Credential, type NodeProcess, type ThreeMembers,
} from './support/harness.js';
import { publicKeyFault } from '../src/protocol/signing.js';
import { verifiesWith } from './support/verify.js';
import { waitFor } from './support/wait.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const dirs: string[] = [];

/** Runs the real command in a scratch directory, so a default `./data` lands nowhere. */
function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const cwd = tempDir('path-messages-cwd');
  dirs.push(cwd);
  // A command that does not take --help for help may start serving: the timeout ends it.
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd, timeout: 20_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

type ErrorBody = { message: string; detail: Record<string, unknown> };

function expectInvalid(res: Answer, field: string): ErrorBody {
  expect(res.status, res.text).toBe(400);
  expect(res.json.error.code).toBe('path.core.invalid_request');
  expect(res.json.error.detail.field).toBe(field);
  return res.json.error;
}

// ---------------------------------------------------------------------------------------------
// Item 7: weak keys at the door (P1)

/**
 * The eight points of order dividing 8 (the well-known list of Ed25519 small-order encodings),
 * made here as the multiples of one point of order 8 with @noble's point arithmetic.
 */
function smallOrderPoints(): string[] {
  const order8 = ed.Point.fromHex(
    'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  );
  const points: string[] = [];
  let p = ed.Point.ZERO;
  for (let k = 0; k < 8; k++) {
    points.push(p.toHex());
    p = p.add(order8);
  }
  return points;
}

const P = 2n ** 255n - 19n;
/** The 32-byte little-endian encoding of y, with the sign bit of x set when asked. */
function encodeY(y: bigint, signBit: boolean): string {
  const bytes = Buffer.alloc(32);
  let v = y;
  for (let i = 0; i < 32; i++, v >>= 8n) bytes[i] = Number(v & 0xffn);
  if (signBit) bytes[31]! |= 0x80;
  return bytes.toString('hex');
}

/** Non-canonical encodings of small-order points: y >= p, or "-0" for a point with x = 0. */
const NON_CANONICAL_SMALL_ORDER = [
  encodeY(1n, true), encodeY(P + 1n, false), encodeY(P + 1n, true), // the identity
  encodeY(P - 1n, true), // the point of order 2
  encodeY(P, false), encodeY(P, true), // y = 0, the points of order 4
];

describe('item 7, P1: small-order public keys are refused when added', () => {
  const small = smallOrderPoints();
  let dataDir: string;

  beforeAll(() => {
    dataDir = tempDir('path-messages-keys');
    dirs.push(dataDir);
  });

  it('the generated points are the standard list of eight, all of small order', () => {
    expect(new Set(small).size).toBe(8);
    expect(small).toEqual(expect.arrayContaining([
      '0100000000000000000000000000000000000000000000000000000000000000',
      'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
      '0000000000000000000000000000000000000000000000000000000000000000',
      '0000000000000000000000000000000000000000000000000000000000000080',
      'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
      'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
      '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
      '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
    ]));
    for (const h of small) expect(ed.Point.fromHex(h).isSmallOrder(), h).toBe(true);
    // The non-canonical ones decode only leniently (ZIP 215), to small-order points.
    for (const h of NON_CANONICAL_SMALL_ORDER) {
      expect(() => ed.Point.fromHex(h, false), h).toThrow();
      expect(ed.Point.fromHex(h, true).isSmallOrder(), h).toBe(true);
    }
  });

  const weak = [...small, ...NON_CANONICAL_SMALL_ORDER];
  const addCredential = (member: string, key: string) =>
    ['credentials', 'add', '--data-dir', dataDir, '--member', member, '--public-key', key];
  const addClient = (client: string, key: string) => ['external-clients', 'add',
    '--data-dir', dataDir, '--client', client, '--public-key', key, '--registries', 'eu.epc.vop'];

  // Each is refused by the check both commands make before they store a key (store.ts); each
  // command is run on one of each kind below.
  it.each(weak)('%s is refused where a key is added (publicKeyFault)', (key) => {
    expect(publicKeyFault(key)).toBe('weak');
  });

  const eachKind = [small[0]!, NON_CANONICAL_SMALL_ORDER[0]!];
  it.each(eachKind)('credentials add %s: exit 2, a message naming the reason', (key) => {
    const r = cli(addCredential('weak', key));
    expect(r.status, r.stdout + r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('small-order or non-canonical Ed25519 point');
  });

  it.each(eachKind)('external-clients add %s: exit 2, refused too', (key) => {
    const r = cli(addClient('weak', key));
    expect(r.status, r.stdout + r.stderr).toBe(2);
    expect(r.stderr).toContain('small-order or non-canonical Ed25519 point');
  });

  it('an upper-case small-order key is refused the same (the command lower-cases it first)', () => {
    const r = cli(addCredential('weak', small[1]!.toUpperCase()));
    expect(r.status).toBe(2);
  });

  it('a sound key is still added, by both commands', () => {
    const key = hex(ed.getPublicKey(ed.utils.randomSecretKey()));
    expect(JSON.parse(runCli(addCredential('ok', key))).key_id).toMatch(/^cred_/);
    expect(JSON.parse(runCli(addClient('ok', key))).key_id).toMatch(/^ext_/);
  });
});

describe('item 7, P1: a small-order key in a member\'s keys document is ignored and logged', () => {
  const goodSeed = ed.utils.randomSecretKey();
  const keysDocument = {
    member: 'evil',
    keys: [
      { kid: 'evil-weak', public_key: `01${'00'.repeat(31)}`, status: 'active' },
      { kid: 'evil-good', public_key: hex(ed.getPublicKey(goodSeed)), status: 'active' },
    ],
  };
  let server: Server;
  let node: NodeProcess;

  beforeAll(async () => {
    // A member node that publishes the identity point beside a sound key (P4 keys document).
    server = createServer((req, res) => {
      const found = req.url === '/.well-known/path-keys';
      res.writeHead(found ? 200 : 404, { 'content-type': 'application/json' });
      res.end(found ? JSON.stringify(keysDocument) : '{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const dataDir = tempDir('path-messages-member');
    dirs.push(dataDir);
    const port = (server.address() as AddressInfo).port;
    const baseUrl = `http://127.0.0.1:${port}`;
    runCli(['members', 'add', '--data-dir', dataDir, '--member', 'evil', '--base-url', baseUrl]);
    node = await startNode({ dataDir });
  });

  afterAll(async () => {
    await node?.stop();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('the sound key is a credential; the identity key is unknown, "forgery" or not', async () => {
    const good: Credential = {
      keyId: 'evil-good', member: 'evil', seedHex: hex(goodSeed), publicKeyHex: '',
    };
    const lookup = { identifier_type: 'phone', identifier_hash: randomBytes(32).toString('hex') };
    const client = new Client(node.baseUrl, good);
    await waitFor('the member keys fetched',
      async () => (await client.post('/sonar/lookup', lookup)).status === 200);
    // R = identity, S = 0 satisfies the cofactorless equation under the identity key for any
    // message; the key is not a credential at all, so the node answers unknown_key.
    const target = `${PREFIX}/sonar/lookup`;
    const body = Buffer.from(JSON.stringify(lookup));
    const headers = {
      ...signRequest(good, { method: 'POST', target, timestamp: new Date().toISOString(), body }),
      'path-key-id': 'evil-weak', 'path-signature': `01${'00'.repeat(63)}`,
      'content-type': 'application/json',
    };
    const res = await fetch(node.baseUrl + target, { method: 'POST', headers, body });
    const answer = await res.json() as any;
    expect(res.status).toBe(401);
    expect(answer.error.detail.reason).toBe('unknown_key');
    const logged = node.output().split('\n').find((l) => l.includes('member key ignored'));
    expect(logged, node.output()).toBeDefined();
    expect(JSON.parse(logged!)).toMatchObject({ member: 'evil', kid: 'evil-weak', fault: 'weak' });
  });
});

// ---------------------------------------------------------------------------------------------
// Items 8 and 9 on one node

describe('items 8 and 9 on one node', () => {
  let m: ThreeMembers;
  const visiblePhone = '+44 20 7946 0811';

  beforeAll(async () => {
    m = await startWithThreeMembers('path-messages');
    dirs.push(m.dataDir);
    const subject = await m.local.post('/subjects', { subject_type: 'natural_person' });
    const registered = await m.local.post('/identifiers', {
      subject_id: subject.json.id, identifier_type: 'phone', identifier: visiblePhone,
      discoverability: 'network',
    });
    expect(registered.status, registered.text).toBe(201);
  });

  afterAll(async () => {
    await m?.node.stop();
  });

  const payerReceipt = async () => {
    const issued = await m.local.post('/receipts', {
      issued_by: 'payer', via: EUR, sent: { value: '5', asset_type: 'fiat', asset_code: 'EUR' },
    });
    expect(issued.status, issued.text).toBe(201);
    return issued.json.reference as string;
  };

  describe('item 8a, P7: a closed set lists its allowed values; detail.field names it', () => {
    it('a receipt transition {"to":"pending"}', async () => {
      const reference = await payerReceipt();
      const res = await m.local.post(`/receipts/${reference}/transitions`, { to: 'pending' });
      const error = expectInvalid(res, 'to');
      expect(error.message).not.toContain('Expected union value');
      expect(error.message).toBe('to must be one of "settled", "failed", "reversed"');
      expect(error.detail.allowed).toEqual(['settled', 'failed', 'reversed']);
    });

    it('a nullable closed set lists null too; a missing one says it is required', async () => {
      const reference = await payerReceipt();
      const res = await m.local.post(`/receipts/${reference}/transitions`, {
        to: 'failed', reason_code: 'oops',
      });
      const error = expectInvalid(res, 'reason_code');
      expect(error.message).toContain('one of null, "rail_unavailable", "rail_rejected"');
      expect(error.detail.allowed).toContain('insufficient_funds');
      const missing = expectInvalid(await m.local.post('/subjects', {}), 'subject_type');
      expect(missing.message)
        .toBe('subject_type is required: one of "natural_person", "legal_entity"');
    });
  });

  describe('item 8b, P7: a pattern mistake says the form in words, never the regex', () => {
    const noRegex = (message: string) => {
      expect(message).not.toMatch(/\^|\$|\\d|\[0-9|Expected string to match/);
    };

    it('an RFC 3339 time with an offset', async () => {
      const body = { accepts: [EUR], expires_at: '2026-11-21T12:00:00+01:00' };
      const error = expectInvalid(await m.local.post('/requests', body), 'expires_at');
      expect(error.message).toBe(
        'expires_at must be an RFC 3339 UTC time ending in Z, like "2026-11-21T12:00:00Z"',
      );
      noRegex(error.message);
    });

    it('a decimal amount with a comma', async () => {
      const amount = { value: '12,50', asset_type: 'fiat', asset_code: 'EUR' };
      const body = { accepts: [EUR], amount };
      const error = expectInvalid(await m.local.post('/requests', body), 'amount.value');
      expect(error.message).toContain('a decimal amount written as a string, like "12.50"');
      noRegex(error.message);
    });

    it('a reference of the wrong shape, and a member name', async () => {
      const instruction = await m.local.post('/instructions', { request: 'req_123', via: EUR });
      const ref = expectInvalid(instruction, 'request');
      expect(ref.message)
        .toBe('request must be a request reference: "req_" followed by 32 lowercase hex digits');
      noRegex(ref.message);
      const receipt = { issued_by: 'payee', via: EUR, payer: { member: '-bad name-' } };
      const payer = expectInvalid(await m.local.post('/receipts', receipt), 'payer.member');
      expect(payer.message)
        .toContain('a member name: 1 to 63 letters, digits, dots, dashes or underscores');
      noRegex(payer.message);
    });
  });

  describe('item 8c, P5: a Path-Timestamp not RFC 3339 UTC with Z is malformed, not stale', () => {
    const now = () => new Date();
    const lookup = { identifier_type: 'phone', identifier: visiblePhone };
    const withOffset = () => {
      // The same instant, written with a +01:00 offset: fresh, but not the form P5 asks for.
      const local = new Date(Date.now() + 3600_000).toISOString().slice(0, 19);
      return `${local}+01:00`;
    };

    it.each([
      ['an offset', withOffset],
      ['no zone', () => now().toISOString().slice(0, 19)],
      ['a space for T', () => now().toISOString().replace('T', ' ')],
      ['an HTTP date', () => now().toUTCString()],
    ])('%s -> 401 unauthenticated, reason malformed, the form in the message', async (_, make) => {
      const res = await m.local.post('/sonar/lookup', lookup, { timestamp: make() });
      expect(res.status, res.text).toBe(401);
      expect(res.json.error.code).toBe('path.auth.unauthenticated');
      expect(res.json.error.detail).toEqual({ reason: 'malformed' });
      expect(res.json.error.message).toContain('RFC 3339 UTC time ending in Z');
    });

    it('whole and fractional seconds are both accepted (P5)', async () => {
      const fractional = now().toISOString();
      const whole = fractional.replace(/\.\d+Z$/, 'Z');
      for (const timestamp of [whole, fractional, fractional.replace('Z', '123456Z')]) {
        const res = await m.local.post('/sonar/lookup', lookup, { timestamp });
        expect(res.status, `${timestamp}: ${res.text}`).toBe(200);
      }
    });

    it('a stale but well-formed timestamp is still stale', async () => {
      const timestamp = new Date(Date.now() - 3600_000).toISOString();
      const res = await m.local.post('/sonar/lookup', lookup, { timestamp });
      expect(res.json.error.detail).toEqual({ reason: 'stale' });
    });

    it('the external listener answers the same reason under its own code', async () => {
      const seed = ed.utils.randomSecretKey();
      const out = JSON.parse(runCli(['external-clients', 'add', '--data-dir', m.dataDir,
        '--client', 'psp', '--public-key', hex(ed.getPublicKey(seed)),
        '--registries', 'eu.epc.vop']));
      const external = new Client(`http://127.0.0.1:${m.node.externalPort}`, {
        keyId: out.key_id, member: 'psp', seedHex: hex(seed), publicKeyHex: '',
      });
      const body = { key_type: 'email', key: 'someone@example.org' };
      const res = await external.post('/discovery', body, { root: true, timestamp: withOffset() });
      expect(res.status, res.text).toBe(401);
      expect(res.json.error.code).toBe('external.auth.unauthenticated');
      expect(res.json.error.detail).toEqual({ reason: 'malformed' });
    });
  });

  describe('item 8e, SPEC I: discovery names checkout\'s {id} (cs_) and {reference} (chk_)', () => {
    it('the URL templates, and each one working with the handle it names', async () => {
      const configuration = await fetch(`${m.node.baseUrl}/.well-known/path-configuration`);
      const doc = await configuration.json() as any;
      const endpoints = doc.endpoints as Record<string, { method: string; url: string }>;
      expect(JSON.stringify(endpoints)).not.toContain('{handle}');
      const at = (path: string) => `${doc.base_url}${PREFIX}${path}`;
      expect(endpoints['checkout.get'])
        .toEqual({ method: 'GET', url: at('/checkout/sessions/{id}') });
      for (const move of ['attempt', 'complete', 'revoke']) {
        expect(endpoints[`checkout.${move}`])
          .toEqual({ method: 'POST', url: at(`/checkout/sessions/{reference}/${move}`) });
      }
      const request = await m.local.post('/requests', { accepts: [EUR] });
      const session = await m.local.post('/checkout/sessions', {
        request_reference: request.json.reference,
        success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/no',
      });
      expect(session.status, session.text).toBe(201);
      const path = (url: string) => new URL(url).pathname.slice(PREFIX.length);
      const { id, reference } = session.json;
      const read = await m.local.get(path(endpoints['checkout.get']!.url.replace('{id}', id)));
      expect(read.status, read.text).toBe(200);
      expect(read.json.id).toBe(session.json.id);
      const attemptUrl = endpoints['checkout.attempt']!.url.replace('{reference}', reference);
      const attempt = await m.beta.post(path(attemptUrl));
      expect(attempt.status, attempt.text).toBe(200);
      expect(attempt.json).toMatchObject({ reference: session.json.reference, attempts: 1 });
    });
  });

  describe('item 9, P17: a batch answers a key that does not normalise at its index', () => {
    const badPhone = '+44 20 7946 09999999';
    const digits = badPhone.replace(/\D/g, '');
    /** 500 items: a raw phone every 50th (on the worker's and the front end's shares), hashes
     * else, and one bad phone. */
    const items = (bad: number) => Array.from({ length: 500 }, (_, i) => {
      if (i === bad) return { identifier_type: 'phone', identifier: badPhone };
      if (i % 50 === 0) return { identifier_type: 'phone', identifier: visiblePhone };
      return { identifier_type: 'phone', identifier_hash: randomBytes(32).toString('hex') };
    });
    const expectError = (result: any, i: number) => {
      expect(result).toEqual({
        identifier_type: 'phone',
        error: {
          code: 'path.core.invalid_request', message: expect.any(String),
          detail: { field: `items.${i}.identifier` },
        },
      });
    };

    it('500 items, one bad phone: 200, 499 answers, the error at its index, 499 paid', async () => {
      const res = await m.beta.post('/sonar/lookup/batch', { items: items(7) });
      expect(res.status, res.text.slice(0, 300)).toBe(200);
      expect(res.json.count).toBe(500);
      expect(res.json.signed).toBe(false);
      expect(res.json.results).toHaveLength(500);
      expectError(res.json.results[7], 7);
      const answers = res.json.results.filter((_r: unknown, i: number) => i !== 7);
      expect(answers.every((r: any) => /^[0-9a-f]{64}$/.test(r.identifier_hash))).toBe(true);
      expect(answers.filter((r: any) => r.found)).toHaveLength(10);
      expect(res.text).not.toContain(digits);
      expect(res.text).not.toContain(badPhone);
      // P12: beta's phone allowance is 1,000 (base 1,000, no contribution); 499 were charged.
      expect(res.headers.get('ratelimit-limit')).toBe('1000');
      expect(res.headers.get('ratelimit-remaining')).toBe('501');
    });

    it('the bad key on the front end\'s share: answered the same, 499 charged again', async () => {
      const res = await m.beta.post('/sonar/lookup/batch', { items: items(420) });
      expectError(res.json.results[420], 420);
      expect(res.headers.get('ratelimit-remaining')).toBe('2');
    });

    it('a signed batch: the error unsigned at its index, every answer verifying (P2)', async () => {
      const batch = items(300).slice(250, 400);
      const res = await m.gamma.post('/sonar/lookup/batch', { items: batch, signed: true });
      expect(res.status, res.text.slice(0, 300)).toBe(200);
      expect(res.json).toMatchObject({ count: 150, signed: true });
      expectError(res.json.results[50], 50);
      const envelopes = res.json.results.filter((_r: unknown, i: number) => i !== 50);
      expect(envelopes).toHaveLength(149);
      for (const e of envelopes) {
        expect(e).toMatchObject({ kind: 'sonar_answer', requester: 'gamma' });
        expect(verifiesWith(e, m.publicKey)).toBe(true);
      }
      expect(res.headers.get('ratelimit-remaining')).toBe(String(1000 - 149));
    });

    it('a batch of bad keys only: 200, every item an error, nothing charged', async () => {
      const res = await m.gamma.post('/sonar/lookup/batch', {
        items: [
          { identifier_type: 'phone', identifier: badPhone },
          { identifier_type: 'email', identifier: 'xq7-no-at-sign' },
        ],
      });
      expect(res.status, res.text).toBe(200);
      expectError(res.json.results[0], 0);
      expect(res.json.results[1]).toMatchObject({
        identifier_type: 'email', error: { detail: { field: 'items.1.identifier' } },
      });
      expect(res.text).not.toContain('xq7-no-at-sign');
      const one = [{ identifier_type: 'phone', identifier: visiblePhone }];
      const next = await m.gamma.post('/sonar/lookup/batch', { items: one });
      expect(next.headers.get('ratelimit-remaining')).toBe(String(1000 - 149 - 1));
    });

    it('a single lookup of a key that does not normalise is still refused (400)', async () => {
      const res = await m.beta.post('/sonar/lookup', {
        identifier_type: 'phone', identifier: badPhone,
      });
      expectInvalid(res, 'identifier');
      expect(res.text).not.toContain(digits);
    });

    it('a body that is not a batch is still 400: no items, a key of two shapes', async () => {
      expectInvalid(await m.beta.post('/sonar/lookup/batch', { items: [] }), 'items');
      expectInvalid(await m.beta.post('/sonar/lookup/batch', { item: [] }), 'items');
      const both = await m.beta.post('/sonar/lookup/batch', {
        items: [{
          identifier_type: 'phone', identifier: visiblePhone,
          identifier_hash: randomBytes(32).toString('hex'),
        }],
      });
      expectInvalid(both, 'items.0.identifier');
      const fax = [{ identifier_type: 'fax', identifier: '+1' }];
      const type = await m.beta.post('/sonar/lookup/batch', { items: fax });
      expectInvalid(type, 'items.0.identifier_type');
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Item 8d: --help

describe('item 8d, P15: --help and -h print the usage and exit 0', () => {
  it.each([['--help'], ['-h']])('path-node %s: the whole usage', (flag) => {
    const r = cli([flag]);
    expect(r.status, r.stderr).toBe(0);
    for (const command of ['serve', 'credentials add', 'credentials create', 'credentials revoke',
      'keys rotate', 'external-clients add', 'external-clients revoke', 'members add',
      'members remove']) {
      expect(r.stdout).toContain(`path-node ${command} `);
    }
    expect(r.stderr).toBe('');
  });

  it.each([
    [['serve', '--help'], 'path-node serve [--port 8080]'],
    [['serve', '-h'], 'path-node serve [--port 8080]'],
    [['credentials', 'add', '--help'], 'path-node credentials add (--data-dir D | --store URL) --member NAME'],
    [['credentials', 'revoke', '-h'], 'path-node credentials revoke (--data-dir D | --store URL) --key-id ID'],
    [['keys', 'rotate', '--help'], 'path-node keys rotate (--data-dir D | --store URL)'],
    [['members', 'add', '--help', '--member', 'x'], 'path-node members add'],
  ])('path-node %j: that command\'s usage alone', (args, usage) => {
    const r = cli(args);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(usage);
    expect(r.stdout.trim().split('\n').filter((l) => l.startsWith('  path-node'))).toHaveLength(1);
  });

  it('an unknown command with --help is still an error (exit 2)', () => {
    const r = cli(['bogus', '--help']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("unknown command 'bogus'");
  });

  it('--help changes nothing: no data directory is created', () => {
    const parent = tempDir('path-messages-help');
    dirs.push(parent);
    const dir = `${parent}/never`;
    const create = ['credentials', 'create', '--data-dir', dir, '--member', 'x', '--help'];
    expect(cli(create).status).toBe(0);
    expect(existsSync(dir)).toBe(false);
  });
});

afterAll(() => {
  for (const d of dirs) removeDir(d);
});
