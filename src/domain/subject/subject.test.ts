// The subject decider alone (SPEC B, C, E, F; "States and transitions: Address, intent,
// attestation"): given events, when a command, then events or a refusal. Every row of the state
// table, every refusal, and the rules that used to live in the routes: who may send what, the
// discoverability and primary defaults, and the payee check's payment context.
import { describe, expect, it } from 'vitest';
import type { Caller, Decision, Publication } from '../decider.js';
import { refusal } from '../../protocol/errors.js';
import {
  BETA,
  deciderSpec,
  goneView,
  LOCAL,
  SPEC_NOW,
  viewOf,
  type Outcome,
  type SpecContext,
} from '../spec.js';
import type { Input, SubjectCommandName } from './decision.js';
import { addressInfoKey, commitmentViewKey, resolverViewKey } from './resolver.js';
import { isOrderedMap } from 'immutable';
import {
  activeIntent,
  attestationsOf,
  contextChecksOf,
  namesCheckedOf,
  identifiersOf,
  liveTargets,
  intentsOf,
  targetsOf,
  type SubjectEvent,
  type SubjectState,
} from './state.js';
import { frame, unframe } from '../../log/record.js';
import { SUBJECT_ACCESS, subjectDecider } from './subject.js';

const spec = deciderSpec(subjectDecider);
const GAMMA: Caller = { member: 'gamma', local: false };
const AT = new Date(SPEC_NOW).toISOString();
const DAY = AT.slice(0, 10);
const HOUR = 3_600_000;
const IN_AN_HOUR = new Date(SPEC_NOW + HOUR).toISOString();
const NOT_FOUND = 'path.core.not_found';
const INVALID = 'path.core.invalid_request';
const FORBIDDEN = 'path.auth.forbidden';
const SPENT = 'path.finder.budget_exhausted';
const ref = (prefix: string, digit: string) => `${prefix}_${digit.repeat(32)}`;
const SUB = ref('sub', '1');
const ADR = ref('adr', '2');
const ADR2 = ref('adr', '3');
const ATT = ref('att', '4');
const OBD = ref('obd', '5');
const TGT = ref('tgt', '6');
const REQ = ref('req', '7');
const INS = ref('ins', '8');
const IDN = ref('idn', '9');
const ADDRESS = 'path:AbCdEfGhIjKlMnOpQrStUv';
const ADDRESS2 = 'path:ZyXwVuTsRqPoNmLkJiHgFe';
const hash = (digit: string) => digit.repeat(64);
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
/** Sealing as the tests see it: a visible wrapper that the decider opens with `unseal`. */
const sealed = (clear: string) => `sealed:${clear}`;
const unseal = (value: string) => value.slice('sealed:'.length);

type Events = SubjectEvent[];
type Made = Decision<SubjectEvent>;

/** The decision of an outcome that must commit (refused: the test fails). */
const made = (outcome: Outcome<SubjectState, SubjectEvent>): Made => outcome.then(() => undefined);

/** The events `given` has, then those one more command commits. */
function after<K extends SubjectCommandName>(
  given: Events,
  name: K,
  input: Input<K>,
  caller: Caller | null = LOCAL,
  context: SpecContext = {},
): Events {
  return [...given, ...made(spec.given(given, context).when(name, input, caller)).events];
}

const valueOf = (d: Made) => (d.answer as { value: unknown }).value;
const textOf = (d: Made) => JSON.parse((d.answer as { text: string }).text);
const viewAt = (d: Made, key: string): Publication['view'] | undefined =>
  d.publications?.find((p) => p.key === key)?.view;
const viewText = (d: Made, key: string) => JSON.parse((viewAt(d, key) as { text: string }).text);
const stateOf = (events: Events) =>
  events.reduce<SubjectState | null>(subjectDecider.evolve, null)!;

/** A subject owned by beta. */
const subject = (subject_type: 'natural_person' | 'legal_entity' = 'natural_person'): Events =>
  after([], 'create', { id: SUB, subject_type, external_ref_sealed: null }, BETA);
const withAddress = (given = subject(), id = ADR, address = ADDRESS, extra = {}): Events =>
  after(
    given,
    'create-address',
    {
      id,
      address,
      hash: hash('a'),
      profile: 'directory',
      ...extra,
    },
    BETA,
  );
const withTerms = (given = withAddress()): Events =>
  after(given, 'set-intent', { address_id: ADR, accepts: [EUR] }, BETA);
const replacement = { id: ADR2, address: ADDRESS2, hash: hash('b') };
const target = (overrides: Partial<Input<'add-target'>['target']> = {}) => ({
  id: TGT,
  rail: 'book',
  asset_type: 'fiat',
  asset_code: 'EUR',
  account_kind: 'own_ledger' as const,
  account_ref_sealed: sealed('ACCT-1'),
  ...overrides,
});
const binding = {
  reference: OBD,
  binding_type: 'identifier',
  target_kind: 'phone',
  proof_method: 'otp_sms',
  target_hash: hash('c'),
};

