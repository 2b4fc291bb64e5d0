// Granting (SPEC K): the local member creates a connection for one of its subjects, signing the
// subject's consent as it collected it; the grantor cuts a delegation from a connection, signing
// what it binds. Both answer 201 (P7).
import { noChildren } from '../children.js';
import type { Caller, DecideContext, Decision, InputOf, ReadView } from '../decider.js';
import { compareDecimal, fiat, fractionRefusal, isZeroDecimal } from '../../protocol/amounts.js';
import { digestOf } from '../../protocol/digest.js';
import { invalid, refusal, type Refusal } from '../../protocol/errors.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';
import { parseSchedule } from './schedule.js';
import type { connectionCommands } from './schema.js';
import {
  delegationsOf,
  scopeRefusal,
  type BindsTo,
  type ConnectionEvent,
  type ConnectionState,
  type DelegationState,
} from './state.js';

type Commands = typeof connectionCommands;
type Result = Decision<ConnectionEvent> | Refusal;

export { subjectViewKey } from '../subject/resolver.js';
/** The route index entry that finds a delegation's parent connection (services.ownerOf). */
export const routeViewKey = (id: string) => `route/${id}`;

/**
 * A connection, created by the local member (the grantor) for a subject that exists: `subject`
 * is the committed view the subject aggregate publishes for it (`subjectViewKey`), if any.
 */
/** What a new connection or delegation starts with: nothing consumed, nobody revoked it. */
const UNUSED = {
  revoked_at: null,
  revoked_by: null,
  consumed_total: '0',
  consumed_operations: 0,
  usage_count: 0,
} as const;

export function create(
  input: InputOf<Commands, 'create'>,
  caller: Caller | null,
  subject: ReadView | undefined,
  context: DecideContext,
): Result {
  const refused = createRefusal(input, caller, subject, context.now);
  if (refused !== null) return refused;
  const at = isoTime(context.now);
  const terms = {
    grantor: context.member,
    grantee: input.grantee,
    subject_id: input.subject_id,
    capabilities: input.capabilities,
    mode: input.mode,
    max_single: input.max_single,
    max_total: input.max_total,
    currency: input.currency,
    expires_at: input.expires_at,
    ...(input.schedule === undefined ? {} : { schedule: input.schedule }),
  };
  // The subject's consent, collected by this operator in its own product: the signature
  // attests that.
  const consent = signObject(
    {
      type: 'path.consent',
      connection: input.reference,
      ...terms,
      collected_at: at,
      ...envelopeFields(context.signer, at),
    },
    context.signer,
  );
  const state: ConnectionState = {
    reference: input.reference,
    ...terms,
    schedule: input.schedule ?? null,
    period: null,
    consent,
    consent_digest: digestOf(consent),
    created_at: at,
    ...UNUSED,
    delegations: noChildren(),
  };
  const value = {
    reference: state.reference,
    grantee: state.grantee,
    status: 'active',
    mode: state.mode,
    consent_digest: state.consent_digest,
    expires_at: state.expires_at,
  };
  return { events: [{ type: 'created', state }], answer: { value, created: true } };
}

/**
 * Why a connection cannot be created, or null: only the local member creates one, for a subject
 * that exists, with terms that hold together.
 */
function createRefusal(
  input: InputOf<Commands, 'create'>,
  caller: Caller | null,
  subject: ReadView | undefined,
  now: number,
): Refusal | null {
  if (caller === null || !caller.local) {
    return refusal('path.auth.forbidden', "only the operator's own member creates a connection");
  }
  if (subject === undefined || subject.text === null) {
    return refusal('path.core.not_found', 'no such subject');
  }
  if (parseTime(input.expires_at)! <= now) {
    return invalid('expires_at', 'expires_at must be in the future');
  }
  const digits = ceilingsRefusal(input);
  if (digits !== null) return digits;
  if (isZeroDecimal(input.max_total)) return invalid('max_total', 'max_total must be above zero');
  if (compareDecimal(input.max_single, input.max_total) > 0) {
    return invalid('max_single', 'max_single cannot exceed max_total');
  }
  if (input.schedule !== undefined) {
    const parsed = parseSchedule(input.schedule);
    if (typeof parsed === 'string') return invalid('schedule.interval', parsed);
  }
  return null;
}

