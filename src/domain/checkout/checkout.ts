// Checkout sessions (SPEC I, "States and transitions: Checkout session"): a request plus a
// hand-back and a merchant notification address.
//   open -> open (attempt: attempts + 1, payer_member from the credential)
//   open -> completed (complete; exactly one of any number of simultaneous calls wins)
//   open -> revoked (the merchant, a local credential)
//   open -> expired (passage of expires_at)
//   completed, revoked, expired: nowhere (409 path.checkout.session_not_open)
// Completion does not mark the request paid. The merchant-side `id` and `webhook_url` never
// reach the payer-facing object.
import type { Command, DecideContext, Decider, Decision, OutboxEvent, Publication, Reply } from '../../actors/types.js';
import { invalid, refusal } from '../../protocol/errors.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';

export type SessionStatus = 'open' | 'completed' | 'expired' | 'revoked';

export interface SessionState {
  id: string;
  reference: string;
  merchant: string;
  request_reference: string;
  /** The request's signed object when the session opened, JSON text. */
  request_object: string;
  success_url: string;
  cancel_url: string;
  webhook_url: string | null;
  status: SessionStatus;
  payer_member: string | null;
  attempts: number;
  expires_at: string;
  created_at: string;
  completed_at: string | null;
  revoked_at: string | null;
  /** Signed payer-facing object (GET /path/{reference}), JSON text. */
  envelope: string;
}

export type SessionEvent =
  | { type: 'opened'; state: SessionState }
  | { type: 'attempted'; payer_member: string; envelope: string }
  | { type: 'moved'; to: Exclude<SessionStatus, 'open'>; at: string; envelope: string };

export const SESSION_COMPLETED_EVENT = 'checkout.session.completed';
export const SESSION_EXPIRED_EVENT = 'checkout.session.expired';

const ok = (status: number, value: unknown): Reply => ({ status, body: JSON.stringify(value), signed: false });
const notOpen = (s: SessionState) => refusal('path.checkout.session_not_open', `this session is ${s.status}`, { status: s.status });

export const checkoutDecider: Decider<SessionState, SessionEvent> = {
  type: 'checkout',

  decide(command: Command, state: SessionState | null, context: DecideContext): Decision<SessionEvent> {
    const input = (command.input ?? {}) as Record<string, any>;
    if (command.name === 'open') {
      if (state !== null) return invalid('reference', 'reference already in use');
      return open(input, context, command.caller?.member ?? '');
    }
    if (state === null) return refusal('path.core.not_found', 'no such checkout session');
    const at = isoTime(context.now);
    const s = expiredByNow(state, context.now);
    switch (command.name) {
      case 'read':
        // The merchant's view; a session of another member answers 404, never 403.
        if (command.caller === null || command.caller.member !== s.merchant) return refusal('path.core.not_found', 'no such checkout session');
        return { events: [], reply: ok(200, merchantView(s)) };
      case 'attempt': {
        if (s.status !== 'open') return notOpen(s);
        const payer = command.caller!.member;
        const next = { ...s, attempts: s.attempts + 1, payer_member: payer };
        return { events: [{ type: 'attempted', payer_member: payer, envelope: payerObject(next, context) }], reply: ok(200, { reference: s.reference, attempts: next.attempts }) };
      }
      case 'complete': {
        if (s.status !== 'open') return notOpen(s);
        const next = { ...s, status: 'completed' as const, completed_at: at };
        return {
          events: [{ type: 'moved', to: 'completed', at, envelope: payerObject(next, context) }],
          reply: ok(200, { reference: s.reference, status: 'completed', completed_at: at, success_url: s.success_url }),
          outbox: [sessionEvent(SESSION_COMPLETED_EVENT, next, context, at)],
        };
      }
      case 'revoke': {
        if (command.caller === null || !command.caller.local) return refusal('path.auth.forbidden', 'only the merchant may revoke a session');
        if (s.status !== 'open') return notOpen(s);
        const next = { ...s, status: 'revoked' as const, revoked_at: at };
        return {
          events: [{ type: 'moved', to: 'revoked', at, envelope: payerObject(next, context) }],
          reply: ok(200, { reference: s.reference, status: 'revoked', revoked_at: at }),
        };
      }
      case 'tick': {
        if (state.status !== 'open' || parseTime(state.expires_at)! > context.now) return { events: [], reply: ok(200, {}) };
        const next = { ...state, status: 'expired' as const };
        return {
          events: [{ type: 'moved', to: 'expired', at, envelope: payerObject(next, context) }],
          reply: ok(200, {}),
          outbox: [sessionEvent(SESSION_EXPIRED_EVENT, next, context, at)],
        };
      }
      default:
        return refusal('path.core.not_found', 'no such operation on a checkout session');
    }
  },

  evolve(state: SessionState | null, event: SessionEvent): SessionState {
    if (event.type === 'opened') return event.state;
    if (state === null) throw new Error('session moved before it was opened');
    if (event.type === 'attempted') return { ...state, attempts: state.attempts + 1, payer_member: event.payer_member, envelope: event.envelope };
    return {
      ...state, status: event.to, envelope: event.envelope,
      completed_at: event.to === 'completed' ? event.at : state.completed_at,
      revoked_at: event.to === 'revoked' ? event.at : state.revoked_at,
    };
  },

  publications(state: SessionState): Publication[] {
    return [{ key: state.reference, reply: { status: 200, body: state.envelope, signed: true } }];
  },

  deadline(state: SessionState): number | null {
    return state.status === 'open' ? parseTime(state.expires_at) : null;
  },
};

