// SPEC L (external registry discovery), SPEC Authentication item 6, SPEC Errors
// (external.key.invalid 400, external.auth.unauthenticated 401), PROTOCOL P5 (request signing)
// and P6 (a separate listener serving /discovery and /registries at its root), and
// docs/decisions.md "External registry discovery": black box over the real node's external
// listener, with external clients issued by the real command line.
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, createCredential, removeDir, runCli, signRequest, startNode, tempDir, type Answer, type Credential, type NodeProcess } from './support/harness.js';

ed.hashes.sha512 = sha512;

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

/** A fresh Ed25519 key pair for an external client, issued with `external-clients add`. */
function addExternalClient(dataDir: string, client: string, registries: string[]): Credential {
  const seed = ed.utils.randomSecretKey();
  const publicKeyHex = hex(ed.getPublicKey(seed));
  const out = JSON.parse(runCli(['external-clients', 'add', '--data-dir', dataDir, '--client', client, '--public-key', publicKeyHex, '--registries', registries.join(',')]));
  expect(typeof out.key_id).toBe('string');
  return { keyId: out.key_id, member: client, seedHex: hex(seed), publicKeyHex };
}

/** Thailand's 13-digit id: the 13th digit is (11 - (sum of d[i] * (13 - i), i = 0..11) mod 11) mod 10. */
function thaiId(body12: string): string {
  let sum = 0;
  for (let i = 0; i < 12; i++) sum += Number(body12[i]) * (13 - i);
  return `${body12}${(11 - (sum % 11)) % 10}`;
}

/** Valid keys, one or more per key type, with the registries of the shipped connectors expected among the candidates. */
const RANDOM_KEY = randomUUID();
const VALID: { type: string; key: string; zones: string[] | null; includes: string[]; excludes: string[] }[] = [
  { type: 'phone', key: '+55 21 98765-4321', zones: ['BR'], includes: ['br.pix.dict'], excludes: ['in.npci.upi', 'us.zelle'] },
  { type: 'phone', key: '+91 98123 45678', zones: ['IN'], includes: ['in.npci.upi'], excludes: ['br.pix.dict'] },
  { type: 'phone', key: '+65 9123 4567', zones: ['SG'], includes: ['sg.paynow'], excludes: ['br.pix.dict', 'in.npci.upi'] },
  { type: 'phone', key: '+66 89 123 4567', zones: ['TH'], includes: ['th.promptpay'], excludes: ['br.pix.dict', 'in.npci.upi'] },
  { type: 'phone', key: '+34 622 123 456', zones: ['ES'], includes: ['es.bizum'], excludes: ['br.pix.dict', 'in.npci.upi'] },
  { type: 'phone', key: '+1 650 253 0000', zones: ['US'], includes: ['us.zelle'], excludes: ['br.pix.dict', 'in.npci.upi'] },
  { type: 'email', key: 'discovery.probe-5c1e@example-ext.org', zones: null, includes: ['br.pix.dict', 'us.zelle'], excludes: ['in.npci.upi', 'eu.epc.vop'] },
  { type: 'tax', key: '529.982.247-25', zones: ['BR'], includes: ['br.pix.dict'], excludes: ['au.npp.payid', 'th.promptpay'] },
  { type: 'tax', key: '11.222.333/0001-81', zones: ['BR'], includes: ['br.pix.dict'], excludes: ['au.npp.payid'] },
  { type: 'tax', key: thaiId('310050012378'), zones: ['TH'], includes: ['th.promptpay'], excludes: ['br.pix.dict'] },
  { type: 'tax', key: '201912345K', zones: ['SG'], includes: ['sg.paynow'], excludes: ['br.pix.dict'] },
  { type: 'tax', key: '51 824 753 556', zones: ['AU'], includes: ['au.npp.payid'], excludes: ['br.pix.dict'] },
  { type: 'random', key: RANDOM_KEY, zones: null, includes: ['br.pix.dict'], excludes: ['in.npci.upi', 'eu.epc.vop'] },
  { type: 'alias', key: 'probe.alias-77', zones: null, includes: ['ar.bcra.alias'], excludes: ['br.pix.dict'] },
  { type: 'iban', key: 'DE89 3704 0044 0532 0130 00', zones: ['DE', 'SEPA'], includes: ['eu.epc.vop'], excludes: ['gb.pay-uk.cop', 'br.pix.dict'] },
  { type: 'iban', key: 'GB29NWBK60161331926819', zones: ['GB', 'SEPA'], includes: ['eu.epc.vop', 'gb.pay-uk.cop'], excludes: ['br.pix.dict'] },
  { type: 'iban', key: 'FR1420041010050500013M02606', zones: ['FR', 'SEPA'], includes: ['eu.epc.vop'], excludes: ['gb.pay-uk.cop'] },
  { type: 'vpa', key: 'probe.payee77@okaxis', zones: null, includes: ['in.npci.upi'], excludes: ['br.pix.dict', 'eu.epc.vop'] },
];

