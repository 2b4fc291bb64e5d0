// SPEC F (payee check, holder-served), SPEC Authentication 4 (member credential or context),
// SPEC Errors (path.address.revoked, path.finder.budget_exhausted, path.auth.unauthenticated),
// SPEC Limits (payee-check allowance), P7 (path.auth.context_refused), P12 (10,000 a day per
// member, 10 over a context's life, 3 distinct names a day per requester and address) over the
// real server. Signatures are checked with test/support/verify.ts.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startWithThreeMembers, type Answer, type Client, type NodeProcess } from './support/harness.js';
import { verifiesWith } from './support/verify.js';
import { sleep } from './support/wait.js';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const dirs: string[] = [];
const nonce = () => `n-${randomBytes(8).toString('hex')}`;

function expectError(res: Answer, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toContain('application/json');
  expect(res.json?.error?.code, res.text).toBe(code);
  expect(typeof res.json.error.message).toBe('string');
}

/** An unused, well-formed opaque address (P9 shape). */
function unknownAddress(): string {
  const digits = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  let s = 'path:';
  for (let i = 0; i < 22; i++) s += digits[Math.floor(Math.random() * 62)];
  return s;
}

interface Payee { subjectId: string; addressId: string; address: string }

/** A subject with a directory address, a book EUR target, a standing intent and (unless null) a payee record. */
async function newPayee(local: Client, registeredName: string | null, options: { subject_type?: string; payee_check?: 'enabled' | 'disabled'; external_ref?: string; account_ref?: string } = {}): Promise<Payee> {
  const subject = await local.post('/subjects', { subject_type: options.subject_type ?? 'natural_person', ...(options.external_ref ? { external_ref: options.external_ref } : {}) });
  expect(subject.status, subject.text).toBe(201);
  const address = await local.post('/addresses', { subject_id: subject.json.id, profile: 'directory', discoverability: 'network' });
  expect(address.status, address.text).toBe(201);
  const target = await local.post(`/addresses/${address.json.id}/targets`, { ...EUR, account_kind: 'own_ledger', account_ref: options.account_ref ?? 'X', is_default: true });
  expect(target.status, target.text).toBe(201);
  const intent = await local.request('PUT', `/addresses/${address.json.id}/standing-intent`, { body: { accepts: [EUR] } });
  expect(intent.status, intent.text).toBe(200);
  if (registeredName !== null) {
    const record = await local.request('PUT', `/subjects/${subject.json.id}/payee-record`, { body: { registered_name: registeredName, payee_check: options.payee_check ?? 'enabled' } });
    expect(record.status, record.text).toBe(200);
    expect(record.text).not.toContain(registeredName);
  }
  return { subjectId: subject.json.id, addressId: address.json.id, address: address.json.address };
}

async function newRequest(client: Client, p: Payee, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await client.post('/requests', { accepts: [EUR], address_id: p.addressId, ...extra });
  expect(res.status, res.text).toBe(201);
  return res.json.reference;
}

async function newInstruction(anon: Client, request: string): Promise<string> {
  const res = await anon.post('/instructions', { request, via: EUR });
  expect(res.status, res.text).toBe(201);
  expect(res.json.status).toBe('open');
  return res.json.reference;
}

const check = (client: Client, body: Record<string, unknown>) => client.post('/payee-check', { nonce: nonce(), ...body });

// =============================================================================================

