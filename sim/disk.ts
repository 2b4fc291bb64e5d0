// The simulated storage under the node: one store (the LMDB file of the embedded node, or the
// cluster's PostgreSQL) and, per running instance, a connection to it (`SimLog`, the node's Log
// and Reads ports). Every fault the seed chooses happens here:
// - a commit is durable only once the disk flushes; a power loss drops what was not flushed, and
//   the appends it held never answer;
// - damage at rest (a record's bytes flipped, its tail torn, a record put in another's place),
//   found by the next fold or never served;
// - a damaged read (the bytes flipped on their way, the stored ones intact);
// - cluster mode: the database goes away and comes back, an append fails before its commit or
//   after it (in doubt), a paused instance's statements wait until it runs again; the database's
//   own checks are kept as path_append keeps them (postgres-schema.ts): the lease fence (P22),
//   the records following on (PN002) and the claims (PN003).
import { MemoryLog } from '../src/log/memory-log.js';
import {
  ClaimTakenError,
  NotFollowingError,
  NotHeldError,
  PARTITION_COUNT,
  ReadsInPlace,
  type Holding,
  type Log,
  type LogEntry,
  type ScanRange,
  type StoredRecord,
  type Table,
  type TableWrite,
} from '../src/log/log.js';
import { UnavailableError } from '../src/log/unavailable.js';
import { planted } from '../src/actors/planted.js';
import { snapshotSeq } from '../src/actors/snapshot.js';

/** One damage at rest, and how to undo it once the node has been seen to refuse it. */

/**
 * The simulated database's refusal while it is down, made without a stack: the node's retries
 * through an outage of simulated hours are hundreds of thousands, and a stack is most of each.
 */
export function unanswered(): UnavailableError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new UnavailableError('the database does not answer');
  } finally {
    Error.stackTraceLimit = limit;
  }
}

export interface Damage {
  kind: 'flipped' | 'torn' | 'misdirected' | 'snapshot';
  partition: number;
  seq: number;
  original: Buffer;
}

interface Commit {
  /** Answered in doubt (UnavailableError) once flushed, instead of resolved. */
  doubted: boolean;
  resolve: () => void;
  reject: (error: unknown) => void;
  /** How to take the commit back out of the store, should the power fail before its flush. */
  undo: { records: [partition: number, seq: number][]; rows: TableWrite[] };
}

/** What the store's faults depend on: the run's chance and the clock of the database. */
export interface DiskChance {
  chance(p: number): boolean;
  int(from: number, to: number): number;
}

export class SimDisk {
  /**
   * What readers see: every commit, from the moment it is made (LMDB's readers see a commit
   * before its flush; PostgreSQL's commit is its flush). Power loss takes back what was not
   * flushed (embedded mode).
   */
  readonly store = new MemoryLog({ autoFlush: false });
  /** Committed and not yet answered, in commit order: in embedded mode, not yet durable. */
  private committed: Commit[] = [];
  /** Per partition, the epoch of its lease (cluster mode's leases table; 0: none yet). */
  readonly leaseEpochs: bigint[] = new Array<bigint>(PARTITION_COUNT).fill(0n);
  /** Cluster mode: the database does not answer. */
  down = false;
  /** Per claimed row, until when its claim holds (table/key). */
  private readonly claims = new Map<string, number>();

  constructor(
    readonly cluster: boolean,
    private readonly chance: DiskChance,
    /** The database's clock (the world's). */
    readonly now: () => number,
  ) {}

  /**
   * A connection for one running instance (its `holding`, in cluster mode), or for the
   * simulator's own look at the store (`observer`: it reads whether the database answers or not).
   */
  connect(holding: Holding | null, observer = false): SimLog {
    return new SimLog(this, holding, observer);
  }

  /** The seq the next record of `p` must take. */
  private nextSeq(p: number): number {
    return this.store.lastSeq(p) + 1;
  }

