// One shard of actors: the single writer for every aggregate of the partitions it owns.
// Each aggregate has a mailbox that runs one command at a time:
//   decide -> (evolve ahead, pure) -> append record + views + outbox + idempotency in one
//   commit -> await durable -> adopt the new state -> reply.
// Nobody, not even the next command of the same aggregate, sees a state before it is durable.
// Different aggregates proceed concurrently, so their appends share group commits.
import type { Clock } from '../clock.js';
import { errorBody, refusal, statusOf, type Refusal } from '../protocol/errors.js';
import type { SigningKey } from '../protocol/signing.js';
import type { ReferencePrefix } from '../protocol/ids.js';
import { ChecksumError, DamagedRowError, frame, unframe } from '../log/record.js';
import { partitionOf, type Log, type LogEntry, type TableWrite } from '../log/log.js';
import { decodeView, encodeView } from '../log/views.js';
import { Scheduler } from './scheduler.js';
import {
  isDecisionRefusal, type CommandResult, type Decider, type DirectoryRow, type IdempotencyEntry, type OutboxEvent,
  type Publication, type ReplayMark, type Reply, type RoutedCommand,
} from './types.js';

export interface ShardOptions {
  partitions: readonly number[];
  log: Log;
  deciders: readonly Decider<any, any>[];
  clock: Clock;
  member: string;
  signer: () => SigningKey;
  newId: (prefix: ReferencePrefix) => string;
  unseal?: (sealed: string) => string;
  /** Records appended to one partition between snapshots. */
  snapshotEveryRecords: number;
  /** Commands waiting in one aggregate's mailbox before new ones are refused (503). */
  mailboxDepthMax: number;
  /** Called when a durable append fails: the node cannot go on safely. */
  onFatal: (error: unknown) => void;
  /** Told what a time-driven command (a tick) committed: outbox events to deliver, index rows to apply. */
  onEffects?: (result: CommandResult) => void;
}

/** A log record: the events one command produced for one aggregate. */
interface LogRecord {
  a: string;
  k: string;
  e: unknown[];
  t: number;
}

interface SnapshotBody {
  seq: number;
  aggregates: [key: string, type: string, state: unknown][];
}

interface Job {
  routed: RoutedCommand;
  resolve: (result: CommandResult) => void;
  reject: (error: unknown) => void;
}

interface Slot {
  type: string;
  state: unknown;
  queue: Job[];
  busy: boolean;
}

/** Commands of one aggregate decided together and made durable in one write. */
const BATCH_COMMANDS_MAX = 256;

export class RecoveryError extends Error {
  override name = 'RecoveryError';
}

export interface RecoveryStats {
  snapshots: number;
  records: number;
  aggregates: number;
}

export class Shard {
  private readonly slots = new Map<number, Map<string, Slot>>();
  private readonly seq = new Map<number, number>();
  private readonly sinceSnapshot = new Map<number, number>();
  private readonly applied = new Map<number, Promise<void>>();
  /** Seq of the last record whose state was adopted, per partition. */
  private readonly adopted = new Map<number, number>();
  private readonly deciders = new Map<string, Decider<any, any>>();
  private readonly scheduler: Scheduler;
  private inFlight = 0;
  private idle: (() => void) | null = null;

  constructor(private readonly options: ShardOptions) {
    for (const d of options.deciders) this.deciders.set(d.type, d);
    for (const p of options.partitions) {
      this.slots.set(p, new Map());
      this.seq.set(p, 0);
      this.adopted.set(p, 0);
      this.sinceSnapshot.set(p, 0);
      this.applied.set(p, Promise.resolve());
    }
    this.scheduler = new Scheduler(options.clock, (key) => this.tick(key));
  }

