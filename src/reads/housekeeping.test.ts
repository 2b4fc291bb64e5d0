// Housekeeping over the real LMDB log: idempotent answers past their retention (P7) go, live ones
// stay, and a sweep reads the expired entries only, through the order rows each commit writes
// beside its entry. Entries of a data directory written before the order rows existed expire too.
// Every sweep that forgets (answers, journal rows, replay marks) forgets all that is past its
// retention in one round, however many, and writes it a page at a time.
import { afterEach, describe, expect, it } from 'vitest';
import { temporaryLogs } from '../../test/support/lmdb.js';
import { decisionWrites } from '../actors/decision.js';
import { DEFAULT_LIMITS, SWEEP_PAGE_ROWS } from '../config.js';
import { journalRows } from '../domain/budget/journal-rows.js';
import { forgetReplays, housekeeping } from './housekeeping.js';
import type { Log, ScanRange, Table, TableWrite } from '../log/log.js';
import { idempotencyOrderRows, idempotencyRows, replayRows } from './rows.js';

const RETENTION = DEFAULT_LIMITS.idempotency_retention_ms;
const HOUR = 3_600_000;
const NOW = Date.parse('2026-11-23T12:00:00Z');

const logs = temporaryLogs('housekeeping');
afterEach(logs.cleanUp);
const freshLog = logs.fresh;

/** Writes what a shard's commit writes for an idempotent command answered at `at`. */
async function commitAnswer(log: Log, scope: string, at: number): Promise<void> {
  const writes = decisionWrites({
    decision: { events: [{}], answer: { text: '{}', signed: false } },
    outbox: [],
    publications: [],
    routed: {
      aggregate: 'receipt',
      key: `rcp_${scope}`,
      command: { name: 'issue', input: {}, caller: null },
      idempotency: { scope, requestHash: `hash-${scope}` },
    },
    reply: { status: 201, body: `{"n":"${scope}"}`, signed: true },
    now: at,
    newId: () => 'id',
    followUps: [],
    position: { partition: 0, seq: 1 },
    retentionMs: 60_000,
  });
  await log.write(writes);
}

/** What an older node wrote: the entry alone. */
async function legacyAnswer(log: Log, scope: string, at: number): Promise<void> {
  const entry = { scope, requestHash: 'h', status: 201, body: '{}', signed: true, at };
  await log.write([idempotencyRows.write(scope, entry)]);
}

const scopes = (log: Log) => [...log.scan('idempotency')].map((r) => r.key).sort();

/** The log, counting the rows read from each table. */
function counting(log: Log): { log: Log; read: Map<Table, number> } {
  const read = new Map<Table, number>();
  const count = (table: Table) => read.set(table, (read.get(table) ?? 0) + 1);
  const wrapped: Log = Object.create(log) as Log;
  wrapped.get = (table, key) => {
    count(table);
    return log.get(table, key);
  };
  wrapped.scan = function* (table: Table, range?: ScanRange) {
    for (const row of log.scan(table, range)) {
      count(table);
      yield row;
    }
  };
  return { log: wrapped, read };
}

