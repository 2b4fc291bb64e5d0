// SPEC B (subjects, identifiers, payee records, attestations, ownership bindings), C (addresses,
// targets, standing intents) and E (resolver, commitments) over the real server and real LMDB;
// "States and transitions: Address, intent, attestation"; principles 2, 4, 6, 7; P3, P7, P8, P9.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startWithThreeMembers, type Answer, type Client, type NodeProcess } from './support/harness.js';
import { digest, verifiesWith } from './support/verify.js';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const ADDRESS = /^path:[A-Za-z0-9]{22,64}$/;
const ref = (prefix: string) => new RegExp(`^${prefix}_[0-9a-f]{32}$`);
const UNKNOWN_SUBJECT = `sub_${'0'.repeat(32)}`;
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const USDC = {
  rail: 'blockchain', asset_type: 'token', asset_code: 'USDC',
  chain: { slug: 'base', caip2: 'eip155:8453', evm: { chain_id: 8453 } }, standard: 'erc20', contract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
};

let node: NodeProcess;
let dataDir: string;
let local: Client;
let beta: Client;
let gamma: Client;
let anon: Client;
let publicKey: string;

beforeAll(async () => {
  ({ node, dataDir, local, beta, gamma, anon, publicKey } = await startWithThreeMembers('path-directory'));
});

afterAll(async () => {
  await node?.stop();
  if (dataDir !== undefined) removeDir(dataDir);
});

// ---------------------------------------------------------------------------------------------
// helpers

const put = (client: Client, path: string, body: unknown) => client.request('PUT', path, { body });

async function newSubject(client: Client = local, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await client.post('/subjects', { subject_type: 'natural_person', ...extra });
  expect(res.status, res.text).toBe(201);
  return res.json.id;
}

function addIdentifier(client: Client, subject_id: string, identifier_type: string, identifier: string, extra: Record<string, unknown> = {}) {
  return client.post('/identifiers', { subject_id, identifier_type, identifier, ...extra });
}

async function newAddress(client: Client, subject_id: string, extra: Record<string, unknown> = {}): Promise<{ id: string; address: string }> {
  const res = await client.post('/addresses', { subject_id, profile: 'directory', discoverability: 'network', ...extra });
  expect(res.status, res.text).toBe(201);
  return res.json;
}

async function addTarget(address_id: string, body: Record<string, unknown>): Promise<Answer> {
  return local.post(`/addresses/${address_id}/targets`, { account_kind: 'own_ledger', account_ref: `acct-${Math.random().toString(36).slice(2)}`, ...body });
}

const resolve = (address: string) => anon.get(`/resolver/${address}`);
const commitmentOf = (address: string) => anon.get(`/commitments/${address}`);

function expectError(res: Answer, status: number, code: string, field?: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toContain('application/json');
  expect(res.json.error.code).toBe(code);
  expect(typeof res.json.error.message).toBe('string');
  if (field !== undefined) expect(res.json.error.detail?.field).toBe(field);
}

/** An unused, well-formed opaque address (P9 shape). */
function unknownAddress(): string {
  const digits = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  let s = 'path:';
  for (let i = 0; i < 22; i++) s += digits[Math.floor(Math.random() * 62)];
  return s;
}

let phoneCounter = 100;
/** A distinct valid UK number (020 7946 0xxx, the range set aside for fiction) per call. */
const nextPhone = () => `+44 20 7946 0${String(phoneCounter++).padStart(3, '0')}`;

// ---------------------------------------------------------------------------------------------

describe('SPEC B subjects', () => {
  it('POST /subjects answers 201 with exactly {id, subject_type, created_at}; id is sub_ + 128 bits (P9)', async () => {
    const res = await local.post('/subjects', { subject_type: 'legal_entity', external_ref: 'crm-7c1f-subject-shape' });
    expect(res.status).toBe(201);
    expect(Object.keys(res.json).sort()).toEqual(['created_at', 'id', 'subject_type']);
    expect(res.json.id).toMatch(ref('sub'));
    expect(res.json.subject_type).toBe('legal_entity');
    expect(res.json.created_at).toMatch(RFC3339);
    expect(res.text).not.toContain('crm-7c1f-subject-shape');
  });

  it('refuses an unknown subject_type with 400 naming the field (P7)', async () => {
    expectError(await local.post('/subjects', { subject_type: 'robot' }), 400, 'path.core.invalid_request', 'subject_type');
  });

  it('needs a member credential (401 without one)', async () => {
    expectError(await anon.post('/subjects', { subject_type: 'natural_person' }), 401, 'path.auth.unauthenticated');
  });

  it('external_ref is never returned in any answer about the subject', async () => {
    const externalRef = 'crm-customer-93f0aa51-external';
    const create = await beta.post('/subjects', { subject_type: 'natural_person', external_ref: externalRef });
    expect(create.status).toBe(201);
    const id = create.json.id;
    const answers: Answer[] = [create];
    answers.push(await addIdentifier(beta, id, 'email', 'ext-ref-check@example.com'));
    const address = await beta.post('/addresses', { subject_id: id, profile: 'directory' });
    answers.push(address);
    answers.push(await beta.get(`/addresses?subject_id=${id}`));
    answers.push(await local.post(`/addresses/${address.json.id}/targets`, { ...EUR, account_kind: 'own_ledger', account_ref: 'acc-ext-ref-check' }));
    answers.push(await beta.get(`/addresses/${address.json.id}/targets`));
    answers.push(await local.post('/attestations', { subject_id: id, claim: 'kyc_level', value: '2', expires_at: new Date(Date.now() + 3_600_000).toISOString() }));
    answers.push(await local.get(`/subjects/${id}/attestations`));
    answers.push(await resolve(address.json.address));
    answers.push(await beta.post(`/subjects/${id}/withdraw`));
    for (const a of answers) {
      expect(a.status, a.text).toBeLessThan(300);
      expect(a.text).not.toContain(externalRef);
      expect(a.text).not.toContain('external_ref');
    }
  });
});

