// The instruction decider alone (SPEC G, "States and transitions: Payment instruction"):
// given events, when a command, then events or a refusal. Every row of the state table.
import { describe, expect, it } from 'vitest';
import { BETA, deciderSpec, goneView, LOCAL, SPEC_NOW, viewOf } from '../spec.js';
import { refusal } from '../../protocol/errors.js';
import { addressInfoKey, type AddressInfo } from '../subject/resolver.js';
import { instructionDecider, type InstructionEvent, type InstructionState } from './instruction.js';

const spec = deciderSpec(instructionDecider);
const REF = `ins_${'1'.repeat(32)}`;
const REQ = `req_${'2'.repeat(32)}`;
const ADDRESS = 'path:AbCdEfGhIjKlMnOpQrStUv';
const SEPA = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const CARD = { rail: 'mobile_money', asset_type: 'fiat', asset_code: 'EUR' };
const RESERVED = { rail: 'ach', asset_type: 'fiat', asset_code: 'USD' };

const info = (overrides: Partial<AddressInfo> = {}): AddressInfo => ({
  id: 'adr_x',
  address: ADDRESS,
  revoked: false,
  intent_version: 3,
  accepts: [SEPA, CARD, RESERVED],
  targets: [
    {
      rail: 'book',
      asset_type: 'fiat',
      asset_code: 'EUR',
      is_default: false,
      beneficiary_format: 'iban',
      beneficiary: 'first',
    },
    {
      rail: 'book',
      asset_type: 'fiat',
      asset_code: 'EUR',
      is_default: true,
      beneficiary_format: 'iban',
      beneficiary: 'default',
    },
  ],
  ...overrides,
});
const request = (overrides: Record<string, unknown> = {}) => ({
  reference: REQ,
  status: 'created',
  payee: { member: 'local', address: ADDRESS },
  amount: { value: '12.50', asset_type: 'fiat', asset_code: 'EUR' },
  accepts: [SEPA],
  expires_at: null,
  ...overrides,
});
const withAddress = (i: AddressInfo = info()) => ({
  views: { [addressInfoKey(ADDRESS)]: viewOf(i) },
});
const withRequest = (r = request(), i: AddressInfo = info()) => ({
  views: { [REQ]: viewOf(r), [addressInfoKey(ADDRESS)]: viewOf(i) },
});

const issued = (): InstructionEvent[] => {
  const decision = spec
    .given([], withAddress())
    .when('issue', { reference: REF, address: ADDRESS, via: SEPA }, BETA)
    .then(() => undefined);
  return decision.events;
};
const lifetime = 5 * 60_000;

describe('instruction: issue', () => {
  it(
    'for an address: signs the default live target of ' +
      'the capability in force, open for the lifetime (P12)',
    () => {
      const decision = spec
        .given([], withAddress())
        .when('issue', { reference: REF, address: ADDRESS, via: SEPA }, BETA)
        .then((events) => {
          expect(events).toHaveLength(1);
        });
      expect(decision.answer).toMatchObject({ signed: true, created: true });
      const object = JSON.parse((decision.answer as { text: string }).text);
      expect(object).toMatchObject({
        type: 'path.instruction',
        reference: REF,
        status: 'open',
        single_use: true,
        intent_version: 3,
        beneficiary: { format: 'iban', value: 'default' },
        via: SEPA,
        payee: { member: 'local', address: ADDRESS },
        expires_at: new Date(SPEC_NOW + lifetime).toISOString(),
      });
      const state = (decision.events[0] as Extract<InstructionEvent, { type: 'issued' }>).state;
      expect(state).toMatchObject({ status: 'open', obtained_by: 'beta', used_by: null });
    },
  );

  it('for a request: the request must be open and bound; its amount wins', () => {
    const decision = spec
      .given([], withRequest())
      .when('issue', { reference: REF, request: REQ, via: SEPA }, null)
      .then(() => undefined);
    expect(JSON.parse((decision.answer as { text: string }).text)).toMatchObject({
      request: REQ,
      amount: { value: '12.50' },
    });
    spec
      .given([], withRequest(request({ status: 'paid' })))
      .when('issue', { reference: REF, request: REQ, via: SEPA })
      .thenRefused('path.request.not_open');
    spec
      .given([], {
        views: { [REQ]: goneView(refusal('path.request.expired', 'this request has expired')) },
      })
      .when('issue', { reference: REF, request: REQ, via: SEPA })
      .thenRefused('path.request.expired');
    spec
      .given([])
      .when('issue', { reference: REF, request: REQ, via: SEPA })
      .thenRefused('path.core.not_found');
    spec
      .given([], withRequest(request({ payee: { member: 'local', address: null } })))
      .when('issue', { reference: REF, request: REQ, via: SEPA })
      .thenRefused('path.address.capability_not_accepted');
    spec
      .given([], withRequest())
      .when('issue', { reference: REF, request: REQ, via: CARD })
      .thenRefused('path.address.capability_not_accepted');
  });

  it(
    'refuses: both or neither of request and address, ' +
      'an anonymous caller for an address, a revoked address',
    () => {
      spec
        .given([], withRequest())
        .when('issue', { reference: REF, request: REQ, address: ADDRESS, via: SEPA })
        .thenRefused('path.core.invalid_request', { field: 'request' });
      spec
        .given([])
        .when('issue', { reference: REF, via: SEPA })
        .thenRefused('path.core.invalid_request', { field: 'request' });
      spec
        .given([], withAddress())
        .when('issue', { reference: REF, address: ADDRESS, via: SEPA }, null)
        .thenRefused('path.auth.unauthenticated', { reason: 'missing' });
      spec
        .given([], withAddress(info({ revoked: true })))
        .when('issue', { reference: REF, address: ADDRESS, via: SEPA })
        .thenRefused('path.address.revoked');
      spec
        .given([])
        .when('issue', { reference: REF, address: ADDRESS, via: SEPA })
        .thenRefused('path.core.not_found');
    },
  );

  it('refuses a capability not in force, a reserved rail, a capability with no live target', () => {
    spec
      .given([], withAddress())
      .when('issue', { reference: REF, address: ADDRESS, via: { ...SEPA, asset_code: 'GBP' } })
      .thenRefused('path.address.capability_not_accepted');
    spec
      .given([], withAddress())
      .when('issue', { reference: REF, address: ADDRESS, via: RESERVED })
      .thenRefused('path.address.capability_not_accepted');
    spec
      .given([], withAddress())
      .when('issue', { reference: REF, address: ADDRESS, via: CARD })
      .thenRefused('path.address.capability_not_accepted');
  });

  it("P23: refuses an amount, or a fee of via, beyond its asset's unit, naming it", () => {
    const amount = { value: '12.505', asset_type: 'fiat', asset_code: 'EUR' };
    spec
      .given([], withAddress())
      .when('issue', { reference: REF, address: ADDRESS, via: SEPA, amount }, BETA)
      .thenRefused('path.core.invalid_request', { field: 'amount.value', max_fraction_digits: 2 });
    const fee = { kind: 'operator', amount: { ...amount, value: '0.100' }, paid_by: 'payer' };
    spec
      .given([], withAddress())
      .when('issue', { reference: REF, address: ADDRESS, via: { ...SEPA, fees: [fee] } }, BETA)
      .thenRefused('path.core.invalid_request', {
        field: 'via.fees.0.amount.value',
        max_fraction_digits: 2,
      });
  });

  it('a target with no beneficiary format pays the address itself', () => {
    const bare = info({
      targets: [
        {
          rail: 'book',
          asset_type: 'fiat',
          asset_code: 'EUR',
          is_default: true,
          beneficiary_format: null,
          beneficiary: null,
        },
      ],
    });
    const decision = spec
      .given([], withAddress(bare))
      .when('issue', { reference: REF, address: ADDRESS, via: SEPA })
      .then(() => undefined);
    expect(JSON.parse((decision.answer as { text: string }).text).beneficiary).toEqual({
      format: 'path_address',
      value: ADDRESS,
    });
  });
});

