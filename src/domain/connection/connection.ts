// Connections, mandates and delegations (SPEC K). A connection and the delegations cut from it
// are one aggregate, so a delegated consume moves both sets of counters in one atomic step
// under a single writer. Usage rows are written to the `usage` table in the same commit; the
// state keeps only counters, so a hot connection stays small.
//
// States: active -> revoked (either party; delegations: grantor, delegate or parent grantee).
// Past `expires_at` a connection or delegation reads as expired and refuses consumption.
import type { Command, DecideContext, Decider, Decision, Reply } from '../../actors/types.js';
import type { TableWrite } from '../../log/log.js';
import { frame } from '../../log/record.js';
import { addDecimal, compareDecimal, isZeroDecimal, subtractDecimal } from '../../protocol/amounts.js';
import { digestOf } from '../../protocol/digest.js';
import { invalid, refusal, type Refusal } from '../../protocol/errors.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';
import { parseSchedule, periodAt, type Schedule } from './schedule.js';

interface Counters { consumed_total: string; consumed_operations: number; usage_count: number }

export interface BindsTo { capability: string; amount: string; currency: string; destination_commitment: string }

export interface DelegationState extends Counters {
  reference: string;
  delegate: string;
  binds_to: BindsTo;
  binds: Record<string, unknown>;
  binds_digest: string;
  max_total: string;
  expires_at: string;
  created_at: string;
  revoked_at: string | null;
  revoked_by: string | null;
}

export interface ConnectionState extends Counters {
  reference: string;
  grantor: string;
  grantee: string;
  subject_id: string;
  mode: string;
  capabilities: Record<string, boolean>;
  max_single: string;
  max_total: string;
  currency: string;
  expires_at: string;
  schedule: Schedule | null;
  /** Consumption of the current mandate period. */
  period: { index: number; consumed: string } | null;
  consent: Record<string, unknown>;
  consent_digest: string;
  created_at: string;
  revoked_at: string | null;
  revoked_by: string | null;
  delegations: Record<string, DelegationState>;
}

export type ConnectionEvent =
  | { type: 'created'; state: ConnectionState }
  | { type: 'consumed'; amount: string; period_index: number | null; delegation: string | null }
  | { type: 'revoked'; at: string; by: string }
  | { type: 'delegation_created'; delegation: DelegationState }
  | { type: 'delegation_revoked'; reference: string; at: string; by: string };

type Result = Decision<ConnectionEvent>;
type Inputs = Record<string, any>;
type Party = 'grantor' | 'grantee' | 'delegate' | null;

const ok = (status: number, value: unknown): Reply => ({ status, body: JSON.stringify(value), signed: false });
const outOfScope = (message: string) => refusal('path.connect.delegation_out_of_scope', message);
const limitReached = (message: string, detail?: Record<string, unknown>) => refusal('path.connect.delegation_limit_reached', message, detail);
const forbidden = () => refusal('path.auth.forbidden', 'not a party to this connection');

export const usageKey = (reference: string, n: number) => `${reference}/${String(n).padStart(12, '0')}`;

