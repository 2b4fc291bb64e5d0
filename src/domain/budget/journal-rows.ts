// The lookup journal the budget aggregate writes (its codec, issue 29): one row per charged call.
import type { JournalCall, JournalEntry } from '../decider.js';
import type { TableWrite } from '../../log/log.js';
import { framePieces, packValue } from '../../log/record.js';
import { codec } from '../../reads/rows.js';
import { packedKeysMsgpack } from './journal-keys.js';

/** The lookup journal: keyed by time first, so retention deletes whole calls as one range. */
export const journalRows = {
  ...codec<[at: string, requester: string, id: string], JournalEntry>(
    'journal',
    (at, requester, id) => `${at}/${requester}/${id}`,
  ),
  /**
   * The row of a call: the frame of its JournalEntry, byte for byte. The entry is encoded with
   * no keys, and its last byte (the empty list) gives way to the keys spelled out from their
   * packing, which spares the worker a list of [type, hash, found] per key.
   */
  entry(call: JournalCall, id: string): TableWrite {
    const empty: JournalEntry = { requester: call.requester, at: call.at, keys: [] };
    const head = packValue(empty);
    const bytes = framePieces([head.subarray(0, -1), packedKeysMsgpack(call.keys)]);
    return { table: 'journal', key: journalRows.key(call.at, call.requester, id), bytes };
  },
};