describe('SPEC B identifiers', () => {
  let subject: string;
  beforeAll(async () => { subject = await newSubject(); });

  it('POST /identifiers answers 201 with exactly {id, identifier_type, discoverability, verified_at}', async () => {
    const res = await addIdentifier(local, subject, 'phone', nextPhone());
    expect(res.status).toBe(201);
    expect(Object.keys(res.json).sort()).toEqual(['discoverability', 'id', 'identifier_type', 'verified_at']);
    expect(res.json.id).toMatch(ref('idn'));
    expect(res.json.identifier_type).toBe('phone');
  });

  it('verified_at is null without a verification_method, and set when one of the type\'s methods is given', async () => {
    const without = await addIdentifier(local, subject, 'email', 'no-method@example.com');
    expect(without.status).toBe(201);
    expect(without.json.verified_at).toBeNull();
    const methods: [string, string, string][] = [
      ['phone', nextPhone(), 'otp_sms'], ['phone', nextPhone(), 'otp_voice'], ['email', 'verified@example.com', 'link_click'],
      ['bank_account', 'iban:DE89 3704 0044 0532 0130 00', 'micro_deposit'], ['bank_account', 'bban:40-30-20 11223344', 'payee_name_check'],
      ['lei', '5493001KJTIIGC8Y1R12', 'registry_lookup'], ['reg', 'reg:GB:companies-house:09876543', 'document_review'],
      ['tax', 'tax:BR:12.345.678/0001-95', 'registry_lookup'],
    ];
    for (const [type, value, method] of methods) {
      const before = Date.now();
      const res = await addIdentifier(local, subject, type, value, { verification_method: method });
      expect(res.status, `${type} ${method}: ${res.text}`).toBe(201);
      expect(res.json.verified_at).toMatch(RFC3339);
      expect(Math.abs(Date.parse(res.json.verified_at) - before)).toBeLessThan(60_000);
    }
  });

  it('refuses a verification_method that is not in the type\'s list (400, field verification_method)', async () => {
    const cases: [string, string, string][] = [
      ['phone', nextPhone(), 'link_click'], ['email', 'wrong-method@example.com', 'otp_sms'],
      ['bank_account', 'iban:GB82WEST12345698765432', 'registry_lookup'], ['lei', '529900T8BM49AURSDO55', 'micro_deposit'],
      ['reg', 'reg:GB:companies-house:01234567', 'otp_voice'], ['tax', 'tax:BR:12345678909', 'link_click'],
      ['phone', nextPhone(), 'carrier_pigeon'],
    ];
    for (const [type, value, method] of cases) {
      expectError(await addIdentifier(local, subject, type, value, { verification_method: method }), 400, 'path.core.invalid_request', 'verification_method');
    }
  });

  it('discoverability defaults per type: phone/email network, bank_account private, lei/reg/tax public', async () => {
    const cases: [string, string, string][] = [
      ['phone', nextPhone(), 'network'], ['email', 'defaults@example.com', 'network'],
      ['bank_account', 'iban:GB82 WEST 1234 5698 7654 32', 'private'], ['lei', '5493001KJTIIGC8Y1R12', 'public'],
      ['reg', 'reg:GB:companies-house:01234567', 'public'], ['tax', 'tax:BR:12345678000195', 'public'],
    ];
    for (const [type, value, expected] of cases) {
      const res = await addIdentifier(local, subject, type, value);
      expect(res.status, res.text).toBe(201);
      expect(res.json.discoverability, type).toBe(expected);
    }
  });

  it('an explicit discoverability wins over the default', async () => {
    const bank = await addIdentifier(local, subject, 'bank_account', 'iban:NL91ABNA0417164300', { discoverability: 'public' });
    expect(bank.json.discoverability).toBe('public');
    const phone = await addIdentifier(local, subject, 'phone', nextPhone(), { discoverability: 'private' });
    expect(phone.json.discoverability).toBe('private');
    expectError(await addIdentifier(local, subject, 'phone', nextPhone(), { discoverability: 'everyone' }), 400, 'path.core.invalid_request', 'discoverability');
  });

  const acceptedForms: [string, string][] = [
    ['phone', '+44 20 7946 0958'], ['phone', '+1-202-555-0143'], ['phone', '+442079460958'],
    ['email', '  Alice.Liddell@Example.COM '], ['email', 'user@Bücher.DE'],
    ['bank_account', 'iban:GB82 WEST 1234 5698 7654 32'], ['bank_account', 'iban:gb82west12345698765432'], ['bank_account', 'bban:12345612345678'],
    ['lei', '5493001KJTIIGC8Y1R12'], ['lei', '529900t8bm49aurSDO55'],
    ['reg', 'reg:GB:companies-house:01234567'],
    ['tax', 'tax:BR:12.345.678/0001-95'],
  ];
  it.each(acceptedForms)('P8 accepts %s form %j over HTTP', async (type, value) => {
    const res = await addIdentifier(local, subject, type, value);
    expect(res.status, res.text).toBe(201);
    expect(res.json.identifier_type).toBe(type);
    expect(res.text).not.toContain(value.trim());
  });

  const refusedForms: [string, string][] = [
    ['phone', '020 7946 0958'], ['phone', '+44 20 7946'], ['phone', '+999 123456'],
    ['email', 'not-an-address'], ['email', 'alice@exa mple.com'], ['email', 'alice@example'],
    ['bank_account', 'iban:GB83WEST12345698765432'], ['bank_account', 'GB82WEST12345698765432'], ['bank_account', 'bban:x!'],
    ['lei', '5493001KJTIIGC8Y1R13'], ['lei', '5493001KJTIIGC8Y1R1'],
    ['reg', 'reg:GB:01234567'], ['reg', 'reg:XX:companies-house:01234567'],
    ['tax', 'tax:BR'], ['tax', 'tax:XX:12345678000195'], ['tax', 'BR:12345678000195'],
  ];
  it.each(refusedForms)('P8 refuses %s form %j with 400 naming the field, without echoing the value', async (type, value) => {
    const res = await addIdentifier(local, subject, type, value);
    expectError(res, 400, 'path.core.invalid_request', 'identifier');
    expect(res.text).not.toContain(value.trim());
    expect(res.text).not.toContain(JSON.stringify(value).slice(1, -1));
  });

  it('refuses an unknown identifier_type (400, field identifier_type)', async () => {
    expectError(await addIdentifier(local, subject, 'passport', 'X1234567'), 400, 'path.core.invalid_request', 'identifier_type');
  });

  it('an unknown subject answers 404; a malformed subject id 400', async () => {
    expectError(await addIdentifier(local, UNKNOWN_SUBJECT, 'phone', nextPhone()), 404, 'path.core.not_found');
    expectError(await addIdentifier(local, 'sub_nope', 'phone', nextPhone()), 400, 'path.core.invalid_request', 'subject_id');
  });
});

