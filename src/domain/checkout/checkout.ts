// Checkout sessions (SPEC I, "States and transitions: Checkout session"): a request plus a
// hand-back and a merchant notification address.
//   open -> open (attempt: attempts + 1, payer_member from the credential)
//   open -> completed (complete; exactly one of any number of simultaneous calls wins)
//   open -> revoked (the merchant, a local credential)
//   open -> expired (passage of expires_at)
//   completed, revoked, expired: nowhere (409 path.checkout.session_not_open)
// Completion does not mark the request paid. The merchant-side `id` and `webhook_url` never
// reach the payer-facing object. Opening reads the request through `reads`: only the merchant
// (the request's issuer, a local credential) opens a session, and only on an open request.
import type {
  Caller,
  CommandOf,
  DecideContext,
  Decider,
  Decision,
  InputOf,
  OutboxEvent,
  Publication,
} from '../decider.js';
import { invalid, refusal, type Refusal } from '../../protocol/errors.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';
import { checkWebhookUrl } from '../../protocol/url-policy.js';
import { openRequestOf } from '../request/request.js';
import { checkoutCommands, SESSION_STATUSES } from './schema.js';

export type SessionStatus = (typeof SESSION_STATUSES)[number];

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

type Commands = typeof checkoutCommands;
type Command = CommandOf<Commands>;
type OpenInput = InputOf<Commands, 'open'>;
type Result = Decision<SessionEvent> | Refusal;
type Unsigned = Omit<SessionState, 'envelope'>;

/** The route index entry that maps a merchant-side id to its session (http/services.ts ownerOf). */
const routeKey = (id: string) => `route/${id}`;

const notOpen = (s: SessionState) =>
  refusal('path.checkout.session_not_open', `this session is ${s.status}`, { status: s.status });
const noSuchSession = () => refusal('path.core.not_found', 'no such checkout session');
const unauthenticated = () =>
  refusal('path.auth.unauthenticated', 'request authentication failed', { reason: 'missing' });

export const checkoutDecider: Decider<SessionState, Commands, SessionEvent> = {
  type: 'checkout',
  passivates: true,
  prefix: 'chk',
  commands: checkoutCommands,

  reads(command: Command): string[] {
    return command.name === 'open' ? [command.input.request_reference] : [];
  },

  decide(command: Command, state: SessionState | null, context: DecideContext): Result {
    if (command.name === 'open') {
      if (state !== null) return invalid('reference', 'reference already in use');
      return open(command.input, command.caller, context);
    }
    // Only the merchant revokes, whether or not the session exists (the route took any member).
    if (command.name === 'revoke' && (command.caller === null || !command.caller.local)) {
      return refusal('path.auth.forbidden', 'only the merchant may revoke a session');
    }
    if (state === null) return noSuchSession();
    const s = expiredByNow(state, context.now);
    switch (command.name) {
      case 'read':
        // The merchant's view; a session of another member answers 404, never 403.
        if (command.caller === null || command.caller.member !== s.merchant) return noSuchSession();
        return { events: [], answer: { value: merchantView(s) } };
      case 'attempt':
        return attempt(s, command.caller, context);
      case 'complete':
        return complete(s, context);
      case 'revoke':
        return revoke(s, context);
      case 'tick':
        return tick(state, context);
    }
  },

  evolve(state: SessionState | null, event: SessionEvent): SessionState {
    if (event.type === 'opened') return event.state;
    if (state === null) throw new Error('session moved before it was opened');
    if (event.type === 'attempted') {
      const { payer_member, envelope } = event;
      return { ...state, attempts: state.attempts + 1, payer_member, envelope };
    }
    return {
      ...state,
      status: event.to,
      envelope: event.envelope,
      completed_at: event.to === 'completed' ? event.at : state.completed_at,
      revoked_at: event.to === 'revoked' ? event.at : state.revoked_at,
    };
  },

  publications(state: SessionState): Publication[] {
    return [{ key: state.reference, view: { text: state.envelope, signed: true } }];
  },

  deadline(state: SessionState): number | null {
    return state.status === 'open' ? parseTime(state.expires_at) : null;
  },
};

function attempt(s: SessionState, caller: Caller | null, context: DecideContext): Result {
  if (caller === null) return unauthenticated();
  if (s.status !== 'open') return notOpen(s);
  const payer = caller.member;
  const next = { ...s, attempts: s.attempts + 1, payer_member: payer };
  return {
    events: [{ type: 'attempted', payer_member: payer, envelope: payerObject(next, context) }],
    answer: { value: { reference: s.reference, attempts: next.attempts } },
  };
}

function complete(s: SessionState, context: DecideContext): Result {
  if (s.status !== 'open') return notOpen(s);
  const at = isoTime(context.now);
  const next = { ...s, status: 'completed' as const, completed_at: at };
  const { reference, success_url } = s;
  const value = { reference, status: 'completed', completed_at: at, success_url };
  return {
    events: [{ type: 'moved', to: 'completed', at, envelope: payerObject(next, context) }],
    answer: { value },
    outbox: [sessionEvent(SESSION_COMPLETED_EVENT, next, context, at)],
  };
}