describe('subject: create, and who may send what (SUBJECT_ACCESS)', () => {
  it('create: the calling member owns the subject; 201 with id, subject_type, created_at', () => {
    const input = {
      id: SUB,
      subject_type: 'legal_entity' as const,
      external_ref_sealed: sealed('crm'),
    };
    const created = spec
      .given([])
      .when('create', input, BETA)
      .then([
        {
          type: 'created',
          subject: { ...input, owner: 'beta', created_at: AT },
        },
      ]);
    expect(created.answer).toEqual({
      value: { id: SUB, subject_type: 'legal_entity', created_at: AT },
      created: true,
    });
  });

  it('create refuses an id in use, and a call without a member', () => {
    const input = { id: SUB, subject_type: 'natural_person' as const, external_ref_sealed: null };
    spec.given(subject()).when('create', input, BETA).thenRefused(INVALID, { field: 'id' });
    spec
      .given([])
      .when('create', input, null)
      .thenRefused('path.auth.unauthenticated', { reason: 'missing' });
  });

  it("another member's subject is answered as absent, naming what the command names", () => {
    const given = withAddress();
    spec.given(given).when('exists', {}, GAMMA).thenRefused(NOT_FOUND);
    spec.given(given).when('exists', {}, null).thenRefused(NOT_FOUND);
    spec.given(given).when('withdraw', {}, GAMMA).thenRefused(NOT_FOUND);
    expect(spec.given(given).when('list-addresses', {}, GAMMA).thenRefused(NOT_FOUND).message).toBe(
      'no such subject',
    );
    const rotate = { address_id: ADR, replacement };
    expect(
      spec.given(given).when('rotate-address', rotate, GAMMA).thenRefused(NOT_FOUND).message,
    ).toBe('no such address');
    // The owner and the operator's own member may.
    expect(valueOf(spec.given(given).when('exists', {}, BETA).thenNothing())).toEqual({ id: SUB });
    spec.given(given).when('exists', {}, LOCAL).thenNothing();
  });

  it('an unknown subject, attestation, binding or address is not found', () => {
    const message = (outcome: Outcome<SubjectState, SubjectEvent>) =>
      outcome.thenRefused(NOT_FOUND).message;
    expect(message(spec.given([]).when('withdraw', {}, BETA))).toBe('no such subject');
    expect(message(spec.given([]).when('read-attestation', { reference: ATT }, BETA))).toBe(
      'no such attestation',
    );
    expect(message(spec.given([]).when('read-binding', { reference: OBD }, BETA))).toBe(
      'no such ownership binding',
    );
    expect(message(spec.given(subject()).when('revoke-address', { address_id: ADR }, BETA))).toBe(
      'no such address',
    );
  });

  it('operator-only commands refuse other members (403), the owner too, before any lookup', () => {
    const local = Object.entries(SUBJECT_ACCESS).filter(([, access]) => access === 'local');
    expect(local.map(([name]) => name).sort()).toEqual([
      'add-attestation',
      'add-binding',
      'add-target',
      'list-attestations',
      'revoke-attestation',
      'set-payee-record',
    ]);
    const attestation = {
      reference: ATT,
      claim: 'kyc_level' as const,
      value: '2',
      expires_at: IN_AN_HOUR,
    };
    const record = { name_sealed: sealed('X'), payee_check: 'enabled' as const };
    for (const given of [withAddress(), []]) {
      const refused = (outcome: Outcome<SubjectState, SubjectEvent>) =>
        outcome.thenRefused(FORBIDDEN);
      refused(spec.given(given).when('set-payee-record', record, BETA));
      refused(spec.given(given).when('add-attestation', attestation, BETA));
      refused(spec.given(given).when('revoke-attestation', { reference: ATT }, BETA));
      refused(spec.given(given).when('list-attestations', {}, BETA));
      refused(spec.given(given).when('list-attestations', {}, null));
      refused(spec.given(given).when('add-binding', binding, BETA));
      refused(spec.given(given).when('add-target', { address_id: ADR, target: target() }, BETA));
    }
  });
});

describe('subject: identifiers (SPEC B)', () => {
  type Identifier = Input<'add-identifier'>;
  const add = (input: Omit<Identifier, 'id' | 'hash'>) =>
    spec.given(subject()).when('add-identifier', { id: IDN, hash: hash('d'), ...input }, BETA);

  it('discoverability by type: phone, email network; bank_account private; others public', () => {
    const defaults = {
      phone: 'network',
      email: 'network',
      bank_account: 'private',
      lei: 'public',
      reg: 'public',
      tax: 'public',
    } as const;
    type Type = Identifier['identifier_type'];
    for (const [type, expected] of Object.entries(defaults) as [Type, string][]) {
      const decision = made(add({ identifier_type: type }));
      expect(valueOf(decision)).toEqual({
        id: IDN,
        identifier_type: type,
        discoverability: expected,
        verified_at: null,
      });
      expect(decision.directory).toEqual([
        {
          key: `idn/${IDN}`,
          identifierType: type,
          identifierHash: hash('d'),
          visibility: expected === 'private' ? null : expected,
        },
      ]);
    }
    const chosen = made(add({ identifier_type: 'bank_account', discoverability: 'public' }));
    expect(valueOf(chosen)).toMatchObject({ discoverability: 'public' });
  });

  it("verified_at is set only with one of the type's methods; another is refused (400)", () => {
    const verified = made(add({ identifier_type: 'phone', verification_method: 'otp_sms' }));
    expect(valueOf(verified)).toMatchObject({ verified_at: AT });
    add({ identifier_type: 'phone', verification_method: 'link_click' }).thenRefused(INVALID, {
      field: 'verification_method',
    });
  });
});