  /** Rebuilds every owned partition from its snapshot and the records after it. */
  async recover(): Promise<RecoveryStats> {
    const stats: RecoveryStats = { snapshots: 0, records: 0, aggregates: 0 };
    for (const p of this.options.partitions) {
      const slots = this.slots.get(p)!;
      let last = 0;
      const snapshot = this.options.log.readSnapshot(p);
      if (snapshot !== undefined) {
        const body = this.unframeOrFail<SnapshotBody>(snapshot, `snapshot of partition ${p}`);
        for (const [key, type, state] of body.aggregates) slots.set(key, { type, state, queue: [], busy: false });
        last = body.seq;
        stats.snapshots++;
      }
      // Records are read one at a time (a partition's log is never held whole in memory). An
      // LMDB commit is atomic, so a record that fails its checksum, even the last one, is damage
      // at rest, not a torn write: dropping it would keep the rest of its commit (views, usage
      // rows, idempotent answers) and serve state that no record explains (P14).
      let replayed = 0;
      for (const { seq, bytes } of this.options.log.read(p, last)) {
        let record: LogRecord;
        try {
          record = unframe<LogRecord>(bytes);
        } catch (error) {
          if (!(error instanceof ChecksumError)) throw error;
          throw new RecoveryError(damagedRecordMessage(p, seq));
        }
        this.replay(slots, record);
        last = seq;
        replayed++;
      }
      stats.records += replayed;
      this.seq.set(p, last);
      this.adopted.set(p, last);
      // Records replayed since the snapshot count towards the next one (a shutdown writes it).
      this.sinceSnapshot.set(p, replayed);
      for (const [key, slot] of slots) this.scheduleFor(key, slot);
      stats.aggregates += slots.size;
    }
    return stats;
  }

  /** Runs a command on its aggregate's mailbox. */
  submit(routed: RoutedCommand): Promise<CommandResult> {
    const p = partitionOf(routed.key);
    const slots = this.slots.get(p);
    if (slots === undefined) throw new Error(`partition ${p} is not owned by this shard`);
    let slot = slots.get(routed.key);
    if (slot === undefined) {
      slot = { type: routed.aggregate, state: null, queue: [], busy: false };
      slots.set(routed.key, slot);
    }
    if (slot.queue.length >= this.options.mailboxDepthMax) {
      return Promise.resolve(refused(refusal('path.core.unavailable', 'too many commands are waiting for this object', { retry_after_seconds: 1 })));
    }
    return new Promise((resolve, reject) => {
      slot!.queue.push({ routed, resolve, reject });
      if (!slot!.busy) void this.run(routed.key, p, slot!);
    });
  }

