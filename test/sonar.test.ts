// SPEC D (lookup, batch lookup, confirm), SPEC Limits (batch cap, lookup budget, confirmation
// freshness), SPEC Errors (path.finder.budget_exhausted), P7 (status codes, confirmation_refused),
// P8 (normalised and hashed identifiers), P12 (reciprocity budget) over the real server.
// Signatures are checked with test/support/verify.ts, independently of the node's signing code.
import { randomBytes } from 'node:crypto';
import * as ed from '@noble/ed25519';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Client, createCredential, PREFIX, publishedKey, removeDir, signRequest, startNode, tempDir, type Answer, type Credential, type NodeProcess,
} from './support/harness.js';
import { canonical, verifiesWith } from './support/verify.js';
import { sleep } from './support/wait.js';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const HASH = /^[0-9a-f]{64}$/;

const dirs: string[] = [];
const randomHash = () => randomBytes(32).toString('hex');

let phoneCounter = 200;
/** A distinct valid UK number (020 7946 0xxx, the range set aside for fiction) per call. */
const nextPhone = () => `+44 20 7946 0${String(phoneCounter++).padStart(3, '0')}`;
let emailCounter = 0;
const nextEmail = () => `sonar-${process.pid}-${emailCounter++}@example.com`;

function expectError(res: Answer, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toContain('application/json');
  expect(res.json?.error?.code, res.text).toBe(code);
  expect(typeof res.json.error.message).toBe('string');
}

function expectRefusedConfirmation(res: Answer, reason: string): void {
  expectError(res, 403, 'path.sonar.confirmation_refused');
  expect(res.json.error.detail?.reason, res.text).toBe(reason);
}

/** `r` (remaining) of the IETF `RateLimit` header. */
function remainingOf(res: Answer): number {
  const header = res.headers.get('ratelimit');
  expect(header, 'RateLimit header').not.toBeNull();
  const m = /(?:^|;)\s*r=(\d+)/.exec(header!);
  expect(m, header!).not.toBeNull();
  return Number(m![1]);
}

async function newSubject(client: Client, subject_type = 'natural_person'): Promise<string> {
  const res = await client.post('/subjects', { subject_type });
  expect(res.status, res.text).toBe(201);
  return res.json.id;
}

async function register(client: Client, subject_id: string, identifier_type: string, identifier: string, discoverability?: string): Promise<void> {
  const res = await client.post('/identifiers', { subject_id, identifier_type, identifier, ...(discoverability === undefined ? {} : { discoverability }) });
  expect(res.status, res.text).toBe(201);
}

const lookup = (client: Client, body: Record<string, unknown>) => client.post('/sonar/lookup', body);
const batch = (client: Client, items: unknown[], signed?: boolean) => client.post('/sonar/lookup/batch', signed === undefined ? { items } : { items, signed });
const confirm = (client: Client, sonar_answer: unknown) => client.post('/sonar/confirm', { sonar_answer });

async function discovery(baseUrl: string): Promise<any> {
  return (await fetch(`${baseUrl}/.well-known/path-configuration`)).json();
}

// =============================================================================================
// Main node: a budget large enough never to interfere.

