// Housekeeping: forgets what is past its retention. Idempotent answers (P7 keeps them at least
// 24 hours) are found through their order rows (rows.ts), lookup journal rows (the retention
// published in discovery) by their keys, which start with their time: either way the expired
// rows are one range, and a sweep reads what it forgets, not every live row.
//
// Every read goes through `Log.load` and `Log.loadRange`, a page at a time: the sweeps run on the
// thread that serves HTTP, which never waits on a database (issue 29).
import { HOUSEKEEPING_READ_PAGE_ROWS, type Limits } from '../config.js';
import type { Log, Reads, ScanRange, Table, TableWrite } from '../log/log.js';
import { idempotencyOrderRows, idempotencyRows } from './rows.js';

const DAY_MS = 86_400_000; // tidy: format (a day in milliseconds)

export async function housekeeping(log: Log, limits: Limits, now = Date.now()): Promise<void> {
  const writes: TableWrite[] = [];
  const cutoff = now - limits.idempotency_retention_ms;
  if ((await log.load('idempotency_order', idempotencyOrderRows.indexedKey)) === undefined)
    writes.push(...(await indexIdempotency(log, cutoff)));
  else writes.push(...(await expiredIdempotency(log, cutoff)));
  const journalCutoff = new Date(now - limits.lookup_journal_retention_days * DAY_MS).toISOString();
  for await (const { key } of pages(log, 'journal', { end: journalCutoff }))
    writes.push({ table: 'journal', key, bytes: null });
  if (writes.length > 0) await log.write(writes);
}

/**
 * The expired entries and their order rows. A key may have been used again after its entry
 * expired (the front end no longer answers from it): its entry is then younger than its old
 * order row, which goes alone.
 */
async function expiredIdempotency(log: Log, cutoff: number): Promise<TableWrite[]> {
  const writes: TableWrite[] = [];
  for await (const { key } of pages(
    log,
    'idempotency_order',
    idempotencyOrderRows.before(cutoff),
  )) {
    writes.push({ table: 'idempotency_order', key, bytes: null });
    const scope = idempotencyOrderRows.scopeOf(key);
    const bytes = await log.load('idempotency', scope);
    if (bytes !== undefined && idempotencyRows.read(scope, bytes).at < cutoff)
      writes.push({ table: 'idempotency', key: scope, bytes: null });
  }
  return writes;
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
 * Reads every idempotent answer once, at start: a damaged row refuses the start, naming its table
 * and key (P14), instead of being found by the first replay that reads it. The sweeps, run every
 * hour, read the expired rows only.
 */
export async function checkIdempotency(log: Log): Promise<number> {
  let rows = 0;
  for await (const { key, bytes } of pages(log, 'idempotency')) {
    idempotencyRows.read(key, bytes);
    rows++;
  }
  return rows;
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
  let start = range.start;
  for (;;) {
    const limit = HOUSEKEEPING_READ_PAGE_ROWS;
    const page = await log.loadRange(table, {
      ...range,
      ...(start === undefined ? {} : { start }),
      limit,
    });
    yield* page;
    if (page.length < limit) return;
    // The next page starts just after this one's last key.
    start = `${page[page.length - 1]!.key}\u0000`;
  }
}