  /** Resolves once no command is running or waiting. */
  drained(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => { this.idle = resolve; });
  }

  /** Writes a snapshot of every owned partition (on shutdown, so that the next start is quick). */
  async snapshotAll(): Promise<void> {
    for (const p of this.options.partitions) if (this.sinceSnapshot.get(p)! > 0) await this.snapshot(p);
  }

  stop(): void {
    this.scheduler.stop();
  }

  /** The state of one aggregate (tests and diagnostics). */
  stateOf(key: string): unknown {
    return this.slots.get(partitionOf(key))?.get(key)?.state ?? null;
  }

  /**
   * The mailbox loop. Commands waiting together are decided one after another against a draft
   * state, their records appended in one durable write, and all of them answered once it is
   * durable: a hot aggregate pays one commit per batch, not one per command, and nobody sees a
   * draft. A decider that reads committed views decides one command per batch, since the views
   * reflect only what is durable.
   */
  private async run(key: string, p: number, slot: Slot): Promise<void> {
    slot.busy = true;
    while (slot.queue.length > 0) {
      const decider = this.deciders.get(slot.queue[0]!.routed.aggregate);
      const take = decider?.reads === undefined ? Math.min(slot.queue.length, BATCH_COMMANDS_MAX) : 1;
      const jobs = slot.queue.splice(0, take);
      this.inFlight += jobs.length;
      try {
        const results = await this.executeBatch(key, p, slot, jobs.map((j) => j.routed));
        jobs.forEach((job, i) => job.resolve(results[i]!));
      } catch (error) {
        for (const job of jobs) job.reject(error);
      } finally {
        this.inFlight -= jobs.length;
        if (this.inFlight === 0 && this.idle !== null) {
          this.idle();
          this.idle = null;
        }
      }
    }
    slot.busy = false;
    if (slot.state === null) this.slots.get(p)!.delete(key);
  }

  private async executeBatch(key: string, p: number, slot: Slot, commands: RoutedCommand[]): Promise<CommandResult[]> {
    const results: CommandResult[] = [];
    const entries: LogEntry[] = [];
    const writes: TableWrite[] = [];
    let draft = slot.state;
    let type = slot.type;
    for (const routed of commands) {
      const decider = this.deciders.get(routed.aggregate);
      if (decider === undefined || (draft !== null && type !== routed.aggregate)) {
        results.push(refused(refusal('path.core.not_found', 'no such object')));
        continue;
      }
      const now = this.options.clock.now();
      const views = this.readViews(decider.reads?.(routed.command, draft as never) ?? []);
      const decision = decider.decide(routed.command, draft, {
        now, member: this.options.member, signer: this.options.signer(), newId: this.options.newId,
        ...(this.options.unseal === undefined ? {} : { unseal: this.options.unseal }),
        ...(views === undefined ? {} : { views }),
      });
      if (isDecisionRefusal(decision)) {
        results.push(refused(decision));
        continue;
      }
      if (decision.events.length === 0) {
        results.push({ reply: decision.reply, committed: false, outbox: [], directory: [] });
        continue;
      }
      for (const event of decision.events) draft = decider.evolve(draft, event);
      type = routed.aggregate;
      const publications = [...(decision.publications ?? []), ...(decider.publications?.(draft) ?? [])];
      const idempotency = routed.idempotency === undefined ? null : {
        scope: routed.idempotency.scope, requestHash: routed.idempotency.requestHash,
        status: decision.reply.status, body: decision.reply.body, signed: decision.reply.signed, at: now,
      } satisfies IdempotencyEntry;
      const seq = this.seq.get(p)! + 1;
      this.seq.set(p, seq);
      const record: LogRecord = { a: routed.aggregate, k: key, e: decision.events, t: now };
      entries.push({ partition: p, seq, bytes: frame(record) });
      writes.push(...tableWrites(publications, decision, idempotency));
      if (routed.replay !== undefined) writes.push(replayWrite(routed.replay));
      results.push({ reply: decision.reply, committed: true, outbox: (decision.outbox ?? []).map((e) => e.id), directory: decision.directory ?? [] });
    }
    if (entries.length === 0) return results;

    const appended = this.options.log.append(entries, writes);
    // Records of one partition are adopted in sequence order, so a snapshot taken between two
    // adoptions is exactly the fold of the records up to its seq.
    const ready = this.applied.get(p)!.then(() => appended);
    this.applied.set(p, ready.catch(() => undefined));
    try {
      await ready;
    } catch (error) {
      this.options.onFatal(error);
      throw error;
    }
    slot.type = type;
    slot.state = draft;
    this.adopted.set(p, entries[entries.length - 1]!.seq);
    this.scheduleFor(key, slot);
    for (let i = 0; i < entries.length; i++) this.countForSnapshot(p);
    return results;
  }

  private readViews(keys: readonly string[]): Map<string, string> | undefined {
    if (keys.length === 0) return undefined;
    const views = new Map<string, string>();
    for (const key of keys) {
      const bytes = this.options.log.get('views', key);
      if (bytes === undefined) continue;
      // A damaged view is not an absent one: deciding on it would act on unverified state (P14).
      const view = decodeView(bytes);
      if (view === null) throw new DamagedRowError('views', key);
      views.set(key, view.body.toString('utf8'));
    }
    return views;
  }

  private replay(slots: Map<string, Slot>, record: LogRecord): void {
    const decider = this.deciders.get(record.a);
    if (decider === undefined) throw new RecoveryError(`log holds records of an unknown aggregate type '${record.a}'`);
    let slot = slots.get(record.k);
    if (slot === undefined) {
      slot = { type: record.a, state: null, queue: [], busy: false };
      slots.set(record.k, slot);
    }
    for (const event of record.e) slot.state = decider.evolve(slot.state, event);
  }

  private scheduleFor(key: string, slot: Slot): void {
    const decider = this.deciders.get(slot.type);
    if (decider?.deadline === undefined || slot.state === null) return;
    this.scheduler.schedule(key, decider.deadline(slot.state));
  }

  private tick(key: string): void {
    const slot = this.slots.get(partitionOf(key))?.get(key);
    if (slot === undefined) return;
    this.submit({ aggregate: slot.type, key, command: { name: 'tick', input: null, caller: null } }).then((result) => {
      if (result.committed) this.options.onEffects?.(result);
    }, this.options.onFatal);
  }

  private countForSnapshot(p: number): void {
    const count = this.sinceSnapshot.get(p)! + 1;
    this.sinceSnapshot.set(p, count);
    if (count >= this.options.snapshotEveryRecords) this.snapshot(p).catch(this.options.onFatal);
  }

  private async snapshot(p: number): Promise<void> {
    const aggregates: SnapshotBody['aggregates'] = [];
    for (const [key, slot] of this.slots.get(p)!) if (slot.state !== null) aggregates.push([key, slot.type, slot.state]);
    // Taken synchronously after the last adoption: the states are the fold up to `seq`.
    const body: SnapshotBody = { seq: this.adopted.get(p)!, aggregates };
    this.sinceSnapshot.set(p, 0);
    await this.options.log.writeSnapshot(p, frame(body));
  }

  private unframeOrFail<T>(bytes: Buffer, what: string): T {
    try {
      return unframe<T>(bytes);
    } catch (error) {
      throw new RecoveryError(`${what} fails its checksum (${(error as Error).message}); refusing to start`);
    }
  }
}