/** Keys that do not parse as their type. */
const INVALID: { type: string; key: string; what: string }[] = [
  { type: 'phone', key: '(21) 98765-4321', what: 'national form' },
  { type: 'phone', key: '021987654321', what: 'national form with trunk prefix' },
  { type: 'phone', key: '+55 21 9876A-4321', what: 'letters' },
  { type: 'phone', key: '+55 21', what: 'too short' },
  { type: 'email', key: 'probe.noat.example-ext.org', what: 'no @' },
  { type: 'tax', key: '529.982.247-26', what: 'CPF with a wrong check digit' },
  { type: 'tax', key: '111.111.111-11', what: 'all-same digits' },
  { type: 'random', key: 'not-a-uuid-probe-1234', what: 'not a UUID' },
  { type: 'alias', key: 'ab12', what: 'too short' },
  { type: 'alias', key: 'probe-alias-far-too-long-77', what: 'too long' },
  { type: 'iban', key: 'DE88 3704 0044 0532 0130 00', what: 'wrong check digits' },
  { type: 'vpa', key: 'probe.payee77.okaxis', what: 'no @' },
];

/** The operator's connectors file adds this registry for phones of zone BR. */
const OPERATOR_REGISTRY = 'br.operator.phonebook-test';

let node: NodeProcess;
let dataDir: string;
let configDir: string;
let member: Credential;
let alpha: Credential;
let beta: Credential;
let external: Client;
let stopCode: number | null = null;
/** Every answer of the external listener to a request carrying a raw key. */
const keyAnswers: Answer[] = [];

const discover = async (client: Client, key_type: string, key: string) => {
  const a = await client.post('/discovery', { key_type, key }, { root: true });
  keyAnswers.push(a);
  return a;
};

beforeAll(async () => {
  dataDir = tempDir('path-external');
  configDir = tempDir('path-external-config');
  const connectorsFile = join(configDir, 'connectors.json');
  writeFileSync(connectorsFile, JSON.stringify({
    connectors: [{ registry: OPERATOR_REGISTRY, name: 'Operator test phonebook', rail: 'operator-rail', zone: 'BR', operations: ['resolver'], key_types: ['phone'], status: 'planned' }],
  }));
  member = createCredential(dataDir, 'local', { local: true });
  alpha = addExternalClient(dataDir, 'alpha-psp', ['br.pix.dict', 'in.npci.upi']);
  beta = addExternalClient(dataDir, 'beta-psp', ['eu.epc.vop', 'us.zelle', OPERATOR_REGISTRY]);
  node = await startNode({ dataDir, args: ['--log-level', 'trace', '--connectors-file', connectorsFile] });
  expect(node.externalPort).toBeGreaterThan(0);
  expect(node.externalPort).not.toBe(node.port);
  external = new Client(`http://127.0.0.1:${node.externalPort}`, alpha);
});

afterAll(async () => {
  if (node !== undefined && node.process.exitCode === null) await node.stop();
  if (dataDir !== undefined) removeDir(dataDir);
  if (configDir !== undefined) removeDir(configDir);
});

const reasonOf = (a: Answer) => [a.status, a.json?.error?.code, a.json?.error?.detail?.reason];

