// A partition's records as a chain (issue 28): each record links to the CRC-32 of the one before
// it (record.ts), its seq follows the one before, and the last is the partition's head (rows.ts,
// headRows). A checksum per record finds a damaged record; the chain finds a missing one, taken
// from the middle (the next record no longer links) or from the end (the head names a record
// the log no longer holds). A start walks the chain from the partition's snapshot (fold.ts); the
// scrub and `path-node verify` walk all of it (scrub.ts). Each says what it found in the same
// words: where, why, and that the way back is a backup (P14).
import type { Log } from '../log/log.js';
import { ChecksumError, openRecord, recordCheck } from '../log/record.js';
import { headRows, type LogPosition } from '../reads/rows.js';

/** Where a partition's chain starts when it has no snapshot: before its first record. */
export const LOG_START: LogPosition = { seq: 0, check: 0 };

/** What is wrong with a record of the chain, said for an operator (no identifier in it). */
export interface ChainFault {
  /** What is damaged: a log record, the partition's snapshot, or its head. */
  item: 'record' | 'snapshot' | 'head';
  partition: number;
  seq: number;
  message: string;
}

const DAMAGED = Symbol('damaged');
const UNLINKED = Symbol('unlinked');
export type Decoded<T> = T | typeof DAMAGED | typeof UNLINKED;

/** A record taken: sound and next (its value), the snapshot's own record, or a fault. */
export type Taken<T> =
  { kind: 'record'; value: T } | { kind: 'anchor' } | { kind: 'fault'; fault: ChainFault };

const RESTORE =
  'The node will not serve state it cannot verify (P14); restore the data directory from the ' +
  'latest backup and start again';

/** What an operator reads when a record is damaged: where, why the node stops, what to do. */
export function damagedRecordMessage(partition: number, seq: number): string {
  return (
    `log record ${seq} of partition ${partition} fails its checksum: the data directory is ` +
    `damaged at rest (a commit is never half-written). ${RESTORE}`
  );
}

/** A record that does not follow the one before it: one between them is missing or replaced. */
export function unlinkedRecordMessage(partition: number, seq: number, previous: number): string {
  return (
    `log record ${seq} of partition ${partition} does not follow record ${previous} before it ` +
    `(the chain of records is broken): a record is missing or was replaced, the data ` +
    `directory is damaged at rest. ${RESTORE}`
  );
}

/** A head that names another record than the log's last: records taken off its end. */
export function headMessage(partition: number, head: LogPosition | null, last: number): string {
  const named = head === null ? 'no record' : `record ${head.seq}`;
  return (
    `the head of partition ${partition} names ${named}, but its log ends at record ${last} ` +
    `(as the head recorded it, or not at all): records are missing from the log, the data ` +
    `directory is damaged at rest. ${RESTORE}`
  );
}

/** A snapshot whose record the log does not hold as it was. */
export function snapshotMessage(partition: number, seq: number): string {
  return (
    `the snapshot of partition ${partition} is the fold up to log record ${seq}, which the log ` +
    `does not hold as the snapshot names it: the data directory is damaged at rest. ${RESTORE}`
  );
}

/**
 * Follows one partition's records, read in order through `Log.replay` with `decode` as its
 * decoder, each handed to `take` with its seq. From a snapshot's position it is anchored: the
 * walk starts at the snapshot's own record, which must be there with the CRC-32 the snapshot
 * names (it is not replayed), and every record after it must link on. A fault found is said
 * once; the walk then takes up the chain again from the record after it (resync), so that one
 * damaged record is one fault, whatever it is that was damaged.
 */
export class Chain<T> {
  /** The last record taken: its seq and CRC-32. */
  readonly at: LogPosition;
  private anchor: LogPosition | null;
  private readonly read: (value: Buffer) => T;
  /** The CRC-32 of the record just decoded, taken as the chain's once `take` has judged it. */
  private next = 0;
  /** The record before was a fault: the next one is not asked to link to it. */
  private resync = false;

  constructor(
    readonly partition: number,
    from: LogPosition,
    options: { anchored: boolean; read: (value: Buffer) => T },
  ) {
    this.at = { seq: from.seq, check: from.check };
    this.anchor = options.anchored && from.seq > 0 ? { ...from } : null;
    this.read = options.read;
  }

  /** Where `Log.replay` starts: after the anchor's record's predecessor, or after `from`. */
  get after(): number {
    return this.anchor === null ? this.at.seq : this.anchor.seq - 1;
  }

  /** The decoder for `Log.replay`: a record's value, or what is wrong with its bytes. */
  readonly decode = (bytes: Buffer): Decoded<T> => {
    let opened;
    try {
      opened = openRecord(bytes);
    } catch (error) {
      if (!(error instanceof ChecksumError)) throw error;
      this.next = bytes.length >= 4 ? recordCheck(bytes) : 0;
      return DAMAGED;
    }
    this.next = recordCheck(bytes);
    if (this.anchor === null && !this.resync && opened.link !== this.at.check) return UNLINKED;
    return this.read(opened.value);
  };

  /**
   * Takes record `seq` as decoded: its value when it is sound and comes next, the anchor (not
   * replayed: the snapshot holds its fold), or the fault. The chain moves on past it either way.
   */
  take(seq: number, decoded: Decoded<T>): Taken<T> {
    const taken = this.judge(seq, decoded);
    this.resync = taken.kind === 'fault';
    this.at.seq = seq;
    this.at.check = this.next;
    return taken;
  }

  private judge(seq: number, decoded: Decoded<T>): Taken<T> {
    const { partition } = this;
    const fault = (item: ChainFault['item'], at: number, message: string): Taken<T> => ({
      kind: 'fault',
      fault: { item, partition, seq: at, message },
    });
    const anchor = this.anchor;
    this.anchor = null;
    if (decoded === DAMAGED) return fault('record', seq, damagedRecordMessage(partition, seq));
    if (anchor !== null) {
      if (seq === anchor.seq && this.next === anchor.check) return { kind: 'anchor' };
      return fault('snapshot', anchor.seq, snapshotMessage(partition, anchor.seq));
    }
    if (decoded === UNLINKED || seq !== this.at.seq + 1)
      return fault('record', seq, unlinkedRecordMessage(partition, seq, this.at.seq));
    return { kind: 'record', value: decoded };
  }

  /**
   * The fault left once every record is taken: a snapshot whose record the log never gave, or a
   * head (null: none stored) other than the last record taken.
   */
  end(head: LogPosition | null): ChainFault | null {
    const { partition } = this;
    if (this.anchor !== null) {
      const seq = this.anchor.seq;
      return { item: 'snapshot', partition, seq, message: snapshotMessage(partition, seq) };
    }
    const matches =
      head === null ? this.at.seq === 0 : head.seq === this.at.seq && head.check === this.at.check;
    if (matches) return null;
    const message = headMessage(partition, head, this.at.seq);
    return { item: 'head', partition, seq: head?.seq ?? 0, message };
  }
}

/** A partition's head as its row holds it (null: none); a damaged row throws DamagedRowError. */
export function headOf(log: Log, p: number): LogPosition | null {
  const key = headRows.key(p);
  const bytes = log.get('heads', key);
  return bytes === undefined ? null : headRows.read(key, bytes);
}