export const connectionDecider: Decider<ConnectionState, ConnectionEvent> = {
  type: 'connection',

  decide(command: Command, state: ConnectionState | null, context: DecideContext): Result {
    const input = (command.input ?? {}) as Inputs;
    if (command.name === 'create') return state === null ? create(input, context) : invalid('reference', 'reference already in use');
    if (state === null || command.caller === null) return refusal('path.core.not_found', `no such ${input.what ?? 'connection'}`);
    const caller = command.caller;
    const party: Party = caller.local ? 'grantor' : caller.member === state.grantee ? 'grantee' : null;
    const delegation = input.delegation === undefined ? undefined : state.delegations[input.delegation];
    if (input.delegation !== undefined && delegation === undefined) return refusal('path.core.not_found', 'no such delegation');
    const delegationParty: Party = party ?? (delegation !== undefined && caller.member === delegation.delegate ? 'delegate' : null);
    switch (command.name) {
      case 'read':
        return party === null ? forbidden() : { events: [], reply: signedReply(connectionObject(state, context), context) };
      case 'usage':
        return party === null ? forbidden() : { events: [], reply: ok(200, { count: state.usage_count }) };
      case 'consume':
        return party !== 'grantee' ? refusal('path.auth.forbidden', 'only the grantee consumes a connection') : consume(state, input, context, null);
      case 'revoke':
        if (party === null) return forbidden();
        if (state.revoked_at !== null) return { events: [], reply: ok(200, revokedView(state)) };
        return revoke(state, caller.member, context);
      case 'create-delegation':
        return party !== 'grantor' ? refusal('path.auth.forbidden', 'only the grantor cuts a delegation') : createDelegation(state, input, context);
      case 'read-delegation':
        return delegationParty === null ? forbidden() : { events: [], reply: signedReply(delegationObject(state, delegation!, context), context) };
      case 'usage-delegation':
        return delegationParty === null ? forbidden() : { events: [], reply: ok(200, { count: delegation!.usage_count }) };
      case 'consume-delegation':
        return caller.member !== delegation!.delegate ? refusal('path.auth.forbidden', 'only the named delegate consumes a delegation') : consume(state, input, context, delegation!);
      case 'revoke-delegation': {
        if (delegationParty === null) return forbidden();
        const d = delegation!;
        if (d.revoked_at !== null) return { events: [], reply: ok(200, revokedView(d)) };
        const at = isoTime(context.now);
        return {
          events: [{ type: 'delegation_revoked', reference: d.reference, at, by: caller.member }],
          reply: ok(200, { reference: d.reference, status: 'revoked', revoked_at: at, revoked_by: caller.member }),
        };
      }
      default:
        return refusal('path.core.not_found', 'no such operation on a connection');
    }
  },

  evolve(state: ConnectionState | null, event: ConnectionEvent): ConnectionState {
    if (event.type === 'created') return event.state;
    if (state === null) throw new Error('connection event before creation');
    switch (event.type) {
      case 'consumed': {
        const next = { ...state, ...moved(state, event.amount) };
        if (event.period_index !== null) {
          const consumed = state.period?.index === event.period_index ? state.period.consumed : '0';
          next.period = { index: event.period_index, consumed: addDecimal(consumed, event.amount) };
        }
        if (event.delegation !== null) {
          const d = state.delegations[event.delegation]!;
          next.delegations = { ...state.delegations, [d.reference]: { ...d, ...moved(d, event.amount) } };
        }
        return next;
      }
      case 'revoked':
        return { ...state, revoked_at: event.at, revoked_by: event.by };
      case 'delegation_created':
        return { ...state, delegations: { ...state.delegations, [event.delegation.reference]: event.delegation } };
      case 'delegation_revoked': {
        const d = state.delegations[event.reference]!;
        return { ...state, delegations: { ...state.delegations, [d.reference]: { ...d, revoked_at: event.at, revoked_by: event.by } } };
      }
    }
  },

  publications: () => [],
};

function moved(c: Counters, amount: string): Counters {
  return { consumed_total: addDecimal(c.consumed_total, amount), consumed_operations: c.consumed_operations + 1, usage_count: c.usage_count + 1 };
}

function statusOf(x: { revoked_at: string | null; expires_at: string }, now: number): 'active' | 'revoked' | 'expired' {
  if (x.revoked_at !== null) return 'revoked';
  return parseTime(x.expires_at)! <= now ? 'expired' : 'active';
}

function closed(x: { revoked_at: string | null; expires_at: string }, now: number, what: string): Refusal | null {
  const status = statusOf(x, now);
  if (status === 'revoked') return refusal('path.connect.revoked', `this ${what} was revoked`);
  if (status === 'expired') return refusal('path.connect.expired', `this ${what} has expired`);
  return null;
}

function create(input: Inputs, context: DecideContext): Result {
  const now = context.now;
  if (parseTime(input.expires_at)! <= now) return invalid('expires_at', 'expires_at must be in the future');
  if (isZeroDecimal(input.max_total)) return invalid('max_total', 'max_total must be above zero');
  if (compareDecimal(input.max_single, input.max_total) > 0) return invalid('max_single', 'max_single cannot exceed max_total');
  if (input.schedule !== undefined) {
    const parsed = parseSchedule(input.schedule);
    if (typeof parsed === 'string') return invalid('schedule.interval', parsed);
  }
  const at = isoTime(now);
  const terms = {
    grantor: context.member, grantee: input.grantee, subject_id: input.subject_id, capabilities: input.capabilities, mode: input.mode,
    max_single: input.max_single, max_total: input.max_total, currency: input.currency, expires_at: input.expires_at,
    ...(input.schedule === undefined ? {} : { schedule: input.schedule }),
  };
  // The subject's consent, collected by this operator in its own product; the signature attests that.
  const consent = signObject({ type: 'path.consent', connection: input.reference, ...terms, collected_at: at, ...envelopeFields(context.signer, at) }, context.signer);
  const state: ConnectionState = {
    reference: input.reference, ...terms, schedule: input.schedule ?? null, period: null,
    consent, consent_digest: digestOf(consent), created_at: at, revoked_at: null, revoked_by: null,
    consumed_total: '0', consumed_operations: 0, usage_count: 0, delegations: {},
  };
  return {
    events: [{ type: 'created', state }],
    reply: ok(201, { reference: state.reference, grantee: state.grantee, status: 'active', mode: state.mode, consent_digest: state.consent_digest, expires_at: state.expires_at }),
  };
}