describe('SPEC F payee check (default allowances)', () => {
  let node: NodeProcess;
  let local: Client;
  let beta: Client;
  let gamma: Client;
  let anon: Client;
  let publicKey: string;
  let kid: string;
  let person: Payee;
  let entity: Payee;

  beforeAll(async () => {
    let dataDir: string;
    ({ node, dataDir, local, beta, gamma, anon, publicKey } = await startWithThreeMembers('path-payee-check'));
    dirs.push(dataDir);
    const keys = await (await fetch(`${node.baseUrl}/.well-known/path-keys`)).json() as { keys: { kid: string; status: string }[] };
    kid = keys.keys.find((k) => k.status === 'active')!.kid;
    person = await newPayee(local, 'Dr. Katarzyna Anna Nowak');
    entity = await newPayee(local, 'Blue Ocean Shipping Ltd', { subject_type: 'legal_entity' });
  });

  afterAll(async () => {
    await node?.stop();
  });

  describe('authorisation (SPEC F, Authentication 4)', () => {
    it('no credential and no context -> 401 path.auth.unauthenticated', async () => {
      expectError(await check(anon, { key: person.address, mode: 'verify', name: 'Katarzyna Nowak' }), 401, 'path.auth.unauthenticated');
      expectError(await check(anon, { key: person.address, mode: 'display' }), 401, 'path.auth.unauthenticated');
    });

    it('a member credential: 200, requester = the member name, inside the signature', async () => {
      const n = nonce();
      const res = await beta.post('/payee-check', { key: person.address, mode: 'verify', name: 'Katarzyna Anna Nowak', nonce: n });
      expect(res.status, res.text).toBe(200);
      expect(res.json).toMatchObject({ key: person.address, requester: 'beta', mode: 'verify', result: 'match', subject_type: 'natural_person', nonce: n, kid });
      expect(verifiesWith(res.json, publicKey)).toBe(true);
      expect(verifiesWith({ ...res.json, requester: 'gamma' }, publicKey)).toBe(false);
      expect(verifiesWith({ ...res.json, nonce: nonce() }, publicKey)).toBe(false);
      expect(verifiesWith({ ...res.json, result: 'no_match' }, publicKey)).toBe(false);
    });

    it('a context naming an open request issued for key, no credential: 200, requester request:<ref> inside the signature', async () => {
      const request = await newRequest(local, person);
      const res = await check(anon, { key: person.address, mode: 'verify', name: 'Katarzyna Nowak', context: { request } });
      expect(res.status, res.text).toBe(200);
      expect(res.json.requester).toBe(`request:${request}`);
      expect(res.json.result).toBe('close_match');
      expect(verifiesWith(res.json, publicKey)).toBe(true);
      expect(verifiesWith({ ...res.json, requester: 'beta' }, publicKey)).toBe(false);
    });

    it('a context naming an open instruction issued for key, no credential: 200, requester instruction:<ref>', async () => {
      const instruction = await newInstruction(anon, await newRequest(local, person));
      const res = await check(anon, { key: person.address, mode: 'display', context: { instruction } });
      expect(res.status, res.text).toBe(200);
      expect(res.json.requester).toBe(`instruction:${instruction}`);
      expect(res.json.result).toBe('shown');
      expect(verifiesWith(res.json, publicKey)).toBe(true);
    });

    it('a context for another address -> 403 path.auth.context_refused (P7)', async () => {
      const other = await newRequest(local, entity);
      expectError(await check(anon, { key: person.address, mode: 'display', context: { request: other } }), 403, 'path.auth.context_refused');
      const otherInstruction = await newInstruction(anon, await newRequest(local, entity));
      expectError(await check(anon, { key: person.address, mode: 'display', context: { instruction: otherInstruction } }), 403, 'path.auth.context_refused');
      // A request with no address at all is not issued for key either.
      const bare = await local.post('/requests', { accepts: [EUR] });
      expect(bare.status, bare.text).toBe(201);
      expectError(await check(anon, { key: person.address, mode: 'display', context: { request: bare.json.reference } }), 403, 'path.auth.context_refused');
    });

    it('a paid or revoked request, a revoked instruction, an unknown reference -> 403 path.auth.context_refused', async () => {
      const paid = await newRequest(local, person);
      expect((await beta.post(`/requests/${paid}/paid`)).status).toBe(200);
      expectError(await check(anon, { key: person.address, mode: 'display', context: { request: paid } }), 403, 'path.auth.context_refused');

      const revoked = await newRequest(local, person);
      const r = await local.post(`/requests/${revoked}/revoke`);
      expect(r.status, r.text).toBe(200);
      expectError(await check(anon, { key: person.address, mode: 'display', context: { request: revoked } }), 403, 'path.auth.context_refused');

      const instruction = await newInstruction(anon, await newRequest(local, person));
      const ri = await local.post(`/instructions/${instruction}/revoke`);
      expect(ri.status, ri.text).toBe(200);
      expectError(await check(anon, { key: person.address, mode: 'display', context: { instruction } }), 403, 'path.auth.context_refused');

      const unknown = `req_${randomBytes(16).toString('hex')}`;
      expectError(await check(anon, { key: person.address, mode: 'display', context: { request: unknown } }), 403, 'path.auth.context_refused');
    });

    it('an expired request -> 403 path.auth.context_refused (SPEC F "not paid, revoked or expired")', async () => {
      const request = await newRequest(local, person, { expires_at: new Date(Date.now() + 1500).toISOString() });
      const before = await check(anon, { key: person.address, mode: 'display', context: { request } });
      expect(before.status, before.text).toBe(200);
      await sleep(2500);
      expectError(await check(anon, { key: person.address, mode: 'display', context: { request } }), 403, 'path.auth.context_refused');
    });
  });

  describe('modes and results (SPEC F)', () => {
    it('verify needs name: 400 without it, naming the field; an unknown mode is 400', async () => {
      const res = await check(beta, { key: person.address, mode: 'verify' });
      expectError(res, 400, 'path.core.invalid_request');
      expect(res.json.error.detail?.field).toBe('name');
      expectError(await check(beta, { key: person.address, mode: 'guess', name: 'x' }), 400, 'path.core.invalid_request');
      const noNonce = await beta.post('/payee-check', { key: person.address, mode: 'display' });
      expectError(noNonce, 400, 'path.core.invalid_request');
      expect(noNonce.json.error.detail?.field).toBe('nonce');
    });

    it('match: no display_name; any order, case, accents, courtesy titles', async () => {
      for (const name of ['Katarzyna Anna Nowak', 'NOWAK katarzyna anna', 'Pani Katarzyna Anna Nowak']) {
        const res = await check(gamma, { key: person.address, mode: 'verify', name });
        expect(res.status, res.text).toBe(200);
        expect(res.json.result, name).toBe('match');
        expect(res.json).not.toHaveProperty('display_name');
      }
    });

    it('close_match: display_name is the masked name (first given name + family-name initial), never the full name', async () => {
      const res = await check(local, { key: person.address, mode: 'verify', name: 'Katarzyna Nowak' });
      expect(res.status, res.text).toBe(200);
      expect(res.json.result).toBe('close_match');
      expect(res.json.display_name).toBe('Katarzyna N.');
      expect(res.text).not.toContain('Nowak');
      expect(res.text).not.toContain('Anna');
      expect(verifiesWith(res.json, publicKey)).toBe(true);
    });

    it('no_match: no display_name', async () => {
      const res = await check(local, { key: person.address, mode: 'verify', name: 'Maria Kowalska' });
      expect(res.status, res.text).toBe(200);
      expect(res.json.result).toBe('no_match');
      expect(res.json).not.toHaveProperty('display_name');
      expect(res.text).not.toContain('Katarzyna');
    });

    it('display: result shown with the masked name; for an entity the registered name; subject_type given', async () => {
      const p = await check(local, { key: person.address, mode: 'display' });
      expect(p.status, p.text).toBe(200);
      expect(p.json).toMatchObject({ result: 'shown', display_name: 'Katarzyna N.', subject_type: 'natural_person', mode: 'display' });
      expect(verifiesWith(p.json, publicKey)).toBe(true);
      const e = await check(local, { key: entity.address, mode: 'display' });
      expect(e.status, e.text).toBe(200);
      expect(e.json).toMatchObject({ result: 'shown', display_name: 'Blue Ocean Shipping Ltd', subject_type: 'legal_entity' });
    });

    it('an entity: legal-form words ignored (match), close_match shows the registered name', async () => {
      const m = await check(gamma, { key: entity.address, mode: 'verify', name: 'BLUE OCEAN SHIPPING LIMITED' });
      expect(m.status, m.text).toBe(200);
      expect(m.json.result).toBe('match');
      expect(m.json.subject_type).toBe('legal_entity');
      const c = await check(gamma, { key: entity.address, mode: 'verify', name: 'Blue Ocean Shiping' });
      expect(c.json.result).toBe('close_match');
      expect(c.json.display_name).toBe('Blue Ocean Shipping Ltd');
    });

    it('unavailable for every check when payee_check is disabled (verify and display), and when there is no payee record; never a display_name', async () => {
      const disabled = await newPayee(local, 'Jan Kowalski', { payee_check: 'disabled' });
      const none = await newPayee(local, null);
      for (const p of [disabled, none]) {
        for (const body of [{ mode: 'verify', name: 'Jan Kowalski' }, { mode: 'verify', name: 'Someone Else' }, { mode: 'display' }]) {
          const res = await check(beta, { key: p.address, ...body });
          expect(res.status, res.text).toBe(200);
          expect(res.json.result).toBe('unavailable');
          expect(res.json).not.toHaveProperty('display_name');
          expect(res.text).not.toContain('Kowalski');
          expect(verifiesWith(res.json, publicKey)).toBe(true);
        }
      }
      // Re-enabling the record makes it checkable again.
      const enabled = await local.request('PUT', `/subjects/${disabled.subjectId}/payee-record`, { body: { registered_name: 'Jan Kowalski', payee_check: 'enabled' } });
      expect(enabled.status, enabled.text).toBe(200);
      expect((await check(beta, { key: disabled.address, mode: 'verify', name: 'Jan Kowalski' })).json.result).toBe('match');
    });

    it('a revoked address -> 410 path.address.revoked; an unknown one -> 404 path.core.not_found', async () => {
      const p = await newPayee(local, 'Ivan Petrov');
      const revoke = await local.post(`/addresses/${p.addressId}/revoke`);
      expect(revoke.status, revoke.text).toBe(200);
      expectError(await check(beta, { key: p.address, mode: 'verify', name: 'Ivan Petrov' }), 410, 'path.address.revoked');
      expectError(await check(beta, { key: p.address, mode: 'display' }), 410, 'path.address.revoked');
      expectError(await check(beta, { key: unknownAddress(), mode: 'display' }), 404, 'path.core.not_found');
    });
  });

  describe('the signed answer (SPEC F, principle 1, 2)', () => {
    it('carries kind-independent fields: key, requester, mode, result, subject_type, nonce, signed_at, kid, signature; verifies', async () => {
      const n = nonce();
      const res = await beta.post('/payee-check', { key: entity.address, mode: 'verify', name: 'Blue Ocean Shipping', nonce: n });
      expect(res.status, res.text).toBe(200);
      const a = res.json;
      expect(a).toMatchObject({ key: entity.address, requester: 'beta', mode: 'verify', result: 'match', subject_type: 'legal_entity', nonce: n, kid });
      expect(a.signed_at).toMatch(RFC3339);
      expect(a.signature).toMatch(/^[0-9a-f]{128}$/);
      expect(verifiesWith(a, publicKey)).toBe(true);
    });

    it('carries the full signed envelope: grammar 2, protocol_version 0.2.0 (SPEC shared types, P10)', async () => {
      const res = await check(beta, { key: entity.address, mode: 'display' });
      expect(res.status, res.text).toBe(200);
      expect(res.json.grammar).toBe(2);
      expect(res.json.protocol_version).toBe('0.2.0');
      expect(res.headers.get('path-protocol-version')).toBe('0.2.0');
    });

    it('never contains any identifier, account reference, external_ref, KYC level or balance', async () => {
      const externalRef = `crm-${randomBytes(6).toString('hex')}`;
      const accountRef = `acct-${randomBytes(6).toString('hex')}`;
      const p = await newPayee(local, 'Mr Oliver James Bennett', { external_ref: externalRef, account_ref: accountRef });
      const phone = '+44 20 7946 0871';
      const email = `oliver.${randomBytes(4).toString('hex')}@example.com`;
      const iban = 'GB82 WEST 1234 5698 7654 32';
      for (const [identifier_type, identifier] of [['phone', phone], ['email', email], ['bank_account', `iban:${iban}`]]) {
        const r = await local.post('/identifiers', { subject_id: p.subjectId, identifier_type, identifier });
        expect(r.status, r.text).toBe(201);
      }
      const kycValue = `tier-${randomBytes(4).toString('hex')}`;
      const att = await local.post('/attestations', { subject_id: p.subjectId, claim: 'kyc_level', value: kycValue, expires_at: new Date(Date.now() + 3_600_000).toISOString() });
      expect(att.status, att.text).toBe(201);
      const hashes: string[] = [];
      for (const [identifier_type, identifier] of [['phone', phone], ['email', email], ['bank_account', `iban:${iban}`]]) {
        const l = await local.post('/sonar/lookup', { identifier_type, identifier });
        expect(l.status, l.text).toBe(200);
        hashes.push(l.json.identifier_hash);
      }
      const answers: Answer[] = [];
      for (const body of [
        { mode: 'verify', name: 'Oliver James Bennett' }, { mode: 'verify', name: 'Oliver Bennett' },
        { mode: 'verify', name: 'Nobody Known' }, { mode: 'display' },
      ]) answers.push(await check(beta, { key: p.address, ...body }));
      expect(answers.map((a) => a.json.result)).toEqual(['match', 'close_match', 'no_match', 'shown']);
      const forbidden = [
        phone, phone.replace(/[^0-9]/g, ''), email, iban.replace(/ /g, ''), externalRef, accountRef, kycValue, p.subjectId, p.addressId, att.json.reference,
        ...hashes, 'James', 'Bennett', 'kyc', 'balance', 'account', 'external_ref', 'iban',
      ];
      for (const a of answers) {
        expect(a.status, a.text).toBe(200);
        for (const f of forbidden) expect(a.text, f).not.toContain(f);
        expect(Object.keys(a.json).sort()).toEqual(expect.arrayContaining(['key', 'mode', 'nonce', 'requester', 'result', 'signature', 'subject_type']));
      }
    });
  });

  describe('allowances (P12, SPEC Limits)', () => {
    it('3 distinct names a day per requester and address: the 4th distinct -> 429 path.finder.budget_exhausted; a resubmitted name (other case, accents, order) is free', async () => {
      const p = await newPayee(local, 'José Álvarez Núñez');
      const other = await newPayee(local, 'Lucía Fernández');
      const names = ['Maria Lopez', 'José Álvarez', 'Pedro Sanchez'];
      for (const name of names) expect((await check(beta, { key: p.address, mode: 'verify', name })).status).toBe(200);
      // Resubmissions, written differently, are the same names and free.
      for (const name of ['MARIA LOPEZ', 'jose alvarez', 'Álvarez José', 'pedro  sánchez']) {
        const res = await check(beta, { key: p.address, mode: 'verify', name });
        expect(res.status, `${name}: ${res.text}`).toBe(200);
      }
      const fourth = await check(beta, { key: p.address, mode: 'verify', name: 'José Álvarez Núñez' });
      expectError(fourth, 429, 'path.finder.budget_exhausted');
      // Still free after the refusal.
      expect((await check(beta, { key: p.address, mode: 'verify', name: 'Maria Lopez' })).status).toBe(200);
      // Display does not submit a name.
      expect((await check(beta, { key: p.address, mode: 'display' })).status).toBe(200);
      // Per requester: another member may still check a new name on this address.
      const byGamma = await check(gamma, { key: p.address, mode: 'verify', name: 'José Álvarez Núñez' });
      expect(byGamma.status, byGamma.text).toBe(200);
      expect(byGamma.json.result).toBe('match');
      // Per address: beta may still check new names on another address.
      for (const name of ['Ana Ruiz', 'Lucia Fernandez', 'Carmen Diaz']) {
        expect((await check(beta, { key: other.address, mode: 'verify', name })).status).toBe(200);
      }
      expectError(await check(beta, { key: other.address, mode: 'verify', name: 'Elena Vidal' }), 429, 'path.finder.budget_exhausted');
    });

    it('a context requester has its own distinct-name allowance per address', async () => {
      const p = await newPayee(local, 'Giulia Bianchi');
      const request = await newRequest(local, p);
      for (const name of ['Anna Rossi', 'Marco Verdi', 'Luca Neri']) {
        expect((await check(anon, { key: p.address, mode: 'verify', name, context: { request } })).status).toBe(200);
      }
      expectError(await check(anon, { key: p.address, mode: 'verify', name: 'Giulia Bianchi', context: { request } }), 429, 'path.finder.budget_exhausted');
      expect((await check(anon, { key: p.address, mode: 'verify', name: 'anna ROSSI', context: { request } })).status).toBe(200);
    });

    it('10 checks over the life of a payment context: the 11th -> 429 path.finder.budget_exhausted; a new context starts again', async () => {
      const p = await newPayee(local, 'Wolfgang Amadeus Mozart');
      const request = await newRequest(local, p);
      for (let i = 0; i < 10; i++) {
        const res = await check(anon, { key: p.address, mode: i % 2 === 0 ? 'display' : 'verify', name: 'Wolfgang Mozart', context: { request } });
        expect(res.status, `check ${i + 1}: ${res.text}`).toBe(200);
      }
      expectError(await check(anon, { key: p.address, mode: 'display', context: { request } }), 429, 'path.finder.budget_exhausted');
      expectError(await check(anon, { key: p.address, mode: 'verify', name: 'Wolfgang Mozart', context: { request } }), 429, 'path.finder.budget_exhausted');
      const fresh = await newRequest(local, p);
      expect((await check(anon, { key: p.address, mode: 'display', context: { request: fresh } })).status).toBe(200);
      const instruction = await newInstruction(anon, fresh);
      for (let i = 0; i < 10; i++) expect((await check(anon, { key: p.address, mode: 'display', context: { instruction } })).status).toBe(200);
      expectError(await check(anon, { key: p.address, mode: 'display', context: { instruction } }), 429, 'path.finder.budget_exhausted');
    });
  });
});