describe('subject: withdrawal (state table: all private, out of the index; subject kept)', () => {
  it('all identifiers and addresses private, all index rows removed; entries: live ones', () => {
    const phone = { id: IDN, identifier_type: 'phone' as const, hash: hash('d') };
    let given = after(subject(), 'add-identifier', phone, BETA);
    given = withAddress(given);
    given = withAddress(given, ADR2, ADDRESS2, { profile: 'relationship' });
    given = after(given, 'revoke-address', { address_id: ADR2 }, BETA);
    const decision = spec
      .given(given)
      .when('withdraw', {}, BETA)
      .then([{ type: 'withdrawn', at: AT }]);
    expect(valueOf(decision)).toEqual({ subject_id: SUB, withdrawn: true, entries: 2 });
    expect(decision.directory!.map((row) => row.visibility)).toEqual([null, null, null]);
    const withdrawn = [...given, ...decision.events];
    const state = stateOf(withdrawn);
    expect([...state.identifiers.values()].map((i) => i.discoverability)).toEqual(['private']);
    expect([...state.addresses.values()].map((a) => a.discoverability)).toEqual([
      'private',
      'private',
    ]);
    spec.given(withdrawn).when('exists', {}, BETA).thenNothing();
  });

  it('rotation does not undo it: the replacement is private too', () => {
    const given = after(withAddress(), 'withdraw', {}, BETA);
    const rotate = { address_id: ADR, replacement };
    const rotated = made(spec.given(given).when('rotate-address', rotate, BETA));
    expect(valueOf(rotated)).toMatchObject({ discoverability: 'private' });
  });
});

describe('subject: payee record (SPEC B, local only)', () => {
  it('is kept sealed and never echoed', () => {
    const name_sealed = sealed('Zebedee Q');
    const input = { name_sealed, payee_check: 'enabled' as const };
    const decision = spec
      .given(subject())
      .when('set-payee-record', input)
      .then([{ type: 'payee_record_set', name_sealed, payee_check: 'enabled', at: AT }]);
    expect(valueOf(decision)).toEqual({ subject_id: SUB, payee_check: 'enabled', updated_at: AT });
  });
});

describe('subject: attestations and bindings (state table: attestation)', () => {
  const attestation = {
    reference: ATT,
    claim: 'kyc_level' as const,
    value: '2',
    expires_at: IN_AN_HOUR,
  };
  const attested = () => after(subject(), 'add-attestation', attestation);

  it('recorded by the operator: 201, indexed by its reference; expires_at in the future', () => {
    const decision = made(spec.given(subject()).when('add-attestation', attestation));
    expect(decision.answer).toEqual({
      value: { ...attestation, subject_id: SUB, created_at: AT },
      created: true,
    });
    expect(viewAt(decision, `route/${ATT}`)).toEqual({ text: SUB, signed: false });
    spec
      .given(subject())
      .when('add-attestation', { ...attestation, expires_at: AT })
      .thenRefused(INVALID, { field: 'expires_at' });
  });

  it('active: any member reads a signed statement, issued by the operator', () => {
    const read = spec
      .given(attested())
      .when('read-attestation', { reference: ATT }, GAMMA)
      .thenNothing();
    expect(read.answer).toMatchObject({ signed: true });
    expect(textOf(read)).toMatchObject({
      type: 'path.attestation',
      reference: ATT,
      issuer: 'local',
      subject_id: SUB,
      claim: 'kyc_level',
    });
  });

  it('active -> revoked: the row kept; the next read answers 410; again changes nothing', () => {
    const revoke = spec
      .given(attested())
      .when('revoke-attestation', { reference: ATT })
      .then([{ type: 'attestation_revoked', reference: ATT, at: AT }]);
    expect(valueOf(revoke)).toEqual({ reference: ATT, revoked: true, revoked_at: AT });
    const revoked = [...attested(), ...revoke.events];
    spec
      .given(revoked)
      .when('read-attestation', { reference: ATT }, GAMMA)
      .thenRefused('path.id.attestation_revoked');
    const again = spec.given(revoked).when('revoke-attestation', { reference: ATT }).thenNothing();
    expect(valueOf(again)).toEqual({ reference: ATT, revoked: true, revoked_at: AT });
    expect(valueOf(spec.given(revoked).when('list-attestations', {}).thenNothing())).toMatchObject({
      attestations: [{ reference: ATT, status: 'revoked', revoked_at: AT }],
    });
    spec.given(subject()).when('revoke-attestation', { reference: ATT }).thenRefused(NOT_FOUND);
  });

  it('active -> expired (passage of expires_at): the next read answers 410; listed expired', () => {
    const later = { now: SPEC_NOW + HOUR };
    spec
      .given(attested(), later)
      .when('read-attestation', { reference: ATT }, BETA)
      .thenRefused('path.id.attestation_expired');
    expect(
      valueOf(spec.given(attested(), later).when('list-attestations', {}).thenNothing()),
    ).toMatchObject({ attestations: [{ reference: ATT, status: 'expired' }] });
    expect(
      valueOf(spec.given(attested()).when('list-attestations', {}).thenNothing()),
    ).toMatchObject({ attestations: [{ reference: ATT, status: 'active', revoked_at: null }] });
  });

  it('ownership bindings: the hashed target only; no expiry unless given; 410 at read', () => {
    const decision = made(spec.given(subject()).when('add-binding', binding));
    expect(valueOf(decision)).toEqual({
      reference: OBD,
      subject_id: SUB,
      binding_type: 'identifier',
      target_kind: 'phone',
      proof_method: 'otp_sms',
      expires_at: null,
      created_at: AT,
    });
    const bound = [...subject(), ...decision.events];
    const read = spec.given(bound).when('read-binding', { reference: OBD }, GAMMA).thenNothing();
    expect(textOf(read)).toMatchObject({
      type: 'path.ownership_binding',
      reference: OBD,
      issuer: 'local',
    });
    expect(JSON.stringify(read.answer)).not.toContain(hash('c'));
    spec
      .given(subject())
      .when('add-binding', { ...binding, expires_at: AT })
      .thenRefused(INVALID, { field: 'expires_at' });
    const expiring = after(subject(), 'add-binding', { ...binding, expires_at: IN_AN_HOUR });
    spec
      .given(expiring, { now: SPEC_NOW + HOUR })
      .when('read-binding', { reference: OBD }, BETA)
      .thenRefused('path.id.attestation_expired');
  });
});

