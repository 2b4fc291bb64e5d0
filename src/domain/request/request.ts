// Payment requests (SPEC H, "States and transitions: Payment request").
//   created -> paid (any member marks it; marking again changes nothing)
//   created -> revoked (the issuer)
//   created -> expired (passage of expires_at)
//   paid, revoked, expired: nowhere
// The signed `path.request` object is re-signed at each move and served as committed bytes.
import type { Command, DecideContext, Decider, Decision, Publication, Reply } from '../../actors/types.js';
import { errorBody, invalid, refusal, type Refusal } from '../../protocol/errors.js';
import type { ReadView } from '../decider.js';
import type { AmountT, CapabilityT } from '../../protocol/schemas.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';

export type RequestStatus = 'created' | 'paid' | 'expired' | 'revoked';

export interface RequestState {
  reference: string;
  issuer: string;
  created_by: string;
  payee: { member: string; address: string | null };
  amount: AmountT | null;
  accepts: CapabilityT[];
  intent_version: number | null;
  order_reference: string | null;
  status: RequestStatus;
  expires_at: string | null;
  created_at: string;
  transitions: { from: RequestStatus | null; to: RequestStatus; at: string; by: string | null }[];
  /** The current signed object, as JSON text. */
  envelope: string;
}

export type RequestEvent =
  | { type: 'created'; state: RequestState }
  | { type: 'moved'; to: RequestStatus; at: string; by: string | null; envelope: string };

export const REQUEST_PAID_EVENT = 'request.paid';

const ok = (status: number, value: unknown): Reply => ({ status, body: JSON.stringify(value), signed: false });

/** What other aggregates read of a request: its current signed object. */
export interface RequestObject {
  reference: string;
  status: RequestStatus;
  payee: { member: string; address: string | null };
  amount: AmountT | null;
  accepts: CapabilityT[];
  expires_at: string | null;
}

/**
 * The request behind a committed view when it is open (SPEC H: created and not past its
 * expiry); its refusal when it is not (P7: 410 where SPEC has a code, else 409); null: none.
 */
export function openRequestOf(view: ReadView | undefined): RequestObject | Refusal | null {
  if (view === undefined) return null;
  if (view.gone !== null) return view.gone;
  const object = JSON.parse(view.text) as RequestObject;
  if (object.status !== 'created') return refusal('path.request.not_open', `this request is ${object.status}`);
  return object;
}

export function requestUrl(baseUrl: string, reference: string): string {
  return `${baseUrl}/path/${reference}`;
}

export const requestDecider: Decider<RequestState, RequestEvent> = {
  type: 'request',

  decide(command: Command, state: RequestState | null, context: DecideContext): Decision<RequestEvent> {
    const input = (command.input ?? {}) as Record<string, any>;
    if (command.name === 'create') {
      if (state !== null) return invalid('reference', 'reference already in use');
      return create(input, context, command.caller?.member ?? '');
    }
    if (state === null) return refusal('path.core.not_found', 'no such request');
    const at = isoTime(context.now);
    switch (command.name) {
      case 'paid': {
        if (state.status === 'paid') return { events: [], reply: ok(200, { reference: state.reference, status: 'paid' }) };
        const closed = closedRefusal(state, context.now);
        if (closed !== null) return closed;
        const envelope = sign({ ...state, status: 'paid' }, context);
        return {
          events: [{ type: 'moved', to: 'paid', at, by: command.caller?.member ?? null, envelope }],
          reply: ok(200, { reference: state.reference, status: 'paid' }),
          outbox: [{ id: context.newId('evt'), event: REQUEST_PAID_EVENT, created_at: at, data: JSON.parse(envelope) }],
        };
      }
      case 'revoke': {
        if (command.caller === null || !command.caller.local) return refusal('path.auth.forbidden', 'only the issuer may revoke a request');
        if (state.status === 'revoked') return { events: [], reply: ok(200, { reference: state.reference, status: 'revoked' }) };
        const closed = closedRefusal(state, context.now);
        if (closed !== null) return closed;
        return {
          events: [{ type: 'moved', to: 'revoked', at, by: command.caller.member, envelope: state.envelope }],
          reply: ok(200, { reference: state.reference, status: 'revoked' }),
        };
      }
      case 'tick': {
        if (state.status !== 'created' || state.expires_at === null || parseTime(state.expires_at)! > context.now) {
          return { events: [], reply: ok(200, {}) };
        }
        return { events: [{ type: 'moved', to: 'expired', at, by: null, envelope: state.envelope }], reply: ok(200, {}) };
      }
      default:
        return refusal('path.core.not_found', 'no such operation on a request');
    }
  },

  evolve(state: RequestState | null, event: RequestEvent): RequestState {
    if (event.type === 'created') return event.state;
    if (state === null) throw new Error('request moved before it was created');
    return {
      ...state, status: event.to, envelope: event.envelope,
      transitions: [...state.transitions, { from: state.status, to: event.to, at: event.at, by: event.by }],
    };
  },

  publications(state: RequestState): Publication[] {
    return [{ key: state.reference, reply: readReply(state) }];
  },

  deadline(state: RequestState): number | null {
    return state.status === 'created' && state.expires_at !== null ? parseTime(state.expires_at) : null;
  },
};

