// The checkout decider alone (SPEC I, "States and transitions: Checkout session"): given
// events, when a command, then events or a refusal. Every row of the state table, every
// refusal, and the rules that used to live in the route: only the merchant opens a session,
// the URLs and the webhook policy (P11), the request must be open (read through `reads`), the
// default expiry from the limits, the request's signed object carried into the session.
import { describe, expect, it } from 'vitest';
import { refusal } from '../../protocol/errors.js';
import { signingKeyFromSeed, verifyObject } from '../../protocol/signing.js';
import { BETA, deciderSpec, goneView, LOCAL, SPEC_NOW, viewOf, type SpecContext } from '../spec.js';
import {
  checkoutDecider,
  SESSION_COMPLETED_EVENT,
  SESSION_EXPIRED_EVENT,
  type SessionEvent,
  type SessionState,
} from './checkout.js';

const spec = deciderSpec(checkoutDecider);
const REF = `chk_${'1'.repeat(32)}`;
const ID = `cs_${'2'.repeat(32)}`;
const REQ = `req_${'3'.repeat(32)}`;
const LINK = `https://node.example/path/${REF}`;
const HOOK = 'https://merchant.example/hooks';
const HOUR = 3600_000;
const LIFETIME = 3600_000;
const at = new Date(SPEC_NOW).toISOString();
const iso = (ms: number) => new Date(ms).toISOString();
const GAMMA = { member: 'gamma', local: false };
/** The key spec.ts signs with (RFC 8032 TEST 1). */
const SEED = '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60';
const PUBLIC = signingKeyFromSeed(SEED).publicKeyHex;

/** The request's signed object as its view holds it (the bytes a session carries). */
const requestObject = (overrides: Record<string, unknown> = {}) => ({
  type: 'path.request',
  reference: REQ,
  issuer: 'local',
  payee: { member: 'local', address: null },
  accepts: [],
  status: 'created',
  expires_at: null,
  signature: 'sig',
  ...overrides,
});
const withRequest = (object = requestObject(), extra: SpecContext = {}): SpecContext => ({
  views: { [REQ]: viewOf(object) },
  ...extra,
});
const open = (extra: Record<string, unknown> = {}) => ({
  id: ID,
  reference: REF,
  url: LINK,
  request_reference: REQ,
  success_url: 'https://shop.example/ok',
  cancel_url: 'https://shop.example/cancel',
  webhook_url: HOOK,
  ...extra,
});

function opened(extra: Record<string, unknown> = {}): SessionEvent[] {
  return spec
    .given([], withRequest())
    .when('open', open(extra))
    .then(() => undefined).events;
}
const stateOf = (events: SessionEvent[]) =>
  events.reduce<SessionState | null>(checkoutDecider.evolve, null)!;
const payerView = (events: SessionEvent[]) => JSON.parse(stateOf(events).envelope);
const moved = (to: Exclude<SessionState['status'], 'open'>): SessionEvent => ({
  type: 'moved',
  to,
  at,
  envelope: '{}',
});

