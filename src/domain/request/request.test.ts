// The request decider alone (SPEC H, "States and transitions: Payment request"): given events,
// when a command, then events or a refusal. Every row of the state table, every refusal, and
// the address binding that used to live in the route (the address's terms, through `reads`).
import { describe, expect, it } from 'vitest';
import { refusal } from '../../protocol/errors.js';
import { signingKeyFromSeed, verifyObject } from '../../protocol/signing.js';
import { BETA, deciderSpec, goneView, LOCAL, SPEC_NOW, viewOf } from '../spec.js';
import { addressInfoKey, type AddressInfo } from '../subject/resolver.js';
import {
  openRequestOf,
  REQUEST_PAID_EVENT,
  requestDecider,
  type RequestEvent,
  type RequestState,
} from './request.js';

const spec = deciderSpec(requestDecider);
const REF = `req_${'1'.repeat(32)}`;
const ADR = `adr_${'2'.repeat(32)}`;
const ADDRESS = 'path:AbCdEfGhIjKlMnOpQrStUv';
const LINK = `https://node.example/path/${REF}`;
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const GBP = { rail: 'book', asset_type: 'fiat', asset_code: 'GBP' };
const AMOUNT = { value: '12.50', asset_type: 'fiat', asset_code: 'EUR' };
const HOUR = 3600_000;
const at = new Date(SPEC_NOW).toISOString();
const iso = (ms: number) => new Date(ms).toISOString();
/** The key spec.ts signs with (RFC 8032 TEST 1). */
const SEED = '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60';
const PUBLIC = signingKeyFromSeed(SEED).publicKeyHex;

const info = (overrides: Partial<AddressInfo> = {}): AddressInfo => ({
  id: ADR,
  address: ADDRESS,
  revoked: false,
  intent_version: 4,
  accepts: [EUR],
  targets: [],
  ...overrides,
});
const withAddress = (i: AddressInfo = info()) => ({ views: { [addressInfoKey(ADR)]: viewOf(i) } });
const create = (extra: Record<string, unknown> = {}) => ({
  reference: REF,
  url: LINK,
  accepts: [EUR],
  ...extra,
});
const bound = (extra: Record<string, unknown> = {}) => create({ address_id: ADR, ...extra });

/** The events of a request created `expiresIn` ms from now (null: indefinite). */
function created(expiresIn: number | null = null): RequestEvent[] {
  const input = expiresIn === null ? create() : create({ expires_at: iso(SPEC_NOW + expiresIn) });
  return spec
    .given([])
    .when('create', input)
    .then(() => undefined).events;
}
const moved = (to: RequestState['status'], by: string | null = null): RequestEvent => ({
  type: 'moved',
  to,
  at,
  by,
  envelope: '{}',
});
const movedTo = (to: RequestState['status'], by: string | null, when = at) => [
  { type: 'moved', to, at: when, by, envelope: expect.any(String) },
];
const stateOf = (events: RequestEvent[]) =>
  events.reduce<RequestState | null>(requestDecider.evolve, null)!;
const goneWith = (code: string) => ({ gone: expect.objectContaining({ code }) });