function revoke(s: SessionState, context: DecideContext): Result {
  if (s.status !== 'open') return notOpen(s);
  const at = isoTime(context.now);
  const next = { ...s, status: 'revoked' as const, revoked_at: at };
  return {
    events: [{ type: 'moved', to: 'revoked', at, envelope: payerObject(next, context) }],
    answer: { value: { reference: s.reference, status: 'revoked', revoked_at: at } },
  };
}

function tick(state: SessionState, context: DecideContext): Result {
  const answer = { value: {} };
  const due = state.status === 'open' && parseTime(state.expires_at)! <= context.now;
  if (!due) return { events: [], answer };
  const at = isoTime(context.now);
  const next = { ...state, status: 'expired' as const };
  return {
    events: [{ type: 'moved', to: 'expired', at, envelope: payerObject(next, context) }],
    answer,
    outbox: [sessionEvent(SESSION_EXPIRED_EVENT, next, context, at)],
  };
}

/** A session past its expiry reads as expired even before its tick is recorded. */
function expiredByNow(state: SessionState, now: number): SessionState {
  const past = state.status === 'open' && parseTime(state.expires_at)! <= now;
  return past ? { ...state, status: 'expired' } : state;
}

function merchantView(s: Unsigned) {
  return {
    id: s.id,
    reference: s.reference,
    status: s.status,
    request_reference: s.request_reference,
    success_url: s.success_url,
    cancel_url: s.cancel_url,
    payer_member: s.payer_member,
    attempts: s.attempts,
    expires_at: s.expires_at,
    completed_at: s.completed_at,
  };
}

/** The signed `path.checkout` object a payer reads: no merchant-side id, no webhook_url. */
function payerObject(s: Unsigned, context: DecideContext): string {
  return JSON.stringify(
    signObject(
      {
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
      },
      context.signer,
    ),
  );
}

function sessionEvent(event: string, s: Unsigned, context: DecideContext, at: string): OutboxEvent {
  return {
    id: context.newId('evt'),
    event,
    created_at: at,
    data: { ...merchantView(s), revoked_at: s.revoked_at },
    targets: s.webhook_url === null ? [] : [s.webhook_url],
  };
}

/** The hand-back and notification addresses: URLs, and a webhook target the node may call (P11). */
function urlRefusal(input: OpenInput, context: DecideContext): Refusal | null {
  for (const field of ['success_url', 'cancel_url'] as const) {
    if (!URL.canParse(input[field])) return invalid(field, `${field} is not a URL`);
  }
  if (input.webhook_url === undefined) return null;
  return checkWebhookUrl(input.webhook_url, 'webhook_url', { dev: context.dev });
}

function open(input: OpenInput, caller: Caller | null, context: DecideContext): Result {
  // Only the issuer of the request opens a session on it: every request here is the operator's.
  if (caller === null || !caller.local) {
    return refusal('path.auth.forbidden', 'only the issuer of the request may open a session');
  }
  const urls = urlRefusal(input, context);
  if (urls !== null) return urls;
  const view = context.views.get(input.request_reference);
  const request = openRequestOf(view);
  if (request === null) return refusal('path.core.not_found', 'no such request');
  if ('code' in request) return request;
  // An open request's view is its signed object: the session carries those very bytes.
  const requestObject = view!.text!;
  const expiresAt = input.expires_at ?? isoTime(defaultExpiry(request.expires_at, context));
  if (parseTime(expiresAt)! <= context.now) {
    return invalid('expires_at', 'expires_at must be in the future');
  }
  const { id, reference, request_reference, success_url, cancel_url } = input;
  const base: Unsigned = {
    id,
    reference,
    merchant: caller.member,
    request_reference,
    request_object: requestObject,
    success_url,
    cancel_url,
    webhook_url: input.webhook_url ?? null,
    status: 'open',
    payer_member: null,
    attempts: 0,
    expires_at: expiresAt,
    created_at: isoTime(context.now),
    completed_at: null,
    revoked_at: null,
  };
  const state: SessionState = { ...base, envelope: payerObject(base, context) };
  const value = {
    id,
    reference,
    url: input.url,
    status: 'open',
    request_reference,
    success_url,
    cancel_url,
    expires_at: expiresAt,
  };
  return {
    events: [{ type: 'opened', state }],
    answer: { value, created: true },
    publications: [{ key: routeKey(id), view: { text: reference, signed: false } }],
  };
}

/** Absent `expires_at`: the configured lifetime, and never past the request's own expiry. */
function defaultExpiry(requestExpiresAt: string | null, context: DecideContext): number {
  const lifetime = context.now + context.limits.checkout_session_lifetime_ms;
  return requestExpiresAt === null ? lifetime : Math.min(lifetime, parseTime(requestExpiresAt)!);
}
