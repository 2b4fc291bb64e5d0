// The member budget (P12) and the lookup journal (SPEC D): all-or-nothing charges per type and
// calendar month, one journal row per call listing every key with its hash only, and the
// retention that deletes journal rows past their time.
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../config.js';
import { MemoryLog } from '../../log/memory-log.js';
import { frame, unframe } from '../../log/record.js';
import { newReference } from '../../protocol/ids.js';
import { signingKeyFromSeed } from '../../protocol/signing.js';
import { housekeeping } from '../../node.js';
import { isDecisionRefusal } from '../../actors/types.js';
import { budgetDecider, type ChargeLookups } from './budget.js';

const signer = signingKeyFromSeed('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60');
const NOW = Date.parse('2026-11-21T12:00:00Z');
const context = { now: NOW, member: 'local', signer, newId: newReference };
const caller = { member: 'beta', local: false };
const keys = (n: number, found = false) => Array.from({ length: n }, (_, i) => ({ identifier_type: 'phone', identifier_hash: i.toString(16).padStart(64, '0'), found }));

describe('lookup charges', () => {
  it('journals every key of a call in one row, with type, hash and found only', () => {
    const input: ChargeLookups = { counts: { phone: 3 }, allowances: { phone: 10 }, answers: keys(3) };
    const decision = budgetDecider.decide({ name: 'charge-lookups', input, caller }, null, context);
    if (isDecisionRefusal(decision)) throw new Error(decision.message);
    expect(decision.tables).toHaveLength(1);
    const row = unframe<{ requester: string; at: string; keys: unknown[] }>(decision.tables![0]!.bytes!);
    expect(row).toEqual({ requester: 'beta', at: '2026-11-21T12:00:00.000Z', keys: keys(3).map((k) => [k.identifier_type, k.identifier_hash, false]) });
    expect(decision.tables![0]!.key.startsWith('2026-11-21T12:00:00.000Z/beta/')).toBe(true);
    expect(decision.reply.meta).toEqual({ remaining: { phone: 7 } });
  });

  it('refuses a call the allowance cannot cover whole, and counts negatives like positives', () => {
    let state = null;
    const charge = (n: number, found: boolean) => budgetDecider.decide({ name: 'charge-lookups', input: { counts: { phone: n }, allowances: { phone: 5 }, answers: keys(n, found) }, caller }, state, context);
    const first = charge(3, false);
    if (isDecisionRefusal(first)) throw new Error(first.message);
    for (const e of first.events) state = budgetDecider.evolve(state, e);
    const refused = charge(3, true);
    expect(isDecisionRefusal(refused) && refused.code).toBe('path.finder.budget_exhausted');
    expect(isDecisionRefusal(refused) && refused.detail).toMatchObject({ allowance: 5, window: 'calendar_month', identifier_type: 'phone', remaining: 2 });
    expect(isDecisionRefusal(charge(2, true))).toBe(false);
  });

  it('starts each UTC calendar month afresh', () => {
    let state = null;
    const input = { counts: { email: 5 }, allowances: { email: 5 }, answers: keys(5) };
    const november = budgetDecider.decide({ name: 'charge-lookups', input, caller }, state, context);
    if (isDecisionRefusal(november)) throw new Error(november.message);
    for (const e of november.events) state = budgetDecider.evolve(state, e);
    expect(isDecisionRefusal(budgetDecider.decide({ name: 'charge-lookups', input, caller }, state, context))).toBe(true);
    const december = budgetDecider.decide({ name: 'charge-lookups', input, caller }, state, { ...context, now: Date.parse('2026-12-01T00:00:00Z') });
    expect(isDecisionRefusal(december)).toBe(false);
  });
});

describe('journal retention', () => {
  it('deletes journal rows older than the published retention and keeps the rest', async () => {
    const log = new MemoryLog();
    const day = 86_400_000;
    const old = new Date(Date.now() - (DEFAULT_LIMITS.lookup_journal_retention_days + 1) * day).toISOString();
    const recent = new Date(Date.now() - day).toISOString();
    await log.write([
      { table: 'journal', key: `${old}/beta/a`, bytes: frame({ keys: [] }) },
      { table: 'journal', key: `${recent}/beta/b`, bytes: frame({ keys: [] }) },
    ]);
    await housekeeping(log, DEFAULT_LIMITS);
    expect([...log.scan('journal')].map((r) => r.key)).toEqual([`${recent}/beta/b`]);
  });
});