  /** The database's checks of one append (path_append), or null where it commits. */
  refusal(holding: Holding | null, entries: readonly LogEntry[], writes: readonly TableWrite[]) {
    if (!this.cluster) return null;
    const partitions = [...new Set(entries.map((e) => e.partition))];
    if (holding !== null && !planted('skip-held-check'))
      for (const p of partitions)
        if (holding.epochs[p] !== this.leaseEpochs[p] || holding.epochs[p] === 0n)
          return new NotHeldError(`partition ${p} is held at another epoch`);
    for (const p of partitions) {
      const first = entries.find((e) => e.partition === p)!;
      if (first.seq !== this.nextSeq(p)) return new NotFollowingError(`PN002 partition ${p}`);
    }
    const now = this.now();
    for (const w of [...writes].sort((a, b) => (a.key < b.key ? -1 : 1))) {
      if (w.until === undefined) continue;
      const held = this.claimHeld(w.table, w.key);
      // A claim whose own time is past is refused like a held one (schema version 4).
      if (w.until <= now || (held !== undefined && held > now))
        return new ClaimTakenError(w.table, w.key);
    }
    return null;
  }

  /**
   * A claim on its own (deployment.ts, claimedInCommits): written, and true, where its key holds
   * no claim still in force; false, nothing written, where another holds it.
   */
  claim(write: TableWrite & { until: number }): boolean {
    const held = this.claimHeld(write.table, write.key);
    if (held !== undefined && held > this.now()) return false;
    void this.store.write([write]);
    this.claims.set(`${write.table}/${write.key}`, write.until);
    return true;
  }

  /** Until when a row's claim holds: a row written without one holds for good. */
  private claimHeld(table: Table, key: string): number | undefined {
    if (this.store.get(table, key) === undefined) return undefined;
    return this.claims.get(`${table}/${key}`) ?? Infinity;
  }

  /**
   * Makes a commit: seen by readers at once, answered at the next flush. In embedded mode it is
   * durable only then; the cluster's database has made it durable before it answers.
   */
  commit(entries: readonly LogEntry[], writes: readonly TableWrite[], doubted: boolean) {
    const undo: Commit['undo'] = {
      records: entries.map((e) => [e.partition, e.seq]),
      rows: writes.map((w) => ({
        table: w.table,
        key: w.key,
        bytes: this.store.get(w.table, w.key) ?? null,
      })),
    };
    void this.store.append(entries, writes);
    this.store.flush();
    for (const w of writes)
      if (w.until !== undefined) this.claims.set(`${w.table}/${w.key}`, w.until);
    const answered = new Promise<void>((resolve, reject) => {
      this.committed.push({
        doubted,
        resolve,
        reject,
        undo: this.cluster ? { records: [], rows: [] } : undo,
      });
    });
    for (const hear of this.commits) hear(writes, answered);
    return answered;
  }

  /**
   * Told of every commit as it is made, with its answer: the parts that hear of commits (the
   * notes the cluster's database sends, webhook delivery's new events).
   */
  readonly commits: ((writes: readonly TableWrite[], answered: Promise<void>) => void)[] = [];

  /** Feed entries written over with other bytes (P2: a sequence says one thing for good). */
  readonly rewrites: string[] = [];

  /** Rows written outside any record, durable at once; a feed entry is never written over. */
  write(writes: readonly TableWrite[]): Promise<void> {
    for (const w of writes) {
      if (w.table !== 'feed') continue;
      const before = this.store.get('feed', w.key);
      if (before !== undefined && (w.bytes === null || !before.equals(w.bytes)))
        this.rewrites.push(w.key);
    }
    return this.store.write(writes);
  }

  /** Commits waiting for a flush. */
  get unflushed(): number {
    return this.committed.length;
  }

  /** Makes every commit so far durable and answers its append. */
  flush(): void {
    const batch = this.committed;
    this.committed = [];
    for (const c of batch)
      if (c.doubted) c.reject(new UnavailableError('the connection was lost after the commit'));
      else c.resolve();
  }

