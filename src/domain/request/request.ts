// Payment requests (SPEC H, "States and transitions: Payment request").
//   created -> paid (any member marks it; marking again changes nothing)
//   created -> revoked (the issuer)
//   created -> expired (passage of expires_at)
//   paid, revoked, expired: nowhere
// The signed `path.request` object is re-signed at each move and served as committed bytes.
// Creating one bound to an address reads the address's committed terms through `reads`: the
// address must not be revoked, each capability asked for must be in its standing intent, and
// the request records the version of that intent.
import type {
  Caller,
  CommandOf,
  DecideContext,
  Decider,
  Decision,
  InputOf,
  Publication,
  ReadView,
  View,
} from '../decider.js';
import { amountRefusal, capabilitiesRefusal } from '../../protocol/amounts.js';
import { findCapability } from '../../protocol/capabilities.js';
import { invalid, refusal, type Refusal } from '../../protocol/errors.js';
import type { AmountT, CapabilityT } from '../../protocol/schemas.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';
import { addressInfoKey, type AddressInfo } from '../subject/resolver.js';
import { requestCommands } from './schema.js';

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
  /** Two entries at most: created, and the one move out of it. */
  transitions: { from: RequestStatus | null; to: RequestStatus; at: string; by: string | null }[];
  /** The current signed object, as JSON text. */
  envelope: string;
}

export type RequestEvent =
  | { type: 'created'; state: RequestState }
  | { type: 'moved'; to: RequestStatus; at: string; by: string | null; envelope: string };

export const REQUEST_PAID_EVENT = 'request.paid';

type Commands = typeof requestCommands;
type Command = CommandOf<Commands>;
type CreateInput = InputOf<Commands, 'create'>;
type Result = Decision<RequestEvent> | Refusal;

const revokedRefusal = () => refusal('path.request.revoked', 'this request was revoked');
const expiredRefusal = () => refusal('path.request.expired', 'this request has expired');
/** P7: 409 for a request that is neither open nor gone (paid). */
const notOpen = (status: RequestStatus) =>
  refusal('path.request.not_open', `this request is ${status}`);
/** When the request stops being payable (ms since the epoch); null: never (SPEC Limits). */
const expiryOf = (state: RequestState): number | null =>
  state.expires_at === null ? null : parseTime(state.expires_at)!;

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
  return object.status === 'created' ? object : notOpen(object.status);
}

export const requestDecider: Decider<RequestState, Commands, RequestEvent> = {
  type: 'request',
  passivates: true,
  prefix: 'req',
  commands: requestCommands,

  reads(command: Command): string[] {
    if (command.name !== 'create' || command.input.address_id === undefined) return [];
    return [addressInfoKey(command.input.address_id)];
  },

  decide(command: Command, state: RequestState | null, context: DecideContext): Result {
    if (command.name === 'create') {
      if (state !== null) return invalid('reference', 'reference already in use');
      return create(command.input, command.caller?.member ?? '', context);
    }
    if (state === null) return refusal('path.core.not_found', 'no such request');
    switch (command.name) {
      case 'paid':
        return paid(state, command.caller, context);
      case 'revoke':
        return revoke(state, command.caller, context);
      case 'tick':
        return tick(state, context);
    }
  },

  evolve(state: RequestState | null, event: RequestEvent): RequestState {
    if (event.type === 'created') return event.state;
    if (state === null) throw new Error('request moved before it was created');
    const step = { from: state.status, to: event.to, at: event.at, by: event.by };
    const transitions = [...state.transitions, step];
    return { ...state, status: event.to, envelope: event.envelope, transitions };
  },

  publications(state: RequestState): Publication[] {
    return [{ key: state.reference, view: viewOf(state) }];
  },

  deadline(state: RequestState): number | null {
    return state.status === 'created' ? expiryOf(state) : null;
  },
};

function paid(state: RequestState, caller: Caller | null, context: DecideContext): Result {
  const value = { reference: state.reference, status: 'paid' };
  if (state.status === 'paid') return { events: [], answer: { value } };
  const closed = closedRefusal(state, context.now);
  if (closed !== null) return closed;
  const at = isoTime(context.now);
  const envelope = sign({ ...state, status: 'paid' }, context);
  const data: unknown = JSON.parse(envelope);
  return {
    events: [{ type: 'moved', to: 'paid', at, by: caller?.member ?? null, envelope }],
    answer: { value },
    outbox: [{ id: context.newId('evt'), event: REQUEST_PAID_EVENT, created_at: at, data }],
  };
}