/** A request that is no longer `created` (P7: 410 where SPEC has a code, else 409). */
function closedRefusal(state: RequestState, now: number) {
  if (state.status === 'revoked') return refusal('path.request.revoked', 'this request was revoked');
  if (state.status === 'expired' || (state.expires_at !== null && parseTime(state.expires_at)! <= now)) {
    return refusal('path.request.expired', 'this request has expired');
  }
  if (state.status !== 'created') return refusal('path.request.not_open', `this request is ${state.status}`);
  return null;
}

function readReply(state: RequestState): Reply {
  if (state.status === 'revoked') return { status: 410, body: errorBody(refusal('path.request.revoked', 'this request was revoked')), signed: false };
  if (state.status === 'expired') return { status: 410, body: errorBody(refusal('path.request.expired', 'this request has expired')), signed: false };
  const expiry = state.status === 'created' && state.expires_at !== null ? { at: parseTime(state.expires_at)!, code: 'path.request.expired' as const } : undefined;
  return { status: 200, body: state.envelope, signed: true, ...(expiry === undefined ? {} : { expiry }) };
}

function sign(state: Omit<RequestState, 'envelope' | 'transitions'> & Partial<RequestState>, context: DecideContext): string {
  const body = {
    type: 'path.request',
    reference: state.reference,
    issuer: state.issuer,
    payee: state.payee,
    ...(state.amount === null ? {} : { amount: state.amount }),
    accepts: state.accepts,
    intent_version: state.intent_version,
    order_reference: state.order_reference,
    status: state.status,
    settled_by: [],
    expires_at: state.expires_at,
    ...envelopeFields(context.signer, isoTime(context.now)),
  };
  return JSON.stringify(signObject(body, context.signer));
}

function create(input: Record<string, any>, context: DecideContext, createdBy: string): Decision<RequestEvent> {
  if (input.expires_at != null && parseTime(input.expires_at)! <= context.now) return invalid('expires_at', 'expires_at must be in the future');
  const base = {
    reference: input.reference as string,
    issuer: context.member,
    created_by: createdBy,
    payee: { member: context.member, address: (input.address ?? null) as string | null },
    amount: (input.amount ?? null) as AmountT | null,
    accepts: input.accepts as CapabilityT[],
    intent_version: (input.intent_version ?? null) as number | null,
    order_reference: (input.order_reference ?? null) as string | null,
    status: 'created' as const,
    expires_at: (input.expires_at ?? null) as string | null,
    created_at: isoTime(context.now),
  };
  const envelope = sign(base, context);
  const state: RequestState = { ...base, envelope, transitions: [{ from: null, to: 'created', at: base.created_at, by: createdBy }] };
  return {
    events: [{ type: 'created', state }],
    reply: ok(201, { reference: state.reference, url: input.url, status: 'created', expires_at: state.expires_at }),
  };
}
