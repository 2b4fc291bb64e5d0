// A usage page (SPEC K, P12): the log of a connection's or a delegation's consumptions, as a
// party reads it. The aggregate says first whether the caller is a party and how long the log
// is (its answer to `usage` or `usage-delegation`: a count, connection.ts); only then are rows
// read. The page is the log's most recent `limit` rows, given oldest first; `count` is the rows
// on the page and `total` the length of the log. The rows are the committed `usage` rows, read
// through their codec in one bounded range, which never holds the thread that serves HTTP
// (issue 29).
import { usageRows } from './usage-rows.js';

/** The committed usage rows, as a page reads them: one range, at most `limit` rows. */
export interface UsageReads {
  loadRange(
    table: 'usage',
    range: { start: string; end: string; reverse: boolean; limit: number },
  ): Promise<{ key: string; bytes: Buffer }[]>;
}

/** The page asked for: the connection's or delegation's reference, and rows at most. */
export interface UsageQuery {
  reference: string;
  limit: number;
}

/** The aggregate's reply to the usage command, as the runtime gives it. */
export interface UsageReply {
  status: number;
  body: string;
}

/** A page as answered (answers.ts `UsagePage`): its rows as the consumptions wrote them. */
export interface UsagePageBody {
  reference: string;
  count: number;
  total: number;
  usage: Record<string, unknown>[];
}

/** The page, or the aggregate's refusal (not a party, no such delegation) as it replied it. */
export type UsageOutcome = { page: UsagePageBody } | { refused: UsageReply };

/** A usage page: asks the aggregate (`ask`), then reads the rows of a party's page. */
export async function usagePage(
  from: { log: UsageReads },
  query: UsageQuery,
  ask: () => Promise<UsageReply>,
): Promise<UsageOutcome> {
  const reply = await ask();
  if (reply.status !== 200) return { refused: reply };
  const { count: total } = JSON.parse(reply.body) as { count: number };
  const { reference, limit } = query;
  const range = { ...usageRows.range(reference), reverse: true, limit };
  const rows = (await from.log.loadRange('usage', range)).reverse();
  const usage = rows.map((row) => usageRows.read(row.key, row.bytes));
  return { page: { reference, count: rows.length, total, usage } };
}