function revoke(state: RequestState, caller: Caller | null, context: DecideContext): Result {
  if (caller === null || !caller.local) {
    return refusal('path.auth.forbidden', 'only the issuer may revoke a request');
  }
  const value = { reference: state.reference, status: 'revoked' };
  if (state.status === 'revoked') return { events: [], answer: { value } };
  const closed = closedRefusal(state, context.now);
  if (closed !== null) return closed;
  const at = isoTime(context.now);
  return {
    events: [{ type: 'moved', to: 'revoked', at, by: caller.member, envelope: state.envelope }],
    answer: { value },
  };
}

function tick(state: RequestState, context: DecideContext): Result {
  const expiry = expiryOf(state);
  const answer = { value: {} };
  const due = state.status === 'created' && expiry !== null && expiry <= context.now;
  if (!due) return { events: [], answer };
  const at = isoTime(context.now);
  const envelope = state.envelope;
  return { events: [{ type: 'moved', to: 'expired', at, by: null, envelope }], answer };
}

/** A request that is no longer `created` (P7: 410 where SPEC has a code, else 409). */
function closedRefusal(state: RequestState, now: number): Refusal | null {
  if (state.status === 'revoked') return revokedRefusal();
  const expiry = expiryOf(state);
  if (state.status === 'expired' || (expiry !== null && expiry <= now)) return expiredRefusal();
  return state.status === 'created' ? null : notOpen(state.status);
}

/** Revoked and expired requests are gone (410); an open one becomes gone at its expiry, exactly. */
function viewOf(state: RequestState): View {
  if (state.status === 'revoked') return { gone: revokedRefusal() };
  if (state.status === 'expired') return { gone: expiredRefusal() };
  const at = state.status === 'created' ? expiryOf(state) : null;
  if (at === null) return { text: state.envelope, signed: true };
  return { text: state.envelope, signed: true, expiry: { at, code: 'path.request.expired' } };
}

type Unsigned = Omit<RequestState, 'envelope' | 'transitions'>;

function sign(state: Unsigned, context: DecideContext): string {
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

/** The address a request binds to, with its intent's version (SPEC H); null: not bound. */
interface Binding {
  address: string;
  intent_version: number | null;
}

/** The terms of `address_id` (read through `reads`): a live address that takes every capability. */
function bindingOf(
  input: CreateInput,
  views: ReadonlyMap<string, ReadView>,
): Binding | Refusal | null {
  if (input.address_id === undefined) return null;
  const view = views.get(addressInfoKey(input.address_id));
  if (view === undefined) return refusal('path.core.not_found', 'no such address');
  if (view.gone !== null) return view.gone;
  const info = JSON.parse(view.text) as AddressInfo;
  if (info.revoked) return refusal('path.address.revoked', 'this address was revoked');
  const missing = input.accepts.findIndex((c) => findCapability(info.accepts, c) === undefined);
  if (missing >= 0) {
    const message = "a capability is not in the address's standing terms";
    const field = `accepts.${missing}`;
    return refusal('path.address.capability_not_accepted', message, { field });
  }
  return { address: info.address, intent_version: info.intent_version };
}

function create(input: CreateInput, createdBy: string, context: DecideContext): Result {
  // P23: the amount, and each capability's fees and ceiling, within their asset's unit.
  const digits =
    amountRefusal(input.amount, 'amount') ?? capabilitiesRefusal(input.accepts, 'accepts');
  if (digits !== null) return digits;
  const binding = bindingOf(input, context.views);
  if (binding !== null && 'code' in binding) return binding;
  if (input.expires_at !== undefined && parseTime(input.expires_at)! <= context.now) {
    return invalid('expires_at', 'expires_at must be in the future');
  }
  const base: Unsigned = {
    reference: input.reference,
    issuer: context.member,
    created_by: createdBy,
    payee: { member: context.member, address: binding?.address ?? null },
    amount: input.amount ?? null,
    accepts: input.accepts,
    intent_version: binding?.intent_version ?? null,
    order_reference: input.order_reference ?? null,
    status: 'created',
    expires_at: input.expires_at ?? null,
    created_at: isoTime(context.now),
  };
  const envelope = sign(base, context);
  const created = { from: null, to: 'created' as const, at: base.created_at, by: createdBy };
  const state: RequestState = { ...base, envelope, transitions: [created] };
  const value = {
    reference: state.reference,
    url: input.url,
    status: 'created',
    expires_at: state.expires_at,
  };
  return { events: [{ type: 'created', state }], answer: { value, created: true } };
}
