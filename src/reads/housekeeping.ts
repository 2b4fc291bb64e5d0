// Housekeeping: forgets what is past its retention. Idempotent answers (P7 keeps them at least
// 24 hours) are found through their order rows (rows.ts), lookup journal rows (the retention
// published in discovery) by their keys, which start with their time: either way the expired
// rows are one range, and a sweep reads what it forgets, not every live row.
import type { Limits } from '../config.js';
import type { Log, TableWrite } from '../log/log.js';
import { idempotencyOrderRows, idempotencyRows } from './rows.js';

const DAY_MS = 86_400_000; // tidy: format (a day in milliseconds)

export async function housekeeping(log: Log, limits: Limits, now = Date.now()): Promise<void> {
  const writes: TableWrite[] = [];
  const cutoff = now - limits.idempotency_retention_ms;
  if (log.get('idempotency_order', idempotencyOrderRows.indexedKey) === undefined)
    writes.push(...indexIdempotency(log, cutoff));
  else writes.push(...expiredIdempotency(log, cutoff));
  const journalCutoff = new Date(now - limits.lookup_journal_retention_days * DAY_MS).toISOString();
  for (const { key } of log.scan('journal', { end: journalCutoff }))
    writes.push({ table: 'journal', key, bytes: null });
  if (writes.length > 0) await log.write(writes);
}

/**
 * The expired entries and their order rows. A key may have been used again after its entry
 * expired (the front end no longer answers from it): its entry is then younger than its old
 * order row, which goes alone.
 */
function expiredIdempotency(log: Log, cutoff: number): TableWrite[] {
  const writes: TableWrite[] = [];
  for (const { key } of log.scan('idempotency_order', idempotencyOrderRows.before(cutoff))) {
    writes.push({ table: 'idempotency_order', key, bytes: null });
    const scope = idempotencyOrderRows.scopeOf(key);
    const bytes = log.get('idempotency', scope);
    if (bytes !== undefined && idempotencyRows.read(scope, bytes).at < cutoff)
      writes.push({ table: 'idempotency', key: scope, bytes: null });
  }
  return writes;
}

/**
 * Once per data directory written before the order rows existed: one walk of the whole table
 * forgets the expired entries and gives each live one its row, then marks the table indexed.
 */
function indexIdempotency(log: Log, cutoff: number): TableWrite[] {
  const writes: TableWrite[] = [];
  for (const { key, bytes } of log.scan('idempotency')) {
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
export function checkIdempotency(log: Log): number {
  let rows = 0;
  for (const { key, bytes } of log.scan('idempotency')) {
    idempotencyRows.read(key, bytes);
    rows++;
  }
  return rows;
}
