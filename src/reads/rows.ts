// One codec per stored row shape: the key layout and the bytes of every row that one part of
// the node writes and another reads. A row is framed with its checksum (record.ts) and read
// back through `unframeRow`, so damage names its table and key (P14).
import type {
  DirectoryRow,
  FollowUp,
  JournalCall,
  JournalEntry,
  OutboxEvent,
  UsageEntry,
} from '../domain/decider.js';
import type { Caller, ReplayMark } from '../actors/types.js';
import type { RecordPosition, Table, TableWrite } from '../log/log.js';
import { frame, framePieces, packValue, unframeRow } from '../log/record.js';
import { packedKeysMsgpack } from '../domain/budget/journal-keys.js';

interface Codec<K extends unknown[], V> {
  table: Table;
  key(...parts: K): string;
  write(key: string, value: V): TableWrite;
  read(key: string, bytes: Uint8Array): V;
}

function codec<K extends unknown[], V>(table: Table, key: (...parts: K) => string): Codec<K, V> {
  return {
    table,
    key,
    write: (k, value) => ({ table, key: k, bytes: frame(value) }),
    read: (k, bytes) => unframeRow<V>(table, k, bytes),
  };
}

/** A stored answer for an idempotency key (P7), scoped to the calling member. */
export interface IdempotencyEntry {
  scope: string;
  requestHash: string;
  status: number;
  body: string;
  signed: boolean;
  at: number;
}

export const idempotencyRows = codec<[scope: string], IdempotencyEntry>(
  'idempotency',
  (scope) => scope,
);

/** The digits of a time (ms) in a key, so that keys sort as their times do. */
const EXPIRY_DIGITS = 15;
const timeKey = (at: number) => String(at).padStart(EXPIRY_DIGITS, '0');

/**
 * The idempotency entries in the order they were stored: one row per entry, keyed by its `at`
 * and written in the entry's commit, so that forgetting the expired ones reads only them (not
 * the whole table). Keyed by the time stored, not the time of expiry: the retention is a limit
 * that may change from one run to the next.
 */
export const idempotencyOrderRows = {
  ...codec<[at: number, scope: string], Record<string, never>>(
    'idempotency_order',
    (at, scope) => `${timeKey(at)}:${scope}`,
  ),
  entry(at: number, scope: string): TableWrite {
    return idempotencyOrderRows.write(idempotencyOrderRows.key(at, scope), {});
  },
  /** Every row of an entry stored before `cutoff`. */
  before(cutoff: number) {
    return { end: `${timeKey(cutoff)}:` };
  },
  scopeOf(key: string): string {
    return key.slice(EXPIRY_DIGITS + 1);
  },
  /**
   * Present once every entry of the table has its row (data directories written before the rows
   * existed are indexed once, housekeeping.ts). It sorts after every time key: no range of
   * `before` reaches it.
   */
  indexedKey: '~indexed',
};

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

export const outboxRows = codec<[id: string], OutboxEvent>('outbox', (id) => id);

/** Remembered requests (P5): keyed by the time they may be forgotten (see http/auth.ts). */
export const replayRows = {
  ...codec<[key: string], { c: string }>('replay', (key) => key),
  mark(mark: ReplayMark): TableWrite {
    return { table: 'replay', key: mark.key, bytes: frame({ c: mark.keyId }) };
  },
  /** The mark as a claim (log.ts, TableWrite.until): the request's alone until it is forgotten. */
  claim(mark: ReplayMark): TableWrite & { bytes: Buffer; until: number } {
    return { table: 'replay', key: mark.key, bytes: frame({ c: mark.keyId }), until: mark.until };
  },
};

/** A follow-up command written by a commit (domain/decider.ts), until its aggregate decides it. */
export interface StoredFollowUp extends FollowUp {
  caller: Caller | null;
}

export const followUpRows = codec<[id: string], StoredFollowUp>('followups', (id) => id);

/** One delivery target of an event, and where its delivery stands (P11). */
export interface TargetState {
  url: string;
  attempts: number;
  next_at: number;
  outcome: 'delivered' | 'abandoned' | null;
  last_status: number | null;
  /** When the outcome was reached (ms); absent on rows written before events were kept. */
  finished_at?: number;
  /** Where its retry window starts when not at the event's creation: a resend (ms). */
  since?: number;
}

export const deliveryRows = codec<[id: string], TargetState[]>('deliveries', (id) => id);

/**
 * Finished events are kept for the retention, so an operator can list and resend them; keyed by
 * the time they may be forgotten, so the sweep deletes whole ranges.
 */
export const eventExpiryRows = {
  ...codec<[at: number, id: string], Record<string, never>>(
    'event_expiry',
    (at, id) => `${timeKey(at)}:${id}`,
  ),
  /** Every row whose time is at or before `now`. */
  due(now: number) {
    return { end: `${timeKey(now)}:~` };
  },
  idOf(key: string): string {
    return key.slice(EXPIRY_DIGITS + 1);
  },
};

/** Resends asked for with the command line, taken up by the running node. */
export const resendRows = codec<[id: string], { at: number }>('resends', (id) => id);

/** Where a partition's log ends: the seq of its last record and that record's CRC-32. */
export interface LogPosition {
  seq: number;
  check: number;
}

const PARTITION_DIGITS = 3;

/**
 * Each partition's head (log.ts, `heads`), written by the shard in the commit of every append:
 * a start compares it with the partition's last record, so a tail taken off the log is found
 * (issue 28; a record from the middle breaks the chain instead, record.ts).
 */
export const headRows = {
  ...codec<[partition: number], LogPosition>('heads', (p) =>
    String(p).padStart(PARTITION_DIGITS, '0'),
  ),
  head(partition: number, position: LogPosition): TableWrite {
    return headRows.write(headRows.key(partition), { seq: position.seq, check: position.check });
  },
};