describe('subject: addresses (SPEC C, E; state table: address, intent)', () => {
  const fresh = { id: ADR, address: ADDRESS, hash: hash('a') };

  it('create: a directory address is network-visible, not primary, unless said; indexed', () => {
    const decision = made(
      spec.given(subject()).when(
        'create-address',
        {
          ...fresh,
          profile: 'directory',
        },
        BETA,
      ),
    );
    expect(decision.answer).toEqual({
      value: {
        id: ADR,
        address: ADDRESS,
        profile: 'directory',
        discoverability: 'network',
        is_primary: false,
        created_at: AT,
      },
      created: true,
    });
    expect(viewAt(decision, `route/${ADR}`)).toEqual({ text: SUB, signed: false });
    expect(viewAt(decision, commitmentViewKey(ADDRESS))).toBeNull();
    expect(viewAt(decision, resolverViewKey(ADDRESS))).toMatchObject({ signed: true });
    expect(viewText(decision, resolverViewKey(ADDRESS))).toMatchObject({
      kind: 'resolver_answer',
      address: ADDRESS,
      accepts: [],
      commitment: null,
    });
    expect(decision.directory).toEqual([
      {
        key: `adr/${ADR}`,
        identifierType: 'address',
        identifierHash: hash('a'),
        visibility: 'network',
      },
    ]);
  });

  it('a relationship address is private unless said, and never in the index', () => {
    const relationship = { ...fresh, profile: 'relationship' as const };
    const hidden = made(spec.given(subject()).when('create-address', relationship, BETA));
    expect(valueOf(hidden)).toMatchObject({ discoverability: 'private' });
    const network = made(
      spec.given(subject()).when(
        'create-address',
        {
          ...relationship,
          discoverability: 'network',
        },
        BETA,
      ),
    );
    expect(network.directory![0]!.visibility).toBeNull();
  });

  it('a new primary address clears the previous primary', () => {
    const given = withAddress(subject(), ADR, ADDRESS, { is_primary: true });
    spec
      .given(given)
      .when(
        'create-address',
        {
          ...replacement,
          profile: 'directory',
          is_primary: true,
        },
        BETA,
      )
      .then((events) => {
        expect(events[0]).toEqual({ type: 'primary_cleared', address_id: ADR });
        expect(events[1]).toMatchObject({
          type: 'address_created',
          address: { id: ADR2, is_primary: true },
        });
      });
  });

  it('active -> revoked: kept; resolution answers 410; not listed; again changes nothing', () => {
    const decision = spec
      .given(withTerms())
      .when('revoke-address', { address_id: ADR }, BETA)
      .then([{ type: 'address_revoked', address_id: ADR, at: AT }]);
    expect(valueOf(decision)).toEqual({ id: ADR, revoked: true });
    const gone = { gone: refusal('path.address.revoked', 'this address was revoked') };
    expect(viewAt(decision, resolverViewKey(ADDRESS))).toEqual(gone);
    expect(viewAt(decision, commitmentViewKey(ADDRESS))).toEqual(gone);
    expect(viewText(decision, addressInfoKey(ADR))).toMatchObject({ id: ADR, revoked: true });
    expect(decision.directory![0]!.visibility).toBeNull();
    const revoked = [...withTerms(), ...decision.events];
    expect(stateOf(revoked).addresses.get(ADR)!.revoked_at).toBe(AT);
    const list = spec.given(revoked).when('list-addresses', {}, BETA).thenNothing();
    expect(valueOf(list)).toEqual({ addresses: [] });
    const again = spec
      .given(revoked)
      .when('revoke-address', { address_id: ADR }, BETA)
      .thenNothing();
    expect(valueOf(again)).toEqual({ id: ADR, revoked: true });
  });

  it('active -> rotated: old revoked, a new one with rotated_from, its targets and terms', () => {
    const given = after(withTerms(), 'add-target', { address_id: ADR, target: target() });
    const rotate = { address_id: ADR, replacement };
    const decision = spec
      .given(given)
      .when('rotate-address', rotate, BETA)
      .then((events) => {
        expect(events.map((e) => e.type)).toEqual(['address_revoked', 'address_created']);
      });
    expect(decision.answer).toEqual({
      value: {
        id: ADR2,
        address: ADDRESS2,
        rotated_from: ADR,
        profile: 'directory',
        discoverability: 'network',
      },
      created: true,
    });
    const rotated = [...given, ...decision.events];
    const state = stateOf(rotated);
    expect(state.addresses.get(ADR)!.revoked_at).toBe(AT);
    const replacement2 = state.addresses.get(ADR2)!;
    const intents = [...intentsOf(replacement2).values()];
    expect(replacement2.rotated_from).toBe(ADR);
    expect([...targetsOf(replacement2).keys()]).toEqual([TGT]);
    expect(intents).toMatchObject([{ version: 1, accepts: [EUR], active: true }]);
    const old = intentsOf(state.addresses.get(ADR)!).first()!;
    expect(intents[0]!.commitment).not.toBe(old.commitment);
    expect(viewAt(decision, resolverViewKey(ADDRESS))).toHaveProperty('gone');
    expect(viewAt(decision, `route/${ADR2}`)).toEqual({ text: SUB, signed: false });
    // A revoked address goes nowhere.
    const again = { address_id: ADR, replacement: { ...replacement, id: ref('adr', 'f') } };
    spec.given(rotated).when('rotate-address', again, BETA).thenRefused('path.address.revoked');
  });

  it('standing intent version n -> n+1 active, n deactivated and kept (never overwritten)', () => {
    const v1 = withTerms();
    const decision = made(
      spec.given(v1).when(
        'set-intent',
        {
          address_id: ADR,
          accepts: [EUR, { ...EUR, asset_code: 'GBP' }],
          policy: { unknown_sender: 'quarantine' },
        },
        BETA,
      ),
    );
    expect(valueOf(decision)).toEqual({ version: 2, active: true });
    const intents = [
      ...intentsOf(stateOf([...v1, ...decision.events]).addresses.get(ADR)!).values(),
    ];
    expect(intents.map((i) => [i.version, i.active])).toEqual([
      [1, false],
      [2, true],
    ]);
    expect(intents[0]!.accepts).toEqual([EUR]);
    expect(viewText(decision, commitmentViewKey(ADDRESS))).toMatchObject({
      type: 'path.address.commitment',
      version: 2,
      commitment: intents[1]!.commitment,
    });
    const revoked = after(v1, 'revoke-address', { address_id: ADR }, BETA);
    spec
      .given(revoked)
      .when('set-intent', { address_id: ADR, accepts: [EUR] }, BETA)
      .thenRefused('path.address.revoked');
  });

  it("P23: a fee or ceiling of the terms beyond its asset's unit is refused, naming it", () => {
    const amount = (value: string, asset_code = 'EUR') => ({
      value,
      asset_type: 'fiat',
      asset_code,
    });
    const fee = { kind: 'operator', amount: amount('0.005'), paid_by: 'payer' };
    spec
      .given(withTerms())
      .when('set-intent', { address_id: ADR, accepts: [EUR, { ...EUR, fees: [fee] }] }, BETA)
      .thenRefused('path.core.invalid_request', {
        field: 'accepts.1.fees.0.amount.value',
        max_fraction_digits: 2,
      });
    const limits = { max_single: amount('1000.5', 'KRW') };
    spec
      .given(withTerms())
      .when('set-intent', { address_id: ADR, accepts: [{ ...EUR, limits }] }, BETA)
      .thenRefused('path.core.invalid_request', {
        field: 'accepts.0.limits.max_single.value',
        max_fraction_digits: 0,
      });
  });
});