describe('SPEC B: another member\'s subject is not disclosed', () => {
  it('a subject created by member beta answers 404 to member gamma, as an unknown subject does', async () => {
    const subject = await newSubject(beta);
    expect((await addIdentifier(beta, subject, 'phone', nextPhone())).status).toBe(201);
    const address = await newAddress(beta, subject);
    expect((await beta.get(`/addresses?subject_id=${subject}`)).status).toBe(200);

    const unknown = await addIdentifier(gamma, UNKNOWN_SUBJECT, 'phone', nextPhone());
    const hidden = await addIdentifier(gamma, subject, 'phone', nextPhone());
    expectError(hidden, 404, 'path.core.not_found');
    expect(hidden.json).toEqual(unknown.json);
    expectError(await gamma.post('/addresses', { subject_id: subject, profile: 'directory' }), 404, 'path.core.not_found');
    expectError(await gamma.get(`/addresses?subject_id=${subject}`), 404, 'path.core.not_found');
    expectError(await gamma.post(`/subjects/${subject}/withdraw`), 404, 'path.core.not_found');
    expectError(await gamma.post(`/addresses/${address.id}/rotate`), 404, 'path.core.not_found');
    expectError(await gamma.post(`/addresses/${address.id}/revoke`), 404, 'path.core.not_found');
    expectError(await gamma.get(`/addresses/${address.id}/targets`), 404, 'path.core.not_found');
    expectError(await put(gamma, `/addresses/${address.id}/standing-intent`, { accepts: [EUR] }), 404, 'path.core.not_found');
    // Nothing gamma tried changed beta's subject.
    const list = await beta.get(`/addresses?subject_id=${subject}`);
    expect(list.json.addresses.map((a: any) => a.id)).toEqual([address.id]);
    expect(list.json.addresses[0].discoverability).toBe('network');
    expect((await resolve(address.address)).status).toBe(200);
  });
});

describe('SPEC B withdrawal ("States and transitions": all private, subject remains)', () => {
  it('answers {subject_id, withdrawn: true, entries} counting identifiers and live addresses; listed addresses become private', async () => {
    const subject = await newSubject(beta);
    for (const [type, value] of [['phone', nextPhone()], ['email', 'withdraw-me@example.com'], ['lei', '529900T8BM49AURSDO55']] as const) {
      expect((await addIdentifier(beta, subject, type, value)).status).toBe(201);
    }
    const a1 = await newAddress(beta, subject, { discoverability: 'public' });
    const a2 = await newAddress(beta, subject, { profile: 'relationship', discoverability: 'network' });
    const gone = await newAddress(beta, subject);
    expect((await beta.post(`/addresses/${gone.id}/revoke`)).status).toBe(200);

    const res = await beta.post(`/subjects/${subject}/withdraw`);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ subject_id: subject, withdrawn: true, entries: 3 + 2 });

    const list = await beta.get(`/addresses?subject_id=${subject}`);
    expect(list.status).toBe(200);
    expect(list.json.addresses.map((a: any) => a.id).sort()).toEqual([a1.id, a2.id].sort());
    for (const a of list.json.addresses) expect(a.discoverability).toBe('private');

    // Rotation does not undo the withdrawal: the replacement is private too.
    const rotated = await beta.post(`/addresses/${a1.id}/rotate`);
    expect(rotated.status).toBe(201);
    expect(rotated.json.discoverability).toBe('private');
  });

  it('an unknown subject cannot be withdrawn (404)', async () => {
    expectError(await local.post(`/subjects/${UNKNOWN_SUBJECT}/withdraw`), 404, 'path.core.not_found');
  });
});