describe('SPEC D lookup, batch and confirm (main node)', () => {
  let node: NodeProcess;
  let local: Client;
  let beta: Client;
  let anon: Client;
  let publicKey: string;
  let kid: string;
  let baseUrl: string;
  let subject: string;
  const visiblePhone = nextPhone();
  const privatePhone = nextPhone();
  const absentPhone = nextPhone();
  const visibleEmail = nextEmail();

  beforeAll(async () => {
    const dataDir = tempDir('path-sonar');
    dirs.push(dataDir);
    const own = createCredential(dataDir, 'local', { local: true });
    const b = createCredential(dataDir, 'beta', { local: false });
    node = await startNode({ dataDir, args: ['--lookup-budget-base', '1000000'] });
    local = new Client(node.baseUrl, own);
    beta = new Client(node.baseUrl, b);
    anon = new Client(node.baseUrl);
    publicKey = await publishedKey(node.baseUrl);
    const keys = await (await fetch(`${node.baseUrl}/.well-known/path-keys`)).json() as { keys: { kid: string; status: string }[] };
    kid = keys.keys.find((k) => k.status === 'active')!.kid;
    baseUrl = (await discovery(node.baseUrl)).base_url;
    subject = await newSubject(local);
    await register(local, subject, 'phone', visiblePhone, 'network');
    await register(local, subject, 'phone', privatePhone, 'private');
    await register(local, subject, 'email', visibleEmail, 'public');
  });

  afterAll(async () => {
    await node?.stop();
  });

  describe('POST /sonar/lookup', () => {
    it('a visible key: 200 signed sonar_answer {found true, member = holder, endpoint}, requester = caller, nonce bound, verifying against the published key (SPEC D, principle 1)', async () => {
      const res = await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone, nonce: 'n-visible-1' });
      expect(res.status, res.text).toBe(200);
      const a = res.json;
      expect(a).toMatchObject({
        kind: 'sonar_answer', identifier_type: 'phone', requester: 'beta', nonce: 'n-visible-1', found: true, member: 'local', kid,
      });
      expect(a.identifier_hash).toMatch(HASH);
      expect(typeof a.endpoint).toBe('string');
      expect(a.endpoint.startsWith(baseUrl)).toBe(true);
      expect(a.signed_at).toMatch(RFC3339);
      expect(verifiesWith(a, publicKey)).toBe(true);
      // The nonce is inside the signature: another nonce does not verify.
      expect(verifiesWith({ ...a, nonce: 'n-visible-2' }, publicKey)).toBe(false);
      expect(verifiesWith({ ...a, requester: 'gamma' }, publicKey)).toBe(false);
      // The clear identifier is hashed and gone (principle 4).
      expect(res.text).not.toContain(visiblePhone.replace(/[^0-9]/g, ''));
    });

    it('the answer carries the full signed envelope: grammar 2, protocol_version 0.2.0, signed_at, kid (SPEC shared types, P10)', async () => {
      const res = await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone, nonce: 'n-envelope' });
      expect(res.status, res.text).toBe(200);
      expect(res.json.grammar).toBe(2);
      expect(res.json.protocol_version).toBe('0.2.0');
      expect(res.json.kid).toBe(kid);
      expect(res.headers.get('path-protocol-version')).toBe('0.2.0');
    });

    it('a lookup by the raw identifier and by the identifier_hash it answered agree (P8)', async () => {
      const byRaw = await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone });
      expect(byRaw.status, byRaw.text).toBe(200);
      const byHash = await lookup(beta, { identifier_type: 'phone', identifier_hash: byRaw.json.identifier_hash });
      expect(byHash.status, byHash.text).toBe(200);
      expect(byHash.json.identifier_hash).toBe(byRaw.json.identifier_hash);
      expect([byHash.json.found, byHash.json.member, byHash.json.endpoint]).toEqual([true, 'local', byRaw.json.endpoint]);
      expect(verifiesWith(byHash.json, publicKey)).toBe(true);
    });

    it('differently formatted forms of one phone number give one hash (P8 E.164 normalisation); another number another hash', async () => {
      const digits = visiblePhone.replace(/[^0-9+]/g, ''); // +44207946....
      const forms = [visiblePhone, digits, `  ${digits}  `, `+44 (20) ${digits.slice(5, 9)}-${digits.slice(9)}`, `+44.20.${digits.slice(5, 9)}.${digits.slice(9)}`];
      const hashes = new Set<string>();
      for (const identifier of forms) {
        const res = await lookup(beta, { identifier_type: 'phone', identifier });
        expect(res.status, `${identifier}: ${res.text}`).toBe(200);
        expect(res.json.found).toBe(true);
        hashes.add(res.json.identifier_hash);
      }
      expect(hashes.size).toBe(1);
      const other = await lookup(beta, { identifier_type: 'phone', identifier: absentPhone });
      expect(other.json.identifier_hash).not.toBe([...hashes][0]);
    });

    it('an email is trimmed and lower-cased before hashing (P8)', async () => {
      const a = await lookup(beta, { identifier_type: 'email', identifier: visibleEmail });
      const b = await lookup(beta, { identifier_type: 'email', identifier: `  ${visibleEmail.toUpperCase()} ` });
      expect(a.status, a.text).toBe(200);
      expect(b.status, b.text).toBe(200);
      expect(a.json.found).toBe(true);
      expect(b.json.identifier_hash).toBe(a.json.identifier_hash);
      expect(b.json.found).toBe(true);
    });

    it('exactly one of identifier or identifier_hash: both -> 400, neither -> 400, the field named (SPEC D, P7)', async () => {
      const both = await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone, identifier_hash: randomHash() });
      expectError(both, 400, 'path.core.invalid_request');
      expect(both.json.error.detail?.field).toMatch(/identifier/);
      const neither = await lookup(beta, { identifier_type: 'phone', nonce: 'x' });
      expectError(neither, 400, 'path.core.invalid_request');
      expect(neither.json.error.detail?.field).toMatch(/identifier/);
    });

    it('malformed input -> 400 naming the field: an invalid phone, a hash that is not 64 lowercase hex, an unknown type (P7, P8)', async () => {
      const phone = await lookup(beta, { identifier_type: 'phone', identifier: '07946 0123' });
      expectError(phone, 400, 'path.core.invalid_request');
      expect(phone.json.error.detail?.field).toBe('identifier');
      expect(phone.text).not.toContain('07946');
      const hash = await lookup(beta, { identifier_type: 'phone', identifier_hash: randomHash().toUpperCase() });
      expectError(hash, 400, 'path.core.invalid_request');
      expect(hash.json.error.detail?.field).toBe('identifier_hash');
      const type = await lookup(beta, { identifier_type: 'passport', identifier: 'X123' });
      expectError(type, 400, 'path.core.invalid_request');
      expect(type.json.error.detail?.field).toBe('identifier_type');
    });

    it('needs a member credential: 401 without one (SPEC D)', async () => {
      expectError(await lookup(anon, { identifier_type: 'phone', identifier: visiblePhone }), 401, 'path.auth.unauthenticated');
      expectError(await batch(anon, [{ identifier_type: 'phone', identifier: visiblePhone }]), 401, 'path.auth.unauthenticated');
    });

    it('a private key and an absent key answer identically: status, shape, byte length; found false, member null, endpoint null (SPEC D negatives)', async () => {
      const nonce = 'n-negative-0001';
      const hidden = await lookup(beta, { identifier_type: 'phone', identifier: privatePhone, nonce });
      const absent = await lookup(beta, { identifier_type: 'phone', identifier: absentPhone, nonce });
      expect(hidden.status, hidden.text).toBe(200);
      expect(absent.status).toBe(hidden.status);
      expect(Buffer.byteLength(absent.text)).toBe(Buffer.byteLength(hidden.text));
      expect(Object.keys(absent.json)).toEqual(Object.keys(hidden.json));
      for (const a of [hidden.json, absent.json]) {
        expect(a).toMatchObject({ kind: 'sonar_answer', found: false, member: null, endpoint: null, requester: 'beta', nonce });
        expect(verifiesWith(a, publicKey)).toBe(true);
      }
      const strip = ({ identifier_hash: _h, signature: _s, signed_at: _t, ...rest }: Record<string, unknown>) => rest;
      expect(strip(absent.json)).toEqual(strip(hidden.json));
      expect(absent.headers.get('content-type')).toBe(hidden.headers.get('content-type'));
      // The same by hash.
      const hiddenByHash = await lookup(beta, { identifier_type: 'phone', identifier_hash: hidden.json.identifier_hash, nonce });
      const absentByHash = await lookup(beta, { identifier_type: 'phone', identifier_hash: randomHash(), nonce });
      expect(hiddenByHash.status).toBe(absentByHash.status);
      expect(Buffer.byteLength(hiddenByHash.text)).toBe(Buffer.byteLength(absentByHash.text));
      expect(strip(hiddenByHash.json)).toEqual(strip(absentByHash.json));
    });

    it('a withdrawn subject\'s identifiers are no longer found (SPEC B withdraw, SPEC D)', async () => {
      const s = await newSubject(local);
      const phone = nextPhone();
      const email = nextEmail();
      await register(local, s, 'phone', phone, 'public');
      await register(local, s, 'email', email);
      expect((await lookup(beta, { identifier_type: 'phone', identifier: phone })).json.found).toBe(true);
      expect((await lookup(beta, { identifier_type: 'email', identifier: email })).json.found).toBe(true);
      const w = await local.post(`/subjects/${s}/withdraw`);
      expect(w.status, w.text).toBe(200);
      expect(w.json.withdrawn).toBe(true);
      const nonce = 'n-withdrawn-01';
      const gone = await lookup(beta, { identifier_type: 'phone', identifier: phone, nonce });
      expect(gone.status).toBe(200);
      expect(gone.json).toMatchObject({ found: false, member: null, endpoint: null });
      const absent = await lookup(beta, { identifier_type: 'phone', identifier: nextPhone(), nonce });
      expect(Buffer.byteLength(gone.text)).toBe(Buffer.byteLength(absent.text));
      expect((await lookup(beta, { identifier_type: 'email', identifier: email })).json.found).toBe(false);
    });

    it('`directory` addresses are found by identifier_type address; `relationship` addresses are not (SPEC C, D)', async () => {
      const s = await newSubject(local);
      const dir = await local.post('/addresses', { subject_id: s, profile: 'directory', discoverability: 'network' });
      expect(dir.status, dir.text).toBe(201);
      const rel = await local.post('/addresses', { subject_id: s, profile: 'relationship' });
      expect(rel.status, rel.text).toBe(201);
      const found = await lookup(beta, { identifier_type: 'address', identifier: dir.json.address, nonce: 'n-addr' });
      expect(found.status, found.text).toBe(200);
      expect(found.json).toMatchObject({ kind: 'sonar_answer', identifier_type: 'address', found: true, member: 'local' });
      expect(found.json.endpoint.startsWith(baseUrl)).toBe(true);
      expect(verifiesWith(found.json, publicKey)).toBe(true);
      const hidden = await lookup(beta, { identifier_type: 'address', identifier: rel.json.address, nonce: 'n-addr' });
      expect(hidden.status).toBe(200);
      expect(hidden.json).toMatchObject({ found: false, member: null, endpoint: null });
    });
  });

  describe('POST /sonar/lookup/batch', () => {
    it('signed:false (the default) answers exactly {count, signed:false, results:[{identifier_type, identifier_hash, found, member, endpoint}]} in item order, unsigned', async () => {
      const single = await lookup(beta, { identifier_type: 'phone', identifier: privatePhone });
      const items = [
        { identifier_type: 'phone', identifier: visiblePhone },
        { identifier_type: 'phone', identifier_hash: single.json.identifier_hash },
        { identifier_type: 'email', identifier: visibleEmail },
        { identifier_type: 'phone', identifier_hash: randomHash() },
      ];
      const res = await batch(beta, items);
      expect(res.status, res.text).toBe(200);
      expect(Object.keys(res.json).sort()).toEqual(['count', 'results', 'signed']);
      expect(res.json.count).toBe(4);
      expect(res.json.signed).toBe(false);
      expect(res.json.results).toHaveLength(4);
      for (const r of res.json.results) {
        expect(Object.keys(r).sort()).toEqual(['endpoint', 'found', 'identifier_hash', 'identifier_type', 'member']);
        expect(r.identifier_hash).toMatch(HASH);
      }
      expect(res.json.results.map((r: any) => [r.identifier_type, r.found, r.member])).toEqual([
        ['phone', true, 'local'], ['phone', false, null], ['email', true, 'local'], ['phone', false, null],
      ]);
      expect(res.json.results[1].identifier_hash).toBe(single.json.identifier_hash);
      expect(res.json.results[3].identifier_hash).toBe(items[3]!.identifier_hash);
      expect(res.json.results[1].endpoint).toBeNull();
      expect(res.text).not.toContain('"signature"');
      expect(res.text).not.toContain('"kid"');
      expect(res.text).not.toContain(visiblePhone.replace(/[^0-9]/g, ''));
      expect(res.text).not.toContain(visibleEmail);
      // Explicit signed:false is the same shape.
      const explicit = await batch(beta, items.slice(0, 1), false);
      expect(explicit.status).toBe(200);
      expect(explicit.json.signed).toBe(false);
      expect(explicit.json.results[0]).toEqual(res.json.results[0]);
    });

    it('an unsigned batch result cannot be confirmed (SPEC D)', async () => {
      const res = await batch(beta, [{ identifier_type: 'phone', identifier: visiblePhone }]);
      expect(res.status).toBe(200);
      const c = await confirm(anon, res.json.results[0]);
      expect(c.status, c.text).toBe(403);
      expect(c.json.error.code).toBe('path.sonar.confirmation_refused');
    });

    it('signed:true answers one signed envelope per key, shaped like a single lookup answer, each confirmable (SPEC D)', async () => {
      const dir = await local.post('/addresses', { subject_id: subject, profile: 'directory' });
      expect(dir.status, dir.text).toBe(201);
      const items = [
        { identifier_type: 'phone', identifier: visiblePhone },
        { identifier_type: 'phone', identifier: privatePhone },
        { identifier_type: 'email', identifier_hash: randomHash() },
        { identifier_type: 'address', identifier: dir.json.address },
      ];
      const res = await batch(beta, items, true);
      expect(res.status, res.text).toBe(200);
      expect(res.headers.get('path-protocol-version')).toBe('0.2.0');
      const envelopes: any[] = res.json.results;
      expect(envelopes).toHaveLength(4);
      const single = await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone });
      for (const e of envelopes) {
        expect(e.kind).toBe('sonar_answer');
        expect(e.requester).toBe('beta');
        expect(e.kid).toBe(kid);
        expect(Object.keys(e).sort()).toEqual(Object.keys(single.json).sort());
        expect(verifiesWith(e, publicKey)).toBe(true);
      }
      expect(envelopes.map((e) => [e.identifier_type, e.found, e.member])).toEqual([
        ['phone', true, 'local'], ['phone', false, null], ['email', false, null], ['address', true, 'local'],
      ]);
      for (const e of [envelopes[0], envelopes[3]]) {
        const c = await confirm(anon, e);
        expect(c.status, c.text).toBe(200);
        expect(c.json).toMatchObject({ kind: 'holder_confirmation', identifier_hash: e.identifier_hash, requester: 'beta', held: true });
        expect(verifiesWith(c.json, publicKey)).toBe(true);
      }
      expectRefusedConfirmation(await confirm(anon, envelopes[1]), 'wrong_holder');
    });

    it('500 items are served; 501 -> 400; 0 -> 400 (SPEC Limits, P12)', async () => {
      const items = Array.from({ length: 500 }, (_, i) => (i % 100 === 0
        ? { identifier_type: 'phone', identifier: visiblePhone }
        : { identifier_type: 'phone', identifier_hash: randomHash() }));
      const ok = await batch(beta, items);
      expect(ok.status, ok.text.slice(0, 300)).toBe(200);
      expect(ok.json.count).toBe(500);
      expect(ok.json.results).toHaveLength(500);
      expect(ok.json.results.filter((r: any) => r.found).length).toBe(5);
      const over = await batch(beta, [...items, { identifier_type: 'phone', identifier_hash: randomHash() }]);
      expectError(over, 400, 'path.core.invalid_request');
      expect(over.json.error.detail?.field).toBe('items');
      const empty = await batch(beta, []);
      expectError(empty, 400, 'path.core.invalid_request');
      expect(empty.json.error.detail?.field).toBe('items');
    });

    // P17: an item that does not normalise is answered at its index, naming its field; the
    // clear value is not echoed (P7, P8).
    it('an item that does not normalise -> an error at its index, items.N.identifier', async () => {
      const res = await batch(beta, [
        { identifier_type: 'phone', identifier: visiblePhone },
        { identifier_type: 'email', identifier: visibleEmail },
        { identifier_type: 'phone', identifier: '+44 20 79 not-a-number' },
      ]);
      expect(res.status, res.text).toBe(200);
      expect(res.json.results[2]).toEqual({
        identifier_type: 'phone',
        error: {
          code: 'path.core.invalid_request', message: expect.any(String),
          detail: { field: 'items.2.identifier' },
        },
      });
      expect(res.json.results.slice(0, 2).map((r: any) => r.found)).toEqual([true, true]);
      expect(res.text).not.toContain('not-a-number');
      // A key of the wrong shape is not a key at all: the body is not a batch, 400 (P17).
      const both = await batch(beta, [{ identifier_type: 'phone', identifier: visiblePhone, identifier_hash: randomHash() }]);
      expectError(both, 400, 'path.core.invalid_request');
      expect(both.json.error.detail?.field).toMatch(/^items\.0\.identifier/);
    });
    // The answer is written from fragments and a usual body read by a scanner fitted to it: the
    // bytes must be those the route wrote before (JSON of the result objects), whichever reader
    // took the body, and negatives of both kinds must look alike (SPEC D, P17).
    it('an unsigned batch answers byte for byte the JSON of its results, by either reader', async () => {
      const visible = (await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone })).json;
      const hidden = (await lookup(beta, { identifier_type: 'phone', identifier: privatePhone })).json;
      const email = (await lookup(beta, { identifier_type: 'email', identifier: visibleEmail })).json;
      const bad = '+44 20 79 not-a-number';
      const badError = (await lookup(beta, { identifier_type: 'phone', identifier: bad })).json.error;
      const absent = randomHash();
      const items = [
        { identifier_type: 'phone', identifier_hash: visible.identifier_hash },
        { identifier_type: 'phone', identifier_hash: hidden.identifier_hash },
        { identifier_type: 'phone', identifier_hash: absent },
        { identifier_type: 'email', identifier: visibleEmail },
        { identifier_type: 'phone', identifier: bad },
        { identifier_type: 'email', identifier_hash: visible.identifier_hash },
      ];
      const answer = (type: string, hash: string, holder: { member: string; endpoint: string } | null) => ({
        identifier_type: type, identifier_hash: hash, found: holder !== null, member: holder?.member ?? null, endpoint: holder?.endpoint ?? null,
      });
      const expected = JSON.stringify({
        count: 6,
        signed: false,
        results: [
          answer('phone', visible.identifier_hash, visible),
          answer('phone', hidden.identifier_hash, null),
          answer('phone', absent, null),
          answer('email', email.identifier_hash, email),
          { identifier_type: 'phone', error: { ...badError, detail: { field: 'items.4.identifier' } } },
          answer('email', visible.identifier_hash, null),
        ],
      });
      const usual = await batch(beta, items);
      expect(usual.status, usual.text).toBe(200);
      expect(usual.text).toBe(expected);
      // The same batch with an escaped name and an extra member: the strict reader's path.
      const strictBody = JSON.stringify({ items, extra: null }).replace('"identifier_hash"', '"identifier\\u005fhash"');
      const strict = await beta.request('POST', '/sonar/lookup/batch', { rawBody: strictBody });
      expect(strict.status, strict.text).toBe(200);
      expect(strict.text).toBe(expected);
      // A duplicate member is still refused whole by the strict reader (P2).
      const twice = `{"items":[{"identifier_type":"phone","identifier_hash":"${absent}","identifier_hash":"${absent}"}]}`;
      expectError(await beta.request('POST', '/sonar/lookup/batch', { rawBody: twice }), 400, 'path.core.invalid_request');
    });
  });

  describe('POST /sonar/confirm', () => {
    it('a fresh answer naming this node: 200 signed holder_confirmation {kind, identifier_type, identifier_hash, member, requester, nonce, held:true}, no credential needed', async () => {
      const answer = (await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone, nonce: 'n-confirm-1' })).json;
      const res = await confirm(anon, answer);
      expect(res.status, res.text).toBe(200);
      const c = res.json;
      expect(c).toMatchObject({
        kind: 'holder_confirmation', identifier_type: 'phone', identifier_hash: answer.identifier_hash,
        member: 'local', requester: 'beta', nonce: 'n-confirm-1', held: true, kid,
      });
      expect(c.signed_at).toMatch(RFC3339);
      expect(verifiesWith(c, publicKey)).toBe(true);
      expect(verifiesWith({ ...c, requester: 'local' }, publicKey)).toBe(false);
      expect(verifiesWith({ ...c, nonce: 'n-confirm-2' }, publicKey)).toBe(false);
    });

    it('the confirmation carries the full signed envelope: grammar 2, protocol_version 0.2.0 (SPEC shared types)', async () => {
      const answer = (await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone, nonce: 'n-confirm-env' })).json;
      const res = await confirm(anon, answer);
      expect(res.status, res.text).toBe(200);
      expect(res.json.grammar).toBe(2);
      expect(res.json.protocol_version).toBe('0.2.0');
    });

    it('a tampered answer -> 403 path.sonar.confirmation_refused, reason invalid_signature (P7)', async () => {
      const answer = (await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone, nonce: 'n-tamper' })).json;
      expectRefusedConfirmation(await confirm(anon, { ...answer, requester: 'gamma' }), 'invalid_signature');
      expectRefusedConfirmation(await confirm(anon, { ...answer, nonce: 'n-tamper-2' }), 'invalid_signature');
      const flipped = answer.signature.slice(0, 10) + (answer.signature[10] === '0' ? '1' : '0') + answer.signature.slice(11);
      expectRefusedConfirmation(await confirm(anon, { ...answer, signature: flipped }), 'invalid_signature');
    });

    it('a found:false answer (validly signed) -> 403 reason wrong_holder (SPEC D "name this member as holder")', async () => {
      const answer = (await lookup(beta, { identifier_type: 'phone', identifier: absentPhone, nonce: 'n-absent' })).json;
      expect(verifiesWith(answer, publicKey)).toBe(true);
      expectRefusedConfirmation(await confirm(anon, answer), 'wrong_holder');
      const hidden = (await lookup(beta, { identifier_type: 'phone', identifier: privatePhone, nonce: 'n-absent' })).json;
      expectRefusedConfirmation(await confirm(anon, hidden), 'wrong_holder');
    });

    it('malformed input -> 403 reason malformed; no sonar_answer at all -> 400 (P7)', async () => {
      expectRefusedConfirmation(await confirm(anon, { hello: 'world' }), 'malformed');
      const answer = (await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone })).json;
      const { kind: _k, ...noKind } = answer;
      expectRefusedConfirmation(await confirm(anon, noKind), 'malformed');
      const missing = await anon.post('/sonar/confirm', {});
      expectError(missing, 400, 'path.core.invalid_request');
      expect(missing.json.error.detail?.field).toBe('sonar_answer');
    });

    it('an answer signed under a kid this node never published -> 403 reason unknown_key', async () => {
      const answer = (await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone, nonce: 'n-forged' })).json;
      const seed = randomBytes(32);
      const forgedKid = `ed25519-${randomBytes(16).toString('hex')}`;
      const { signature: _s, ...rest } = answer;
      const unsigned = { ...rest, kid: forgedKid };
      const signature = Buffer.from(ed.sign(Buffer.from(canonical(unsigned), 'utf8'), seed)).toString('hex');
      const forged = { ...unsigned, signature };
      expect(verifiesWith(forged, Buffer.from(ed.getPublicKey(seed)).toString('hex'))).toBe(true);
      expectRefusedConfirmation(await confirm(anon, forged), 'unknown_key');
    });
  });

  describe('discovery', () => {
    it('publishes lookup_journal_retention_days (a positive integer) and the sonar endpoints; no `finder` endpoint is invented (SPEC A, D, P4)', async () => {
      const doc = await discovery(node.baseUrl);
      expect(Number.isInteger(doc.lookup_journal_retention_days)).toBe(true);
      expect(doc.lookup_journal_retention_days).toBeGreaterThan(0);
      const urls = Object.values(doc.endpoints as Record<string, { method: string; url: string }>);
      expect(urls).toContainEqual({ method: 'POST', url: `${baseUrl}${PREFIX}/sonar/lookup` });
      expect(urls).toContainEqual({ method: 'POST', url: `${baseUrl}${PREFIX}/sonar/lookup/batch` });
      expect(urls).toContainEqual({ method: 'POST', url: `${baseUrl}${PREFIX}/sonar/confirm` });
      expect(JSON.stringify(doc.endpoints)).not.toContain('finder');
    });
  });

  describe('timing (SPEC D: negatives indistinguishable in timing)', () => {
    it('lookups of a private key and of absent keys: Welch |t| < 4.5 over 2400 interleaved samples; identical status and body length', async () => {
      const hiddenHash = (await lookup(beta, { identifier_type: 'phone', identifier: privatePhone })).json.identifier_hash as string;
      const nonce = 'timing-nonce-0123456789';
      const credential = beta.credential as Credential;
      const target = `${PREFIX}/sonar/lookup`;
      const a: number[] = [];
      const b: number[] = [];
      const statuses = new Set<number>();
      const lengths = new Set<number>();
      const total = 2400;
      const started = Date.now();
      for (let i = 0; i < total; i++) {
        const hidden = i % 2 === 0;
        const body = Buffer.from(JSON.stringify({ identifier_type: 'phone', identifier_hash: hidden ? hiddenHash : randomHash(), nonce }));
        const headers = { 'content-type': 'application/json', ...signRequest(credential, { method: 'POST', target, timestamp: new Date().toISOString(), body }) };
        const t0 = process.hrtime.bigint();
        const res = await fetch(node.baseUrl + target, { method: 'POST', headers, body });
        const text = await res.text();
        const elapsed = Number(process.hrtime.bigint() - t0);
        if (i >= 100) {
          (hidden ? a : b).push(elapsed);
          statuses.add(res.status);
          lengths.add(Buffer.byteLength(text));
        }
      }
      expect(Date.now() - started).toBeLessThan(55_000);
      expect([...statuses]).toEqual([200]);
      expect(lengths.size).toBe(1);
      const mean = (x: number[]) => x.reduce((s, v) => s + v, 0) / x.length;
      const variance = (x: number[], m: number) => x.reduce((s, v) => s + (v - m) ** 2, 0) / (x.length - 1);
      const ma = mean(a);
      const mb = mean(b);
      const t = (ma - mb) / Math.sqrt(variance(a, ma) / a.length + variance(b, mb) / b.length);
      expect(a.length + b.length).toBeGreaterThanOrEqual(2000);
      expect(Math.abs(t), `Welch t = ${t.toFixed(3)} (private mean ${(ma / 1e6).toFixed(3)} ms, absent mean ${(mb / 1e6).toFixed(3)} ms)`).toBeLessThan(4.5);
    }, 60_000);
  });
});

