// A member's reciprocity budget (P12), one aggregate per member so that every charge is atomic:
// lookups per identifier type and UTC calendar month, and payee checks per UTC day. A lookup
// charge writes the journal rows (hashes only) in the same commit.
//
// A charge is all or nothing: a batch the allowance cannot cover is refused whole (429). The
// answers are signed beside the charge, on any worker (signAnswers).
import type { Command, DecideContext, Decider, Decision } from '../../actors/types.js';
import { frame } from '../../log/record.js';
import { refusal } from '../../protocol/errors.js';
import { envelopeFields, signObject, type SigningKey } from '../../protocol/signing.js';
import { isoTime } from '../../protocol/time.js';

export interface BudgetState {
  member: string;
  /** UTC month of `lookups`, YYYY-MM. */
  month: string;
  lookups: Record<string, number>;
  /** UTC day of `payee_checks`, YYYY-MM-DD. */
  day: string;
  payee_checks: number;
}

export type BudgetEvent =
  | { type: 'lookups_charged'; month: string; counts: Record<string, number> }
  | { type: 'payee_check_charged'; day: string };

/** One lookup answer to sign (identical work for positives and negatives). */
export interface AnswerBody {
  identifier_type: string;
  identifier_hash: string;
  found: boolean;
  member: string | null;
  endpoint: string | null;
  nonce: string | null;
}

export interface ChargeLookups {
  counts: Record<string, number>;
  allowances: Record<string, number>;
  /** What the journal keeps of each answer. */
  answers: Pick<AnswerBody, 'identifier_type' | 'identifier_hash' | 'found'>[];
}

export const budgetKey = (member: string) => `budget/${member}`;
export const monthOf = (now: number) => isoTime(now).slice(0, 7);
const dayOf = (now: number) => isoTime(now).slice(0, 10);

export const budgetDecider: Decider<BudgetState, BudgetEvent> = {
  type: 'budget',

  decide(command: Command, state: BudgetState | null, context: DecideContext): Decision<BudgetEvent> {
    const member = command.caller?.member;
    if (member === undefined) return refusal('path.auth.forbidden', 'a budget belongs to a member');
    const month = monthOf(context.now);
    const spent = state !== null && state.month === month ? state.lookups : {};
    if (command.name === 'charge-lookups') return chargeLookups(command.input as ChargeLookups, member, spent, month, context);
    if (command.name === 'charge-payee-check') {
      const day = dayOf(context.now);
      const used = state !== null && state.day === day ? state.payee_checks : 0;
      const allowance = (command.input as { allowance: number }).allowance;
      if (used + 1 > allowance) return refusal('path.finder.budget_exhausted', 'the daily payee-check allowance is spent', { allowance, window: 'calendar_day' });
      return { events: [{ type: 'payee_check_charged', day }], reply: { status: 200, body: '{}', signed: false, meta: { remaining: allowance - used - 1 } } };
    }
    return refusal('path.core.not_found', 'no such operation on a budget');
  },

  evolve(state: BudgetState | null, event: BudgetEvent): BudgetState {
    const s = state ?? { member: '', month: '', lookups: {}, day: '', payee_checks: 0 };
    if (event.type === 'payee_check_charged') return { ...s, day: event.day, payee_checks: s.day === event.day ? s.payee_checks + 1 : 1 };
    const lookups = s.month === event.month ? { ...s.lookups } : {};
    for (const [type, n] of Object.entries(event.counts)) lookups[type] = (lookups[type] ?? 0) + n;
    return { ...s, month: event.month, lookups };
  },
};

function chargeLookups(input: ChargeLookups, member: string, spent: Record<string, number>, month: string, context: DecideContext): Decision<BudgetEvent> {
  const remaining: Record<string, number> = {};
  for (const [type, n] of Object.entries(input.counts)) {
    const allowance = input.allowances[type]!;
    const used = spent[type] ?? 0;
    if (used + n > allowance) {
      return refusal('path.finder.budget_exhausted', 'the lookup budget for this identifier type is spent', {
        allowance, window: 'calendar_month', identifier_type: type, remaining: Math.max(0, allowance - used),
      });
    }
    remaining[type] = allowance - used - n;
  }
  const at = isoTime(context.now);
  // One journal row per call, listing every key it asked (type, hash, found): keyed by time first,
  // so that retention deletes whole calls as one range.
  const tables = [{
    table: 'journal' as const,
    key: `${at}/${member}/${context.newId('evt').slice(4)}`,
    bytes: frame({ requester: member, at, keys: input.answers.map((a) => [a.identifier_type, a.identifier_hash, a.found]) }),
  }];
  return {
    events: [{ type: 'lookups_charged', month, counts: input.counts }],
    reply: { status: 200, body: '{}', signed: false, meta: { remaining } },
    tables,
  };
}

/**
 * Signed lookup answers (SPEC D) as one JSON array text. Stateless: any worker signs them, in
 * parallel with the budget charge, so signing never waits behind a member's commits.
 */
export function signAnswers(answers: readonly AnswerBody[], requester: string, signedAt: string, signer: SigningKey): string {
  return `[${answers.map((a) => JSON.stringify(signObject({
    kind: 'sonar_answer', identifier_type: a.identifier_type, identifier_hash: a.identifier_hash, requester, nonce: a.nonce,
    found: a.found, member: a.member, endpoint: a.endpoint, ...envelopeFields(signer, signedAt),
  }, signer))).join(',')}]`;
}
