// One codec per stored row shape: the key layout and the bytes of every row that one part of
// the node writes and another reads. A row is framed with its checksum (record.ts) and read
// back through `unframeRow`, so damage names its table and key (P14). Here are the runtime's
// rows (idempotency answers, replay marks, the outbox, follow-ups, deliveries, heads); an
// aggregate's own rows have their codecs in its folder (issue 29): the directory rows the subject
// writes (domain/subject/directory-rows.ts), the usage rows of a connection
// (domain/connection/usage-rows.ts), the budget's lookup journal (domain/budget/journal-rows.ts).
import type { FollowUp, OutboxEvent } from '../domain/decider.js';
import type { Caller, ReplayMark } from '../actors/types.js';
import type { Table, TableWrite } from '../log/log.js';
import { frame, unframeRow } from '../log/record.js';

/** The key layout of a table and its rows' framed bytes. */
export interface Codec<K extends unknown[], V> {
  table: Table;
  key(...parts: K): string;
  write(key: string, value: V): TableWrite;
  read(key: string, bytes: Uint8Array): V;
}

export function codec<K extends unknown[], V>(
  table: Table,
  key: (...parts: K) => string,
): Codec<K, V> {
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

export const outboxRows = codec<[id: string], OutboxEvent>('outbox', (id) => id);

const UNTIL_HEX_DIGITS = 12;

/** Remembered requests (P5): keyed by the time they may be forgotten (see http/auth.ts). */
export const replayRows = {
  ...codec<[key: string], { c: string }>('replay', (key) => key),
  /** The key of a request kept as a row until `until` (ms), by its digest. */
  keyOf(until: number, digest: string): string {
    return `${until.toString(16).padStart(UNTIL_HEX_DIGITS, '0')}/${digest}`;
  },
  /** The key that sorts before every row still to keep at `now`. */
  cutoff(now: number): string {
    return now.toString(16).padStart(UNTIL_HEX_DIGITS, '0');
  },
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

/**
 * Each aggregate's next deadline (log.ts, `deadlines`; issue 33), written by the shard in the
 * commit that sets, moves or clears it: keyed by partition, then time, then aggregate, so that a
 * partition's deadlines due before a time are one range, in the order they fall due. Its value
 * names the aggregate's type, which a wake-up of an aggregate not in memory is routed by.
 */
export const deadlineRows = {
  ...codec<[partition: number, at: number, key: string], { a: string }>(
    'deadlines',
    (partition, at, key) =>
      `${String(partition).padStart(PARTITION_DIGITS, '0')}:${timeKey(at)}:${key}`,
  ),
  /** The row of `key`'s deadline `at`, in `partition`. */
  row(partition: number, at: number, key: string, type: string): TableWrite {
    return deadlineRows.write(deadlineRows.key(partition, at, key), { a: type });
  },
  /** The deletion of that row. */
  removal(partition: number, at: number, key: string): TableWrite {
    return { table: 'deadlines', key: deadlineRows.key(partition, at, key), bytes: null };
  },
  /** Every row of `partition`. */
  of(partition: number) {
    const prefix = String(partition).padStart(PARTITION_DIGITS, '0');
    return { start: `${prefix}:`, end: `${prefix};` };
  },
  /** The time and the aggregate a row's key names. */
  parse(key: string): { at: number; key: string } {
    const at = PARTITION_DIGITS + 1;
    return {
      at: Number(key.slice(at, at + EXPIRY_DIGITS)),
      key: key.slice(at + EXPIRY_DIGITS + 1),
    };
  },
};

/**
 * An aggregate's state as its last commit left it (log.ts, `states`; issue 33): its type, the
 * seq of that commit's last record of it, and the state. Keyed by the aggregate.
 */
export interface StateRow {
  a: string;
  q: number;
  s: unknown;
}

export const stateRows = codec<[key: string], StateRow>('states', (key) => key);

/** The digits of a record's seq in a key, so that keys sort as their seqs do. */
const SEQ_DIGITS = 16;

/**
 * The keys a commit changed in the directory (log.ts, `directory_changes`; issue 34), written by
 * the shard in that commit, keyed by its partition and seq, the hashes alone (never a clear
 * identifier). Beside them, one row (`image`) names the directory image in use and the one
 * being written (directory/checkpoint.ts): a start takes only an image that row names.
 */
export const directoryChangeRows = {
  ...codec<[partition: number, seq: number], { h: string[] }>(
    'directory_changes',
    (partition, seq) =>
      `${String(partition).padStart(PARTITION_DIGITS, '0')}:` +
      String(seq).padStart(SEQ_DIGITS, '0'),
  ),
  /** The row of a commit that changed the rows of these keys. */
  row(position: { partition: number; seq: number }, hashes: readonly string[]): TableWrite {
    const key = directoryChangeRows.key(position.partition, position.seq);
    return directoryChangeRows.write(key, { h: [...new Set(hashes)] });
  },
  /** The rows of `partition` after `seq`, or (`through`) up to and with it. */
  after(partition: number, seq: number) {
    const prefix = String(partition).padStart(PARTITION_DIGITS, '0');
    return { start: `${directoryChangeRows.key(partition, seq)}\u0000`, end: `${prefix};` };
  },
  through(partition: number, seq: number) {
    const prefix = String(partition).padStart(PARTITION_DIGITS, '0');
    return { start: `${prefix}:`, end: `${directoryChangeRows.key(partition, seq)}\u0000` };
  },
};

/**
 * The keys a page of a followed member's feed changed in its replica (`directory_changes`,
 * issue 34), written with the page's replica rows and cursor, keyed by the member and that
 * cursor: a start that takes an image reads again the replica keys of the pages after it.
 */
export const replicaChangeRows = {
  ...codec<[member: string, cursor: number], { h: string[] }>(
    'directory_changes',
    (member, cursor) => `r/${member}/${String(cursor).padStart(SEQ_DIGITS, '0')}`,
  ),
  row(member: string, cursor: number, hashes: readonly string[]): TableWrite {
    return replicaChangeRows.write(replicaChangeRows.key(member, cursor), { h: [...hashes] });
  },
  /** The rows of `member`'s pages after `cursor`, or (`through`) up to and with it. */
  after(member: string, cursor: number) {
    return { start: `${replicaChangeRows.key(member, cursor)}\u0000`, end: `r/${member}0` };
  },
  through(member: string, cursor: number) {
    return { start: `r/${member}/`, end: `${replicaChangeRows.key(member, cursor)}\u0000` };
  },
  /** Every member's rows. */
  all: { start: 'r/', end: 'r0' },
  /** The member a row's key names. */
  memberOf(key: string): string {
    return key.slice(2, key.lastIndexOf('/'));
  },
};

/** The `directory_changes` row naming the image in use (`current`) and the one being written. */
export interface ImageNames {
  current: string | null;
  pending: string | null;
}

export const IMAGE_NAMES_KEY = 'image';
export const imageNameRows = codec<[], ImageNames>('directory_changes', () => IMAGE_NAMES_KEY);
