// Principle 4 and P8 (clear identifiers exist only in the memory of the request that carries
// them), SPEC B (external_ref, payee record name, ownership binding target "hashed and
// forgotten") and C (account_ref never returned): register every kind of clear value over the
// real server, stop the node, and search every byte of its data directory and every line it
// logged. None may be found.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { domainToASCII } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, createCredential, removeDir, startNode, tempDir, type Answer, type NodeProcess } from './support/harness.js';

/** ISO 7064 MOD 97-10 over letters-as-numbers, written here independently of the node. */
function mod97(text: string): number {
  const digits = [...text].map((c) => (/[A-Z]/.test(c) ? String(c.charCodeAt(0) - 55) : c)).join('');
  return Number(BigInt(digits) % 97n);
}
/** A valid IBAN for a country and BBAN (check digits computed here). */
function ibanOf(country: string, bban: string): string {
  const check = 98 - mod97(`${bban}${country}00`);
  return `${country}${String(check).padStart(2, '0')}${bban}`;
}
/** A valid LEI (ISO 17442) from its first 18 characters. */
function leiOf(prefix18: string): string {
  const check = 98 - mod97(`${prefix18}00`);
  return `${prefix18}${String(check).padStart(2, '0')}`;
}

const IBAN = ibanOf('DE', '370400440532719864');
const LEI = leiOf('9845007QPRIVACY1ZX');
const EMAIL_DOMAIN = 'Privätbank-Probe.example';

/** Every clear value the node is given, raw and in the forms it normalises to. */
const clear = {
  externalRef: 'ext-ref-Privacy-4e1d9c2a',
  phoneRaw: '+33 1 47 20 83 61',
  phoneNormalised: '+33147208361',
  emailRaw: '  Privacy.Probe-7f3a@Example-Privacy.ORG ',
  emailNormalised: 'privacy.probe-7f3a@example-privacy.org',
  idnEmailRaw: `Quentin.Idnprobe@${EMAIL_DOMAIN}`,
  idnEmailNormalised: `quentin.idnprobe@${domainToASCII(EMAIL_DOMAIN.toLowerCase())}`,
  ibanRaw: `iban:${IBAN.toLowerCase().replace(/(.{4})/g, '$1 ').trim()}`,
  ibanNormalised: `iban:${IBAN}`,
  bbanRaw: 'bban:7731-90 4418 2266',
  bbanNormalised: 'bban:7731-9044182266',
  leiRaw: LEI.toLowerCase(),
  leiNormalised: LEI,
  regRaw: 'reg:GB:companies-house:PV718293',
  tax: 'tax:BR:98.765.432/0001-10',
  taxNormalised: 'tax:BR:98765432000110',
  payeeName: 'Ignatius Privacyprobe-Wolfenden',
  accountRef: 'ACCT-PRIV-88d1e0f4c2',
  accountRef2: 'LEDGER-PRIV-19af77b3e5',
  bindingPhoneRaw: '+33 1 47 20 83 62',
  bindingPhoneNormalised: '+33147208362',
  bindingWallet: '0xB1nd1ngTarget5eCret0000000000000000dEaD',
  // Values sent only in requests the node refuses.
  refusedPhone: '06 12 34 56 78',
  refusedEmail: 'leaky.refusal@@example-privacy.org',
  refusedIban: 'iban:DE00370400440532719864',
  unknownSubjectEmail: 'orphan.probe-91c2@example-privacy.org',
  overlongPrefix: 'overlong-identifier-probe-',
};

/** Distinctive fragments too: a store that kept only part of a value still leaks it. */
const needles: string[] = [
  ...Object.values(clear),
  clear.phoneRaw.trim(), '147208361', '147208362', 'Privacy.Probe-7f3a', 'privacy.probe-7f3a', 'Quentin.Idnprobe', 'quentin.idnprobe',
  IBAN, IBAN.slice(4), clear.ibanRaw.slice(5), '7731-90 4418 2266', '9044182266', LEI, LEI.slice(0, 18), 'PV718293', '98765432000110', '98.765.432/0001-10',
  'Privacyprobe', 'Wolfenden', '88d1e0f4c2', '19af77b3e5', 'B1nd1ngTarget5eCret', '06 12 34 56 78', 'leaky.refusal', 'orphan.probe-91c2',
].filter((n) => n.trim().length >= 6);

