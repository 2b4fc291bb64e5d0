// The connection decider alone (SPEC K, "States and transitions: Connection and delegation"):
// given events, when a command, then events or a refusal. Every row of the state table, every
// refusal the decider makes, and the rules that used to live in routes/connect.ts (the local
// member alone creates connections and cuts delegations; the subject must exist, read through
// `reads`).
import { describe, expect, it } from 'vitest';
import type { Caller, Decision, UsageEntry } from '../decider.js';
import { BETA, deciderSpec, goneView, LOCAL, SPEC_NOW, viewOf } from '../spec.js';
import { digestOf } from '../../protocol/digest.js';
import { refusal } from '../../protocol/errors.js';
import { signingKeyFromSeed, verifyObject } from '../../protocol/signing.js';
import {
  connectionDecider,
  routeViewKey,
  subjectViewKey,
  type ConnectionEvent,
  type ConnectionState,
} from './connection.js';

const spec = deciderSpec(connectionDecider);
const GAMMA: Caller = { member: 'gamma', local: false };
const DELTA: Caller = { member: 'delta', local: false };
const PUBLIC_KEY = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
).publicKeyHex;
const CON = `con_${'1'.repeat(32)}`;
const DLG = `dlg_${'2'.repeat(32)}`;
const SUB = `sub_${'3'.repeat(32)}`;
const COMMIT = `sha256:${'ab'.repeat(32)}`;
const HOUR = 3_600_000;
const at = (ms: number) => new Date(ms).toISOString();
const NOW = at(SPEC_NOW);
const withSubject = { views: { [subjectViewKey(SUB)]: viewOf({ id: SUB }) } };
const FORBIDDEN = 'path.auth.forbidden';
const INVALID = 'path.core.invalid_request';
const OUT_OF_SCOPE = 'path.connect.delegation_out_of_scope';
const LIMIT_REACHED = 'path.connect.delegation_limit_reached';

const terms = (overrides: Record<string, unknown> = {}) => ({
  reference: CON,
  grantee: 'beta',
  subject_id: SUB,
  capabilities: { payment_request: true, refund: false },
  mode: 'persistent_consent' as const,
  max_single: '10',
  max_total: '45',
  currency: 'EUR',
  expires_at: at(SPEC_NOW + 2 * HOUR),
  ...overrides,
});
const bound = (overrides: Record<string, unknown> = {}) => ({
  reference: DLG,
  delegate: 'gamma',
  capability: 'payment_request',
  amount: '5',
  currency: 'EUR',
  destination_commitment: COMMIT,
  expires_at: at(SPEC_NOW + HOUR),
  ...overrides,
});
const spend = (amount: string, ref = 'op-1') => ({
  capability: 'payment_request',
  amount,
  currency: 'EUR',
  operation_ref: ref,
});
const spendDelegated = (overrides: Record<string, unknown> = {}) => ({
  delegation: DLG,
  capability: 'payment_request',
  amount: '5',
  currency: 'EUR',
  destination_commitment: COMMIT,
  operation_ref: 'dop-1',
  ...overrides,
});
const ofDelegation = { delegation: DLG };

const consumed = (amount: string, delegation: string | null = null): ConnectionEvent => ({
  type: 'consumed',
  amount,
  period_index: null,
  delegation,
});
const revokedBy = (by: string): ConnectionEvent => ({ type: 'revoked', at: NOW, by });
const delegationRevokedBy = (by: string): ConnectionEvent => ({
  type: 'delegation_revoked',
  reference: DLG,
  at: NOW,
  by,
});

const created = (overrides: Record<string, unknown> = {}): ConnectionEvent[] =>
  spec
    .given([], withSubject)
    .when('create', terms(overrides))
    .then(() => undefined).events;
const withDelegation = (overrides: Record<string, unknown> = {}): ConnectionEvent[] => {
  const given = created();
  const cut = spec
    .given(given)
    .when('create-delegation', bound(overrides))
    .then(() => undefined);
  return [...given, ...cut.events];
};
const stateOf = (events: ConnectionEvent[]) =>
  events.reduce<ConnectionState | null>(connectionDecider.evolve, null)!;