describe('SPEC B payee record (local only, name never echoed)', () => {
  const name = 'Zebedee Quillfeather-Ostrander';

  it('the local member sets it; the answer never contains the name', async () => {
    const subject = await newSubject();
    const res = await put(local, `/subjects/${subject}/payee-record`, { registered_name: name, payee_check: 'enabled' });
    expect(res.status, res.text).toBe(200);
    expect(res.text).not.toContain(name);
    expect(res.text).not.toContain('Quillfeather');
    expect(res.text).not.toContain('registered_name');
  });

  it('another member is refused with 403 path.auth.forbidden, without echoing the name', async () => {
    const subject = await newSubject(beta);
    const res = await put(beta, `/subjects/${subject}/payee-record`, { registered_name: name, payee_check: 'enabled' });
    expectError(res, 403, 'path.auth.forbidden');
    expect(res.text).not.toContain(name);
  });

  it('refuses a bad payee_check (400) and an unknown subject (404), never echoing the name', async () => {
    const subject = await newSubject();
    const bad = await put(local, `/subjects/${subject}/payee-record`, { registered_name: name, payee_check: 'sometimes' });
    expectError(bad, 400, 'path.core.invalid_request', 'payee_check');
    expect(bad.text).not.toContain(name);
    const unknown = await put(local, `/subjects/${UNKNOWN_SUBJECT}/payee-record`, { registered_name: name, payee_check: 'disabled' });
    expectError(unknown, 404, 'path.core.not_found');
    expect(unknown.text).not.toContain(name);
  });
});