const CONTROL = 'CONTROL-attestation-value-5b8e31';

let node: NodeProcess;
let dataDir: string;
let local: Client;
let beta: Client;
const answers: Answer[] = [];
const refusals: Answer[] = [];

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

function foundIn(haystack: Buffer, needle: string): boolean {
  return haystack.includes(Buffer.from(needle, 'utf8')) || haystack.includes(Buffer.from(needle, 'utf16le'));
}

async function ok(res: Promise<Answer>, status = 201): Promise<Answer> {
  const a = await res;
  expect(a.status, a.text).toBe(status);
  answers.push(a);
  return a;
}

beforeAll(async () => {
  dataDir = tempDir('path-privacy');
  const own = createCredential(dataDir, 'local', { local: true });
  const other = createCredential(dataDir, 'beta', { local: false });
  node = await startNode({ dataDir, args: ['--log-level', 'trace'] });
  local = new Client(node.baseUrl, own);
  beta = new Client(node.baseUrl, other);

  const subject = (await ok(local.post('/subjects', { subject_type: 'natural_person', external_ref: clear.externalRef }))).json.id;
  const identifiers: [string, string, string?][] = [
    ['phone', clear.phoneRaw, 'otp_sms'], ['email', clear.emailRaw, 'link_click'], ['email', clear.idnEmailRaw],
    ['bank_account', clear.ibanRaw, 'micro_deposit'], ['bank_account', clear.bbanRaw], ['lei', clear.leiRaw, 'registry_lookup'],
    ['reg', clear.regRaw, 'document_review'], ['tax', clear.tax],
  ];
  for (const [identifier_type, identifier, verification_method] of identifiers) {
    // Some with an idempotency key, so that the stored-answer path is searched as well (P7).
    await ok(local.post('/identifiers', { subject_id: subject, identifier_type, identifier, ...(verification_method ? { verification_method } : {}) },
      verification_method ? { idempotencyKey: `idn-${identifier_type}-${Math.random().toString(36).slice(2)}` } : {}));
  }
  await ok(local.request('PUT', `/subjects/${subject}/payee-record`, { body: { registered_name: clear.payeeName, payee_check: 'enabled' } }), 200);
  const address = (await ok(local.post('/addresses', { subject_id: subject, profile: 'directory', discoverability: 'network' }))).json;
  await ok(local.post(`/addresses/${address.id}/targets`, { rail: 'book', asset_type: 'fiat', asset_code: 'EUR', account_kind: 'own_ledger', account_ref: clear.accountRef }));
  await ok(local.post(`/addresses/${address.id}/targets`, { rail: 'mobile_money', asset_type: 'fiat', asset_code: 'KES', account_kind: 'external_account', account_ref: clear.accountRef2 }, { idempotencyKey: 'tgt-privacy-1' }));
  await ok(local.request('PUT', `/addresses/${address.id}/standing-intent`, { body: { accepts: [{ rail: 'book', asset_type: 'fiat', asset_code: 'EUR' }], policy: { unknown_sender: 'quarantine' } } }), 200);
  await ok(local.post('/ownership-bindings', { subject_id: subject, binding_type: 'identifier', target_kind: 'phone', target: clear.bindingPhoneRaw, proof_method: 'otp_sms' }));
  await ok(local.post('/ownership-bindings', { subject_id: subject, binding_type: 'wallet', target_kind: 'chain_address', target: clear.bindingWallet, proof_method: 'signed_message' }));
  await ok(local.post('/attestations', { subject_id: subject, claim: 'kyc_level', value: CONTROL, expires_at: new Date(Date.now() + 86_400_000).toISOString() }));
  const rotated = (await ok(local.post(`/addresses/${address.id}/rotate`))).json;
  await ok(local.get(`/addresses?subject_id=${subject}`), 200);
  await ok(local.get(`/addresses/${rotated.id}/targets`), 200);

  // Requests the node refuses, each carrying a clear value.
  const refuse = async (res: Promise<Answer>, status: number) => {
    const a = await res;
    expect(a.status, a.text).toBe(status);
    refusals.push(a);
  };
  await refuse(local.post('/identifiers', { subject_id: subject, identifier_type: 'phone', identifier: clear.refusedPhone }), 400);
  await refuse(local.post('/identifiers', { subject_id: subject, identifier_type: 'email', identifier: clear.refusedEmail }), 400);
  await refuse(local.post('/identifiers', { subject_id: subject, identifier_type: 'bank_account', identifier: clear.refusedIban }), 400);
  await refuse(local.post('/identifiers', { subject_id: subject, identifier_type: 'email', identifier: clear.overlongPrefix + 'x'.repeat(400) }), 400);
  await refuse(local.post('/identifiers', { subject_id: subject, identifier_type: 'passport', identifier: clear.phoneRaw }), 400);
  await refuse(local.post('/identifiers', { subject_id: `sub_${'0'.repeat(32)}`, identifier_type: 'email', identifier: clear.unknownSubjectEmail }), 404);
  await refuse(local.post('/identifiers', undefined, { rawBody: `{"subject_id":"${subject}","identifier_type":"email","identifier":"${clear.emailNormalised}"` }), 400);
  await refuse(local.post('/ownership-bindings', { subject_id: subject, binding_type: 'identifier', target_kind: 'phone', target: clear.refusedPhone, proof_method: 'otp_sms' }), 400);
  await refuse(beta.request('PUT', `/subjects/${subject}/payee-record`, { body: { registered_name: clear.payeeName, payee_check: 'enabled' } }), 403);
  await refuse(beta.post(`/addresses/${rotated.id}/targets`, { rail: 'book', asset_type: 'fiat', asset_code: 'EUR', account_kind: 'own_ledger', account_ref: clear.accountRef }), 403);

  const code = await node.stop();
  expect(code).toBe(0);
});