describe('checkout: open', () => {
  it('the merchant opens a session: 201 without webhook_url, the route index names it', () => {
    const decision = spec
      .given([], withRequest())
      .when('open', open(), LOCAL)
      .then((events) => expect(events).toHaveLength(1));
    const expiresAt = iso(SPEC_NOW + LIFETIME);
    expect(decision.answer).toEqual({
      value: {
        id: ID,
        reference: REF,
        url: LINK,
        status: 'open',
        request_reference: REQ,
        success_url: 'https://shop.example/ok',
        cancel_url: 'https://shop.example/cancel',
        expires_at: expiresAt,
      },
      created: true,
    });
    expect(decision.publications).toEqual([
      { key: `route/${ID}`, view: { text: REF, signed: false } },
    ]);
    expect(stateOf(decision.events)).toMatchObject({
      status: 'open',
      merchant: 'local',
      attempts: 0,
      payer_member: null,
      webhook_url: HOOK,
      expires_at: expiresAt,
      completed_at: null,
      revoked_at: null,
    });
  });

  it("reads the request it names, and carries its signed object into the payer's object", () => {
    const command = { name: 'open' as const, input: open(), caller: LOCAL };
    expect(checkoutDecider.reads!(command, null, new Map())).toEqual([REQ]);
    const text = JSON.stringify(requestObject());
    const decision = spec
      .given([], withRequest())
      .when('open', open())
      .then(() => undefined);
    expect(stateOf(decision.events).request_object).toBe(text);
    const payer = payerView(decision.events);
    expect(payer).toMatchObject({
      type: 'path.checkout',
      reference: REF,
      issuer: 'local',
      status: 'open',
      attempts: 0,
      request: requestObject(),
      success_url: 'https://shop.example/ok',
      completed_at: null,
    });
    expect(verifyObject(payer, PUBLIC).valid).toBe(true);
    // The merchant-side id and webhook_url never reach the payer-facing object.
    const envelope = stateOf(decision.events).envelope;
    for (const secret of [ID, HOOK, 'webhook_url']) expect(envelope).not.toContain(secret);
    expect(checkoutDecider.publications!(stateOf(decision.events))).toEqual([
      { key: REF, view: { text: envelope, signed: true } },
    ]);
  });

  it('only the issuer of the request (a local credential) opens one: 403 otherwise', () => {
    spec.given([], withRequest()).when('open', open(), BETA).thenRefused('path.auth.forbidden');
    spec.given([], withRequest()).when('open', open(), null).thenRefused('path.auth.forbidden');
    // Who may is decided before anything else about the session (the route's order).
    spec
      .given([])
      .when('open', open({ success_url: 'https://[bad' }), BETA)
      .thenRefused('path.auth.forbidden');
  });

  it('refuses a success_url or cancel_url that is not a URL (400 naming the field)', () => {
    for (const field of ['success_url', 'cancel_url']) {
      spec
        .given([], withRequest())
        .when('open', open({ [field]: 'https://[bad' }))
        .thenRefused('path.core.invalid_request', { field });
    }
  });

  it('webhook_url: https and a public host without --dev; http and loopback with it (P11)', () => {
    const strict = [
      'http://127.0.0.1:8099/hooks',
      'http://shop.example/hooks',
      'https://127.0.0.1/hooks',
      'https://localhost/hooks',
      'https://10.0.0.1/hooks',
      'https://192.168.1.20/hooks',
      'https://169.254.169.254/latest',
      'https://user:pw@shop.example/hooks',
      'https://[::1]/hooks',
    ];
    for (const webhook_url of strict) {
      spec
        .given([], withRequest())
        .when('open', open({ webhook_url }))
        .thenRefused('path.core.invalid_request', { field: 'webhook_url' });
    }
    const dev = withRequest(requestObject(), { dev: true });
    for (const webhook_url of ['http://127.0.0.1:8099/hooks', 'https://localhost/hooks']) {
      spec
        .given([], dev)
        .when('open', open({ webhook_url }))
        .then(() => undefined);
    }
    spec
      .given([], dev)
      .when('open', open({ webhook_url: 'https://10.0.0.1/hooks' }))
      .thenRefused('path.core.invalid_request', { field: 'webhook_url' });
    const none = spec
      .given([], withRequest())
      .when('open', open({ webhook_url: undefined }))
      .then(() => undefined);
    expect(stateOf(none.events).webhook_url).toBeNull();
  });

  it('only while the request is created: 404 none, 409 paid, 410 revoked or expired', () => {
    spec.given([]).when('open', open()).thenRefused('path.core.not_found');
    spec
      .given([], withRequest(requestObject({ status: 'paid' })))
      .when('open', open())
      .thenRefused('path.request.not_open');
    for (const code of ['path.request.revoked', 'path.request.expired'] as const) {
      spec
        .given([], { views: { [REQ]: goneView(refusal(code, 'gone')) } })
        .when('open', open())
        .thenRefused(code);
    }
  });

  it("default expiry: the configured lifetime, never past the request's own expiry", () => {
    const expiryOf = (context: SpecContext) =>
      stateOf(
        spec
          .given([], context)
          .when('open', open())
          .then(() => undefined).events,
      ).expires_at;
    expect(expiryOf(withRequest())).toBe(iso(SPEC_NOW + LIFETIME));
    const limits = { checkout_session_lifetime_ms: 60_000 };
    expect(expiryOf(withRequest(requestObject(), { limits }))).toBe(iso(SPEC_NOW + 60_000));
    const soon = iso(SPEC_NOW + 5 * 60_000);
    expect(expiryOf(withRequest(requestObject({ expires_at: soon })))).toBe(soon);
    const late = iso(SPEC_NOW + 5 * HOUR);
    expect(expiryOf(withRequest(requestObject({ expires_at: late })))).toBe(
      iso(SPEC_NOW + LIFETIME),
    );
  });

  it('a given expires_at is kept, and must be in the future', () => {
    const given = iso(SPEC_NOW + 3 * HOUR);
    const decision = spec
      .given([], withRequest())
      .when('open', open({ expires_at: given }))
      .then(() => undefined);
    expect(stateOf(decision.events).expires_at).toBe(given);
    spec
      .given([], withRequest())
      .when('open', open({ expires_at: at }))
      .thenRefused('path.core.invalid_request', { field: 'expires_at' });
  });

  it('refuses a reference already in use', () => {
    spec
      .given(opened(), withRequest())
      .when('open', open())
      .thenRefused('path.core.invalid_request', { field: 'reference' });
  });
});

