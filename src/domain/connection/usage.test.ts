// A usage page (SPEC K, P12) as the connection domain reads it: the aggregate is asked first,
// the page is the most recent `limit` rows of the owner's log, oldest first, counted on the page
// and in total. The rows are real `usage` rows in an in-memory log.
import { describe, expect, it } from 'vitest';
import { MemoryLog } from '../../log/memory-log.js';
import { usageRows } from './usage-rows.js';
import { usagePage, type UsageReads } from './usage.js';

const CONNECTION = 'con_usage1';

/** A consumption row as the consume command writes it (connection/consume.ts). */
const row = (index: number) => ({
  capability: 'payment.send',
  amount: `${index}.00`,
  currency: 'EUR',
  operation_ref: `op-${index}`,
  occurred_at: new Date(Date.UTC(2026, 10, 27, 12, 0, index)).toISOString(),
});

/** A log holding `n` usage rows of the connection, and some of another whose name it starts. */
async function logWith(n: number): Promise<MemoryLog> {
  const log = new MemoryLog();
  const writes = [];
  for (let index = 1; index <= n; index++) {
    writes.push(usageRows.entry({ owner: CONNECTION, index, row: row(index) }, at(index)));
  }
  for (let index = 1; index <= 3; index++) {
    const other = { owner: `${CONNECTION}x`, index, row: row(100 + index) };
    writes.push(usageRows.entry(other, at(100 + index)));
  }
  await log.write(writes);
  return log;
}

const at = (seq: number) => ({ partition: 7, seq });
const counted = (count: number) => async () => ({ status: 200, body: JSON.stringify({ count }) });

describe('a usage page (SPEC K, P12)', () => {
  it('is the last `limit` rows of its log, oldest first, the log length as total', async () => {
    const log = await logWith(12);
    const outcome = await usagePage({ log }, { reference: CONNECTION, limit: 5 }, counted(12));
    expect(outcome).toEqual({
      page: {
        reference: CONNECTION,
        count: 5,
        total: 12,
        usage: [8, 9, 10, 11, 12].map(row),
      },
    });
  });

  it('holds the whole log when it is shorter than the limit, and none of another log', async () => {
    const log = await logWith(3);
    const outcome = await usagePage({ log }, { reference: CONNECTION, limit: 50 }, counted(3));
    expect(outcome).toEqual({
      page: { reference: CONNECTION, count: 3, total: 3, usage: [1, 2, 3].map(row) },
    });
  });

  it('is empty for a log with no consumption yet', async () => {
    const log = new MemoryLog();
    const outcome = await usagePage({ log }, { reference: CONNECTION, limit: 10 }, counted(0));
    expect(outcome).toEqual({ page: { reference: CONNECTION, count: 0, total: 0, usage: [] } });
  });

  it("answers the aggregate's refusal as replied, and reads no row for a non-party", async () => {
    const ranges: unknown[] = [];
    const log: UsageReads = {
      loadRange: async (_table, range) => {
        ranges.push(range);
        return [];
      },
    };
    const refusal = { status: 403, body: '{"error":{"code":"path.auth.forbidden"}}' };
    const outcome = await usagePage({ log }, { reference: CONNECTION, limit: 10 }, async () => {
      return refusal;
    });
    expect(outcome).toEqual({ refused: refusal });
    expect(ranges).toEqual([]);
  });
});