const valueOf = (decision: Decision<ConnectionEvent>) =>
  (decision.answer as { value: unknown }).value;
const signedOf = (decision: Decision<ConnectionEvent>) => {
  expect(decision.answer).toMatchObject({ signed: true });
  const object = JSON.parse((decision.answer as { text: string }).text) as Record<string, unknown>;
  expect(verifyObject(object, PUBLIC_KEY).valid).toBe(true);
  return object;
};

describe('connection: create (local member only, subject read through `reads`)', () => {
  it("reads the subject's committed view, and only for create", () => {
    const none = new Map();
    const reads = connectionDecider.reads!;
    expect(reads({ name: 'create', input: terms(), caller: LOCAL }, null, none)).toEqual([
      subjectViewKey(SUB),
    ]);
    expect(reads({ name: 'read', input: {}, caller: LOCAL }, null, none)).toEqual([]);
  });

  it('signs the consent as collected and answers 201 with its digest', () => {
    const decision = spec
      .given([], withSubject)
      .when('create', terms())
      .then((events) => {
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({
          type: 'created',
          state: { reference: CON, grantor: 'local' },
        });
      });
    const state = stateOf(decision.events);
    expect(decision.answer).toEqual({
      value: {
        reference: CON,
        grantee: 'beta',
        status: 'active',
        mode: 'persistent_consent',
        consent_digest: state.consent_digest,
        expires_at: terms().expires_at,
      },
      created: true,
    });
    expect(state.consent_digest).toBe(digestOf(state.consent));
    expect(verifyObject(state.consent, PUBLIC_KEY).valid).toBe(true);
    expect(state.consent).toMatchObject({
      type: 'path.consent',
      connection: CON,
      grantor: 'local',
      grantee: 'beta',
      subject_id: SUB,
      max_single: '10',
      max_total: '45',
      currency: 'EUR',
      collected_at: NOW,
    });
    expect(state).toMatchObject({ consumed_total: '0', consumed_operations: 0, usage_count: 0 });
  });

  it('refuses a caller other than the local member, before looking at the subject', () => {
    spec.given([], withSubject).when('create', terms(), BETA).thenRefused(FORBIDDEN);
    spec.given([]).when('create', terms(), BETA).thenRefused(FORBIDDEN);
    spec.given([], withSubject).when('create', terms(), null).thenRefused(FORBIDDEN);
  });

  it('refuses a subject with no committed view (404 no such subject)', () => {
    const r = spec.given([]).when('create', terms()).thenRefused('path.core.not_found');
    expect(r.message).toBe('no such subject');
    const gone = goneView(refusal('path.core.not_found', 'gone'));
    spec
      .given([], { views: { [subjectViewKey(SUB)]: gone } })
      .when('create', terms())
      .thenRefused('path.core.not_found');
  });

  it('refuses impossible terms: past expiry, zero total, single > total, bad interval', () => {
    const when = (overrides: Record<string, unknown>) =>
      spec.given([], withSubject).when('create', terms(overrides));
    when({ expires_at: at(SPEC_NOW - 60_000) }).thenRefused(INVALID, { field: 'expires_at' });
    when({ expires_at: NOW }).thenRefused(INVALID, { field: 'expires_at' });
    when({ max_total: '0.00' }).thenRefused(INVALID, { field: 'max_total' });
    when({ max_single: '45.01' }).thenRefused(INVALID, { field: 'max_single' });
    for (const interval of ['every month', `R/${NOW}/PT1H`, 'R/2026-02-30T00:00:00Z/P1M']) {
      when({ schedule: { interval, max_per_period: '15' } }).thenRefused(INVALID, {
        field: 'schedule.interval',
      });
    }
  });

  it("P23: refuses a ceiling beyond its currency's minor unit, naming it and the digits", () => {
    const when = (overrides: Record<string, unknown>) =>
      spec.given([], withSubject).when('create', terms(overrides));
    const digits = (field: string, max_fraction_digits: number) => ({ field, max_fraction_digits });
    when({ max_single: '1.001' }).thenRefused(INVALID, digits('max_single', 2));
    when({ max_total: '45.000' }).thenRefused(INVALID, digits('max_total', 2));
    const schedule = { interval: `R/${NOW}/P1M`, max_per_period: '15.001' };
    when({ schedule }).thenRefused(INVALID, digits('schedule.max_per_period', 2));
    when({ currency: 'JPY', max_single: '10.5' }).thenRefused(INVALID, digits('max_single', 0));
    spec
      .given([], withSubject)
      .when('create', terms({ currency: 'JPY' }))
      .then((events) => {
        expect(events).toHaveLength(1);
      });
    const bhd = terms({ currency: 'BHD', max_single: '1.005', max_total: '45.125' });
    spec
      .given([], withSubject)
      .when('create', bhd)
      .then((events) => {
        expect(events).toHaveLength(1);
      });
  });

  it('refuses a reference already in use', () => {
    spec
      .given(created(), withSubject)
      .when('create', terms())
      .thenRefused(INVALID, { field: 'reference' });
  });
});