/** Consumes on the connection, or through a delegation (then both ceilings apply and both counters move). */
function consume(state: ConnectionState, input: Inputs, context: DecideContext, delegation: DelegationState | null): Result {
  const now = context.now;
  if (isZeroDecimal(input.amount)) return invalid('amount', 'amount must be above zero');
  if (delegation !== null) {
    const gone = closed(delegation, now, 'delegation');
    if (gone !== null) return gone;
    const b = delegation.binds_to;
    if (input.capability !== b.capability || input.currency !== b.currency || input.destination_commitment !== b.destination_commitment
      || compareDecimal(input.amount, b.amount) !== 0) {
      return outOfScope('the operation does not match what the delegation binds');
    }
    if (compareDecimal(addDecimal(delegation.consumed_total, input.amount), delegation.max_total) > 0) {
      return limitReached('the delegation\'s ceiling is reached', { remaining_total: subtractDecimal(delegation.max_total, delegation.consumed_total) });
    }
  }
  const gone = closed(state, now, 'connection');
  if (gone !== null) return gone;
  if (state.capabilities[input.capability] !== true) return outOfScope('the capability is not granted by this connection');
  if (input.currency !== state.currency) return outOfScope('the currency is not the connection\'s');
  if (compareDecimal(input.amount, state.max_single) > 0) return limitReached('the amount is above max_single', { max_single: state.max_single });
  if (compareDecimal(addDecimal(state.consumed_total, input.amount), state.max_total) > 0) {
    return limitReached('the connection\'s total ceiling is reached', { remaining_total: subtractDecimal(state.max_total, state.consumed_total) });
  }
  let periodIndex: number | null = null;
  if (state.schedule !== null) {
    const schedule = parseSchedule(state.schedule);
    if (typeof schedule === 'string') throw new Error('stored schedule does not parse');
    const index = periodAt(schedule, now);
    if (index === null) return refusal('path.connect.expired', 'the mandate\'s last period has passed');
    if (index < 0) return outOfScope('the mandate\'s first period has not begun');
    const spent = state.period?.index === index ? state.period.consumed : '0';
    if (compareDecimal(addDecimal(spent, input.amount), schedule.maxPerPeriod) > 0) {
      return limitReached('the mandate\'s ceiling for this period is reached', { max_per_period: schedule.maxPerPeriod, period_consumed: spent });
    }
    periodIndex = index;
  }
  const at = isoTime(now);
  const event: ConnectionEvent = { type: 'consumed', amount: input.amount, period_index: periodIndex, delegation: delegation?.reference ?? null };
  const next = connectionDecider.evolve(state, event);
  const row = { capability: input.capability, amount: input.amount, currency: input.currency, operation_ref: input.operation_ref, occurred_at: at };
  const tables: TableWrite[] = [];
  if (delegation === null) {
    tables.push({ table: 'usage', key: usageKey(state.reference, next.usage_count), bytes: frame(row) });
    return { events: [event], reply: ok(200, { ok: true, ...countersView(next) }), tables };
  }
  const delegated = { ...row, destination_commitment: input.destination_commitment, delegation: delegation.reference };
  const d = next.delegations[delegation.reference]!;
  tables.push({ table: 'usage', key: usageKey(state.reference, next.usage_count), bytes: frame(delegated) });
  tables.push({ table: 'usage', key: usageKey(delegation.reference, d.usage_count), bytes: frame({ ...row, destination_commitment: input.destination_commitment }) });
  return {
    events: [event],
    reply: ok(200, { ok: true, ...countersView(d), parent_consumed_total: next.consumed_total, parent_remaining_total: subtractDecimal(next.max_total, next.consumed_total) }),
    tables,
  };
}

