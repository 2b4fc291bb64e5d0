// Housekeeping: forgets what is past its retention. Idempotent answers (P7 keeps them at least
// 24 hours) are found through their order rows (rows.ts), lookup journal rows (the retention
// published in discovery) by their keys, which start with their time: either way the expired
// rows are one range, and a sweep reads what it forgets, not every live row.
//
// Every read goes through `Log.load` and `Log.loadRange`, a page at a time: the sweeps run on the
// thread that serves HTTP, which never waits on a database (issue 29). What a sweep forgets it
// forgets a page at a time too, each page written before the next is read, and a round goes on
// until nothing past its retention is left (forgetRange).
import { HOUSEKEEPING_READ_PAGE_ROWS, SWEEP_PAGE_ROWS, type Limits } from '../config.js';
import type { Log, Reads, ScanRange, Table, TableWrite } from '../log/log.js';
import { idempotencyOrderRows, idempotencyRows, replayRows } from './rows.js';

const DAY_MS = 86_400_000; // tidy: format (a day in milliseconds)

export async function housekeeping(log: Log, limits: Limits, now = Date.now()): Promise<void> {
  const cutoff = now - limits.idempotency_retention_ms;
  if ((await log.load('idempotency_order', idempotencyOrderRows.indexedKey)) === undefined) {
    const writes = await indexIdempotency(log, cutoff);
    if (writes.length > 0) await log.write(writes);
  } else await forgetExpiredIdempotency(log, cutoff);
  const journalCutoff = new Date(now - limits.lookup_journal_retention_days * DAY_MS).toISOString();
  await forgetRange(log, 'journal', { end: journalCutoff });
}

/**
 * Forgets every row of `range` in `table`, SWEEP_PAGE_ROWS a page: a page read, its rows deleted
 * with what `also` adds for each, written, and only then the next page read, until the range is
 * empty. However many rows came in since the last round, one round forgets them all, holding
 * neither the thread that serves HTTP nor memory for more than a page. Answers how many it forgot.
 */
export async function forgetRange(
  log: Pick<Reads, 'loadRange' | 'write'>,
  table: Table,
  range: Pick<ScanRange, 'start' | 'end'>,
  also: (key: string) => Promise<readonly TableWrite[]> = async () => [],
): Promise<number> {
  let forgotten = 0;
  // The next page is read once this one's deletions are written (the loop asks for it then); it
  // starts past this one's last key, so a row a write did not take is not read again this round.
  for await (const page of rangePages(log, table, range, SWEEP_PAGE_ROWS)) {
    const writes: TableWrite[] = [];
    for (const { key } of page) writes.push({ table, key, bytes: null }, ...(await also(key)));
    if (writes.length > 0) await log.write(writes);
    forgotten += page.length;
  }
  return forgotten;
}

/**
 * Forgets the replay marks past their window (P5). They sort by the time they may be forgotten,
 * so those are one range; a round forgets all of it (a round of at most 10,000 fell behind any
 * load of more than 10,000 signed requests between two rounds, and the table grew for ever).
 */
export function forgetReplays(log: Pick<Reads, 'loadRange' | 'write'>, now: number) {
  return forgetRange(log, 'replay', { end: replayRows.cutoff(now) });
}

/**
 * Forgets the expired entries and their order rows. A key may have been used again after its
 * entry expired (the front end no longer answers from it): its entry is then younger than its
 * old order row, which goes alone.
 */
function forgetExpiredIdempotency(log: Log, cutoff: number): Promise<number> {
  return forgetRange(log, 'idempotency_order', idempotencyOrderRows.before(cutoff), async (key) => {
    const scope = idempotencyOrderRows.scopeOf(key);
    const bytes = await log.load('idempotency', scope);
    return bytes !== undefined && idempotencyRows.read(scope, bytes).at < cutoff
      ? [{ table: 'idempotency', key: scope, bytes: null }]
      : [];
  });
}

/**
 * Once per data directory written before the order rows existed: one walk of the whole table
 * forgets the expired entries and gives each live one its row, then marks the table indexed.
 */
async function indexIdempotency(log: Log, cutoff: number): Promise<TableWrite[]> {
  const writes: TableWrite[] = [];
  for await (const { key, bytes } of pages(log, 'idempotency')) {
    const { at } = idempotencyRows.read(key, bytes);
    writes.push(
      at < cutoff
        ? { table: 'idempotency', key, bytes: null }
        : idempotencyOrderRows.entry(at, key),
    );
  }
  writes.push(idempotencyOrderRows.write(idempotencyOrderRows.indexedKey, {}));
  return writes;
}

/**
 * The rows of a range in key order, HOUSEKEEPING_READ_PAGE_ROWS a read (also the directory
 * image's reads of `directory_changes`, directory/changes.ts).
 */
export async function* pages(
  log: Pick<Reads, 'loadRange'>,
  table: Table,
  range: Pick<ScanRange, 'start' | 'end'> = {},
): AsyncIterable<{ key: string; bytes: Buffer }> {
  for await (const page of rangePages(log, table, range, HOUSEKEEPING_READ_PAGE_ROWS)) yield* page;
}

/** A range in key order, `limit` rows a read, a page at a time. */
async function* rangePages(
  log: Pick<Reads, 'loadRange'>,
  table: Table,
  range: Pick<ScanRange, 'start' | 'end'>,
  limit: number,
): AsyncIterable<{ key: string; bytes: Buffer }[]> {
  let start = range.start;
  for (;;) {
    const page = await log.loadRange(table, {
      ...range,
      ...(start === undefined ? {} : { start }),
      limit,
    });
    yield page;
    if (page.length < limit) return;
    // The next page starts just after this one's last key.
    start = `${page[page.length - 1]!.key}\u0000`;
  }
}