describe('subject: targets (SPEC C)', () => {
  const add = (t: Partial<Input<'add-target'>['target']> = {}) =>
    spec.given(withAddress()).when('add-target', { address_id: ADR, target: target(t) });

  it('added by the operator: 201 with the public fields only; not the default unless said', () => {
    const decision = made(add());
    expect(decision.answer).toEqual({
      value: {
        id: TGT,
        rail: 'book',
        asset_type: 'fiat',
        asset_code: 'EUR',
        account_kind: 'own_ledger',
        is_default: false,
        created_at: AT,
      },
      created: true,
    });
    expect(JSON.stringify(decision.answer)).not.toContain('ACCT-1');
    expect(viewText(decision, addressInfoKey(ADDRESS)).accepts).toEqual([EUR]);
  });

  it('a reserved rail has no beneficiary format; chain_address: blockchain; both or none', () => {
    add({
      rail: 'swift_future',
      beneficiary_format: 'chain_address',
      beneficiary: '0x1',
    }).thenRefused(INVALID, { field: 'beneficiary_format' });
    add({ beneficiary_format: 'chain_address', beneficiary: '0x1' }).thenRefused(INVALID, {
      field: 'beneficiary_format',
    });
    add({ rail: 'blockchain', beneficiary_format: 'chain_address' }).thenRefused(INVALID, {
      field: 'beneficiary',
    });
    const onChain = { beneficiary_format: 'chain_address' as const, beneficiary: '0x2' };
    expect(valueOf(made(add({ rail: 'blockchain', ...onChain })))).toMatchObject(onChain);
  });

  it('retired once: not listed; retiring again changes nothing; an unknown one: not found', () => {
    const given = after(withAddress(), 'add-target', { address_id: ADR, target: target() });
    const retire = { address_id: ADR, target_id: TGT };
    const revoke = spec
      .given(given)
      .when('revoke-target', retire, BETA)
      .then([{ type: 'target_revoked', address_id: ADR, target_id: TGT, at: AT }]);
    const revoked = [...given, ...revoke.events];
    const list = spec.given(revoked).when('list-targets', { address_id: ADR }, BETA).thenNothing();
    expect(valueOf(list)).toEqual({ address_id: ADR, targets: [] });
    const again = spec.given(revoked).when('revoke-target', retire, BETA);
    expect(valueOf(again.thenNothing())).toEqual({ id: TGT, revoked: true, revoked_at: AT });
    for (const target_id of [ref('tgt', '0'), '__proto__', 'constructor']) {
      spec
        .given(given)
        .when('revoke-target', { address_id: ADR, target_id }, BETA)
        .thenRefused(NOT_FOUND);
    }
    const onRevoked = after(given, 'revoke-address', { address_id: ADR }, BETA);
    spec
      .given(onRevoked)
      .when('list-targets', { address_id: ADR }, BETA)
      .thenRefused('path.address.revoked');
    spec
      .given(onRevoked)
      .when('add-target', { address_id: ADR, target: target() })
      .thenRefused('path.address.revoked');
  });
});