describe('connection: reads and usage count (either party)', () => {
  it('grantor and grantee read it signed now: status and counters now, terms from consent', () => {
    for (const caller of [LOCAL, BETA]) {
      const object = signedOf(spec.given(created()).when('read', {}, caller).thenNothing());
      expect(object).toMatchObject({
        type: 'path.connection',
        reference: CON,
        grantor: 'local',
        grantee: 'beta',
        subject_id: SUB,
        status: 'active',
        schedule: null,
        consumed_total: '0',
        consumed_operations: 0,
        remaining_total: '45',
        revoked_at: null,
        revoked_by: null,
      });
    }
    spec.given(created()).when('read', {}, GAMMA).thenRefused(FORBIDDEN);
  });

  it('a read past expires_at says expired (expiry is read, never recorded)', () => {
    const read = spec
      .given(created(), { now: SPEC_NOW + 2 * HOUR })
      .when('read', {})
      .thenNothing();
    expect(signedOf(read).status).toBe('expired');
  });

  it('usage answers the length of the log to a party; a third member is refused', () => {
    const given = [...created(), consumed('1')];
    expect(valueOf(spec.given(given).when('usage', {}, BETA).thenNothing())).toEqual({ count: 1 });
    spec.given(given).when('usage', {}, GAMMA).thenRefused(FORBIDDEN);
  });

  it('a connection that does not exist is not found, whatever the command', () => {
    const absent = spec.given([]);
    for (const r of [
      absent.when('read', {}, BETA).thenRefused('path.core.not_found'),
      absent.when('usage', {}, BETA).thenRefused('path.core.not_found'),
      absent.when('consume', spend('1'), BETA).thenRefused('path.core.not_found'),
      absent.when('revoke', {}, BETA).thenRefused('path.core.not_found'),
      absent.when('create-delegation', bound()).thenRefused('path.core.not_found'),
    ])
      expect(r.message).toBe('no such connection');
    const r = absent.when('read-delegation', ofDelegation).thenRefused('path.core.not_found');
    expect(r.message).toBe('no such delegation');
  });
});

