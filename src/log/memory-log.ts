// An in-memory log for tests of the runtime. It keeps "committed" and "flushed" apart the way
// a disk does: `append` resolves only when a flush covers the records, and `crash()` drops
// everything committed but not yet flushed (simulated power loss). `tearTail` and `corrupt`
// damage records at rest; `remove` and `replace` take one out or put another in its place.
import {
  ReadsInPlace,
  type Log,
  type LogEntry,
  type ScanRange,
  type StoredRecord,
  type Table,
  type TableWrite,
} from './log.js';

interface Pending {
  entries: LogEntry[];
  writes: TableWrite[];
  resolve: () => void;
}

export class MemoryLog extends ReadsInPlace implements Log {
  private readonly records = new Map<number, StoredRecord[]>();
  private readonly snapshots = new Map<number, Buffer>();
  private readonly tables: Record<Table, Map<string, Buffer>> = {
    views: new Map(),
    outbox: new Map(),
    idempotency: new Map(),
    idempotency_order: new Map(),
    directory: new Map(),
    deliveries: new Map(),
    journal: new Map(),
    usage: new Map(),
    feed: new Map(),
    feed_state: new Map(),
    replica: new Map(),
    cursors: new Map(),
    replay: new Map(),
    followups: new Map(),
    event_expiry: new Map(),
    resends: new Map(),
    heads: new Map(),
    deadlines: new Map(),
    states: new Map(),
    directory_changes: new Map(),
  };
  private pending: Pending[] = [];
  /** Bumped by every change to the tables: peeks read them as they are. */
  private version = 0;

  /** With autoFlush the log flushes on the next macrotask, like a prompt group commit. */
  constructor(private readonly options: { autoFlush: boolean } = { autoFlush: true }) {
    super();
  }

  append(entries: readonly LogEntry[], writes: readonly TableWrite[]): Promise<void> {
    return new Promise((resolve) => {
      this.pending.push({ entries: [...entries], writes: [...writes], resolve });
      if (this.options.autoFlush) setImmediate(() => this.flush());
    });
  }

  /** Makes every committed write durable and resolves their appends. */
  flush(): void {
    const batch = this.pending;
    this.pending = [];
    this.version++;
    for (const p of batch) {
      for (const e of p.entries) {
        const list = this.records.get(e.partition) ?? [];
        list.push({ seq: e.seq, bytes: e.bytes });
        this.records.set(e.partition, list);
      }
      for (const w of p.writes) {
        if (w.bytes === null) this.tables[w.table].delete(w.key);
        else this.tables[w.table].set(w.key, w.bytes);
      }
    }
    for (const p of batch) p.resolve();
  }

  /** Power loss: unflushed writes vanish and their appends never resolve. */
  crash(): void {
    this.pending = [];
  }

  pendingCount(): number {
    return this.pending.length;
  }

  recordCount(): number {
    let n = 0;
    for (const list of this.records.values()) n += list.length;
    return n;
  }

  tearTail(partition: number): void {
    const list = this.records.get(partition);
    const last = list?.[list.length - 1];
    if (last === undefined) throw new Error('partition is empty');
    last.bytes = flipLastByte(last.bytes);
  }

  corrupt(partition: number, seq: number): void {
    const record = this.records.get(partition)?.find((r) => r.seq === seq);
    if (record === undefined) throw new Error('no such record');
    record.bytes = flipLastByte(record.bytes);
  }

  /** Takes a record out of the log, leaving its commit's rows (the head among them) as they are. */
  remove(partition: number, seq: number): void {
    const list = this.records.get(partition) ?? [];
    const at = list.findIndex((r) => r.seq === seq);
    if (at < 0) throw new Error('no such record');
    list.splice(at, 1);
  }

  /** Replaces a record's bytes (a record from elsewhere put in its place). */
  replace(partition: number, seq: number, bytes: Buffer): void {
    const record = this.records.get(partition)?.find((r) => r.seq === seq);
    if (record === undefined) throw new Error('no such record');
    record.bytes = bytes;
  }

  refresh(): void {}

  get(table: Table, key: string): Buffer | undefined {
    return this.tables[table].get(key);
  }

  peekVersion(): number {
    return this.version;
  }

  peek<T>(table: Table, key: string, use: (bytes: Buffer, key: string) => T): T | undefined {
    const bytes = this.tables[table].get(key);
    return bytes === undefined ? undefined : use(bytes, key);
  }

  async write(writes: readonly TableWrite[]): Promise<void> {
    this.version++;
    for (const w of writes) {
      if (w.bytes === null) this.tables[w.table].delete(w.key);
      else this.tables[w.table].set(w.key, w.bytes);
    }
  }

  *scan(table: Table, range: ScanRange = {}): Iterable<{ key: string; bytes: Buffer }> {
    const rows = [...this.tables[table]]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .filter(
        ([key]) =>
          (range.start === undefined || key >= range.start) &&
          (range.end === undefined || key < range.end),
      );
    if (range.reverse) rows.reverse();
    for (const [key, bytes] of rows.slice(0, range.limit ?? rows.length)) yield { key, bytes };
  }

  *read(partition: number, afterSeq: number): Iterable<StoredRecord> {
    for (const r of this.records.get(partition) ?? []) if (r.seq > afterSeq) yield r;
  }

  lastSeq(partition: number): number {
    return this.records.get(partition)?.at(-1)?.seq ?? 0;
  }

  readSnapshot(partition: number): Buffer | undefined {
    return this.snapshots.get(partition);
  }

  async writeSnapshot(partition: number, bytes: Buffer): Promise<void> {
    this.snapshots.set(partition, bytes);
  }

  async close(): Promise<void> {}
}

function flipLastByte(bytes: Buffer): Buffer {
  const damaged = Buffer.from(bytes);
  damaged[damaged.length - 1] = damaged[damaged.length - 1]! ^ 0xff;
  return damaged;
}