// =============================================================================================
// Budget node: base 5, factor 0, so that every member's allowance is 5 per type and month.

describe('P12 lookup budget (--lookup-budget-base 5 --lookup-budget-factor 0)', () => {
  let node: NodeProcess;
  let dataDir: string;
  const creds: Record<string, Credential> = {};
  const clients: Record<string, Client> = {};
  const args = ['--lookup-budget-base', '5', '--lookup-budget-factor', '0'];
  const env = { PATH_LIMIT_LOOKUP_JOURNAL_RETENTION_DAYS: '30' };
  const visiblePhone = nextPhone();
  const connect = (n: NodeProcess) => { for (const [m, c] of Object.entries(creds)) clients[m] = new Client(n.baseUrl, c); };

  beforeAll(async () => {
    dataDir = tempDir('path-sonar-budget');
    dirs.push(dataDir);
    creds.local = createCredential(dataDir, 'local', { local: true });
    for (const m of ['beta', 'gamma', 'neg', 'pos']) creds[m] = createCredential(dataDir, m, { local: false });
    node = await startNode({ dataDir, args, env });
    connect(node);
    const s = await newSubject(clients.local!);
    await register(clients.local!, s, 'phone', visiblePhone, 'network');
  });

  afterAll(async () => {
    await node?.stop();
  });

  it('the 6th phone lookup in the month answers 429 path.finder.budget_exhausted {allowance 5, window calendar_month}; RateLimit remaining counts down; email has its own budget', async () => {
    const beta = clients.beta!;
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await lookup(beta, i % 2 === 0 ? { identifier_type: 'phone', identifier_hash: randomHash() } : { identifier_type: 'phone', identifier: visiblePhone });
      expect(res.status, res.text).toBe(200);
      expect(res.headers.get('ratelimit-policy')).not.toBeNull();
      remaining.push(remainingOf(res));
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);
    const sixth = await lookup(beta, { identifier_type: 'phone', identifier: visiblePhone });
    expectError(sixth, 429, 'path.finder.budget_exhausted');
    expect(sixth.json.error.detail?.allowance).toBe(5);
    expect(sixth.json.error.detail?.window).toBe('calendar_month');
    expect(remainingOf(sixth)).toBe(0);
    // The batch route shares the budget.
    expectError(await batch(beta, [{ identifier_type: 'phone', identifier_hash: randomHash() }]), 429, 'path.finder.budget_exhausted');
    // Email is its own budget.
    const email = await lookup(beta, { identifier_type: 'email', identifier: nextEmail() });
    expect(email.status, email.text).toBe(200);
    expect(remainingOf(email)).toBe(4);
  });

  it('negatives are charged like positives: 5 negatives and 5 positives both exhaust the allowance (P12)', async () => {
    for (let i = 0; i < 5; i++) {
      const neg = await lookup(clients.neg!, { identifier_type: 'phone', identifier_hash: randomHash() });
      expect(neg.status, neg.text).toBe(200);
      expect(neg.json.found).toBe(false);
      const pos = await lookup(clients.pos!, { identifier_type: 'phone', identifier: visiblePhone });
      expect(pos.status, pos.text).toBe(200);
      expect(pos.json.found).toBe(true);
      expect(remainingOf(neg)).toBe(remainingOf(pos));
    }
    for (const m of ['neg', 'pos']) {
      const res = await lookup(clients[m]!, { identifier_type: 'phone', identifier: visiblePhone });
      expectError(res, 429, 'path.finder.budget_exhausted');
      expect(res.json.error.detail?.allowance).toBe(5);
    }
  });

  it('a batch larger than what is left is refused whole and charges nothing (SPEC D "charged per key", P12)', async () => {
    const gamma = clients.gamma!;
    for (let i = 0; i < 3; i++) expect((await lookup(gamma, { identifier_type: 'phone', identifier_hash: randomHash() })).status).toBe(200);
    const items = (n: number) => Array.from({ length: n }, () => ({ identifier_type: 'phone', identifier_hash: randomHash() }));
    const tooMany = await batch(gamma, items(3), true);
    expectError(tooMany, 429, 'path.finder.budget_exhausted');
    expect(tooMany.json.error.detail?.allowance).toBe(5);
    expect(tooMany.json.error.detail?.window).toBe('calendar_month');
    // Nothing of the refused batch was charged: the 2 left are still there, for a batch of 2.
    const fits = await batch(gamma, items(2));
    expect(fits.status, fits.text).toBe(200);
    expect(fits.json.count).toBe(2);
    expect(remainingOf(fits)).toBe(0);
    expectError(await lookup(gamma, { identifier_type: 'phone', identifier_hash: randomHash() }), 429, 'path.finder.budget_exhausted');
  });

  it('the batch is charged per key, not per call: a batch of 5 spends the whole allowance', async () => {
    const local = clients.local!;
    const res = await batch(local, Array.from({ length: 5 }, () => ({ identifier_type: 'bank_account', identifier_hash: randomHash() })));
    expect(res.status, res.text).toBe(200);
    expect(remainingOf(res)).toBe(0);
    expectError(await lookup(local, { identifier_type: 'bank_account', identifier_hash: randomHash() }), 429, 'path.finder.budget_exhausted');
  });

  it('discovery publishes the configured lookup_journal_retention_days (30 here)', async () => {
    expect((await discovery(node.baseUrl)).lookup_journal_retention_days).toBe(30);
  });

  it('spent budget survives a restart: stop, start on the same data directory, still exhausted (P12, P14)', async () => {
    expect(await node.stop()).toBe(0);
    node = await startNode({ dataDir, args, env });
    connect(node);
    const res = await lookup(clients.beta!, { identifier_type: 'phone', identifier: visiblePhone });
    expectError(res, 429, 'path.finder.budget_exhausted');
    expect(res.json.error.detail?.allowance).toBe(5);
    // Beta's email budget kept its one spent lookup.
    const email = await lookup(clients.beta!, { identifier_type: 'email', identifier_hash: randomHash() });
    expect(email.status, email.text).toBe(200);
    expect(remainingOf(email)).toBe(3);
  });
});