describe('housekeeping of idempotent answers (P7)', () => {
  it('forgets the expired answers and keeps the live ones with their order rows', async () => {
    const log = freshLog();
    await commitAnswer(log, 'old-1', NOW - RETENTION - 2 * HOUR);
    await commitAnswer(log, 'old-2', NOW - RETENTION - 1);
    await commitAnswer(log, 'live-1', NOW - RETENTION + HOUR);
    await commitAnswer(log, 'live-2', NOW - 1);
    await housekeeping(log, DEFAULT_LIMITS, NOW);
    await housekeeping(log, DEFAULT_LIMITS, NOW);
    expect(scopes(log)).toEqual(['live-1', 'live-2']);
    const order = [...log.scan('idempotency_order', idempotencyOrderRows.before(NOW + HOUR))];
    expect(order.map((r) => idempotencyOrderRows.scopeOf(r.key))).toEqual(['live-1', 'live-2']);
    // Later, the live ones expire in their turn.
    await housekeeping(log, DEFAULT_LIMITS, NOW + RETENTION);
    expect(scopes(log)).toEqual([]);
  });

  it('reads the expired entries only, however many live ones the table holds', async () => {
    const log = freshLog();
    await housekeeping(log, DEFAULT_LIMITS, NOW);
    for (let i = 0; i < 200; i++) await commitAnswer(log, `live-${i}`, NOW - HOUR + i);
    await commitAnswer(log, 'old-a', NOW - RETENTION - HOUR);
    await commitAnswer(log, 'old-b', NOW - RETENTION - 2 * HOUR);
    const { log: watched, read } = counting(log);
    await housekeeping(watched, DEFAULT_LIMITS, NOW);
    expect(read.get('idempotency')).toBe(2);
    expect(read.get('idempotency_order')).toBe(2 + 1);
    expect(scopes(log)).toHaveLength(200);
    expect(scopes(log)).not.toContain('old-a');
  });

  it('keeps an answer whose key was used again after its first answer expired', async () => {
    const log = freshLog();
    await housekeeping(log, DEFAULT_LIMITS, NOW);
    await commitAnswer(log, 'again', NOW - RETENTION - HOUR);
    await commitAnswer(log, 'again', NOW - HOUR);
    await housekeeping(log, DEFAULT_LIMITS, NOW);
    expect(scopes(log)).toEqual(['again']);
    await housekeeping(log, DEFAULT_LIMITS, NOW + RETENTION);
    expect(scopes(log)).toEqual([]);
  });

  it('expires the answers an older node wrote without order rows', async () => {
    const log = freshLog();
    await legacyAnswer(log, 'legacy-old', NOW - RETENTION - HOUR);
    await legacyAnswer(log, 'legacy-live', NOW - HOUR);
    await commitAnswer(log, 'new-live', NOW - HOUR);
    await housekeeping(log, DEFAULT_LIMITS, NOW);
    expect(scopes(log)).toEqual(['legacy-live', 'new-live']);
    // Indexed once: the next sweeps read the order rows, and the legacy entry expires by them.
    const { log: watched, read } = counting(log);
    await housekeeping(watched, DEFAULT_LIMITS, NOW + RETENTION);
    expect(read.get('idempotency')).toBe(2);
    expect(scopes(log)).toEqual([]);
  });
});

/** The log, recording how many rows each of its writes held. */
function writeSizes(log: Log): { log: Log; sizes: number[] } {
  const sizes: number[] = [];
  const wrapped: Log = Object.create(log) as Log;
  wrapped.write = (writes: readonly TableWrite[]) => {
    sizes.push(writes.length);
    return log.write(writes);
  };
  return { log: wrapped, sizes };
}

const count = (log: Log, table: Table) => [...log.scan(table)].length;
/** Over 10,000: what a round of the replay sweep forgot before it went on to the end. */
const MANY = 12_500;

describe('forgetting all that is past its retention, a page at a time', () => {
  it('forgets every replay mark past its window in one round, keeps the others (P5)', async () => {
    const log = freshLog();
    const marks = Array.from({ length: MANY }, (_, i) =>
      replayRows.mark({ key: replayRows.keyOf(NOW - 1 - i, `old-${i}`), keyId: 'k', until: 0 }),
    );
    const live = [NOW + 1, NOW + HOUR].map((until, i) =>
      replayRows.mark({ key: replayRows.keyOf(until, `live-${i}`), keyId: 'k', until }),
    );
    await log.write([...marks, ...live]);
    const { log: watched, sizes } = writeSizes(log);
    expect(await forgetReplays(watched, NOW)).toBe(MANY);
    expect([...log.scan('replay')].map((r) => r.key)).toEqual(live.map((w) => w.key));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(SWEEP_PAGE_ROWS);
  });

  it('forgets every expired answer and journal row in one round, a page a write', async () => {
    const log = freshLog();
    await housekeeping(log, DEFAULT_LIMITS, NOW);
    const answers = Array.from({ length: 1_500 }, (_, i) =>
      commitAnswer(log, `old-${i}`, NOW - RETENTION - 1 - i),
    );
    await Promise.all(answers);
    await commitAnswer(log, 'live', NOW - HOUR);
    const retained = DEFAULT_LIMITS.lookup_journal_retention_days * 24 * HOUR;
    const journal = (at: number, id: string) =>
      journalRows.entry(
        { requester: 'm', at: new Date(at).toISOString(), keys: new Uint8Array() },
        id,
      );
    const calls = Array.from({ length: MANY }, (_, i) => journal(NOW - retained - 1 - i, `j${i}`));
    await log.write([...calls, journal(NOW - HOUR, 'kept')]);
    const { log: watched, sizes } = writeSizes(log);
    await housekeeping(watched, DEFAULT_LIMITS, NOW);
    expect(scopes(log)).toEqual(['live']);
    expect(count(log, 'idempotency_order')).toBe(2); // live's row and the mark of the indexing
    expect([...log.scan('journal')].map((r) => r.key)).toEqual([journal(NOW - HOUR, 'kept').key]);
    // Each page: its order rows and their entries, or its journal rows.
    expect(Math.max(...sizes)).toBeLessThanOrEqual(2 * SWEEP_PAGE_ROWS);
  });
});