describe('request: create', () => {
  it('unbound: 201 with the link, a signed path.request, status created (SPEC H)', () => {
    const input = create({ amount: AMOUNT, order_reference: 'o-7' });
    const decision = spec
      .given([])
      .when('create', input, LOCAL)
      .then((events) => expect(events).toHaveLength(1));
    expect(decision.answer).toEqual({
      value: { reference: REF, url: LINK, status: 'created', expires_at: null },
      created: true,
    });
    const state = stateOf(decision.events);
    expect(state).toMatchObject({ status: 'created', created_by: 'local', intent_version: null });
    expect(state.transitions).toEqual([{ from: null, to: 'created', at, by: 'local' }]);
    const object = JSON.parse(state.envelope);
    expect(object).toMatchObject({
      type: 'path.request',
      reference: REF,
      issuer: 'local',
      amount: AMOUNT,
      accepts: [EUR],
      payee: { member: 'local', address: null },
      order_reference: 'o-7',
      status: 'created',
      settled_by: [],
      expires_at: null,
    });
    expect(verifyObject(object, PUBLIC).valid).toBe(true);
  });

  it('without an amount the signed object has none: the payer chooses', () => {
    expect(JSON.parse(stateOf(created()).envelope)).not.toHaveProperty('amount');
  });

  it('bound to an address: reads its terms and records the version of its standing intent', () => {
    const reads = (input: ReturnType<typeof create>) =>
      requestDecider.reads!({ name: 'create', input, caller: LOCAL }, null, new Map());
    expect(reads(bound())).toEqual([addressInfoKey(ADR)]);
    expect(reads(create())).toEqual([]);
    const decision = spec
      .given([], withAddress())
      .when('create', bound())
      .then(() => undefined);
    expect(JSON.parse(stateOf(decision.events).envelope)).toMatchObject({
      payee: { member: 'local', address: ADDRESS },
      intent_version: 4,
    });
  });

  it('refuses an unknown address (404), a revoked one (410), one whose read is gone', () => {
    spec.given([]).when('create', bound()).thenRefused('path.core.not_found');
    spec
      .given([], withAddress(info({ revoked: true })))
      .when('create', bound())
      .thenRefused('path.address.revoked');
    const gone = goneView(refusal('path.address.revoked', 'gone'));
    spec
      .given([], { views: { [addressInfoKey(ADR)]: gone } })
      .when('create', bound())
      .thenRefused('path.address.revoked');
  });

  it('refuses a capability outside the standing intent, naming its entry (accepts.<i>)', () => {
    spec
      .given([], withAddress())
      .when('create', bound({ accepts: [GBP] }))
      .thenRefused('path.address.capability_not_accepted', { field: 'accepts.0' });
    spec
      .given([], withAddress())
      .when('create', bound({ accepts: [EUR, GBP] }))
      .thenRefused('path.address.capability_not_accepted', { field: 'accepts.1' });
  });

  it("expires_at must be in the future; the address is checked first (the route's order)", () => {
    spec
      .given([])
      .when('create', bound({ expires_at: at }))
      .thenRefused('path.core.not_found');
    spec
      .given([])
      .when('create', create({ expires_at: at }))
      .thenRefused('path.core.invalid_request', { field: 'expires_at' });
    const later = iso(SPEC_NOW + 1);
    const decision = spec
      .given([])
      .when('create', create({ expires_at: later }))
      .then(() => undefined);
    expect(decision.answer).toMatchObject({ value: { expires_at: later } });
  });

  it("P23: refuses an amount, a fee or a ceiling beyond its asset's unit, naming it", () => {
    const refused = (extra: Record<string, unknown>, field: string, digits: number) =>
      spec
        .given([])
        .when('create', create(extra))
        .thenRefused('path.core.invalid_request', { field, max_fraction_digits: digits });
    refused({ amount: { ...AMOUNT, value: '12.500' } }, 'amount.value', 2);
    refused({ amount: { ...AMOUNT, value: '1.5', asset_code: 'JPY' } }, 'amount.value', 0);
    const fee = { kind: 'operator', amount: { ...AMOUNT, value: '0.001' }, paid_by: 'payer' };
    refused({ accepts: [EUR, { ...GBP, fees: [fee] }] }, 'accepts.1.fees.0.amount.value', 2);
    const ceiling = { max_single: { ...AMOUNT, value: '100.001' } };
    refused({ accepts: [{ ...EUR, limits: ceiling }] }, 'accepts.0.limits.max_single.value', 2);
    for (const amount of [
      { ...AMOUNT, value: '15', asset_code: 'JPY' },
      { ...AMOUNT, value: '1.005', asset_code: 'BHD' },
    ])
      spec
        .given([])
        .when('create', create({ amount }))
        .then((events) => expect(events).toHaveLength(1));
  });

  it('refuses a reference already in use', () => {
    spec
      .given(created())
      .when('create', create())
      .thenRefused('path.core.invalid_request', { field: 'reference' });
  });
});

