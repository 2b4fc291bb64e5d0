// What a connection aggregate keeps (SPEC K): the connection's terms and counters, and the
// delegations cut from it with theirs, and how each event moves them (also used for replay).
import { childrenOf, type Children } from '../children.js';
import { addDecimal } from '../../protocol/amounts.js';
import { refusal, type Refusal } from '../../protocol/errors.js';
import { parseTime } from '../../protocol/time.js';
import type { Schedule } from './schedule.js';

export interface Counters {
  consumed_total: string;
  consumed_operations: number;
  /** Rows in the usage log: the position of the next row is this plus one. */
  usage_count: number;
}

export interface BindsTo {
  capability: string;
  amount: string;
  currency: string;
  destination_commitment: string;
}

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
  /** A persistent map (src/domain/children.ts): read through `delegationsOf`. */
  delegations: Children<DelegationState>;
}

/** A connection's delegations (stored before they were a persistent map: taken over). */
export const delegationsOf = (state: ConnectionState): Children<DelegationState> =>
  childrenOf(state.delegations);

export type ConnectionEvent =
  | { type: 'created'; state: ConnectionState }
  | { type: 'consumed'; amount: string; period_index: number | null; delegation: string | null }
  | { type: 'revoked'; at: string; by: string }
  | { type: 'delegation_created'; delegation: DelegationState }
  | { type: 'delegation_revoked'; reference: string; at: string; by: string };

type Consumed = Extract<ConnectionEvent, { type: 'consumed' }>;

export function evolveConnection(
  state: ConnectionState | null,
  event: ConnectionEvent,
): ConnectionState {
  if (event.type === 'created') return event.state;
  if (state === null) throw new Error('connection event before creation');
  switch (event.type) {
    case 'consumed':
      return consumed(state, event);
    case 'revoked':
      return { ...state, revoked_at: event.at, revoked_by: event.by };
    case 'delegation_created': {
      const delegations = delegationsOf(state).set(event.delegation.reference, event.delegation);
      return { ...state, delegations };
    }
    case 'delegation_revoked': {
      const d = delegationsOf(state).get(event.reference)!;
      const revoked = { ...d, revoked_at: event.at, revoked_by: event.by };
      return { ...state, delegations: delegationsOf(state).set(d.reference, revoked) };
    }
  }
}

function consumed(state: ConnectionState, event: Consumed): ConnectionState {
  const next = { ...state, ...moved(state, event.amount) };
  if (event.period_index !== null) {
    const spent = state.period?.index === event.period_index ? state.period.consumed : '0';
    next.period = { index: event.period_index, consumed: addDecimal(spent, event.amount) };
  }
  if (event.delegation !== null) {
    const d = delegationsOf(state).get(event.delegation)!;
    next.delegations = delegationsOf(state).set(d.reference, { ...d, ...moved(d, event.amount) });
  }
  return next;
}

/** Counters after one consume of `amount`. */
export function moved(c: Counters, amount: string): Counters {
  return {
    consumed_total: addDecimal(c.consumed_total, amount),
    consumed_operations: c.consumed_operations + 1,
    usage_count: c.usage_count + 1,
  };
}

type Lifetime = { revoked_at: string | null; expires_at: string };

/** The status of a connection or delegation at `now` (expiry is read, never recorded). */
export function statusOf(x: Lifetime, now: number): 'active' | 'revoked' | 'expired' {
  if (x.revoked_at !== null) return 'revoked';
  return parseTime(x.expires_at)! <= now ? 'expired' : 'active';
}

/** The refusal of a connection or delegation no longer active (410), or null. */
export function closed(
  x: Lifetime,
  now: number,
  what: 'connection' | 'delegation',
): Refusal | null {
  const status = statusOf(x, now);
  if (status === 'revoked') return refusal('path.connect.revoked', `this ${what} was revoked`);
  if (status === 'expired') return refusal('path.connect.expired', `this ${what} has expired`);
  return null;
}

export const outOfScope = (message: string): Refusal =>
  refusal('path.connect.delegation_out_of_scope', message);

/**
 * A connection no longer active, or a capability or currency it does not grant, or null: the
 * first checks of a consume and of cutting a delegation, whose messages name the connection as
 * their caller sees it.
 */
export function scopeRefusal(
  state: ConnectionState,
  asked: { capability: string; currency: string },
  now: number,
  named: { by: string; of: string },
): Refusal | null {
  const gone = closed(state, now, 'connection');
  if (gone !== null) return gone;
  if (state.capabilities[asked.capability] !== true)
    return outOfScope(`the capability is not granted by ${named.by}`);
  if (asked.currency !== state.currency) return outOfScope(`the currency is not ${named.of}`);
  return null;
}