/** A session past its expiry reads as expired even before its tick is recorded. */
function expiredByNow(state: SessionState, now: number): SessionState {
  return state.status === 'open' && parseTime(state.expires_at)! <= now ? { ...state, status: 'expired' } : state;
}

function merchantView(s: SessionState) {
  return {
    id: s.id, reference: s.reference, status: s.status, request_reference: s.request_reference, success_url: s.success_url,
    cancel_url: s.cancel_url, payer_member: s.payer_member, attempts: s.attempts, expires_at: s.expires_at, completed_at: s.completed_at,
  };
}

/** The signed `path.checkout` object a payer reads: no merchant-side id, no webhook_url. */
function payerObject(s: Omit<SessionState, 'envelope'>, context: DecideContext): string {
  return JSON.stringify(signObject({
    type: 'path.checkout',
    reference: s.reference,
    issuer: context.member,
    status: s.status,
    request: JSON.parse(s.request_object),
    success_url: s.success_url,
    cancel_url: s.cancel_url,
    attempts: s.attempts,
    expires_at: s.expires_at,
    completed_at: s.completed_at,
    ...envelopeFields(context.signer, isoTime(context.now)),
  }, context.signer));
}

function sessionEvent(event: string, s: Omit<SessionState, 'envelope'>, context: DecideContext, at: string): OutboxEvent & { targets: string[] } {
  return {
    id: context.newId('evt'), event, created_at: at,
    data: { ...merchantView(s as SessionState), revoked_at: s.revoked_at },
    targets: s.webhook_url === null ? [] : [s.webhook_url],
  };
}

function open(input: Record<string, any>, context: DecideContext, merchant: string): Decision<SessionEvent> {
  const at = isoTime(context.now);
  const expiresAt = input.expires_at as string;
  if (parseTime(expiresAt)! <= context.now) return invalid('expires_at', 'expires_at must be in the future');
  const base: Omit<SessionState, 'envelope'> = {
    id: input.id, reference: input.reference, merchant, request_reference: input.request_reference, request_object: input.request_object,
    success_url: input.success_url, cancel_url: input.cancel_url, webhook_url: input.webhook_url ?? null, status: 'open',
    payer_member: null, attempts: 0, expires_at: expiresAt, created_at: at, completed_at: null, revoked_at: null,
  };
  const state: SessionState = { ...base, envelope: payerObject(base, context) };
  return {
    events: [{ type: 'opened', state }],
    reply: ok(201, {
      id: state.id, reference: state.reference, url: input.url, status: 'open', request_reference: state.request_reference,
      success_url: state.success_url, cancel_url: state.cancel_url, expires_at: state.expires_at,
    }),
    publications: [{ key: `route/${state.id}`, reply: { status: 200, body: state.reference, signed: false } }],
  };
}