describe('connection: consume (the grantee; scope, currency, both ceilings)', () => {
  it('moves the counters, writes a usage row at the next position; the state stays active', () => {
    const decision = spec
      .given(created())
      .when('consume', spend('7.5'), BETA)
      .then([consumed('7.5')]);
    expect(valueOf(decision)).toEqual({
      ok: true,
      consumed_total: '7.5',
      consumed_operations: 1,
      remaining_total: '37.5',
    });
    const row = {
      capability: 'payment_request',
      amount: '7.5',
      currency: 'EUR',
      operation_ref: 'op-1',
      occurred_at: NOW,
    };
    expect(decision.usage).toEqual<UsageEntry[]>([{ owner: CON, index: 1, row }]);
    const after = [...created(), ...decision.events];
    expect(signedOf(spec.given(after).when('read', {}).thenNothing()).status).toBe('active');
    const second = spec
      .given(after)
      .when('consume', spend('0.5', 'op-2'), BETA)
      .then([consumed('0.5')]);
    expect(second.usage![0]!.index).toBe(2);
  });

  it('only the grantee consumes', () => {
    spec.given(created()).when('consume', spend('1'), LOCAL).thenRefused(FORBIDDEN);
    spec.given(created()).when('consume', spend('1'), GAMMA).thenRefused(FORBIDDEN);
  });

  it('refuses zero, a capability not granted (false or absent), another currency', () => {
    const when = (input: ReturnType<typeof spend>) =>
      spec.given(created()).when('consume', input, BETA);
    when(spend('0.00')).thenRefused(INVALID, { field: 'amount' });
    when({ ...spend('1'), capability: 'refund' }).thenRefused(OUT_OF_SCOPE);
    when({ ...spend('1'), capability: 'payout' }).thenRefused(OUT_OF_SCOPE);
    when({ ...spend('1'), currency: 'USD' }).thenRefused(OUT_OF_SCOPE);
  });

  it('refuses above max_single and beyond the total; exactly the remainder fits (P13)', () => {
    spec
      .given(created())
      .when('consume', spend('10.01'), BETA)
      .thenRefused(LIMIT_REACHED, { max_single: '10' });
    spec
      .given(created())
      .when('consume', spend('10.00'), BETA)
      .then([consumed('10.00')]);
    const spent = [...created(), ...['10', '10', '10', '10'].map((a) => consumed(a))];
    spec
      .given(spent)
      .when('consume', spend('5.01'), BETA)
      .thenRefused(LIMIT_REACHED, { remaining_total: '5' });
    expect(
      valueOf(
        spec
          .given(spent)
          .when('consume', spend('5'), BETA)
          .then([consumed('5')]),
      ),
    ).toEqual({ ok: true, consumed_total: '45', consumed_operations: 5, remaining_total: '0' });
  });

  it("P23: an amount below its currency's minor unit is refused (400) and counts nothing", () => {
    for (const amount of ['0.001', '0.0000000000000000000001', '1.000']) {
      const outcome = spec.given(created()).when('consume', spend(amount), BETA);
      outcome.thenRefused(INVALID, { field: 'amount', max_fraction_digits: 2 });
      expect(outcome.state).toMatchObject({ consumed_total: '0', consumed_operations: 0 });
    }
  });

  it('refuses after expires_at (410 path.connect.expired)', () => {
    spec
      .given(created(), { now: SPEC_NOW + 2 * HOUR })
      .when('consume', spend('1'), BETA)
      .thenRefused('path.connect.expired');
  });
});

describe('connection: mandates (schedule)', () => {
  const start = at(SPEC_NOW - 1000);
  const mandate = (interval: string) =>
    created({ schedule: { interval, max_per_period: '15' }, expires_at: at(SPEC_NOW + 72 * HOUR) });

  it('a period has its own ceiling; the next period starts afresh', () => {
    const given = mandate(`R/${start}/P1D`);
    const first = spec
      .given(given)
      .when('consume', spend('10'), BETA)
      .then([{ type: 'consumed', amount: '10', period_index: 0, delegation: null }]);
    const spent = [...given, ...first.events];
    spec
      .given(spent)
      .when('consume', spend('6'), BETA)
      .thenRefused(LIMIT_REACHED, { max_per_period: '15', period_consumed: '10' });
    spec
      .given(spent)
      .when('consume', spend('5'), BETA)
      .then(() => undefined);
    spec
      .given(spent, { now: SPEC_NOW + 24 * HOUR - 1000 })
      .when('consume', spend('10'), BETA)
      .then([{ type: 'consumed', amount: '10', period_index: 1, delegation: null }]);
  });

  it('before the first period: out of scope; after the last: expired', () => {
    spec
      .given(mandate(`R/${at(SPEC_NOW + 24 * HOUR)}/P1M`))
      .when('consume', spend('1'), BETA)
      .thenRefused(OUT_OF_SCOPE);
    spec
      .given(mandate(`R1/${at(SPEC_NOW - 48 * HOUR)}/P1D`))
      .when('consume', spend('1'), BETA)
      .thenRefused('path.connect.expired');
  });
});