  /**
   * Power loss: in embedded mode what was committed and not flushed is gone (taken back out of
   * the store, last first); the appends of all of it never answer.
   */
  powerLoss(): number {
    const lost = this.committed;
    this.committed = [];
    for (const c of [...lost].reverse()) {
      for (const [partition, seq] of c.undo.records) this.store.remove(partition, seq);
      void this.store.write(c.undo.rows);
    }
    return this.cluster ? 0 : lost.length;
  }

  /** Partitions holding at least one durable record. */
  writtenPartitions(): number[] {
    const ps: number[] = [];
    for (let p = 0; p < PARTITION_COUNT; p++) if (this.store.lastSeq(p) > 0) ps.push(p);
    return ps;
  }

  /**
   * Damages, as the seed says, one durable record a start reads (the snapshot's own and those
   * after it; older ones are the scrub's, scrub.ts), or a snapshot: null where there is none.
   */
  damage(kind: Damage['kind'], pick: (items: readonly number[]) => number): Damage | null {
    const written = this.writtenPartitions();
    if (kind === 'snapshot') {
      const held = written.filter((p) => this.store.readSnapshot(p) !== undefined);
      if (held.length === 0) return null;
      const partition = pick(held);
      const original = this.store.readSnapshot(partition)!;
      const damaged = Buffer.from(original);
      damaged[damaged.length - 1] = damaged[damaged.length - 1]! ^ 0x01;
      void this.store.writeSnapshot(partition, damaged);
      return { kind, partition, seq: 0, original };
    }
    if (written.length === 0) return null;
    const partition = pick(written);
    const last = this.store.lastSeq(partition);
    const snapshot = this.store.readSnapshot(partition);
    const from = snapshot === undefined ? 1 : snapshotSeq(snapshot);
    const seqs = [...this.store.read(partition, from - 1)].map((r) => r.seq);
    if (seqs.length === 0) return null;
    const seq = kind === 'torn' ? last : pick(seqs);
    const original = [...this.store.read(partition, seq - 1)][0]!.bytes;
    if (kind === 'torn')
      this.store.replace(partition, seq, original.subarray(0, original.length - 7));
    else if (kind === 'flipped') this.store.corrupt(partition, seq);
    else {
      // Another partition's record, or the same partition's earlier one, written in its place.
      const others = written.filter((p) => p !== partition);
      const from = others.length > 0 ? pick(others) : partition;
      const source = [...this.store.read(from, 0)][0]!;
      if (from === partition && source.seq === seq) return null;
      this.store.replace(partition, seq, source.bytes);
    }
    return { kind, partition, seq, original };
  }

  /** Puts a damaged record back as it was (a restore of the operator's backup). */
  repair(damage: Damage): void {
    if (damage.kind === 'snapshot')
      void this.store.writeSnapshot(damage.partition, damage.original);
    else this.store.replace(damage.partition, damage.seq, damage.original);
  }

  /** A fault of one append in cluster mode: before its commit, after it (in doubt), or none. */
  appendFault(): 'before' | 'after' | null {
    if (!this.cluster) return null;
    if (this.chance.chance(0.02)) return 'before';
    if (this.chance.chance(0.02)) return 'after';
    return null;
  }
}

/**
 * One instance's connection to the store: the node's Log. Once its instance is killed it answers
 * nothing (its appends never resolve, its reads fail); while its instance is paused its
 * statements wait, and run when it runs again.
 */
export class SimLog extends ReadsInPlace implements Log {
  dead = false;
  /** The next record read comes with its bytes damaged on the way (the stored ones intact). */
  damageNextRead = false;
  /** Records handed out damaged so far. */
  damagedReads = 0;
  private paused: (() => void)[] | null = null;

  constructor(
    private readonly disk: SimDisk,
    private readonly holding: Holding | null,
    private readonly observer: boolean,
  ) {
    super();
  }

  /** The bytes a read hands out: once armed, one record comes damaged. */
  private handOut(bytes: Buffer): Buffer {
    if (!this.damageNextRead) return bytes;
    this.damageNextRead = false;
    this.damagedReads++;
    const damaged = Buffer.from(bytes);
    damaged[damaged.length >> 1] = damaged[damaged.length >> 1]! ^ 0x40;
    return damaged;
  }