describe('SPEC B attestations', () => {
  let subject: string;
  const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();
  beforeAll(async () => { subject = await newSubject(local, { subject_type: 'legal_entity' }); });

  it('the claim list is closed: an unknown claim is 400 naming claim', async () => {
    expectError(await local.post('/attestations', { subject_id: subject, claim: 'credit_score', value: '800', expires_at: inAnHour() }), 400, 'path.core.invalid_request', 'claim');
  });

  it('accepts every claim of the closed list', async () => {
    for (const claim of ['kyc_level', 'kyb_level', 'aml', 'sanctions', 'pep', 'risk_tier', 'identity_level']) {
      const res = await local.post('/attestations', { subject_id: subject, claim, value: 'ok', expires_at: inAnHour() });
      expect(res.status, `${claim}: ${res.text}`).toBe(201);
    }
  });

  it('expires_at is mandatory (400 without it) and must be a future RFC 3339 time', async () => {
    expectError(await local.post('/attestations', { subject_id: subject, claim: 'kyc_level', value: '2' }), 400, 'path.core.invalid_request', 'expires_at');
    expectError(await local.post('/attestations', { subject_id: subject, claim: 'kyc_level', value: '2', expires_at: 'next tuesday' }), 400, 'path.core.invalid_request', 'expires_at');
    expectError(await local.post('/attestations', { subject_id: subject, claim: 'kyc_level', value: '2', expires_at: new Date(Date.now() - 60_000).toISOString() }), 400, 'path.core.invalid_request', 'expires_at');
  });

  it('is recorded by the local member only (another member: 403)', async () => {
    expectError(await beta.post('/attestations', { subject_id: subject, claim: 'kyc_level', value: '2', expires_at: inAnHour() }), 403, 'path.auth.forbidden');
  });

  it('POST answers 201 with a reference; GET answers the local member a signed statement; no credential: 401', async () => {
    const expires = inAnHour();
    const res = await local.post('/attestations', { subject_id: subject, claim: 'kyb_level', value: 'enhanced', expires_at: expires });
    expect(res.status).toBe(201);
    expect(res.json.reference).toMatch(ref('att'));
    expect(res.json).toMatchObject({ subject_id: subject, claim: 'kyb_level', value: 'enhanced', expires_at: expires });
    const read = await local.get(`/attestations/${res.json.reference}`);
    expect(read.status, read.text).toBe(200);
    expect(read.json).toMatchObject({ reference: res.json.reference, claim: 'kyb_level', value: 'enhanced', expires_at: expires, issuer: 'local' });
    expect(verifiesWith(read.json, publicKey)).toBe(true);
    expectError(await anon.get(`/attestations/${res.json.reference}`), 401, 'path.auth.unauthenticated');
  });

  it('GET /attestations/{reference} is an execution-time check open to any member (SPEC B: "any member")', async () => {
    const res = await local.post('/attestations', { subject_id: subject, claim: 'kyc_level', value: '3', expires_at: inAnHour() });
    expect(res.status).toBe(201);
    for (const reader of [beta, gamma]) {
      const read = await reader.get(`/attestations/${res.json.reference}`);
      expect(read.status, `${reader.credential!.member}: ${read.text}`).toBe(200);
      expect(read.json).toMatchObject({ reference: res.json.reference, claim: 'kyc_level', value: '3', issuer: 'local' });
      expect(verifiesWith(read.json, publicKey)).toBe(true);
    }
  });

  it('revoke keeps the row; the next read answers 410 path.id.attestation_revoked; the list shows it revoked', async () => {
    const res = await local.post('/attestations', { subject_id: subject, claim: 'sanctions', value: 'clear', expires_at: inAnHour() });
    const reference = res.json.reference;
    expectError(await beta.post(`/attestations/${reference}/revoke`), 403, 'path.auth.forbidden');
    expect((await local.get(`/attestations/${reference}`)).status).toBe(200);
    const revoked = await local.post(`/attestations/${reference}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.json).toMatchObject({ reference, revoked: true });
    expectError(await local.get(`/attestations/${reference}`), 410, 'path.id.attestation_revoked');
    const list = await local.get(`/subjects/${subject}/attestations`);
    expect(list.status).toBe(200);
    const row = list.json.attestations.find((a: any) => a.reference === reference);
    expect(row).toMatchObject({ reference, claim: 'sanctions', value: 'clear', status: 'revoked' });
    expect(row.revoked_at).toMatch(RFC3339);
  });

  it('passage of expires_at: the next read answers 410 path.id.attestation_expired; the row is kept and listed expired', async () => {
    const expires = new Date(Date.now() + 2_000).toISOString();
    const res = await local.post('/attestations', { subject_id: subject, claim: 'pep', value: 'no', expires_at: expires });
    expect(res.status, res.text).toBe(201);
    const reference = res.json.reference;
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(expires) - Date.now()) + 600));
    expectError(await local.get(`/attestations/${reference}`), 410, 'path.id.attestation_expired');
    const list = await local.get(`/subjects/${subject}/attestations`);
    expect(list.json.attestations.find((a: any) => a.reference === reference)).toMatchObject({ reference, claim: 'pep', status: 'expired', expires_at: expires });
  });

  it('lists every claim of the subject for the local member only', async () => {
    const list = await local.get(`/subjects/${subject}/attestations`);
    expect(list.status).toBe(200);
    expect(list.json.attestations.length).toBeGreaterThanOrEqual(10);
    expect(list.json.attestations.filter((a: any) => a.status === 'active').length).toBeGreaterThanOrEqual(8);
    expectError(await beta.get(`/subjects/${subject}/attestations`), 403, 'path.auth.forbidden');
  });

  it('an unknown reference answers 404', async () => {
    expectError(await local.get(`/attestations/att_${'0'.repeat(32)}`), 404, 'path.core.not_found');
  });
});

describe('SPEC B ownership bindings (target hashed and forgotten)', () => {
  let subject: string;
  beforeAll(async () => { subject = await newSubject(); });

  const bind = (target: string) =>
    local.post('/ownership-bindings', { subject_id: subject, binding_type: 'identifier', target_kind: 'phone', target, proof_method: 'otp_sms' });

  it('creates a binding on a phone target; neither the answer nor the signed read contains the target', async () => {
    const target = '+44 20 7946 0777';
    const res = await bind(target);
    expect(res.status, res.text).toBe(201);
    expect(res.json.reference).toMatch(ref('obd'));
    expect(res.json).toMatchObject({ subject_id: subject, binding_type: 'identifier', target_kind: 'phone', proof_method: 'otp_sms' });
    for (const text of [target, '+442079460777', '2079460777']) expect(res.text).not.toContain(text);
    const read = await local.get(`/ownership-bindings/${res.json.reference}`);
    expect(read.status, read.text).toBe(200);
    expect(read.json).toMatchObject({ reference: res.json.reference, binding_type: 'identifier', target_kind: 'phone', proof_method: 'otp_sms' });
    expect(verifiesWith(read.json, publicKey)).toBe(true);
    for (const text of [target, '+442079460777', '2079460777']) expect(read.text).not.toContain(text);
  });

  it('GET /ownership-bindings/{reference} is an execution-time check open to a member credential (SPEC B)', async () => {
    const res = await bind('+44 20 7946 0778');
    expect(res.status).toBe(201);
    const read = await beta.get(`/ownership-bindings/${res.json.reference}`);
    expect(read.status, read.text).toBe(200);
    expect(read.json).toMatchObject({ reference: res.json.reference, target_kind: 'phone' });
    expect(verifiesWith(read.json, publicKey)).toBe(true);
    expect(read.text).not.toContain('2079460778');
  });

  it('refuses a phone target that does not normalise (400 field target) without echoing it', async () => {
    const res = await local.post('/ownership-bindings', { subject_id: subject, binding_type: 'identifier', target_kind: 'phone', target: '020 7946 0555', proof_method: 'otp_sms' });
    expectError(res, 400, 'path.core.invalid_request', 'target');
    expect(res.text).not.toContain('020 7946 0555');
  });

  it('is created by the local member only (403)', async () => {
    expectError(await beta.post('/ownership-bindings', { subject_id: subject, binding_type: 'identifier', target_kind: 'phone', target: nextPhone(), proof_method: 'otp_sms' }), 403, 'path.auth.forbidden');
  });

  it('an unknown reference answers 404', async () => {
    expectError(await local.get(`/ownership-bindings/obd_${'0'.repeat(32)}`), 404, 'path.core.not_found');
  });
});

describe('SPEC C addresses', () => {
  let subject: string;
  beforeAll(async () => { subject = await newSubject(); });

  it('POST /addresses answers 201 {id, address: path:<opaque>, profile, discoverability} (P9)', async () => {
    const res = await local.post('/addresses', { subject_id: subject, profile: 'relationship', discoverability: 'private', is_primary: false });
    expect(res.status).toBe(201);
    expect(res.json.id).toMatch(ref('adr'));
    expect(res.json.address).toMatch(ADDRESS);
    expect(res.json).toMatchObject({ profile: 'relationship', discoverability: 'private' });
    const other = await newAddress(local, subject);
    expect(other.address).not.toBe(res.json.address);
  });

  it('refuses an unknown profile (400) and an unknown subject (404)', async () => {
    expectError(await local.post('/addresses', { subject_id: subject, profile: 'gateway' }), 400, 'path.core.invalid_request', 'profile');
    expectError(await local.post('/addresses', { subject_id: UNKNOWN_SUBJECT, profile: 'directory' }), 404, 'path.core.not_found');
  });

  it('GET /addresses?subject_id= lists the live addresses; a revoked one is omitted; subject_id is required', async () => {
    const s = await newSubject();
    const a = await newAddress(local, s, { is_primary: true });
    const b = await newAddress(local, s, { profile: 'relationship', discoverability: 'private' });
    const c = await newAddress(local, s);
    const revoke = await local.post(`/addresses/${c.id}/revoke`);
    expect(revoke.status).toBe(200);
    expect(revoke.json).toEqual({ id: c.id, revoked: true });
    const list = await local.get(`/addresses?subject_id=${s}`);
    expect(list.status).toBe(200);
    expect(list.json.addresses.map((x: any) => x.id).sort()).toEqual([a.id, b.id].sort());
    for (const x of list.json.addresses) {
      expect(Object.keys(x).sort()).toEqual(['address', 'created_at', 'discoverability', 'id', 'is_primary', 'profile']);
    }
    expect(list.json.addresses.find((x: any) => x.id === a.id)).toMatchObject({ address: a.address, profile: 'directory', discoverability: 'network', is_primary: true });
    expect(list.json.addresses.find((x: any) => x.id === b.id)).toMatchObject({ address: b.address, profile: 'relationship', discoverability: 'private', is_primary: false });
    expectError(await local.get('/addresses'), 400, 'path.core.invalid_request', 'subject_id');
  });

  it('rotate issues a new address linked by rotated_from; the old one is revoked (410 at the resolver and commitments)', async () => {
    const old = await newAddress(local, subject);
    expect((await resolve(old.address)).status).toBe(200);
    const rotated = await local.post(`/addresses/${old.id}/rotate`);
    expect(rotated.status, rotated.text).toBe(201);
    expect(rotated.json.rotated_from).toBe(old.id);
    expect(rotated.json.address).toMatch(ADDRESS);
    expect(rotated.json.address).not.toBe(old.address);
    expect(rotated.json.id).not.toBe(old.id);
    expectError(await resolve(old.address), 410, 'path.address.revoked');
    expectError(await commitmentOf(old.address), 410, 'path.address.revoked');
    expect((await resolve(rotated.json.address)).status).toBe(200);
    const list = await local.get(`/addresses?subject_id=${subject}`);
    const ids = list.json.addresses.map((x: any) => x.id);
    expect(ids).toContain(rotated.json.id);
    expect(ids).not.toContain(old.id);
    // A revoked address goes nowhere: it cannot be rotated again.
    expectError(await local.post(`/addresses/${old.id}/rotate`), 410, 'path.address.revoked');
  });

  it('revoke: the resolver and commitments answer 410 path.address.revoked, distinct from 404 for an unknown address', async () => {
    const a = await newAddress(local, subject);
    expect((await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [EUR] })).status).toBe(200);
    expect((await commitmentOf(a.address)).status).toBe(200);
    expect((await local.post(`/addresses/${a.id}/revoke`)).status).toBe(200);
    expectError(await resolve(a.address), 410, 'path.address.revoked');
    expectError(await commitmentOf(a.address), 410, 'path.address.revoked');
    expectError(await resolve(encodeURIComponent(a.address)), 410, 'path.address.revoked');
    const unknown = unknownAddress();
    expectError(await resolve(unknown), 404, 'path.core.not_found');
    expectError(await commitmentOf(unknown), 404, 'path.core.not_found');
    expectError(await resolve('not-an-address'), 404, 'path.core.not_found');
    // A revoked address takes no new terms.
    expectError(await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [EUR] }), 410, 'path.address.revoked');
  });

  it('an unknown address id answers 404 on rotate and revoke', async () => {
    expectError(await local.post(`/addresses/adr_${'0'.repeat(32)}/rotate`), 404, 'path.core.not_found');
    expectError(await local.post(`/addresses/adr_${'0'.repeat(32)}/revoke`), 404, 'path.core.not_found');
  });
});

describe('SPEC C targets', () => {
  let subject: string;
  let address: { id: string; address: string };
  beforeAll(async () => {
    subject = await newSubject(beta);
    address = await newAddress(beta, subject);
  });

  it('POST is local only (another member, even the subject\'s owner: 403)', async () => {
    const res = await beta.post(`/addresses/${address.id}/targets`, { ...EUR, account_kind: 'own_ledger', account_ref: 'beta-tries-7731' });
    expectError(res, 403, 'path.auth.forbidden');
    expect(res.text).not.toContain('beta-tries-7731');
  });

  it('account_ref is stored but never returned, by POST or by GET', async () => {
    const accountRef = 'LEDGER-ACCT-5f2e9d10-private';
    const res = await local.post(`/addresses/${address.id}/targets`, { ...EUR, account_kind: 'virtual_account', account_ref: accountRef, is_default: true });
    expect(res.status, res.text).toBe(201);
    expect(res.json.id).toMatch(ref('tgt'));
    expect(res.json).toMatchObject({ ...EUR, account_kind: 'virtual_account', is_default: true });
    expect(res.json).not.toHaveProperty('account_ref');
    expect(res.text).not.toContain(accountRef);
    for (const reader of [local, beta]) {
      const list = await reader.get(`/addresses/${address.id}/targets`);
      expect(list.status).toBe(200);
      expect(list.json.targets.map((t: any) => t.id)).toContain(res.json.id);
      expect(list.text).not.toContain(accountRef);
      expect(list.text).not.toContain('account_ref');
    }
  });

  it('a reserved rail has no beneficiary format (400)', async () => {
    const res = await addTarget(address.id, { rail: 'swift_future', asset_type: 'fiat', asset_code: 'USD', account_kind: 'external_account', beneficiary_format: 'chain_address', beneficiary: '0x1111111111111111111111111111111111111111' });
    expectError(res, 400, 'path.core.invalid_request', 'beneficiary_format');
  });

  it('a blockchain target takes beneficiary_format chain_address', async () => {
    const beneficiary = '0x2222222222222222222222222222222222222222';
    const res = await addTarget(address.id, { rail: 'blockchain', asset_type: 'token', asset_code: 'USDC', account_kind: 'wallet', beneficiary_format: 'chain_address', beneficiary });
    expect(res.status, res.text).toBe(201);
    expect(res.json).toMatchObject({ rail: 'blockchain', beneficiary_format: 'chain_address', beneficiary });
    expectError(await addTarget(address.id, { ...EUR, beneficiary_format: 'iban' }), 400, 'path.core.invalid_request', 'beneficiary_format');
  });

  it('revoking a target retires it from the list', async () => {
    const t = await addTarget(address.id, { rail: 'mobile_money', asset_type: 'fiat', asset_code: 'KES' });
    expect(t.status).toBe(201);
    const revoked = await beta.post(`/addresses/${address.id}/targets/${t.json.id}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.json).toMatchObject({ id: t.json.id, revoked: true });
    const list = await beta.get(`/addresses/${address.id}/targets`);
    expect(list.json.targets.map((x: any) => x.id)).not.toContain(t.json.id);
  });
});