// =============================================================================================

describe('P12 daily per-member payee-check allowance (PATH_LIMIT_PAYEE_CHECK_DAILY_MAX=3)', () => {
  let node: NodeProcess;
  let local: Client;
  let beta: Client;
  let gamma: Client;
  let anon: Client;

  beforeAll(async () => {
    let dataDir: string;
    ({ node, dataDir, local, beta, gamma, anon } = await startWithThreeMembers('path-payee-daily', { env: { PATH_LIMIT_PAYEE_CHECK_DAILY_MAX: '3' } }));
    dirs.push(dataDir);
  });

  afterAll(async () => {
    await node?.stop();
  });

  it('a member\'s 4th check of the day -> 429 path.finder.budget_exhausted, across addresses and modes; another member and a payment context still work', async () => {
    const a = await newPayee(local, 'Anna Maria Rossi');
    const b = await newPayee(local, 'Marco Polo');
    expect((await check(beta, { key: a.address, mode: 'display' })).status).toBe(200);
    expect((await check(beta, { key: a.address, mode: 'verify', name: 'Anna Rossi' })).status).toBe(200);
    expect((await check(beta, { key: b.address, mode: 'verify', name: 'Marco Polo' })).status).toBe(200);
    expectError(await check(beta, { key: b.address, mode: 'display' }), 429, 'path.finder.budget_exhausted');
    expectError(await check(beta, { key: a.address, mode: 'verify', name: 'Anna Rossi' }), 429, 'path.finder.budget_exhausted');
    const g = await check(gamma, { key: a.address, mode: 'verify', name: 'Anna Maria Rossi' });
    expect(g.status, g.text).toBe(200);
    expect(g.json.result).toBe('match');
    const request = await newRequest(local, b);
    const ctx = await check(anon, { key: b.address, mode: 'display', context: { request } });
    expect(ctx.status, ctx.text).toBe(200);
    expect(ctx.json.requester).toBe(`request:${request}`);
  });
});

afterAll(() => {
  for (const d of dirs) removeDir(d);
});
