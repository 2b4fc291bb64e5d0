// A member's lookup allowance (P12, SPEC D): how many lookups of one identifier type it may make
// in a window, and when the window starts afresh. The allowance grows with what the member gives
// the directory: base + factor x the entries of that type it contributes, in whole lookups. The
// front end knows the contributions (the in-memory index) and sends the allowance with the
// charge; the budget decider spends it per UTC calendar month (budget.ts, `monthOf`).
import type { Config } from '../../config.js';

/** The operator's terms of the allowance (`--lookup-budget-base`, `--lookup-budget-factor`). */
export type AllowanceTerms = Pick<Config, 'lookupBudgetBase' | 'lookupBudgetFactor'>;

/** P12: base + factor x the entries of the type the member contributes, rounded down. */
export function lookupAllowance(terms: AllowanceTerms, contributed: number): number {
  return Math.floor(terms.lookupBudgetBase + terms.lookupBudgetFactor * contributed);
}

/** Whole seconds from `now` until the allowance starts afresh: the next UTC calendar month. */
export function allowanceResetSeconds(now: number): number {
  const date = new Date(now);
  const nextMonth = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  return Math.ceil((nextMonth - now) / 1000);
}