describe('request: the state table', () => {
  it('created -> paid by any member: transition recorded, request.paid, re-signed object', () => {
    const decision = spec.given(created()).when('paid', {}, BETA).then(movedTo('paid', 'beta'));
    expect(decision.answer).toEqual({ value: { reference: REF, status: 'paid' } });
    expect(decision.outbox).toHaveLength(1);
    expect(decision.outbox![0]).toMatchObject({
      event: REQUEST_PAID_EVENT,
      created_at: at,
      data: { reference: REF, status: 'paid' },
    });
    const state = stateOf([...created(), ...decision.events]);
    expect(state.transitions.map((t) => [t.from, t.to, t.by])).toEqual([
      [null, 'created', 'local'],
      ['created', 'paid', 'beta'],
    ]);
    expect(verifyObject(JSON.parse(state.envelope), PUBLIC).valid).toBe(true);
  });

  it('paid -> paid (same call again): no error, no second transition, no second event', () => {
    const decision = spec
      .given([...created(), moved('paid', 'beta')])
      .when('paid', {}, LOCAL)
      .thenNothing();
    expect(decision.answer).toEqual({ value: { reference: REF, status: 'paid' } });
    expect(decision.outbox).toBeUndefined();
  });

  it('created -> revoked by the issuer (a local credential) only; again changes nothing', () => {
    spec.given(created()).when('revoke', {}, BETA).thenRefused('path.auth.forbidden');
    spec.given(created()).when('revoke', {}, null).thenRefused('path.auth.forbidden');
    const decision = spec
      .given(created())
      .when('revoke', {}, LOCAL)
      .then(movedTo('revoked', 'local'));
    expect(decision.answer).toEqual({ value: { reference: REF, status: 'revoked' } });
    spec
      .given([...created(), moved('revoked', 'local')])
      .when('revoke', {}, LOCAL)
      .thenNothing();
  });

  it('created -> expired at expires_at by the tick, not a millisecond before', () => {
    spec
      .given(created(HOUR), { now: SPEC_NOW + HOUR - 1 })
      .when('tick', null, null)
      .thenNothing();
    const later = SPEC_NOW + HOUR;
    spec
      .given(created(HOUR), { now: later })
      .when('tick', null, null)
      .then(movedTo('expired', null, iso(later)));
    spec
      .given(created(), { now: later + 400 * 24 * HOUR })
      .when('tick', null, null)
      .thenNothing();
  });

  it('revoked and expired read as 410 with their code; created and paid serve the object', () => {
    const view = (events: RequestEvent[]) => requestDecider.publications!(stateOf(events))[0]!.view;
    expect(view([...created(), moved('revoked')])).toEqual(goneWith('path.request.revoked'));
    expect(view([...created(), moved('expired')])).toEqual(goneWith('path.request.expired'));
    expect(view(created())).toEqual({ text: expect.any(String), signed: true });
    // An open request with an expiry is gone at that millisecond, before its tick is recorded.
    expect(view(created(HOUR))).toMatchObject({
      signed: true,
      expiry: { at: SPEC_NOW + HOUR, code: 'path.request.expired' },
    });
    expect(view([...created(HOUR), moved('paid')])).toEqual({ text: '{}', signed: true });
  });

  it('only created has anywhere to go: paid, revoked, expired go nowhere', () => {
    const cases = [
      ['revoked', 'paid', 'path.request.revoked'],
      ['expired', 'paid', 'path.request.expired'],
      ['paid', 'revoke', 'path.request.not_open'],
      ['expired', 'revoke', 'path.request.expired'],
    ] as const;
    for (const [from, command, code] of cases) {
      spec
        .given([...created(), moved(from)])
        .when(command, {}, LOCAL)
        .thenRefused(code);
    }
    for (const from of ['paid', 'revoked', 'expired'] as const) {
      const events = [...created(HOUR), moved(from)];
      expect(requestDecider.deadline!(stateOf(events))).toBeNull();
      spec
        .given(events, { now: SPEC_NOW + 2 * HOUR })
        .when('tick', null, null)
        .thenNothing();
    }
    expect(requestDecider.deadline!(stateOf(created(HOUR)))).toBe(SPEC_NOW + HOUR);
    expect(requestDecider.deadline!(stateOf(created()))).toBeNull();
  });

  it('past expires_at and not yet ticked: paid and revoke answer 410 path.request.expired', () => {
    const past = { now: SPEC_NOW + HOUR };
    spec.given(created(HOUR), past).when('paid', {}, BETA).thenRefused('path.request.expired');
    spec.given(created(HOUR), past).when('revoke', {}, LOCAL).thenRefused('path.request.expired');
  });

  it('a request that does not exist is not found, whatever the command', () => {
    spec.given([]).when('paid', {}, BETA).thenRefused('path.core.not_found');
    spec.given([]).when('revoke', {}, LOCAL).thenRefused('path.core.not_found');
    spec.given([]).when('tick', null, null).thenRefused('path.core.not_found');
  });
});

describe('openRequestOf: what another aggregate reads of a request', () => {
  it('the object when created; 409 when paid; the refusal of a gone one; null: none', () => {
    const object = JSON.parse(stateOf(created()).envelope);
    expect(openRequestOf(viewOf(object))).toMatchObject({ reference: REF, status: 'created' });
    expect(openRequestOf(viewOf({ ...object, status: 'paid' }))).toMatchObject({
      code: 'path.request.not_open',
    });
    const gone = refusal('path.request.revoked', 'this request was revoked');
    expect(openRequestOf(goneView(gone))).toEqual(gone);
    expect(openRequestOf(undefined)).toBeNull();
  });
});
