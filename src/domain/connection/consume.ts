// Consumption (SPEC K): on a connection by its grantee, or through a delegation by its delegate,
// when both ceilings apply and both counters move. Scope, currency, the ceilings and the mandate
// period are checked against the live state; each consume writes one row to the usage log of
// the connection and, when delegated, one to the delegation's.
import type { DecideContext, Decision, InputOf, UsageEntry } from '../decider.js';
import {
  addDecimal,
  compareDecimal,
  fiat,
  fractionRefusal,
  isZeroDecimal,
  subtractDecimal,
} from '../../protocol/amounts.js';
import { invalid, refusal, type Refusal } from '../../protocol/errors.js';
import { isoTime } from '../../protocol/time.js';
import { parseSchedule, periodAt } from './schedule.js';
import type { connectionCommands } from './schema.js';
import {
  closed,
  evolveConnection,
  type ConnectionEvent,
  type ConnectionState,
  type Counters,
  type DelegationState,
  delegationsOf,
  outOfScope,
  scopeRefusal,
} from './state.js';

type Commands = typeof connectionCommands;
/** A consume's input: a delegated one adds the destination it binds. */
type ConsumeInput = InputOf<Commands, 'consume'> & { destination_commitment?: string };

/** One row of a usage log (SPEC K "Usage"), as the usage page answers it. */
export type UsageRow = {
  capability: string;
  amount: string;
  currency: string;
  operation_ref: string;
  occurred_at: string;
  /** Delegated consumes: in both logs. */
  destination_commitment?: string;
  /** Delegated consumes, in the parent connection's log: the delegation that consumed. */
  delegation?: string;
};

const limitReached = (message: string, detail: Record<string, unknown>) =>
  refusal('path.connect.delegation_limit_reached', message, detail);

export function consume(
  state: ConnectionState,
  input: ConsumeInput,
  context: DecideContext,
  delegation: DelegationState | null,
): Decision<ConnectionEvent> | Refusal {
  const now = context.now;
  // P23: a consume below its currency's minor unit is refused before anything is counted.
  const digits = fractionRefusal(input.amount, fiat(input.currency), 'amount');
  if (digits !== null) return digits;
  if (isZeroDecimal(input.amount)) return invalid('amount', 'amount must be above zero');
  const refused =
    (delegation === null ? null : delegationRefusal(delegation, input, now)) ??
    connectionRefusal(state, input, now);
  if (refused !== null) return refused;
  const period = periodIndex(state, input.amount, now);
  if (period !== null && typeof period !== 'number') return period;
  const event: ConnectionEvent = {
    type: 'consumed',
    amount: input.amount,
    period_index: period,
    delegation: delegation?.reference ?? null,
  };
  const next = evolveConnection(state, event);
  const row: UsageRow = {
    capability: input.capability,
    amount: input.amount,
    currency: input.currency,
    operation_ref: input.operation_ref,
    occurred_at: isoTime(now),
  };
  if (delegation === null) {
    const usage: UsageEntry[] = [{ owner: state.reference, index: next.usage_count, row }];
    return { events: [event], answer: { value: { ok: true, ...countersView(next) } }, usage };
  }
  const d = delegationsOf(next).get(delegation.reference)!;
  const destination = { destination_commitment: input.destination_commitment! };
  const parentRow: UsageRow = { ...row, ...destination, delegation: d.reference };
  const usage: UsageEntry[] = [
    { owner: state.reference, index: next.usage_count, row: parentRow },
    { owner: d.reference, index: d.usage_count, row: { ...row, ...destination } },
  ];
  const value = {
    ok: true,
    ...countersView(d),
    parent_consumed_total: next.consumed_total,
    parent_remaining_total: subtractDecimal(next.max_total, next.consumed_total),
  };
  return { events: [event], answer: { value }, usage };
}

/** A delegated consume must be what the delegation binds, exactly, within its own ceiling. */
function delegationRefusal(d: DelegationState, input: ConsumeInput, now: number): Refusal | null {
  const gone = closed(d, now, 'delegation');
  if (gone !== null) return gone;
  const b = d.binds_to;
  if (
    input.capability !== b.capability ||
    input.currency !== b.currency ||
    input.destination_commitment !== b.destination_commitment ||
    compareDecimal(input.amount, b.amount) !== 0
  ) {
    return outOfScope('the operation does not match what the delegation binds');
  }
  if (compareDecimal(addDecimal(d.consumed_total, input.amount), d.max_total) > 0) {
    return limitReached("the delegation's ceiling is reached", {
      remaining_total: subtractDecimal(d.max_total, d.consumed_total),
    });
  }
  return null;
}

function connectionRefusal(
  state: ConnectionState,
  input: ConsumeInput,
  now: number,
): Refusal | null {
  const named = { by: 'this connection', of: "the connection's" };
  const scope = scopeRefusal(state, input, now, named);
  if (scope !== null) return scope;
  if (compareDecimal(input.amount, state.max_single) > 0) {
    return limitReached('the amount is above max_single', { max_single: state.max_single });
  }
  if (compareDecimal(addDecimal(state.consumed_total, input.amount), state.max_total) > 0) {
    return limitReached("the connection's total ceiling is reached", {
      remaining_total: subtractDecimal(state.max_total, state.consumed_total),
    });
  }
  return null;
}

/** The mandate period a consume falls in (null: no schedule), or why it may not. */
function periodIndex(state: ConnectionState, amount: string, now: number): number | null | Refusal {
  if (state.schedule === null) return null;
  const schedule = parseSchedule(state.schedule);
  if (typeof schedule === 'string') throw new Error('stored schedule does not parse');
  const index = periodAt(schedule, now);
  if (index === null) {
    return refusal('path.connect.expired', "the mandate's last period has passed");
  }
  if (index < 0) return outOfScope("the mandate's first period has not begun");
  const spent = state.period?.index === index ? state.period.consumed : '0';
  if (compareDecimal(addDecimal(spent, amount), schedule.maxPerPeriod) > 0) {
    return limitReached("the mandate's ceiling for this period is reached", {
      max_per_period: schedule.maxPerPeriod,
      period_consumed: spent,
    });
  }
  return index;
}

/** Counters as answered and signed: consumed, operations, what remains of the ceiling. */
export function countersView(c: Counters & { max_total: string }) {
  return {
    consumed_total: c.consumed_total,
    consumed_operations: c.consumed_operations,
    remaining_total: subtractDecimal(c.max_total, c.consumed_total),
  };
}