describe('connection: the state table (active -> revoked, either party)', () => {
  it('active -> revoked by the grantor or the grantee, recording revoked_at and revoked_by', () => {
    for (const [caller, by] of [
      [LOCAL, 'local'],
      [BETA, 'beta'],
    ] as const) {
      const decision = spec
        .given(created())
        .when('revoke', { reason: 'done' }, caller)
        .then([revokedBy(by)]);
      expect(valueOf(decision)).toEqual({
        reference: CON,
        status: 'revoked',
        revoked_at: NOW,
        revoked_by: by,
      });
    }
  });

  it('a third member cannot revoke', () => {
    spec.given(created()).when('revoke', {}, GAMMA).thenRefused(FORBIDDEN);
  });

  it('revoked goes nowhere: revoking again answers the revocation as recorded', () => {
    const revoked = [...created(), revokedBy('local')];
    const again = spec
      .given(revoked, { now: SPEC_NOW + HOUR })
      .when('revoke', {}, BETA)
      .thenNothing();
    expect(valueOf(again)).toEqual({
      reference: CON,
      status: 'revoked',
      revoked_at: NOW,
      revoked_by: 'local',
    });
  });

  it('takes effect at the next operation: consume is 410; reads and the usage log remain', () => {
    const revoked = [...created(), consumed('4'), revokedBy('local')];
    spec.given(revoked).when('consume', spend('1'), BETA).thenRefused('path.connect.revoked');
    expect(signedOf(spec.given(revoked).when('read', {}, BETA).thenNothing())).toMatchObject({
      status: 'revoked',
      revoked_by: 'local',
      consumed_total: '4',
      consumed_operations: 1,
    });
    expect(valueOf(spec.given(revoked).when('usage', {}, BETA).thenNothing())).toEqual({
      count: 1,
    });
  });
});

describe('delegation: cut by the grantor', () => {
  it('signs what it binds, answers 201, and publishes the route index entry to its parent', () => {
    const decision = spec
      .given(created())
      .when('create-delegation', bound({ max_total: '20' }))
      .then((events) =>
        expect(events[0]).toMatchObject({
          type: 'delegation_created',
          delegation: { reference: DLG, max_total: '20' },
        }),
      );
    const d = stateOf([...created(), ...decision.events]).delegations.get(DLG)!;
    expect(decision.answer).toEqual({
      value: {
        reference: DLG,
        delegate: 'gamma',
        status: 'active',
        binds_digest: d.binds_digest,
        expires_at: bound().expires_at,
      },
      created: true,
    });
    expect(d.binds_digest).toBe(digestOf(d.binds));
    expect(verifyObject(d.binds, PUBLIC_KEY).valid).toBe(true);
    expect(d.binds).toMatchObject({
      type: 'path.delegation.binds',
      connection: CON,
      grantor: 'local',
      delegate: 'gamma',
    });
    expect(decision.publications).toEqual([
      { key: routeViewKey(DLG), view: { text: CON, signed: false } },
    ]);
  });

  it('max_total defaults to the bound amount (one use)', () => {
    expect(stateOf(withDelegation()).delegations.get(DLG)!.max_total).toBe('5');
  });

  it('only the local member cuts one, said before whether the connection exists', () => {
    spec.given(created()).when('create-delegation', bound(), BETA).thenRefused(FORBIDDEN);
    spec.given([]).when('create-delegation', bound(), BETA).thenRefused(FORBIDDEN);
  });

  it('refuses a closed parent, scope outside it, zero, bad expiry, max_total below', () => {
    spec
      .given([...created(), revokedBy('beta')])
      .when('create-delegation', bound())
      .thenRefused('path.connect.revoked');
    spec
      .given(created(), { now: SPEC_NOW + 2 * HOUR })
      .when('create-delegation', bound())
      .thenRefused('path.connect.expired');
    const when = (overrides: Record<string, unknown>) =>
      spec.given(created()).when('create-delegation', bound(overrides));
    when({ capability: 'refund' }).thenRefused(OUT_OF_SCOPE);
    when({ capability: 'payout' }).thenRefused(OUT_OF_SCOPE);
    when({ currency: 'USD' }).thenRefused(OUT_OF_SCOPE);
    when({ amount: '0' }).thenRefused(INVALID, { field: 'amount' });
    when({ expires_at: NOW }).thenRefused(INVALID, { field: 'expires_at' });
    when({ expires_at: at(SPEC_NOW + 3 * HOUR) }).thenRefused(INVALID, { field: 'expires_at' });
    when({ max_total: '4' }).thenRefused(INVALID, { field: 'max_total' });
    // P23: what a delegation binds and its ceiling are amounts of its currency.
    const digits = (field: string) => ({ field, max_fraction_digits: 2 });
    when({ amount: '5.001' }).thenRefused(INVALID, digits('amount'));
    when({ max_total: '10.000' }).thenRefused(INVALID, digits('max_total'));
  });
});