describe('SPEC Authentication 6, P5, Errors: access to POST /discovery is closed (401 external.auth.unauthenticated)', () => {
  const body = { key_type: 'email', key: 'discovery.probe-5c1e@example-ext.org' };

  it('a signed request by an issued external client is answered', async () => {
    const a = await discover(external, body.key_type, body.key);
    expect(a.status, a.text).toBe(200);
    expect(a.json.kind).toBe('external.discovery');
  });

  it('no credential: 401, reason missing', async () => {
    const a = await external.as(null).post('/discovery', body, { root: true });
    keyAnswers.push(a);
    expect(reasonOf(a)).toEqual([401, 'external.auth.unauthenticated', 'missing']);
    expect(a.headers.get('content-type')).toMatch(/application\/json/);
  });

  it('a member credential of the node is valid on the main API but refused here: unknown_key', async () => {
    const main = new Client(node.baseUrl, member);
    const subject = await main.post('/subjects', { subject_type: 'natural_person' });
    expect(subject.status, subject.text).toBe(201);
    const a = await external.as(member).post('/discovery', body, { root: true });
    keyAnswers.push(a);
    expect(reasonOf(a)).toEqual([401, 'external.auth.unauthenticated', 'unknown_key']);
  });

  it('an external client\'s key is not a member credential on the main API (path.auth.unauthenticated)', async () => {
    const a = await new Client(node.baseUrl, alpha).post('/subjects', { subject_type: 'natural_person' });
    expect(a.status, a.text).toBe(401);
    expect(a.json?.error?.code).toBe('path.auth.unauthenticated');
  });

  it('a stale timestamp (10 minutes old, and 10 minutes ahead): 401, reason stale', async () => {
    for (const offset of [-600_000, 600_000]) {
      const a = await external.post('/discovery', body, { root: true, timestamp: new Date(Date.now() + offset).toISOString() });
      keyAnswers.push(a);
      expect(reasonOf(a)).toEqual([401, 'external.auth.unauthenticated', 'stale']);
    }
  });

  it('a signature by another key under the client\'s key id: 401, reason bad_signature', async () => {
    const forged: Credential = { ...alpha, seedHex: hex(ed.utils.randomSecretKey()) };
    const a = await external.as(forged).post('/discovery', body, { root: true });
    keyAnswers.push(a);
    expect(reasonOf(a)).toEqual([401, 'external.auth.unauthenticated', 'bad_signature']);
  });

  it('a body changed after signing: 401, reason bad_signature', async () => {
    const timestamp = new Date().toISOString();
    const signed = JSON.stringify(body);
    const headers = signRequest(alpha, { method: 'POST', target: '/discovery', timestamp, body: Buffer.from(signed) });
    const res = await fetch(`http://127.0.0.1:${node.externalPort}/discovery`, {
      method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ ...body, key_type: 'vpa' }),
    });
    const json = await res.json() as any;
    expect([res.status, json?.error?.code, json?.error?.detail?.reason]).toEqual([401, 'external.auth.unauthenticated', 'bad_signature']);
  });

  it('the same signed request twice: the second is 401, reason replayed', async () => {
    const timestamp = new Date().toISOString();
    const first = await external.post('/discovery', body, { root: true, timestamp });
    const second = await external.post('/discovery', body, { root: true, timestamp });
    keyAnswers.push(first, second);
    expect(first.status, first.text).toBe(200);
    expect(reasonOf(second)).toEqual([401, 'external.auth.unauthenticated', 'replayed']);
  });

  it('a revoked client (external-clients revoke while the node runs) is refused within 2 s', async () => {
    const gamma = addExternalClient(dataDir, 'gamma-psp', ['br.pix.dict']);
    const client = external.as(gamma);
    // The node follows the command line's changes; wait (bounded) until the new client is known.
    let before: Answer | undefined;
    for (const deadline = Date.now() + 5_000; Date.now() < deadline;) {
      before = await client.post('/discovery', body, { root: true });
      keyAnswers.push(before);
      if (before.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(before?.status, before?.text).toBe(200);

    const revoked = JSON.parse(runCli(['external-clients', 'revoke', '--data-dir', dataDir, '--key-id', gamma.keyId]));
    expect(revoked).toEqual({ key_id: gamma.keyId, revoked: true });
    const revokedAt = Date.now();
    let after: Answer | undefined;
    while (Date.now() - revokedAt < 2_000) {
      after = await client.post('/discovery', body, { root: true });
      keyAnswers.push(after);
      if (after.status === 401) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(reasonOf(after!)).toEqual([401, 'external.auth.unauthenticated', 'unknown_key']);
    // Other clients are unaffected.
    expect((await discover(external, body.key_type, body.key)).status).toBe(200);
  });
});

describe('SPEC L GET /registries: unauthenticated, the connector list', () => {
  it('answers without a credential, listing registry, zone, operations and status planned for each connector', async () => {
    const a = await external.as(null).get('/registries', { root: true });
    expect(a.status, a.text).toBe(200);
    const list = a.json.registries as any[];
    expect(Array.isArray(list)).toBe(true);
    expect(list.length).toBeGreaterThanOrEqual(3);
    for (const r of list) {
      expect(typeof r.registry).toBe('string');
      expect(typeof r.zone).toBe('string');
      expect(r.operations.length).toBeGreaterThan(0);
      for (const op of r.operations) expect(['sonar', 'resolver', 'payee_check']).toContain(op);
      expect(r.status).toBe('planned');
    }
    expect(new Set(list.map((r) => r.registry)).size).toBe(list.length);
  });

  it('ships the real schemes: Pix DICT (phone, email, tax, random), UPI (vpa, phone), SEPA VoP (iban)', async () => {
    const list = (await external.as(null).get('/registries', { root: true })).json.registries as any[];
    const by = new Map(list.map((r) => [r.registry, r]));
    expect(by.get('br.pix.dict')).toMatchObject({ zone: 'BR', status: 'planned' });
    expect([...by.get('br.pix.dict').key_types].sort()).toEqual(['email', 'phone', 'random', 'tax']);
    expect(by.get('in.npci.upi')).toMatchObject({ zone: 'IN', status: 'planned' });
    expect([...by.get('in.npci.upi').key_types].sort()).toEqual(['phone', 'vpa']);
    expect(by.get('eu.epc.vop')).toMatchObject({ zone: 'SEPA', status: 'planned' });
    expect(by.get('eu.epc.vop').key_types).toEqual(['iban']);
    expect(by.get('eu.epc.vop').operations).toContain('payee_check');
  });

  it('a signed request is answered the same (the credential is not needed, not refused)', async () => {
    const open = await external.as(null).get('/registries', { root: true });
    const signed = await external.get('/registries', { root: true });
    expect(signed.status).toBe(200);
    expect(signed.json).toEqual(open.json);
  });

  it('the operator\'s --connectors-file entry is listed with the shipped ones', async () => {
    const list = (await external.as(null).get('/registries', { root: true })).json.registries as any[];
    expect(list.find((r) => r.registry === OPERATOR_REGISTRY)).toMatchObject({ zone: 'BR', operations: ['resolver'], status: 'planned' });
    expect(list.some((r) => r.registry === 'br.pix.dict')).toBe(true);
  });
});

describe('SPEC L POST /discovery: candidates by key type and zone', () => {
  let registries: Map<string, any>;
  beforeAll(async () => {
    const list = (await external.as(null).get('/registries', { root: true })).json.registries as any[];
    registries = new Map(list.map((r) => [r.registry, r]));
  });

  for (const v of VALID) {
    it(`${v.type} ${v.zones === null ? '(no zone)' : `in ${v.zones.join('/')}`}: 200 external.discovery with candidates ${v.includes.join(', ')}`, async () => {
      const a = await discover(external, v.type, v.key);
      expect(a.status, a.text).toBe(200);
      expect(a.json.kind).toBe('external.discovery');
      expect(a.json.key_type).toBe(v.type);
      const candidates = a.json.candidates as any[];
      const names = candidates.map((c) => c.registry);
      for (const r of v.includes) expect(names).toContain(r);
      for (const r of v.excludes) expect(names).not.toContain(r);
      for (const c of candidates) {
        expect(Object.keys(c).sort()).toEqual(['granted', 'operations', 'rail', 'registry', 'zone']);
        expect(typeof c.rail).toBe('string');
        expect(typeof c.granted).toBe('boolean');
        const listed = registries.get(c.registry);
        expect(listed, `${c.registry} is listed by GET /registries`).toBeDefined();
        expect(listed.key_types).toContain(v.type);
        expect(c.zone).toBe(listed.zone);
        expect(c.operations).toEqual(listed.operations);
        if (v.zones !== null) expect(v.zones).toContain(c.zone);
      }
      // Every listed connector of this key type and zone is a candidate (restricted by zone, not arbitrarily).
      const expected = [...registries.values()]
        .filter((r) => r.key_types.includes(v.type) && (v.zones === null || v.zones.includes(r.zone)))
        .map((r) => r.registry).sort();
      expect([...names].sort()).toEqual(expected);
    });
  }

  it('a +55 phone reaches Pix and not UPI; a +91 phone reaches UPI and not Pix', async () => {
    const br = (await discover(external, 'phone', '+5521987654321')).json.candidates.map((c: any) => c.registry);
    const ind = (await discover(external, 'phone', '+919812345678')).json.candidates.map((c: any) => c.registry);
    expect(br).toContain('br.pix.dict');
    expect(br).not.toContain('in.npci.upi');
    expect(ind).toContain('in.npci.upi');
    expect(ind).not.toContain('br.pix.dict');
  });

  it('an email reaches several registries in several zones', async () => {
    const candidates = (await discover(external, 'email', 'discovery.probe-5c1e@example-ext.org')).json.candidates as any[];
    expect(candidates.length).toBeGreaterThan(1);
    expect(new Set(candidates.map((c) => c.zone)).size).toBeGreaterThan(1);
  });

  it('the operator\'s --connectors-file adds its registry as a candidate for a BR phone, not for an IN phone', async () => {
    const br = (await discover(external, 'phone', '+55 21 98765-4321')).json.candidates as any[];
    expect(br.find((c) => c.registry === OPERATOR_REGISTRY)).toEqual({ registry: OPERATOR_REGISTRY, rail: 'operator-rail', zone: 'BR', operations: ['resolver'], granted: false });
    expect(br.some((c) => c.registry === 'br.pix.dict')).toBe(true);
    const ind = (await discover(external, 'phone', '+91 98123 45678')).json.candidates as any[];
    expect(ind.some((c) => c.registry === OPERATOR_REGISTRY)).toBe(false);
  });

  for (const v of INVALID) {
    it(`${v.type}, ${v.what}: 400 external.key.invalid`, async () => {
      const a = await discover(external, v.type, v.key);
      expect(a.status, a.text).toBe(400);
      expect(a.json?.error?.code).toBe('external.key.invalid');
    });
  }

  it('an address (path:…) as key is 400 external.key.invalid, whatever the key type', async () => {
    const main = new Client(node.baseUrl, member);
    const subject = await main.post('/subjects', { subject_type: 'natural_person' });
    expect(subject.status, subject.text).toBe(201);
    const created = await main.post('/addresses', { subject_id: subject.json.id, profile: 'directory', discoverability: 'network' });
    expect(created.status, created.text).toBe(201);
    const address = created.json.address as string;
    expect(address.startsWith('path:')).toBe(true);
    for (const key_type of ['alias', 'random', 'vpa', 'email', 'phone', 'tax', 'iban']) {
      const a = await discover(external, key_type, address);
      expect([a.status, a.json?.error?.code], `${key_type}: ${a.text}`).toEqual([400, 'external.key.invalid']);
    }
    const upper = await discover(external, 'alias', address.toUpperCase());
    expect([upper.status, upper.json?.error?.code]).toEqual([400, 'external.key.invalid']);
  });

  it('an unknown key_type is 400 path.core.invalid_request, not a discovery', async () => {
    const a = await discover(external, 'passport', 'X1234567');
    expect(a.status, a.text).toBe(400);
    expect(a.json?.error?.code).toBe('path.core.invalid_request');
  });

  it('a missing key or key_type is 400', async () => {
    const noKey = await external.post('/discovery', { key_type: 'email' }, { root: true });
    const noType = await external.post('/discovery', { key: 'discovery.probe-5c1e@example-ext.org' }, { root: true });
    keyAnswers.push(noKey, noType);
    expect(noKey.status, noKey.text).toBe(400);
    expect(noType.status, noType.text).toBe(400);
  });
});

describe('SPEC L granted: follows each client\'s grants', () => {
  it('two clients with different --registries see different granted flags for the same key', async () => {
    const key = 'discovery.probe-5c1e@example-ext.org';
    const ofAlpha = (await discover(external, 'email', key)).json.candidates as any[];
    const ofBeta = (await discover(external.as(beta), 'email', key)).json.candidates as any[];
    const flags = (cs: any[]) => Object.fromEntries(cs.map((c) => [c.registry, c.granted]));
    const a = flags(ofAlpha);
    const b = flags(ofBeta);
    expect(Object.keys(a).sort()).toEqual(Object.keys(b).sort());
    expect(a['br.pix.dict']).toBe(true);
    expect(b['br.pix.dict']).toBe(false);
    expect(a['us.zelle']).toBe(false);
    expect(b['us.zelle']).toBe(true);
    for (const registry of Object.keys(a)) {
      expect(a[registry], registry).toBe(['br.pix.dict', 'in.npci.upi'].includes(registry));
      expect(b[registry], registry).toBe(['eu.epc.vop', 'us.zelle', OPERATOR_REGISTRY].includes(registry));
    }
  });

  it('granted for IBAN and phone keys follows the same grants', async () => {
    const ibanAlpha = (await discover(external, 'iban', 'DE89370400440532013000')).json.candidates as any[];
    const ibanBeta = (await discover(external.as(beta), 'iban', 'DE89370400440532013000')).json.candidates as any[];
    expect(ibanAlpha.find((c) => c.registry === 'eu.epc.vop')?.granted).toBe(false);
    expect(ibanBeta.find((c) => c.registry === 'eu.epc.vop')?.granted).toBe(true);
    const upiAlpha = (await discover(external, 'phone', '+91 98123 45678')).json.candidates as any[];
    const upiBeta = (await discover(external.as(beta), 'phone', '+91 98123 45678')).json.candidates as any[];
    expect(upiAlpha.find((c) => c.registry === 'in.npci.upi')?.granted).toBe(true);
    expect(upiBeta.find((c) => c.registry === 'in.npci.upi')?.granted).toBe(false);
    const brBeta = (await discover(external.as(beta), 'phone', '+55 21 98765-4321')).json.candidates as any[];
    expect(brBeta.find((c) => c.registry === OPERATOR_REGISTRY)?.granted).toBe(true);
  });

  it('decisions: granted is the union over the client\'s live keys; revoking one key withdraws its grants', async () => {
    const first = addExternalClient(dataDir, 'delta-psp', ['br.pix.dict']);
    const second = addExternalClient(dataDir, 'delta-psp', ['us.zelle']);
    const key = 'discovery.probe-5c1e@example-ext.org';
    const flagsOf = async (credential: Credential) => {
      const a = await discover(external.as(credential), 'email', key);
      return a.status === 200 ? Object.fromEntries((a.json.candidates as any[]).map((c) => [c.registry, c.granted])) : null;
    };
    let flags: Record<string, boolean> | null = null;
    for (const deadline = Date.now() + 5_000; Date.now() < deadline;) {
      flags = await flagsOf(second);
      if (flags !== null) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(flags).toMatchObject({ 'br.pix.dict': true, 'us.zelle': true, 'au.npp.payid': false });
    runCli(['external-clients', 'revoke', '--data-dir', dataDir, '--key-id', first.keyId]);
    const revokedAt = Date.now();
    while (Date.now() - revokedAt < 2_000) {
      flags = await flagsOf(second);
      if (flags?.['br.pix.dict'] === false) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(flags).toMatchObject({ 'br.pix.dict': false, 'us.zelle': true });
  });
});

describe('P6: the external interface is its own listener', () => {
  it('the discovery document on the main port has external_url pointing at the external listener', async () => {
    const doc = await (await fetch(`${node.baseUrl}/.well-known/path-configuration`)).json() as any;
    expect(doc.external_url).toBe(`http://127.0.0.1:${node.externalPort}`);
    const viaDoc = await fetch(`${doc.external_url}/registries`);
    expect(viaDoc.status).toBe(200);
    expect(((await viaDoc.json()) as any).registries.some((r: any) => r.registry === 'br.pix.dict')).toBe(true);
  });

  it('the main API port does not serve /discovery or /registries', async () => {
    const a = await new Client(node.baseUrl, alpha).post('/discovery', { key_type: 'vpa', key: 'probe.payee77@okaxis' }, { root: true });
    keyAnswers.push(a);
    expect(a.status).not.toBe(200);
    const r = await fetch(`${node.baseUrl}/registries`);
    expect(r.status).toBe(404);
  });

  it('the external port does not serve the main API', async () => {
    const a = await new Client(`http://127.0.0.1:${node.externalPort}`, member).post('/subjects', { subject_type: 'natural_person' });
    expect(a.status).not.toBe(201);
    const doc = await fetch(`http://127.0.0.1:${node.externalPort}/.well-known/path-configuration`);
    expect(doc.status).toBe(404);
  });
});

describe('SPEC L: the raw key is never echoed, stored or logged', () => {
  /** Every raw key sent, valid or not, and compact forms of the longer ones. */
  const rawKeys = () => {
    const keys = [...VALID, ...INVALID].map((v) => v.key);
    const compact = keys.map((k) => k.replace(/[\s().\-/]/g, '')).filter((k) => k.replace(/\D/g, '').length >= 8 || k.length >= 10);
    return [...new Set([...keys, ...compact, '+5521987654321', '+919812345678', '5521987654321', '919812345678', 'DE89370400440532013000', RANDOM_KEY.toUpperCase()])]
      .filter((k) => k.length >= 8);
  };

  it('no answer of the external listener contains a raw key', () => {
    expect(keyAnswers.length).toBeGreaterThan(VALID.length + INVALID.length);
    const leaks: string[] = [];
    for (const a of keyAnswers) for (const k of rawKeys()) if (a.text.includes(k)) leaks.push(`${k} in ${a.text}`);
    expect(leaks).toEqual([]);
  });

  it('the node\'s log output at trace level holds no raw key', () => {
    const output = node.output();
    expect(output).toContain('listening');
    expect(output.length).toBeGreaterThan(0);
    const leaks = rawKeys().filter((k) => output.includes(k));
    expect(leaks).toEqual([]);
  });

  it('after the node stops, no file of the data directory holds a raw key (read as bytes)', async () => {
    stopCode = await node.stop();
    expect(stopCode).toBe(0);
    const files = (function walk(dir: string): string[] {
      return readdirSync(dir).flatMap((name) => {
        const path = join(dir, name);
        return statSync(path).isDirectory() ? walk(path) : [path];
      });
    })(dataDir);
    expect(files.length).toBeGreaterThan(0);
    // The search reads what the node stores: the issued clients' public keys are there.
    expect(files.some((f) => readFileSync(f).includes(Buffer.from(alpha.publicKeyHex)) || readFileSync(f).includes(Buffer.from(alpha.publicKeyHex, 'hex')))).toBe(true);
    const leaks: string[] = [];
    for (const file of files) {
      const bytes = readFileSync(file);
      for (const k of rawKeys()) {
        if (bytes.includes(Buffer.from(k, 'utf8')) || bytes.includes(Buffer.from(k, 'utf16le'))) leaks.push(`${k} in ${file.slice(dataDir.length)}`);
      }
    }
    expect(leaks).toEqual([]);
  });
});