// =============================================================================================
// Factor node: base 5, factor 10; confirmation freshness shortened to 1.5 s.

describe('P12 reciprocity factor and confirmation freshness (--lookup-budget-base 5 --lookup-budget-factor 10)', () => {
  let node: NodeProcess;
  let local: Client;
  let beta: Client;
  let anon: Client;
  let publicKey: string;

  beforeAll(async () => {
    const dataDir = tempDir('path-sonar-factor');
    dirs.push(dataDir);
    const own = createCredential(dataDir, 'local', { local: true });
    const b = createCredential(dataDir, 'beta', { local: false });
    node = await startNode({ dataDir, args: ['--lookup-budget-base', '5', '--lookup-budget-factor', '10'], env: { PATH_LIMIT_LOOKUP_CONFIRM_FRESHNESS_MS: '1500' } });
    local = new Client(node.baseUrl, own);
    beta = new Client(node.baseUrl, b);
    anon = new Client(node.baseUrl);
    publicKey = await publishedKey(node.baseUrl);
  });

  afterAll(async () => {
    await node?.stop();
  });

  const taxItems = (n: number) => Array.from({ length: n }, () => ({ identifier_type: 'tax', identifier_hash: randomHash() }));

  it('the local member\'s allowance is base + factor x its visible entries of the type; private entries and other members do not grow it', async () => {
    // Nothing contributed yet: 5.
    expect((await batch(local, taxItems(5))).status).toBe(200);
    const first = await lookup(local, { identifier_type: 'tax', identifier_hash: randomHash() });
    expectError(first, 429, 'path.finder.budget_exhausted');
    expect(first.json.error.detail?.allowance).toBe(5);

    // Two visible tax entries (public by default) held by this node: 5 + 10 x 2 = 25.
    const s = await newSubject(local, 'legal_entity');
    await register(local, s, 'tax', 'tax:GB:100000001');
    await register(local, s, 'tax', 'tax:GB:100000002', 'network');
    const grown = await lookup(local, { identifier_type: 'tax', identifier_hash: randomHash() });
    expect(grown.status, grown.text).toBe(200);
    expect(remainingOf(grown)).toBe(25 - 6);
    expect((await batch(local, taxItems(19))).status).toBe(200);
    const spent = await lookup(local, { identifier_type: 'tax', identifier_hash: randomHash() });
    expectError(spent, 429, 'path.finder.budget_exhausted');
    expect(spent.json.error.detail?.allowance).toBe(25);

    // A private entry is not a contribution.
    await register(local, s, 'tax', 'tax:GB:100000003', 'private');
    const still = await lookup(local, { identifier_type: 'tax', identifier_hash: randomHash() });
    expectError(still, 429, 'path.finder.budget_exhausted');
    expect(still.json.error.detail?.allowance).toBe(25);

    // Beta contributes nothing to this index: its allowance stays at the base.
    expect((await batch(beta, taxItems(5))).status).toBe(200);
    const betaSpent = await lookup(beta, { identifier_type: 'tax', identifier_hash: randomHash() });
    expectError(betaSpent, 429, 'path.finder.budget_exhausted');
    expect(betaSpent.json.error.detail?.allowance).toBe(5);

    // The contribution is per type: phone is still at the base for local.
    expect((await batch(local, Array.from({ length: 5 }, () => ({ identifier_type: 'phone', identifier_hash: randomHash() })))).status).toBe(200);
    const phone = await lookup(local, { identifier_type: 'phone', identifier_hash: randomHash() });
    expectError(phone, 429, 'path.finder.budget_exhausted');
    expect(phone.json.error.detail?.allowance).toBe(5);
  });

  it('an answer older than the confirmation freshness (here 1.5 s; 5 minutes by default) -> 403 reason stale; fresh it confirms (SPEC D, Limits)', async () => {
    const s = await newSubject(local);
    const phone = nextPhone();
    await register(local, s, 'phone', phone);
    const answer = (await lookup(beta, { identifier_type: 'phone', identifier: phone, nonce: 'n-stale' })).json;
    expect(answer.found).toBe(true);
    const fresh = await confirm(anon, answer);
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.json.held).toBe(true);
    expect(verifiesWith(fresh.json, publicKey)).toBe(true);
    await sleep(2000);
    expectRefusedConfirmation(await confirm(anon, answer), 'stale');
  });
});

afterAll(() => {
  for (const d of dirs) removeDir(d);
});
