// The lookup allowance (P12) as a pure rule: its formula, and when its window starts afresh.
import { describe, expect, it } from 'vitest';
import { allowanceResetSeconds, lookupAllowance } from './allowance.js';

describe('the lookup allowance (P12)', () => {
  it('is the base with nothing contributed', () => {
    const terms = { lookupBudgetBase: 1000, lookupBudgetFactor: 10 };
    expect(lookupAllowance(terms, 0)).toBe(1000);
  });

  it('grows by the factor for each entry of the type the member contributes', () => {
    const terms = { lookupBudgetBase: 1000, lookupBudgetFactor: 10 };
    expect(lookupAllowance(terms, 1)).toBe(1010);
    expect(lookupAllowance(terms, 250)).toBe(3500);
  });

  it('counts whole lookups: a fractional factor is rounded down', () => {
    const terms = { lookupBudgetBase: 5, lookupBudgetFactor: 0.5 };
    expect(lookupAllowance(terms, 3)).toBe(6);
    expect(lookupAllowance(terms, 4)).toBe(7);
    expect(lookupAllowance({ lookupBudgetBase: 0, lookupBudgetFactor: 0.25 }, 3)).toBe(0);
  });

  it('ignores contributions when the factor is 0', () => {
    expect(lookupAllowance({ lookupBudgetBase: 7, lookupBudgetFactor: 0 }, 1_000_000)).toBe(7);
  });
});

describe('the window of the allowance: the UTC calendar month', () => {
  it('starts afresh at the next month, in whole seconds rounded up', () => {
    expect(allowanceResetSeconds(Date.parse('2026-11-30T23:59:59.500Z'))).toBe(1);
    expect(allowanceResetSeconds(Date.parse('2026-11-30T23:00:00Z'))).toBe(3600);
  });

  it('runs a whole month from its first instant, and over the end of a year', () => {
    expect(allowanceResetSeconds(Date.parse('2026-12-01T00:00:00Z'))).toBe(31 * 86_400);
    expect(allowanceResetSeconds(Date.parse('2026-12-31T23:00:00Z'))).toBe(3600);
    expect(allowanceResetSeconds(Date.parse('2028-02-01T00:00:00Z'))).toBe(29 * 86_400);
  });
});
