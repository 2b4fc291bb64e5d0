// The member budget (P12) and the lookup journal (SPEC D), the decider alone: given the charges
// a member has made, when a charge, then its events, journal entry and remaining allowance, or
// the refusal of the whole call. Lookups per type and UTC calendar month (the allowance comes
// from the front end, which holds the directory index); payee checks per UTC day against
// `payee_check_daily_max` from the node's limits. Last, the retention that deletes journal rows
// past their time.
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../config.js';
import { journalRows } from './journal-rows.js';
import { MemoryLog } from '../../log/memory-log.js';
import { housekeeping } from '../../reads/housekeeping.js';
import type { Decision, JournalCall, JournalEntry } from '../decider.js';
import { BETA, deciderSpec, SPEC_NOW } from '../spec.js';
import { budgetDecider, type BudgetEvent, type ChargeLookups } from './budget.js';
import { packJournalKeys } from './journal-keys.js';

const spec = deciderSpec(budgetDecider);
const NOW = new Date(SPEC_NOW).toISOString();
const MONTH = '2026-11';
const DAY = '2026-11-21';
const EXHAUSTED = 'path.finder.budget_exhausted';
const keys = (n: number, found = false, type = 'phone') =>
  Array.from({ length: n }, (_, i) => ({
    identifier_type: type,
    identifier_hash: i.toString(16).padStart(64, '0'),
    found,
  }));
const charge = (n: number, allowance: number, found = false): ChargeLookups => ({
  counts: { phone: n },
  allowances: { phone: allowance },
  keys: packJournalKeys(keys(n, found)),
});
const charged = (n: number, month = MONTH): BudgetEvent => ({
  type: 'lookups_charged',
  month,
  counts: { phone: n },
});
const metaOf = (decision: Decision<BudgetEvent>) => decision.meta;

describe('budget: lookup charges (P12, SPEC D)', () => {
  it('charges the call and journals every key of it in one entry: type, hash, found only', () => {
    const decision = spec
      .given([])
      .when('charge-lookups', charge(3, 10), BETA)
      .then([charged(3)]);
    // The journal row, as stored and read back.
    const rows = (decision.journal ?? []).map((call, i) => {
      const write = journalRows.entry(call, `id-${i}`);
      return journalRows.read(write.key, write.bytes!);
    });
    expect(rows).toEqual<JournalEntry[]>([
      {
        requester: 'beta',
        at: NOW,
        keys: keys(3).map((k) => [k.identifier_type, k.identifier_hash, false]),
      },
    ]);
    expect(decision.answer).toEqual({ value: {} });
    expect(metaOf(decision)).toEqual({ remaining: { phone: 7 } });
  });

  it('refuses a call the allowance cannot cover whole, and counts negatives like positives', () => {
    const refused = spec
      .given([charged(3)])
      .when('charge-lookups', charge(3, 5, true), BETA)
      .thenRefused(EXHAUSTED, {
        allowance: 5,
        window: 'calendar_month',
        identifier_type: 'phone',
        remaining: 2,
      });
    expect(refused.message).toMatch(/lookup budget/);
    const fits = spec
      .given([charged(3)])
      .when('charge-lookups', charge(2, 5, true), BETA)
      .then([charged(2)]);
    expect(metaOf(fits)).toEqual({ remaining: { phone: 0 } });
    spec
      .given([charged(3), charged(2)])
      .when('charge-lookups', charge(1, 5), BETA)
      .thenRefused(EXHAUSTED, { remaining: 0 });
  });

  it('refuses the whole call when one of its types is spent, charging none of them', () => {
    const input: ChargeLookups = {
      counts: { email: 1, phone: 2 },
      allowances: { email: 10, phone: 1 },
      keys: packJournalKeys([...keys(1, false, 'email'), ...keys(2)]),
    };
    spec
      .given([])
      .when('charge-lookups', input, BETA)
      .thenRefused(EXHAUSTED, { identifier_type: 'phone' });
  });

  it('starts each UTC calendar month afresh', () => {
    spec
      .given([charged(5)])
      .when('charge-lookups', charge(5, 5), BETA)
      .thenRefused(EXHAUSTED);
    const december = Date.parse('2026-12-01T00:00:00Z');
    spec
      .given([charged(5)], { now: december })
      .when('charge-lookups', charge(5, 5), BETA)
      .then([charged(5, '2026-12')]);
  });

  it('a charge decided by a clock behind the month the budget has begun counts against it', () => {
    // December began on another instance's clock; this one is still in November, spent.
    const behind = { now: Date.parse('2026-11-30T23:59:30Z') };
    const decision = spec
      .given([charged(5), charged(3, '2026-12')], behind)
      .when('charge-lookups', charge(2, 5), BETA)
      .then([charged(2, '2026-12')]);
    expect(metaOf(decision)).toEqual({ remaining: { phone: 0 } });
  });

  it('refuses a caller that is no member, and a call missing an allowance (a defect)', () => {
    spec.given([]).when('charge-lookups', charge(1, 5), null).thenRefused('path.auth.forbidden');
    const gap: ChargeLookups = {
      counts: { phone: 1 },
      allowances: {},
      keys: packJournalKeys(keys(1)),
    };
    spec.given([]).when('charge-lookups', gap, BETA).thenRefused('path.core.internal');
    // Keys that are not a packing of lookup keys are a defect too: nothing is journalled.
    const torn = { ...charge(2, 5), keys: packJournalKeys(keys(2)).subarray(1) };
    spec.given([]).when('charge-lookups', torn, BETA).thenRefused('path.core.internal');
  });
});