  pause(): void {
    this.paused ??= [];
  }

  resume(): void {
    const waiting = this.paused ?? [];
    this.paused = null;
    for (const run of waiting) run();
  }

  /** Reads fail while the database is away (cluster mode) or the instance is gone. */
  private reachable(): void {
    if (this.dead) throw new Error('the instance is gone');
    if (this.disk.down && !this.observer) throw unanswered();
  }

  /** A statement, run now or once the instance runs again; never, once it is gone. */
  statement<T>(run: () => Promise<T>): Promise<T> {
    if (this.dead) return new Promise<T>(() => undefined);
    if (this.paused === null) return run();
    return new Promise<T>((resolve, reject) => {
      this.paused!.push(() => {
        if (!this.dead) run().then(resolve, reject);
      });
    });
  }

  append(entries: readonly LogEntry[], writes: readonly TableWrite[]): Promise<void> {
    return this.statement(async () => {
      this.reachable();
      const fault = this.disk.appendFault();
      if (fault === 'before')
        throw new UnavailableError('the connection was lost before the commit');
      const refused = this.disk.refusal(this.holding, entries, writes);
      if (refused !== null) throw refused;
      return this.disk.commit(entries, writes, fault === 'after');
    });
  }

  write(writes: readonly TableWrite[]): Promise<void> {
    return this.statement(async () => {
      this.reachable();
      return this.disk.write(writes);
    });
  }

  /**
   * Rows written only while this instance holds `partition` (postgres-log.ts): refused at once
   * where it holds none, and by the database where its lease moved on.
   */
  writeHolding(partition: number, writes: readonly TableWrite[], madeAt?: bigint): Promise<void> {
    return this.statement(async () => {
      this.reachable();
      const epoch = this.holding?.epochs[partition] ?? 0n;
      if (epoch === 0n) throw new NotHeldError(`partition ${partition} is not held here`);
      if (madeAt !== undefined && epoch !== madeAt)
        throw new NotHeldError(`partition ${partition} is held at another epoch than the rows'`);
      if (epoch !== this.disk.leaseEpochs[partition] && !planted('skip-held-check'))
        throw new NotHeldError(`partition ${partition} is held at another epoch`);
      return this.disk.write(writes);
    });
  }

  /** A claim on its own, atomic in the store (SimDisk.claim). */
  claim(write: TableWrite & { until: number }): Promise<boolean> {
    return this.statement(async () => {
      this.reachable();
      return this.disk.claim(write);
    });
  }

  writeSnapshot(partition: number, bytes: Buffer): Promise<void> {
    return this.statement(async () => {
      this.reachable();
      if (
        this.holding !== null &&
        this.holding.epochs[partition] !== this.disk.leaseEpochs[partition]
      )
        throw new NotHeldError(`partition ${partition} is held at another epoch`);
      return this.disk.store.writeSnapshot(partition, bytes);
    });
  }

  refresh(): void {}

  peekVersion(): number {
    return this.disk.store.peekVersion();
  }

  peek<T>(table: Table, key: string, use: (bytes: Buffer, key: string) => T): T | undefined {
    this.reachable();
    return this.disk.store.peek(table, key, use);
  }

  get(table: Table, key: string): Buffer | undefined {
    this.reachable();
    return this.disk.store.get(table, key);
  }

  scan(table: Table, range?: ScanRange): Iterable<{ key: string; bytes: Buffer }> {
    this.reachable();
    return this.disk.store.scan(table, range);
  }

  *read(partition: number, afterSeq: number): Iterable<StoredRecord> {
    this.reachable();
    for (const r of this.disk.store.read(partition, afterSeq))
      yield { seq: r.seq, bytes: this.handOut(r.bytes) };
  }

  lastSeq(partition: number): number {
    this.reachable();
    return this.disk.store.lastSeq(partition);
  }

  readSnapshot(partition: number): Buffer | undefined {
    this.reachable();
    return this.disk.store.readSnapshot(partition);
  }

  async close(): Promise<void> {}
}
