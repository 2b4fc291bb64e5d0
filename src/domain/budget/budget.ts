// A member's reciprocity budget (P12), one aggregate per member so that every charge is atomic:
// lookups per identifier type and UTC calendar month, and payee checks per UTC day. A lookup
// charge journals the call (hashes only, P8) in the same commit.
//
// A charge is all or nothing: a call the allowance cannot cover is refused whole (429). Each
// window starts afresh at its UTC boundary; there are no other states. The answers are signed
// beside the charge, on any worker (signAnswers), so signing never waits behind a member's
// commits.
import type {
  CommandOf,
  DecideContext,
  Decider,
  Decision,
  InputOf,
  JournalCall,
} from '../decider.js';
import { refusal, type Refusal } from '../../protocol/errors.js';
import { envelopeFields, signObject, type SigningKey } from '../../protocol/signing.js';
import { isoTime } from '../../protocol/time.js';
import { isPackedKeys } from './journal-keys.js';
import { budgetCommands } from './schema.js';

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

type Commands = typeof budgetCommands;
type Command = CommandOf<Commands>;
type Result = Decision<BudgetEvent> | Refusal;
export type ChargeLookups = InputOf<Commands, 'charge-lookups'>;

/** One lookup answer to sign (identical work for positives and negatives). */
export interface AnswerBody {
  identifier_type: string;
  identifier_hash: string;
  found: boolean;
  member: string | null;
  endpoint: string | null;
  nonce: string | null;
}

export const budgetKey = (member: string) => `budget/${member}`;
export const monthOf = (now: number) => isoTime(now).slice(0, 7);
const dayOf = (now: number) => isoTime(now).slice(0, 10);

/**
 * The window (a UTC month or day, as ISO text) a charge falls in: the clock's, or the budget's
 * own when that is later. A window never opens again once a later one has begun: a charge decided
 * by a clock behind the one that began the later window (the instances of a cluster may be a
 * minute apart, P22; a command decided before a pause and committed after) counts against the
 * later window, never against an earlier one whose allowance the budget no longer holds (found
 * by the simulator: a member's payee checks of one day went past their allowance, the 13th
 * charged by an instance still before midnight after another had begun the next day).
 */
const windowOf = (clock: string, held: string | undefined): string =>
  held !== undefined && held > clock ? held : clock;

export const budgetDecider: Decider<BudgetState, Commands, BudgetEvent> = {
  type: 'budget',
  passivates: true,
  prefix: null,
  commands: budgetCommands,

  decide(command: Command, state: BudgetState | null, context: DecideContext): Result {
    const member = command.caller?.member;
    if (member === undefined) return refusal('path.auth.forbidden', 'a budget belongs to a member');
    switch (command.name) {
      case 'charge-lookups': {
        const month = windowOf(monthOf(context.now), state?.month);
        const spent = state !== null && state.month === month ? state.lookups : {};
        return chargeLookups(command.input, { member, spent, month, now: context.now });
      }
      case 'charge-payee-check':
        return chargePayeeCheck(state, context);
    }
  },

  evolve(state: BudgetState | null, event: BudgetEvent): BudgetState {
    const s = state ?? { member: '', month: '', lookups: {}, day: '', payee_checks: 0 };
    if (event.type === 'payee_check_charged') {
      return { ...s, day: event.day, payee_checks: s.day === event.day ? s.payee_checks + 1 : 1 };
    }
    const lookups = s.month === event.month ? { ...s.lookups } : {};
    for (const [type, n] of Object.entries(event.counts)) lookups[type] = (lookups[type] ?? 0) + n;
    return { ...s, month: event.month, lookups };
  },
};

interface Spending {
  member: string;
  /** Lookups charged this month, per identifier type. */
  spent: Record<string, number>;
  month: string;
  now: number;
}

function chargeLookups(input: ChargeLookups, { member, spent, month, now }: Spending): Result {
  const remaining: Record<string, number> = {};
  for (const [type, n] of Object.entries(input.counts)) {
    const allowance = input.allowances[type];
    // The front end sends an allowance for every type it counts: a gap is a defect of the node.
    if (allowance === undefined) {
      const defect = `budget.charge-lookups: no allowance for ${type}`;
      return refusal('path.core.internal', 'internal error', { defect });
    }
    const used = spent[type] ?? 0;
    if (used + n > allowance) {
      const message = 'the lookup budget for this identifier type is spent';
      return refusal('path.finder.budget_exhausted', message, {
        allowance,
        window: 'calendar_month',
        identifier_type: type,
        remaining: Math.max(0, allowance - used),
      });
    }
    remaining[type] = allowance - used - n;
  }
  // One journal entry per call, listing every key it asked: type, hash, found (P8: hashes only).
  if (!isPackedKeys(input.keys)) {
    const defect = 'budget.charge-lookups: keys are not a packing of lookup keys';
    return refusal('path.core.internal', 'internal error', { defect });
  }
  const entry: JournalCall = { requester: member, at: isoTime(now), keys: input.keys };
  return {
    events: [{ type: 'lookups_charged', month, counts: input.counts }],
    answer: { value: {} },
    journal: [entry],
    meta: { remaining },
  };
}

/** One payee check against the daily allowance of the node's limits. */
function chargePayeeCheck(state: BudgetState | null, context: DecideContext): Result {
  const day = windowOf(dayOf(context.now), state?.day);
  const used = state !== null && state.day === day ? state.payee_checks : 0;
  const allowance = context.limits.payee_check_daily_max;
  if (used + 1 > allowance) {
    return refusal('path.finder.budget_exhausted', 'the daily payee-check allowance is spent', {
      allowance,
      window: 'calendar_day',
    });
  }
  return {
    events: [{ type: 'payee_check_charged', day }],
    answer: { value: {} },
    meta: { remaining: allowance - used - 1 },
  };
}

/**
 * Signed lookup answers (SPEC D) as one JSON array text. Stateless: any worker signs them, in
 * parallel with the budget charge, so signing never waits behind a member's commits.
 */
export function signAnswers(
  answers: readonly AnswerBody[],
  requester: string,
  signedAt: string,
  signer: SigningKey,
): string {
  return `[${answers
    .map((a) =>
      JSON.stringify(
        signObject(
          {
            kind: 'sonar_answer',
            identifier_type: a.identifier_type,
            identifier_hash: a.identifier_hash,
            requester,
            nonce: a.nonce,
            found: a.found,
            member: a.member,
            endpoint: a.endpoint,
            ...envelopeFields(signer, signedAt),
          },
          signer,
        ),
      ),
    )
    .join(',')}]`;
}