describe('SPEC C standing intents ("States and transitions": version n+1 active, n kept)', () => {
  let subject: string;
  beforeAll(async () => { subject = await newSubject(); });

  it('PUT answers {version: 1, active: true}, then {version: 2, active: true}; the resolver reflects the newest', async () => {
    const a = await newAddress(local, subject);
    const v1 = await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [EUR] });
    expect(v1.status, v1.text).toBe(200);
    expect(v1.json).toEqual({ version: 1, active: true });
    const r1 = await resolve(a.address);
    expect(r1.json.accepts).toEqual([EUR]);
    expect(r1.json.commitment_version).toBe(1);

    const v2 = await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [USDC, EUR], policy: { unknown_sender: 'quarantine' } });
    expect(v2.status, v2.text).toBe(200);
    expect(v2.json).toEqual({ version: 2, active: true });
    const r2 = await resolve(a.address);
    expect(r2.json.accepts).toEqual([USDC, EUR]);
    expect(r2.json.commitment_version).toBe(2);
    expect(r2.json.commitment).not.toBe(r1.json.commitment);
    expect(verifiesWith(r2.json, publicKey)).toBe(true);
    const c2 = await commitmentOf(a.address);
    expect(c2.json).toMatchObject({ commitment: r2.json.commitment, version: 2 });

    // Re-stating the first terms appends version 3: earlier versions are never reused or overwritten.
    const v3 = await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [EUR] });
    expect(v3.json).toEqual({ version: 3, active: true });
    const r3 = await resolve(a.address);
    expect(r3.json.commitment_version).toBe(3);
    expect(r3.json.commitment).toBe(r1.json.commitment);
  });

  it('the standing intent wins over what the targets imply', async () => {
    const a = await newAddress(local, subject);
    expect((await addTarget(a.id, { rail: 'mobile_money', asset_type: 'fiat', asset_code: 'KES' })).status).toBe(201);
    expect((await resolve(a.address)).json.accepts).toEqual([{ rail: 'mobile_money', asset_type: 'fiat', asset_code: 'KES' }]);
    expect((await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [EUR] })).status).toBe(200);
    expect((await resolve(a.address)).json.accepts).toEqual([EUR]);
  });

  it('unknown members inside capabilities are preserved exactly in the resolver answer (principle 6)', async () => {
    const a = await newAddress(local, subject);
    const capability = {
      ...USDC, chain: { ...USDC.chain, x_finality: { blocks: 12, note: 'soft' } }, x_vendor: { tags: ['a', 2, null, true], 'ünï': 'kept' },
      fees: [{ kind: 'operator', amount: { value: '0.10', asset_type: 'token', asset_code: 'USDC', x_basis: 'flat' }, paid_by: 'payer', x_fee_id: 'f-1' }],
      limits: { max_single: { value: '1000.00', asset_type: 'token', asset_code: 'USDC' }, x_daily: '5000' },
    };
    const limits = { x_monthly: { value: '20000', asset_type: 'token', asset_code: 'USDC' } };
    const res = await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [capability, EUR], limits });
    expect(res.status, res.text).toBe(200);
    const answer = (await resolve(a.address)).json;
    expect(answer.accepts).toEqual([capability, EUR]);
    expect(answer.limits).toEqual(limits);
    expect(verifiesWith(answer, publicKey)).toBe(true);
    expect(answer.commitment).toBe(digest({ grammar: 2, address: a.address, accepts: [capability, EUR], limits }));
  });

  it('rotation keeps the terms and commits them afresh over the new address', async () => {
    const a = await newAddress(local, subject);
    const accepts = [{ ...EUR, x_kept: 'through-rotation' }];
    expect((await put(local, `/addresses/${a.id}/standing-intent`, { accepts, policy: { unknown_sender: 'quarantine' } })).status).toBe(200);
    const before = (await resolve(a.address)).json;
    const rotated = await local.post(`/addresses/${a.id}/rotate`);
    expect(rotated.status).toBe(201);
    const after = await resolve(rotated.json.address);
    expect(after.status).toBe(200);
    expect(after.json.accepts).toEqual(accepts);
    expect(after.json.limits).toEqual(before.limits);
    expect(after.json.commitment).not.toBeNull();
    expect(after.json.commitment).not.toBe(before.commitment);
    expect(after.json.commitment).toBe(digest({ grammar: 2, address: rotated.json.address, accepts, limits: after.json.limits }));
    const c = await commitmentOf(rotated.json.address);
    expect(c.status).toBe(200);
    expect(c.json.commitment).toBe(after.json.commitment);
    expect(verifiesWith(c.json, publicKey)).toBe(true);
  });

  it('an absent capability is denied: empty accepts or a capability without rail is 400 (principle 7)', async () => {
    const a = await newAddress(local, subject);
    expectError(await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [] }), 400, 'path.core.invalid_request');
    expectError(await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [{ asset_type: 'fiat', asset_code: 'EUR' }] }), 400, 'path.core.invalid_request');
    expectError(await put(local, `/addresses/${a.id}/standing-intent`, {}), 400, 'path.core.invalid_request', 'accepts');
    // Nothing was committed.
    expect((await resolve(a.address)).json.commitment).toBeNull();
  });
});