describe('subject: the payee check (SPEC F)', () => {
  type Check = Input<'payee-check'>;
  type Kind = 'natural_person' | 'legal_entity';
  const payee = (name: string | null, setting: 'enabled' | 'disabled' = 'enabled', kind?: Kind) => {
    const given = withAddress(subject(kind));
    if (name === null) return given;
    return after(given, 'set-payee-record', { name_sealed: sealed(name), payee_check: setting });
  };
  const verify = (name: string, key = hash('1'), context: Check['context'] = null): Check => ({
    address_id: ADR,
    nonce: 'n-1',
    context,
    mode: 'verify',
    name_sealed: sealed(name),
    name_key: key,
  });
  const display = (context: Check['context'] = null): Check => ({
    address_id: ADR,
    nonce: 'n-2',
    context,
    mode: 'display',
  });
  const person = payee('Dr. Katarzyna Anna Nowak');
  const open = { unseal };
  const checked = (
    given: Events,
    input: Check,
    caller: Caller | null,
    context: SpecContext = open,
  ) => made(spec.given(given, context).when('payee-check', input, caller));
  const requestView = (status = 'created', address: string | null = ADDRESS) =>
    viewOf({
      reference: REQ,
      status,
      payee: { member: 'local', address },
      amount: null,
      accepts: [EUR],
      expires_at: null,
    });

  it('a member asks: the signed answer names it; match, close_match (masked), no_match', () => {
    const match = checked(person, verify('NOWAK katarzyna anna'), GAMMA);
    expect(match.answer).toMatchObject({ signed: true });
    expect(textOf(match)).toMatchObject({
      kind: 'payee_check',
      key: ADDRESS,
      requester: 'gamma',
      mode: 'verify',
      result: 'match',
      subject_type: 'natural_person',
      nonce: 'n-1',
    });
    expect(textOf(match)).not.toHaveProperty('display_name');
    const close = textOf(checked(person, verify('Katarzyna Nowak'), GAMMA));
    expect(close).toMatchObject({ result: 'close_match', display_name: 'Katarzyna N.' });
    expect(textOf(checked(person, verify('Maria Kowalska'), GAMMA)).result).toBe('no_match');
    const shown = spec
      .given(person, open)
      .when('payee-check', display(), GAMMA)
      .then([
        {
          type: 'payee_checked',
          day: DAY,
          context: null,
          names_key: null,
          name_key: null,
        },
      ]);
    expect(textOf(shown)).toMatchObject({ result: 'shown', display_name: 'Katarzyna N.' });
  });

  it('unavailable, no display_name, no name counted: payee_check disabled, or no record', () => {
    for (const given of [payee('Jan Kowalski', 'disabled'), payee(null)]) {
      for (const input of [verify('Jan Kowalski'), display()]) {
        const decision = checked(given, input, GAMMA);
        expect(decision.events[0]).toMatchObject({ names_key: null, name_key: null });
        expect(textOf(decision).result).toBe('unavailable');
        expect(textOf(decision)).not.toHaveProperty('display_name');
      }
    }
  });

  it('no credential and no context: 401; an open request carries the call as request:<ref>', () => {
    spec
      .given(person, open)
      .when('payee-check', display(), null)
      .thenRefused('path.auth.unauthenticated', { reason: 'missing' });
    const context = { unseal, views: { [REQ]: requestView() } };
    const input = verify('Katarzyna Nowak', hash('1'), { request: REQ });
    const decision = checked(person, input, null, context);
    expect(textOf(decision)).toMatchObject({ requester: `request:${REQ}`, result: 'close_match' });
    expect(decision.events[0]).toMatchObject({
      context: REQ,
      names_key: `${ADR}|request:${REQ}|${DAY}`,
    });
    const none = new Map();
    const reads = (input: Check, caller: Caller | null) =>
      subjectDecider.reads!({ name: 'payee-check', input, caller }, null, none);
    expect(reads(display({ request: REQ }), null)).toEqual([REQ]);
    expect(reads(display({ instruction: INS }), GAMMA)).toEqual([INS]);
    expect(reads(display(), GAMMA)).toEqual([]);
  });

  it('an open instruction for the address carries it too, as instruction:<ref>', () => {
    const instruction = { type: 'path.instruction', status: 'open', payee: { address: ADDRESS } };
    const context = { unseal, views: { [INS]: viewOf(instruction) } };
    const decision = checked(person, display({ instruction: INS }), null, context);
    expect(textOf(decision).requester).toBe(`instruction:${INS}`);
  });

  it('a context not open, not for this address, or unknown: 403, even with a member', () => {
    type Views = SpecContext['views'];
    const refused = (views: Views, context: Check['context'], caller: Caller | null) =>
      spec
        .given(person, { unseal, views })
        .when('payee-check', display(context), caller)
        .thenRefused('path.auth.context_refused');
    const expired = goneView(refusal('path.request.expired', 'this request has expired'));
    const revoked = goneView(refusal('path.instruction.revoked', 'this instruction was revoked'));
    const elsewhere = viewOf({ status: 'open', payee: { address: ADDRESS2 } });
    refused({ [REQ]: requestView('paid') }, { request: REQ }, null);
    refused({ [REQ]: requestView('created', ADDRESS2) }, { request: REQ }, null);
    refused({ [REQ]: requestView('created', null) }, { request: REQ }, null);
    refused({ [REQ]: expired }, { request: REQ }, null);
    refused({}, { request: REQ }, GAMMA);
    refused({ [INS]: revoked }, { instruction: INS }, null);
    refused({ [INS]: elsewhere }, { instruction: INS }, null);
  });

  it('a revoked address answers 410; an address the subject does not hold, 404', () => {
    const revoked = after(person, 'revoke-address', { address_id: ADR }, BETA);
    spec
      .given(revoked, open)
      .when('payee-check', verify('Katarzyna Nowak'), GAMMA)
      .thenRefused('path.address.revoked');
    spec
      .given(person, open)
      .when('payee-check', { ...display(), address_id: ADR2 }, GAMMA)
      .thenRefused(NOT_FOUND);
  });

  it('distinct names per requester, address and day (context.limits); a name again is free', () => {
    const context = { unseal, limits: { payee_check_names_per_day_max: 2 } };
    let given = after(person, 'payee-check', verify('Anna Rossi', hash('1')), GAMMA, context);
    given = after(given, 'payee-check', verify('Marco Verdi', hash('2')), GAMMA, context);
    given = after(given, 'payee-check', verify('anna ROSSI', hash('1')), GAMMA, context);
    given = after(given, 'payee-check', display(), GAMMA, context);
    const luca = verify('Luca Neri', hash('3'));
    const third = spec.given(given, context).when('payee-check', luca, GAMMA).thenRefused(SPENT);
    expect(third.detail).toEqual({ allowance: 2, window: 'calendar_day' });
    // Another requester, and another day, start afresh.
    checked(given, luca, BETA, context);
    checked(given, luca, GAMMA, { ...context, now: SPEC_NOW + 24 * HOUR });
  });

  it('checks per payment context over its life (context.limits): the next is refused (429)', () => {
    const limits = { payee_check_context_max: 2 };
    const context = { unseal, views: { [REQ]: requestView() }, limits };
    let given = after(person, 'payee-check', display({ request: REQ }), null, context);
    const anna = verify('Anna Rossi', hash('1'), { request: REQ });
    given = after(given, 'payee-check', anna, GAMMA, context);
    const refused = spec
      .given(given, context)
      .when('payee-check', display({ request: REQ }), null)
      .thenRefused(SPENT);
    expect(refused.detail).toEqual({ allowance: 2, window: 'context' });
    checked(given, display(), GAMMA, context);
  });

  it('an entity: legal forms ignored; close_match shows the registered name', () => {
    const entity = payee('Blue Ocean Shipping Ltd', 'enabled', 'legal_entity');
    const match = textOf(checked(entity, verify('BLUE OCEAN SHIPPING LIMITED'), GAMMA));
    expect(match).toMatchObject({ result: 'match', subject_type: 'legal_entity' });
    const close = textOf(checked(entity, verify('Blue Ocean Shiping'), GAMMA));
    expect(close).toMatchObject({ result: 'close_match', display_name: 'Blue Ocean Shipping Ltd' });
  });
});