describe('delegation: reads (grantor, parent grantee, delegate)', () => {
  it('is read signed by its parties, terms from binds; a fourth member is refused', () => {
    for (const caller of [LOCAL, BETA, GAMMA]) {
      const read = spec.given(withDelegation()).when('read-delegation', ofDelegation, caller);
      const object = signedOf(read.thenNothing());
      expect(object).toMatchObject({
        type: 'path.delegation',
        reference: DLG,
        connection: CON,
        delegate: 'gamma',
        status: 'active',
        max_total: '5',
        consumed_total: '0',
        consumed_operations: 0,
        remaining_total: '5',
      });
      expect((object.binds as Record<string, unknown>).binds_to).toEqual({
        capability: 'payment_request',
        amount: '5',
        currency: 'EUR',
        destination_commitment: COMMIT,
      });
    }
    const given = spec.given(withDelegation());
    given.when('read-delegation', ofDelegation, DELTA).thenRefused(FORBIDDEN);
    given.when('usage-delegation', ofDelegation, DELTA).thenRefused(FORBIDDEN);
    expect(valueOf(given.when('usage-delegation', ofDelegation, GAMMA).thenNothing())).toEqual({
      count: 0,
    });
  });

  it('an unknown delegation of an existing connection is not found', () => {
    const other = `dlg_${'9'.repeat(32)}`;
    const given = spec.given(withDelegation());
    given.when('read-delegation', { delegation: other }, LOCAL).thenRefused('path.core.not_found');
    given
      .when('consume-delegation', spendDelegated({ delegation: other }), GAMMA)
      .thenRefused('path.core.not_found');
  });
});