function countersView(c: Counters & { max_total: string }) {
  return { consumed_total: c.consumed_total, consumed_operations: c.consumed_operations, remaining_total: subtractDecimal(c.max_total, c.consumed_total) };
}

function revokedView(x: { reference: string; revoked_at: string | null; revoked_by: string | null }) {
  return { reference: x.reference, status: 'revoked', revoked_at: x.revoked_at, revoked_by: x.revoked_by };
}

function revoke(state: ConnectionState, by: string, context: DecideContext): Result {
  const at = isoTime(context.now);
  return { events: [{ type: 'revoked', at, by }], reply: ok(200, { reference: state.reference, status: 'revoked', revoked_at: at, revoked_by: by }) };
}

function createDelegation(state: ConnectionState, input: Inputs, context: DecideContext): Result {
  const gone = closed(state, context.now, 'connection');
  if (gone !== null) return gone;
  if (state.capabilities[input.capability] !== true) return outOfScope('the capability is not granted by the parent connection');
  if (input.currency !== state.currency) return outOfScope('the currency is not the parent connection\'s');
  if (isZeroDecimal(input.amount)) return invalid('amount', 'amount must be above zero');
  const expires = parseTime(input.expires_at)!;
  if (expires <= context.now) return invalid('expires_at', 'expires_at must be in the future');
  if (expires > parseTime(state.expires_at)!) return invalid('expires_at', 'a delegation cannot outlive its connection');
  const maxTotal: string = input.max_total ?? input.amount;
  if (compareDecimal(maxTotal, input.amount) < 0) return invalid('max_total', 'max_total cannot be below the bound amount');
  const at = isoTime(context.now);
  const binds_to: BindsTo = { capability: input.capability, amount: input.amount, currency: input.currency, destination_commitment: input.destination_commitment };
  const binds = signObject({
    type: 'path.delegation.binds', delegation: input.reference, connection: state.reference, grantor: state.grantor, delegate: input.delegate,
    binds_to, max_total: maxTotal, expires_at: input.expires_at, ...envelopeFields(context.signer, at),
  }, context.signer);
  const delegation: DelegationState = {
    reference: input.reference, delegate: input.delegate, binds_to, binds, binds_digest: digestOf(binds), max_total: maxTotal,
    expires_at: input.expires_at, created_at: at, revoked_at: null, revoked_by: null, consumed_total: '0', consumed_operations: 0, usage_count: 0,
  };
  return {
    events: [{ type: 'delegation_created', delegation }],
    reply: ok(201, { reference: delegation.reference, delegate: delegation.delegate, status: 'active', binds_digest: delegation.binds_digest, expires_at: delegation.expires_at }),
    publications: [{ key: `route/${delegation.reference}`, reply: { status: 200, body: state.reference, signed: false } }],
  };
}

/** The connection as signed at read: status and counters now; terms as the consent states them. */
function connectionObject(s: ConnectionState, context: DecideContext): Record<string, unknown> {
  const terms = s.consent;
  return {
    type: 'path.connection', reference: s.reference, grantor: terms.grantor, grantee: terms.grantee, subject_id: terms.subject_id,
    status: statusOf(s, context.now), mode: terms.mode, capabilities: terms.capabilities, max_single: terms.max_single,
    max_total: terms.max_total, currency: terms.currency, expires_at: terms.expires_at, schedule: terms.schedule ?? null,
    consent_digest: s.consent_digest, consent: s.consent, ...countersView(s), revoked_at: s.revoked_at, revoked_by: s.revoked_by,
  };
}

/** A delegation as signed at read: terms from `binds`, status and counters now. */
function delegationObject(s: ConnectionState, d: DelegationState, context: DecideContext): Record<string, unknown> {
  return {
    type: 'path.delegation', reference: d.reference, connection: s.reference, delegate: d.binds.delegate, status: statusOf(d, context.now),
    binds_to: d.binds.binds_to, max_total: d.binds.max_total, expires_at: d.binds.expires_at, binds: d.binds, binds_digest: d.binds_digest,
    ...countersView(d), revoked_at: d.revoked_at, revoked_by: d.revoked_by,
  };
}

function signedReply(object: Record<string, unknown>, context: DecideContext): Reply {
  const signed = signObject({ ...object, ...envelopeFields(context.signer, isoTime(context.now)) }, context.signer);
  return { status: 200, body: JSON.stringify(signed), signed: true };
}