afterAll(async () => {
  if (node !== undefined && node.process.exitCode === null) await node.stop();
  if (dataDir !== undefined) removeDir(dataDir);
});

describe('principle 4 / P8: clear values never reach the data directory or the log', () => {
  it('the search reads what the node stores: a non-secret control value is found in the data directory', () => {
    const files = filesUnder(dataDir);
    expect(files.length).toBeGreaterThan(0);
    expect(files.some((f) => foundIn(readFileSync(f), CONTROL))).toBe(true);
  });

  it('policy.unknown_sender is kept with the standing intent (SPEC C)', () => {
    expect(filesUnder(dataDir).some((f) => foundIn(readFileSync(f), 'quarantine'))).toBe(true);
  });

  it('no file of the data directory holds any identifier, name, external_ref, account ref or binding target, raw or normalised', () => {
    const leaks: string[] = [];
    for (const file of filesUnder(dataDir)) {
      const bytes = readFileSync(file);
      for (const needle of needles) if (foundIn(bytes, needle)) leaks.push(`${JSON.stringify(needle)} in ${file.slice(dataDir.length)}`);
    }
    expect(leaks).toEqual([]);
  });

  it('the node\'s log output holds none of them', () => {
    const output = node.output();
    expect(output).toContain('listening');
    const leaks = needles.filter((n) => output.includes(n));
    expect(leaks).toEqual([]);
  });

  it('no answer, successful or refused, echoes an identifier, name, external_ref, account ref or binding target', () => {
    expect(answers.length).toBeGreaterThan(10);
    expect(refusals.length).toBe(10);
    const leaks: string[] = [];
    for (const a of [...answers, ...refusals]) {
      for (const needle of needles) if (a.text.includes(needle)) leaks.push(`${JSON.stringify(needle)} in ${a.text}`);
    }
    expect(leaks).toEqual([]);
  });

  it('refusals of bad identifiers are 400 invalid_request naming the field (P7, P8)', () => {
    const fields = refusals.filter((a) => a.status === 400).map((a) => [a.json?.error?.code, a.json?.error?.detail?.field]);
    expect(fields).toEqual([
      ['path.core.invalid_request', 'identifier'], ['path.core.invalid_request', 'identifier'], ['path.core.invalid_request', 'identifier'],
      ['path.core.invalid_request', 'identifier'], ['path.core.invalid_request', 'identifier_type'], ['path.core.invalid_request', '(body)'],
      ['path.core.invalid_request', 'target'],
    ]);
  });
});