describe('subject: children as persistent maps (issue 15: no copy of the others)', () => {
  const phone = (n: number) => ({
    id: `idn_${String(n).padStart(32, '0')}`,
    identifier_type: 'phone' as const,
    hash: hash(String(n)),
  });

  it('a state framed and read back (a snapshot) keeps them, and goes on evolving', () => {
    let events: Events = subject();
    for (let n = 1; n <= 3; n++) events = after(events, 'add-identifier', phone(n), BETA);
    const restored = unframe<SubjectState>(frame(stateOf(events)));
    expect(identifiersOf(restored).size).toBe(3);
    const next = subjectDecider.evolve(restored, {
      type: 'identifier_added',
      identifier: { ...stateOf(events).identifiers.get(phone(1).id)!, id: phone(4).id },
    });
    expect(identifiersOf(next).size).toBe(4);
    // The state it came from is untouched: evolve stays pure.
    expect(identifiersOf(restored).size).toBe(3);
  });

  it('a snapshot with a plain-object map (written before) is taken over', () => {
    const current = stateOf(after(subject(), 'add-identifier', phone(1), BETA));
    const entry = current.identifiers.get(phone(1).id)!;
    const old = { ...current, identifiers: { [entry.id]: entry } } as unknown as SubjectState;
    const added = subjectDecider.evolve(old, {
      type: 'identifier_added',
      identifier: { ...entry, id: phone(2).id },
    });
    expect([...identifiersOf(added).keys()].sort()).toEqual([phone(1).id, phone(2).id].sort());
    const decision = subjectDecider.decide(
      { name: 'withdraw', input: {}, caller: BETA } as never,
      old,
      { now: Date.parse(AT) } as never,
    );
    expect((decision as { answer: { value: { entries: number } } }).answer.value.entries).toBe(1);
  });

  it('attestations, bindings, targets and intent versions are persistent maps too', () => {
    const att = (n: number) => ({
      reference: ref('att', n.toString(16)),
      claim: 'kyc_level' as const,
      value: '2',
      expires_at: new Date(Date.parse(AT) + 3600_000).toISOString(),
    });
    let events = withTerms();
    events = after(events, 'add-target', { address_id: ADR, target: target() });
    events = after(events, 'add-attestation', att(1));
    const before = stateOf(events);
    const next = stateOf(after(events, 'add-attestation', att(2)));
    expect(isOrderedMap(next.attestations)).toBe(true);
    expect([...attestationsOf(next).keys()]).toEqual([att(1).reference, att(2).reference]);
    // The state it came from keeps its one attestation: nothing was copied into it.
    expect(attestationsOf(before).size).toBe(1);
    expect(isOrderedMap(before.bindings)).toBe(true);
    const address = before.addresses.get(ADR)!;
    expect(isOrderedMap(address.targets)).toBe(true);
    expect(isOrderedMap(address.intents)).toBe(true);
    // Framed and read back (a snapshot), they stay maps, in order.
    const restored = unframe<SubjectState>(frame(before));
    expect([...targetsOf(restored.addresses.get(ADR)!).keys()]).toEqual([TGT]);
    expect(intentsOf(restored.addresses.get(ADR)!).last()!.active).toBe(true);
  });

  it('payee-check counts are persistent maps; names of an earlier day go at the next day', () => {
    const checked = (day: string, context: string | null, name: string) => ({
      type: 'payee_checked' as const,
      day,
      context,
      names_key: `${ADR}|beta|${day}`,
      name_key: name,
    });
    const base = stateOf(withAddress());
    const first = [checked('2026-11-20', 'ctx1', 'n1'), checked('2026-11-20', 'ctx1', 'n2')];
    const day1 = first.reduce(subjectDecider.evolve, base);
    expect(isOrderedMap(day1.payee_checks!.contexts)).toBe(true);
    expect(contextChecksOf(day1.payee_checks).get('ctx1')).toBe(2);
    expect(namesCheckedOf(day1.payee_checks).get(`${ADR}|beta|2026-11-20`)).toEqual(['n1', 'n2']);
    const day2 = subjectDecider.evolve(day1, checked('2026-11-21', 'ctx2', 'n1'));
    expect([...namesCheckedOf(day2.payee_checks).keys()]).toEqual([`${ADR}|beta|2026-11-21`]);
    expect(contextChecksOf(day2.payee_checks).toObject()).toEqual({ ctx1: 2, ctx2: 1 });
    // An older state's plain objects are taken over.
    const plain = { contexts: { ctx1: 3 }, names: { [`${ADR}|beta|2026-11-21`]: ['n9'] } };
    const old = { ...day1, payee_checks: plain };
    const next = subjectDecider.evolve(old, checked('2026-11-21', 'ctx1', 'n8'));
    expect(contextChecksOf(next.payee_checks).get('ctx1')).toBe(4);
    expect(namesCheckedOf(next.payee_checks).get(`${ADR}|beta|2026-11-21`)).toEqual(['n9', 'n8']);
  });

  it('an address held in plain form (written before) is read and evolved the same', () => {
    const events = after(withTerms(), 'add-target', { address_id: ADR, target: target() });
    const current = stateOf(events);
    const a = current.addresses.get(ADR)!;
    const plain = {
      ...a,
      targets: Object.fromEntries(targetsOf(a)),
      intents: [...intentsOf(a).values()],
    };
    const old = { ...current, addresses: current.addresses.set(ADR, plain) };
    expect(activeIntent(plain)).toEqual(activeIntent(a));
    expect(liveTargets(plain)).toEqual(liveTargets(a));
    const decision = made(
      spec.given(events).when('set-intent', { address_id: ADR, accepts: [EUR] }, BETA),
    );
    expect(valueOf(decision)).toEqual({ version: 2, active: true });
    const evolved = decision.events.reduce(subjectDecider.evolve, old);
    const versions = [...intentsOf(evolved.addresses.get(ADR)!).values()];
    expect(versions.map((i) => [i.version, i.active])).toEqual([
      [1, false],
      [2, true],
    ]);
    expect([...targetsOf(evolved.addresses.get(ADR)!).keys()]).toEqual([TGT]);
  });
});