describe('delegation: consume (the named delegate, exactly what it binds, both ceilings)', () => {
  it('moves both counters in one event and writes a row to each log', () => {
    const decision = spec
      .given(withDelegation({ max_total: '20' }))
      .when('consume-delegation', spendDelegated(), GAMMA)
      .then([consumed('5', DLG)]);
    expect(valueOf(decision)).toEqual({
      ok: true,
      consumed_total: '5',
      consumed_operations: 1,
      remaining_total: '15',
      parent_consumed_total: '5',
      parent_remaining_total: '40',
    });
    const row = {
      capability: 'payment_request',
      amount: '5',
      currency: 'EUR',
      operation_ref: 'dop-1',
      occurred_at: NOW,
    };
    expect(decision.usage).toEqual<UsageEntry[]>([
      { owner: CON, index: 1, row: { ...row, destination_commitment: COMMIT, delegation: DLG } },
      { owner: DLG, index: 1, row: { ...row, destination_commitment: COMMIT } },
    ]);
  });

  it('only the named delegate consumes (not the grantor, the parent grantee, another)', () => {
    for (const caller of [LOCAL, BETA, DELTA]) {
      spec
        .given(withDelegation())
        .when('consume-delegation', spendDelegated(), caller)
        .thenRefused(FORBIDDEN);
    }
  });

  it('refuses anything but what it binds; an amount written otherwise is the same decimal', () => {
    const when = (change: Record<string, unknown>) =>
      spec.given(withDelegation()).when('consume-delegation', spendDelegated(change), GAMMA);
    for (const change of [
      { amount: '4' },
      { amount: '6' },
      { destination_commitment: `sha256:${'cd'.repeat(32)}` },
      { capability: 'refund' },
      { currency: 'USD' },
    ])
      when(change).thenRefused(OUT_OF_SCOPE);
    when({ amount: '5.00' }).then([consumed('5.00', DLG)]);
    // P23: "5.000" is the same decimal but not a spelling of euros.
    when({ amount: '5.000' }).thenRefused(INVALID, { field: 'amount', max_fraction_digits: 2 });
  });

  it("stops at its own ceiling, and at the parent's", () => {
    const once = [...withDelegation(), consumed('5', DLG)];
    spec
      .given(once)
      .when('consume-delegation', spendDelegated(), GAMMA)
      .thenRefused(LIMIT_REACHED, { remaining_total: '0' });
    const parentSpent = [
      ...withDelegation({ max_total: '50' }),
      ...['10', '10', '10', '10'].map((a) => consumed(a)),
    ];
    const when = (events: ConnectionEvent[]) =>
      spec.given(events).when('consume-delegation', spendDelegated(), GAMMA);
    when(parentSpent).then([consumed('5', DLG)]);
    when([...parentSpent, consumed('5', DLG)]).thenRefused(LIMIT_REACHED, { remaining_total: '0' });
  });

  it('refuses when it or its parent is revoked or expired (410)', () => {
    const when = (events: ConnectionEvent[], now = SPEC_NOW) =>
      spec.given(events, { now }).when('consume-delegation', spendDelegated(), GAMMA);
    when([...withDelegation(), delegationRevokedBy('gamma')]).thenRefused('path.connect.revoked');
    when([...withDelegation(), revokedBy('beta')]).thenRefused('path.connect.revoked');
    when(withDelegation(), SPEC_NOW + HOUR).thenRefused('path.connect.expired');
  });
});

describe('delegation: the state table (active -> revoked by any of its parties)', () => {
  it('active -> revoked by each of its parties, recording who; the parent is untouched', () => {
    for (const [caller, by] of [
      [LOCAL, 'local'],
      [GAMMA, 'gamma'],
      [BETA, 'beta'],
    ] as const) {
      const decision = spec
        .given(withDelegation())
        .when('revoke-delegation', { ...ofDelegation, reason: 'done' }, caller)
        .then([delegationRevokedBy(by)]);
      expect(valueOf(decision)).toEqual({
        reference: DLG,
        status: 'revoked',
        revoked_at: NOW,
        revoked_by: by,
      });
      const after = stateOf([...withDelegation(), ...decision.events]);
      expect(after.revoked_at).toBeNull();
      expect(after.delegations.get(DLG)).toMatchObject({ revoked_at: NOW, revoked_by: by });
    }
  });

  it('a fourth member cannot revoke; revoking again changes nothing; reads, log remain', () => {
    spec
      .given(withDelegation())
      .when('revoke-delegation', ofDelegation, DELTA)
      .thenRefused(FORBIDDEN);
    const revoked = spec.given([
      ...withDelegation(),
      consumed('5', DLG),
      delegationRevokedBy('gamma'),
    ]);
    expect(valueOf(revoked.when('revoke-delegation', ofDelegation, LOCAL).thenNothing())).toEqual({
      reference: DLG,
      status: 'revoked',
      revoked_at: NOW,
      revoked_by: 'gamma',
    });
    expect(
      signedOf(revoked.when('read-delegation', ofDelegation, GAMMA).thenNothing()),
    ).toMatchObject({ status: 'revoked', revoked_by: 'gamma', consumed_total: '5' });
    expect(valueOf(revoked.when('usage-delegation', ofDelegation, GAMMA).thenNothing())).toEqual({
      count: 1,
    });
  });
});