/** P23: a connection's ceilings are amounts of its currency, within its minor unit. */
function ceilingsRefusal(input: InputOf<Commands, 'create'>): Refusal | null {
  const currency = fiat(input.currency);
  const perPeriod = input.schedule?.max_per_period;
  return (
    fractionRefusal(input.max_single, currency, 'max_single') ??
    fractionRefusal(input.max_total, currency, 'max_total') ??
    fractionRefusal(perPeriod, currency, 'schedule.max_per_period')
  );
}

/** A delegation cut by the grantor, within the parent's scope and lifetime. */
export function createDelegation(
  state: ConnectionState,
  input: InputOf<Commands, 'create-delegation'>,
  context: DecideContext,
): Result {
  // References are the route's, fresh (P9); one already cut would be cut again with its usage
  // forgotten, past its ceiling: refused, as every aggregate refuses a reference in use.
  if (delegationsOf(state).has(input.reference))
    return invalid('reference', 'reference already in use');
  const refused = delegationRefusal(state, input, context.now);
  if (refused !== null) return refused;
  const maxTotal = input.max_total ?? input.amount;
  const at = isoTime(context.now);
  const binds_to: BindsTo = {
    capability: input.capability,
    amount: input.amount,
    currency: input.currency,
    destination_commitment: input.destination_commitment,
  };
  const binds = signObject(
    {
      type: 'path.delegation.binds',
      delegation: input.reference,
      connection: state.reference,
      grantor: state.grantor,
      delegate: input.delegate,
      binds_to,
      max_total: maxTotal,
      expires_at: input.expires_at,
      ...envelopeFields(context.signer, at),
    },
    context.signer,
  );
  const delegation: DelegationState = {
    reference: input.reference,
    delegate: input.delegate,
    binds_to,
    binds,
    binds_digest: digestOf(binds),
    max_total: maxTotal,
    expires_at: input.expires_at,
    created_at: at,
    ...UNUSED,
  };
  const value = {
    reference: delegation.reference,
    delegate: delegation.delegate,
    status: 'active',
    binds_digest: delegation.binds_digest,
    expires_at: delegation.expires_at,
  };
  return {
    events: [{ type: 'delegation_created', delegation }],
    answer: { value, created: true },
    // The route index: a delegation's reference finds its parent connection's aggregate.
    publications: [
      {
        key: routeViewKey(delegation.reference),
        view: { text: state.reference, signed: false },
      },
    ],
  };
}

/**
 * Why a delegation cannot be cut from this connection, or null: the connection is no longer
 * active, or the delegation reaches beyond its scope or lifetime.
 */
function delegationRefusal(
  state: ConnectionState,
  input: InputOf<Commands, 'create-delegation'>,
  now: number,
): Refusal | null {
  const named = { by: 'the parent connection', of: "the parent connection's" };
  const scope = scopeRefusal(state, input, now, named);
  if (scope !== null) return scope;
  const currency = fiat(input.currency);
  const digits =
    fractionRefusal(input.amount, currency, 'amount') ??
    fractionRefusal(input.max_total, currency, 'max_total');
  if (digits !== null) return digits;
  if (isZeroDecimal(input.amount)) return invalid('amount', 'amount must be above zero');
  const expires = parseTime(input.expires_at)!;
  if (expires <= now) return invalid('expires_at', 'expires_at must be in the future');
  if (expires > parseTime(state.expires_at)!) {
    return invalid('expires_at', 'a delegation cannot outlive its connection');
  }
  const maxTotal = input.max_total ?? input.amount;
  if (compareDecimal(maxTotal, input.amount) < 0) {
    return invalid('max_total', 'max_total cannot be below the bound amount');
  }
  return null;
}
