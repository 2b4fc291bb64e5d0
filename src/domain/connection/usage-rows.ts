// The usage rows of a connection or delegation (their codec, issue 29): written by the connection
// aggregate's commits, read by its usage page (usage.ts) and checked by the scrub.
import type { UsageEntry } from '../decider.js';
import type { RecordPosition, TableWrite } from '../../log/log.js';
import { codec } from '../../reads/rows.js';

const USAGE_INDEX_DIGITS = 12;

/** A usage row as stored: the row, and the log record it was written with (issue 28). */
interface StoredUsage {
  row: Record<string, unknown>;
  at: [partition: number, seq: number];
}

const storedUsage = codec<[owner: string, index: number], StoredUsage>(
  'usage',
  (owner, index) => `${owner}/${String(index).padStart(USAGE_INDEX_DIGITS, '0')}`,
);

/** A connection's or delegation's usage log: keyed owner then position, so a page is one range. */
export const usageRows = {
  key: storedUsage.key,
  read: (key: string, bytes: Uint8Array) => storedUsage.read(key, bytes).row,
  /** The log record the row was written with. */
  position(key: string, bytes: Uint8Array): RecordPosition {
    const [partition, seq] = storedUsage.read(key, bytes).at;
    return { partition, seq };
  },
  entry(entry: UsageEntry, position: RecordPosition): TableWrite {
    const stored: StoredUsage = { row: entry.row, at: [position.partition, position.seq] };
    return storedUsage.write(usageRows.key(entry.owner, entry.index), stored);
  },
  range(owner: string) {
    return { start: `${owner}/`, end: `${owner}0` };
  },
};