describe('instruction: the state table', () => {
  const at = new Date(SPEC_NOW).toISOString();
  it('open -> used (a receipt names it); a second use changes nothing', () => {
    const used = spec
      .given(issued())
      .when('use', { receipt: 'rcp_a' }, null)
      .then([{ type: 'moved', to: 'used', at, receipt: 'rcp_a' }]);
    expect(used.answer).toEqual({ value: { reference: REF, status: 'used' } });
    const events = [
      ...issued(),
      { type: 'moved', to: 'used', at, receipt: 'rcp_a' } as InstructionEvent,
    ];
    spec.given(events).when('use', { receipt: 'rcp_b' }, null).thenNothing();
  });

  it('open -> revoked (issuer only); revoking again changes nothing; a used one is gone', () => {
    spec.given(issued()).when('revoke', {}, BETA).thenRefused('path.auth.forbidden');
    spec
      .given(issued())
      .when('revoke', {}, LOCAL)
      .then([{ type: 'moved', to: 'revoked', at }]);
    spec
      .given([...issued(), { type: 'moved', to: 'revoked', at }])
      .when('revoke', {}, LOCAL)
      .thenNothing();
    spec
      .given([...issued(), { type: 'moved', to: 'used', at, receipt: 'rcp_a' }])
      .when('revoke', {}, LOCAL)
      .thenRefused('path.instruction.used');
  });

  it(
    'open -> expired (passage of expires_at): the tick moves it; ' +
      'before then it does nothing; revoke after it is gone',
    () => {
      spec
        .given(issued(), { now: SPEC_NOW + lifetime - 1 })
        .when('tick', null, null)
        .thenNothing();
      const later = SPEC_NOW + lifetime;
      spec
        .given(issued(), { now: later })
        .when('tick', null, null)
        .then([{ type: 'moved', to: 'expired', at: new Date(later).toISOString() }]);
      spec
        .given(issued(), { now: later })
        .when('revoke', {}, LOCAL)
        .thenRefused('path.instruction.expired');
    },
  );

  it('used, revoked, expired go nowhere: their reads answer 410 with the matching code', () => {
    for (const to of ['used', 'revoked', 'expired'] as const) {
      const state = [
        ...issued(),
        { type: 'moved', to, at } as InstructionEvent,
      ].reduce<InstructionState | null>(instructionDecider.evolve, null)!;
      const [publication] = instructionDecider.publications!(state);
      expect(publication!.view).toEqual({
        gone: expect.objectContaining({ code: `path.instruction.${to}` }),
      });
      expect(instructionDecider.deadline!(state)).toBeNull();
      spec
        .given([...issued(), { type: 'moved', to, at }], { now: SPEC_NOW + 2 * lifetime })
        .when('tick', null, null)
        .thenNothing();
    }
  });

  it('an instruction that does not exist is not found, whatever the command', () => {
    spec.given([]).when('use', { receipt: 'rcp_a' }, null).thenRefused('path.core.not_found');
    spec.given([]).when('revoke', {}, LOCAL).thenRefused('path.core.not_found');
  });
});