describe('budget: payee checks (P12, SPEC F: payee_check_daily_max per UTC day)', () => {
  const checked: BudgetEvent = { type: 'payee_check_charged', day: DAY };
  const limits = { limits: { payee_check_daily_max: 2 } };

  it("charges one check against the allowance of the node's limits", () => {
    const first = spec.given([], limits).when('charge-payee-check', {}, BETA).then([checked]);
    expect(metaOf(first)).toEqual({ remaining: 1 });
    const second = spec
      .given([checked], limits)
      .when('charge-payee-check', {}, BETA)
      .then([checked]);
    expect(metaOf(second)).toEqual({ remaining: 0 });
    spec
      .given([checked, checked], limits)
      .when('charge-payee-check', {}, BETA)
      .thenRefused(EXHAUSTED, { allowance: 2, window: 'calendar_day' });
  });

  it('takes the allowance from the limits alone (the default is payee_check_daily_max)', () => {
    const decision = spec.given([checked]).when('charge-payee-check', {}, BETA).then([checked]);
    expect(metaOf(decision)).toEqual({ remaining: DEFAULT_LIMITS.payee_check_daily_max - 2 });
  });

  it('starts each UTC day afresh, and refuses a caller that is not a member', () => {
    const tomorrow = { ...limits, now: Date.parse('2026-11-22T00:00:00Z') };
    spec
      .given([checked, checked], tomorrow)
      .when('charge-payee-check', {}, BETA)
      .then([{ type: 'payee_check_charged', day: '2026-11-22' }]);
    spec.given([], limits).when('charge-payee-check', {}, null).thenRefused('path.auth.forbidden');
  });

  it('a charge by a clock behind the day the budget has begun counts against that day', () => {
    // Another instance, a minute ahead, began the 22nd; this one's clock is still on the 21st,
    // whose allowance is spent: the charge is the 22nd's, and the 21st never passes its allowance.
    const next: BudgetEvent = { type: 'payee_check_charged', day: '2026-11-22' };
    const behind = { ...limits, now: Date.parse('2026-11-21T23:59:30Z') };
    const decision = spec
      .given([checked, checked, next], behind)
      .when('charge-payee-check', {}, BETA)
      .then([next]);
    expect(metaOf(decision)).toEqual({ remaining: 0 });
    spec
      .given([checked, checked, next, next], behind)
      .when('charge-payee-check', {}, BETA)
      .thenRefused(EXHAUSTED, { allowance: 2, window: 'calendar_day' });
  });

  it('keeps lookups and payee checks apart', () => {
    const state = [charged(5), checked].reduce(budgetDecider.evolve, null);
    expect(state).toMatchObject({ month: MONTH, lookups: { phone: 5 }, day: DAY, payee_checks: 1 });
  });
});

describe('journal retention', () => {
  it('deletes journal rows older than the published retention and keeps the rest', async () => {
    const log = new MemoryLog();
    const day = 86_400_000;
    const entry = (at: string): JournalCall => ({ requester: 'beta', at, keys: new Uint8Array() });
    const retention = DEFAULT_LIMITS.lookup_journal_retention_days * day;
    const old = entry(new Date(Date.now() - retention - day).toISOString());
    const recent = entry(new Date(Date.now() - day).toISOString());
    await log.write([journalRows.entry(old, 'a'), journalRows.entry(recent, 'b')]);
    await housekeeping(log, DEFAULT_LIMITS);
    expect([...log.scan('journal')].map((r) => r.key)).toEqual([
      journalRows.key(recent.at, 'beta', 'b'),
    ]);
  });
});