/** What an operator reads when a record is damaged: where, why the node stops, what to do. */
export function damagedRecordMessage(partition: number, seq: number): string {
  return `log record ${seq} of partition ${partition} fails its checksum: the data directory is `
    + 'damaged at rest (a commit is never half-written). The node will not serve state it cannot '
    + 'verify (P14); restore the data directory from the latest backup and start again';
}

/** The request behind a committed command is remembered with it, so a restart refuses it too (P5). */
export function replayWrite(mark: ReplayMark): TableWrite {
  return { table: 'replay', key: mark.key, bytes: frame({ c: mark.keyId }) };
}

function refused(r: Refusal): CommandResult {
  return { reply: errorReply(r), committed: false, outbox: [], directory: [] };
}

/** Directory rows are keyed hash first, so every registration of one key reads as one range. */
export function directoryRowKey(row: DirectoryRow): string {
  return `${row.identifierHash}/${row.key}`;
}

export function errorReply(r: Refusal): Reply {
  return { status: statusOf(r.code), body: errorBody(r), signed: false };
}

function tableWrites(publications: Publication[], decision: { outbox?: OutboxEvent[]; directory?: DirectoryRow[]; tables?: TableWrite[] }, idempotency: IdempotencyEntry | null): TableWrite[] {
  const writes: TableWrite[] = publications.map((pub) => ({ table: 'views', key: pub.key, bytes: pub.reply === null ? null : encodeView(pub.reply) }));
  for (const event of decision.outbox ?? []) writes.push({ table: 'outbox', key: event.id, bytes: frame(event) });
  for (const row of decision.directory ?? []) {
    writes.push({ table: 'directory', key: directoryRowKey(row), bytes: row.visibility === null ? null : frame({ t: row.identifierType, v: row.visibility }) });
  }
  if (decision.tables !== undefined) writes.push(...decision.tables);
  if (idempotency !== null) writes.push({ table: 'idempotency', key: idempotency.scope, bytes: frame(idempotency) });
  return writes;
}