describe('SPEC E resolver and commitments (public, signed; P3)', () => {
  let subject: string;
  const externalRef = 'crm-ref-resolver-61b7c0';
  const name = 'Hortensia Vanderpump-Ellery';
  const email = 'hortensia.resolver@example.org';
  const phone = '+44 20 7946 0888';
  const iban = 'iban:GB82 WEST 1234 5698 7654 32';
  const accountRef = 'ACCT-resolver-0c4471ee';

  beforeAll(async () => {
    subject = await newSubject(local, { external_ref: externalRef });
    expect((await put(local, `/subjects/${subject}/payee-record`, { registered_name: name, payee_check: 'enabled' })).status).toBe(200);
    for (const [type, value] of [['email', email], ['phone', phone], ['bank_account', iban]]) {
      expect((await addIdentifier(local, subject, type!, value!)).status).toBe(201);
    }
  });

  it('without a standing intent: signed holder answer, commitment null, accepts inferred from live targets', async () => {
    const a = await newAddress(local, subject);
    const empty = await resolve(a.address);
    expect(empty.status).toBe(200);
    expect(empty.json.accepts).toEqual([]);
    const t1 = await addTarget(a.id, { ...EUR, account_ref: accountRef });
    expect(t1.status).toBe(201);
    expect((await addTarget(a.id, { ...EUR, account_kind: 'external_account' })).status).toBe(201);
    const t3 = await addTarget(a.id, { rail: 'blockchain', asset_type: 'token', asset_code: 'USDC', account_kind: 'wallet' });
    expect(t3.status).toBe(201);

    const res = await resolve(a.address);
    expect(res.status).toBe(200);
    expect(res.headers.get('path-protocol-version')).toBe('0.2.0');
    const answer = res.json;
    expect(answer).toMatchObject({ kind: 'resolver_answer', address: a.address, standing: 'holder', requester: null, valid: true, commitment: null, grammar: 2, protocol_version: '0.2.0' });
    expect(answer.signed_at).toMatch(RFC3339);
    expect(verifiesWith(answer, publicKey)).toBe(true);
    expect(answer.accepts).toHaveLength(2);
    expect(answer.accepts).toEqual(expect.arrayContaining([EUR, { rail: 'blockchain', asset_type: 'token', asset_code: 'USDC' }]));

    // Revoking a target removes what only it implied.
    expect((await local.post(`/addresses/${a.id}/targets/${t3.json.id}/revoke`)).status).toBe(200);
    const after = (await resolve(a.address)).json;
    expect(after.accepts).toEqual([EUR]);
    expect(after.commitment).toBeNull();
    expect(verifiesWith(after, publicKey)).toBe(true);
  });

  it('a payer recomputes digest({grammar, address, accepts, limits}) and finds the resolver\'s and the signed commitment object\'s value', async () => {
    const a = await newAddress(local, subject);
    expect((await addTarget(a.id, { ...EUR, account_ref: accountRef })).status).toBe(201);
    expect((await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [EUR, USDC], limits: { x_cap: '100' } })).status).toBe(200);

    const answer = (await resolve(a.address)).json;
    expect(verifiesWith(answer, publicKey)).toBe(true);
    const recomputed = digest({ grammar: 2, address: answer.address, accepts: answer.accepts, limits: answer.limits });
    expect(recomputed).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(answer.commitment).toBe(recomputed);
    expect(answer.commitment_version).toBe(1);

    const res = await commitmentOf(a.address);
    expect(res.status).toBe(200);
    const object = res.json;
    expect(verifiesWith(object, publicKey)).toBe(true);
    expect(object).toMatchObject({ address: a.address, commitment: recomputed, version: 1 });
    // Identical for every caller (SPEC E): a credential changes nothing.
    expect((await beta.get(`/commitments/${a.address}`)).text).toBe(res.text);
    // A tampered answer would not match.
    expect(digest({ grammar: 2, address: answer.address, accepts: [EUR], limits: answer.limits })).not.toBe(object.commitment);
  });

  it('the path: form and its percent-encoded form (path%3A / path%3a) are the same key', async () => {
    const a = await newAddress(local, subject);
    expect((await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [EUR] })).status).toBe(200);
    const plain = await resolve(a.address);
    expect(plain.status).toBe(200);
    const opaque = a.address.slice('path:'.length);
    for (const key of [`path%3A${opaque}`, `path%3a${opaque}`]) {
      const r = await resolve(key);
      expect(r.status, key).toBe(200);
      expect(r.text).toBe(plain.text);
      const c = await commitmentOf(key);
      expect(c.status, key).toBe(200);
      expect(c.text).toBe((await commitmentOf(a.address)).text);
    }
  });

  it('a routing question gets a routing answer: no subject, external_ref, name, identifier or account ref (principle 2)', async () => {
    const a = await newAddress(local, subject, { is_primary: true });
    expect((await addTarget(a.id, { ...EUR, account_ref: accountRef })).status).toBe(201);
    const withoutIntent = await resolve(a.address);
    expect((await put(local, `/addresses/${a.id}/standing-intent`, { accepts: [EUR] })).status).toBe(200);
    const withIntent = await resolve(a.address);
    const commitment = await commitmentOf(a.address);
    const forbidden = [
      subject, subject.slice(4), externalRef, name, 'Vanderpump', email, 'hortensia', phone, '+442079460888', '2079460888',
      'GB82WEST12345698765432', 'GB82 WEST', accountRef, a.id, 'sub_', 'subject', 'external_ref', 'registered_name', 'account_ref', 'identifier',
    ];
    for (const res of [withoutIntent, withIntent, commitment]) {
      expect(res.status).toBe(200);
      for (const text of forbidden) expect(res.text, `${text} in ${res.text}`).not.toContain(text);
    }
  });
});