describe('checkout: the state table', () => {
  it('open -> open by attempt: attempts + 1, payer_member from the credential', () => {
    const first = spec
      .given(opened())
      .when('attempt', {}, BETA)
      .then((events) => {
        expect(events).toEqual([
          { type: 'attempted', payer_member: 'beta', envelope: expect.any(String) },
        ]);
      });
    expect(first.answer).toEqual({ value: { reference: REF, attempts: 1 } });
    const events = [...opened(), ...first.events];
    expect(stateOf(events)).toMatchObject({ status: 'open', attempts: 1, payer_member: 'beta' });
    expect(payerView(events)).toMatchObject({ attempts: 1, status: 'open' });
    const second = spec
      .given(events)
      .when('attempt', {}, GAMMA)
      .then(() => undefined);
    expect(second.answer).toEqual({ value: { reference: REF, attempts: 2 } });
    expect(stateOf([...events, ...second.events])).toMatchObject({
      attempts: 2,
      payer_member: 'gamma',
    });
    spec.given(opened()).when('attempt', {}, null).thenRefused('path.auth.unauthenticated');
  });

  it('open -> completed: completed_at, checkout.session.completed to its webhook_url', () => {
    const decision = spec
      .given(opened())
      .when('complete', {}, BETA)
      .then([{ type: 'moved', to: 'completed', at, envelope: expect.any(String) }]);
    expect(decision.answer).toEqual({
      value: {
        reference: REF,
        status: 'completed',
        completed_at: at,
        success_url: 'https://shop.example/ok',
      },
    });
    expect(decision.outbox).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        event: SESSION_COMPLETED_EVENT,
        created_at: at,
        targets: [HOOK],
        data: expect.objectContaining({ id: ID, status: 'completed', completed_at: at }),
      },
    ]);
    // The underlying request is NOT marked paid: nothing follows the completion.
    expect(decision.followUps).toBeUndefined();
    const events = [...opened(), ...decision.events];
    expect(payerView(events)).toMatchObject({ status: 'completed', completed_at: at });
    // Of any number of completes, only the first finds the session open.
    spec
      .given(events)
      .when('complete', {}, GAMMA)
      .thenRefused('path.checkout.session_not_open', { status: 'completed' });
  });

  it('open -> revoked by the merchant (a local credential) only: revoked_at set', () => {
    spec.given(opened()).when('revoke', {}, BETA).thenRefused('path.auth.forbidden');
    spec.given(opened()).when('revoke', {}, null).thenRefused('path.auth.forbidden');
    const decision = spec
      .given(opened())
      .when('revoke', {}, LOCAL)
      .then([{ type: 'moved', to: 'revoked', at, envelope: expect.any(String) }]);
    expect(decision.answer).toEqual({
      value: { reference: REF, status: 'revoked', revoked_at: at },
    });
    expect(stateOf([...opened(), ...decision.events])).toMatchObject({
      status: 'revoked',
      revoked_at: at,
    });
    expect(decision.outbox).toBeUndefined();
  });

  it('open -> expired at expires_at by the tick: checkout.session.expired, not a ms before', () => {
    spec
      .given(opened(), { now: SPEC_NOW + LIFETIME - 1 })
      .when('tick', null, null)
      .thenNothing();
    const later = SPEC_NOW + LIFETIME;
    const decision = spec
      .given(opened(), { now: later })
      .when('tick', null, null)
      .then([{ type: 'moved', to: 'expired', at: iso(later), envelope: expect.any(String) }]);
    expect(decision.outbox).toEqual([
      expect.objectContaining({
        event: SESSION_EXPIRED_EVENT,
        created_at: iso(later),
        targets: [HOOK],
        data: expect.objectContaining({ id: ID, status: 'expired', completed_at: null }),
      }),
    ]);
    const quiet = spec
      .given(opened({ webhook_url: undefined }), { now: later })
      .when('tick', null, null)
      .then(() => undefined);
    expect(quiet.outbox![0]!.targets).toEqual([]);
    expect(checkoutDecider.deadline!(stateOf(opened()))).toBe(later);
  });

  it('completed, revoked, expired go nowhere: attempt, complete, revoke answer 409', () => {
    for (const to of ['completed', 'revoked', 'expired'] as const) {
      const events = [...opened(), moved(to)];
      for (const command of ['attempt', 'complete', 'revoke'] as const) {
        spec
          .given(events)
          .when(command, {}, LOCAL)
          .thenRefused('path.checkout.session_not_open', { status: to });
      }
      expect(checkoutDecider.deadline!(stateOf(events))).toBeNull();
      spec
        .given(events, { now: SPEC_NOW + 2 * LIFETIME })
        .when('tick', null, null)
        .thenNothing();
    }
  });

  it('past expires_at and not yet ticked, the session is already not open', () => {
    const past = { now: SPEC_NOW + LIFETIME };
    for (const command of ['attempt', 'complete', 'revoke'] as const) {
      spec
        .given(opened(), past)
        .when(command, {}, LOCAL)
        .thenRefused('path.checkout.session_not_open', { status: 'expired' });
    }
    const read = spec.given(opened(), past).when('read', {}, LOCAL).thenNothing();
    expect(read.answer).toMatchObject({ value: { status: 'expired' } });
  });
});

describe("checkout: the merchant's read, and a session that does not exist", () => {
  it('the merchant reads its session; another member, or none, is told it does not exist', () => {
    const decision = spec.given(opened()).when('read', {}, LOCAL).thenNothing();
    expect(decision.answer).toEqual({
      value: {
        id: ID,
        reference: REF,
        status: 'open',
        request_reference: REQ,
        success_url: 'https://shop.example/ok',
        cancel_url: 'https://shop.example/cancel',
        payer_member: null,
        attempts: 0,
        expires_at: iso(SPEC_NOW + LIFETIME),
        completed_at: null,
      },
    });
    spec.given(opened()).when('read', {}, BETA).thenRefused('path.core.not_found');
    spec.given(opened()).when('read', {}, null).thenRefused('path.core.not_found');
  });

  it("any command on a session that does not exist: 404; a non-merchant's revoke: 403", () => {
    for (const command of ['read', 'attempt', 'complete', 'revoke'] as const) {
      spec.given([]).when(command, {}, LOCAL).thenRefused('path.core.not_found');
    }
    spec.given([]).when('tick', null, null).thenRefused('path.core.not_found');
    spec.given([]).when('revoke', {}, BETA).thenRefused('path.auth.forbidden');
  });
});
