// The directory rows the subject aggregate writes (its codec, issue 29): one row per registration
// of an identifier hash, keyed hash first, read by the lookup index (src/directory).
import type { DirectoryRow } from '../decider.js';
import type { TableWrite } from '../../log/log.js';
import { frame } from '../../log/record.js';
import { codec } from '../../reads/rows.js';

/** Directory rows are keyed hash first, so every registration of one key reads as one range. */
export interface DirectoryEntry {
  t: string;
  v: 'public' | 'network';
}

export const directoryRows = {
  ...codec<[hash: string, aggregateKey: string], DirectoryEntry>(
    'directory',
    (hash, key) => `${hash}/${key}`,
  ),
  /** The write a changed index row makes: a row with no visibility is removed. */
  change(row: DirectoryRow): TableWrite {
    const key = `${row.identifierHash}/${row.key}`;
    return row.visibility === null
      ? { table: 'directory', key, bytes: null }
      : { table: 'directory', key, bytes: frame({ t: row.identifierType, v: row.visibility }) };
  },
  /** Every row of one hash, as a scan range. */
  range(hash: string) {
    return { start: `${hash}/`, end: `${hash}0` };
  },
};
