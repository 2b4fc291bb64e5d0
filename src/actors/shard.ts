// One shard of actors: the single writer for every aggregate of the partitions it owns.
// Each aggregate has a mailbox that runs one command at a time:
//   decide -> (evolve ahead, pure) -> append record + views + outbox + idempotency in one
//   commit -> await durable -> adopt the new state -> reply.
// Nobody, not even the next command of the same aggregate, sees a state before it is durable.
// Different aggregates proceed concurrently, so their appends share group commits.
// A start checks every partition (check) before the node answers, and folds them while it
// answers (warm): a command whose partition is not folded yet has it folded first.
// In cluster mode (P22) a partition can move to another instance and back: `release` drains it,
// snapshots it and forgets it; `adopt` folds it again from the log before it takes commands.
// A log that fails (its database unreachable, issue 29) costs answers, not the process: an
// append whose commit is in doubt answers 503, and its partition is folded again from the log,
// which alone says what committed, before it decides anything more (`doubt`). Only a log proven
// inconsistent (RecoveryError, a damaged record) is fatal.
import type { Clock, Timer } from '../clock.js';
import { refusal, type Refusal } from '../protocol/errors.js';
import type { SigningKey } from '../protocol/signing.js';
import type { ReferencePrefix } from '../protocol/ids.js';
import { DamagedRowError, frameRecord, holdsMoreValuesThan, recordCheck } from '../log/record.js';
import { deadlineRows, headRows, stateRows, type StateRow } from '../reads/rows.js';
import {
  ClaimTakenError,
  NotFollowingError,
  NotHeldError,
  NotWrittenError,
  partitionOf,
  PARTITION_COUNT,
  type Log,
  type LogEntry,
  type RecordPosition,
  type TableWrite,
} from '../log/log.js';
import { decodeView } from '../reads/views.js';
import { Scheduler } from './scheduler.js';
import { planted } from './planted.js';
import { frameSnapshot, type SnapshotBody } from './snapshot.js';
import {
  checkPartitions,
  foldInTurns,
  unframeFolded,
  type FoldInto,
  type FoldedPartition,
  type LogRecord,
} from './fold.js';
import { Elsewhere, type Checked } from './recovery.js';

import { RecoveryError } from './fold.js';
import { MovedError } from './moved.js';
export { MovedError, RecoveryError };
import {
  isRefusal,
  type AnyDecider,
  type CommandOf,
  type CommandSchemas,
  type ReadView,
} from '../domain/decider.js';
import {
  COMMIT_REDO_MAX,
  COLLECT_AFTER_PASSIVATIONS,
  DATABASE_RETRY_AFTER_SECONDS,
  DATABASE_RETRY_BASE_MS,
  DATABASE_RETRY_MAX_MS,
  DECISION_READ_ROUNDS_MAX,
  WARM_TURN_MS,
  type Limits,
} from '../config.js';
import { UnavailableError, unreachable } from '../log/unavailable.js';
import {
  claimsOf,
  CommandChecks,
  decisionWrites,
  errorReply,
  keptOutbox,
  pendingFollowUps,
  readView,
  replyOf,
  takenResult,
} from './decision.js';
import type { ClaimKind, CommandResult, RoutedCommand } from './types.js';

export interface ShardOptions {
  partitions: readonly number[];
  log: Log;
  deciders: readonly AnyDecider[];
  limits: Limits;
  /** The node runs with `--dev` (DecideContext); absent: it does not. */
  dev?: boolean;
  /**
   * The node has operator webhook endpoints, so every event has a target (keptOutbox); absent:
   * it has, and every event is kept.
   */
  operatorWebhooks?: boolean;
  clock: Clock;
  member: string;
  signer: () => SigningKey;
  newId: (prefix: ReferencePrefix) => string;
  unseal?: (sealed: string) => string;
  /** Records appended to one partition between snapshots. */
  snapshotEveryRecords: number;
  /** Commands waiting in one aggregate's mailbox before new ones are refused (503). */
  mailboxDepthMax: number;
  /**
   * Cluster mode: partitions held by other instances when this one starts. They are neither
   * checked nor folded here, and their commands are refused as moved until adopted.
   */
  released?: readonly number[];
  /**
   * How a fold measures its turns (foldInTurns), in ms; absent: the thread's own time. The
   * simulator (sim/) counts records instead, so that where a fold yields is the same every run.
   */
  turnClock?: () => number;
  /**
   * Embedded mode: each commit that changes the directory lists the keys it changed in a row
   * (`directory_changes`, issue 34), so a start after a crash reads again only those after the
   * directory image. Absent: no such row is written (cluster mode keeps no image).
   */
  directoryChanges?: boolean;
  /** Called when the log is proven inconsistent (a damaged record): the node cannot go on. */
  onFatal: (error: unknown) => void;
  /**
   * Told of a failure the shard lives through (a snapshot or fold the log could not take, a
   * commit in doubt): the node logs it. Absent: nothing is told.
   */
  onTrouble?: (error: unknown, partition: number) => void;
  /**
   * Told what a time-driven command (a tick) committed:
   * outbox events to deliver, index rows to apply.
   */
  onEffects?: (result: CommandResult) => void;
  /**
   * A full garbage collection (collect.ts), asked for when the shard has let go of many
   * aggregates and has had no command since its last sweep (issue 33). Absent: none is asked.
   */
  collect?: () => void;
}

interface Job {
  routed: RoutedCommand;
  resolve: (result: CommandResult) => void;
  reject: (error: unknown) => void;
  /** How many times its batch was refused with nothing written, and it decided again. */
  redone?: number;
  /** When it was submitted (performance.now()); kept while it waits for a fold or a redo. */
  arrived: number;
}

/**
 * A batch whose append was refused with nothing written (issue 29): a claim it carried was
 * another commit's (the command at `taken` answers so), or an append before it in its partition
 * did not land. Its other commands are decided again.
 */
class BatchNotWritten extends Error {
  constructor(
    readonly taken: number,
    readonly kind: ClaimKind | null,
  ) {
    super('the batch was not written');
  }
}

interface Slot {
  type: string;
  state: unknown;
  queue: Job[];
  busy: boolean;
  /**
   * Its state is its `states` row as committed (issue 33): it may leave memory, and come back
   * from that row. False for an aggregate whose decider keeps none, or whose row may lag (one
   * folded from a snapshot and no record of it since).
   */
  rowed: boolean;
  /**
   * Its state has grown past `state_row_bytes_max` (a subject's or a connection's children): it
   * stays in memory for good, and its row is no longer written (the next commit says so).
   */
  pinned: boolean;
  /** When a command last came for it, on the shard's clock: the least recent leave first. */
  used: number;
}

/**
 * What a batch's commit does for its aggregate's `states` row (issue 33): nothing (a kind that
 * keeps none, or one pinned in memory); `write` it, the records marked `w: 1`; or `stop` writing
 * it: the row is deleted and the first record carries the state before it (`s`), for a fold
 * that passed over the records the row held.
 */
type Rowing = 'none' | 'write' | 'stop';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A slot with an empty mailbox, nothing running. */
const slotOf = (type: string, state: unknown, rowed: boolean, used: number): Slot => ({
  type,
  state,
  queue: [],
  busy: false,
  rowed,
  pinned: false,
  used,
});

/** The views of a decision that reads none (never written to). */
const NO_VIEWS: ReadonlyMap<string, ReadView> = new Map();

/** What deciding one command came to: an answer alone, or a record and rows to commit. */
type Decided =
  | { kind: 'answered'; result: CommandResult }
  | { kind: 'committed'; record: LogRecord; writes: TableWrite[]; result: CommandResult };

export interface RecoveryStats {
  snapshots: number;
  records: number;
  aggregates: number;
  /** Partitions folded by recovery helpers (recovery.ts). */
  helped: number;
}

export class Shard {
  private readonly slots = new Map<number, Map<string, Slot>>();
  /** Aggregates whose state this shard holds in memory, every partition together (issue 33). */
  aggregatesInMemory(): number {
    let count = 0;
    for (const held of this.slots.values()) count += held.size;
    return count;
  }

  /** Those of them kept in memory for good, their state past state_row_bytes_max (issue 33). */
  aggregatesPinned(): number {
    let count = 0;
    for (const held of this.slots.values())
      for (const slot of held.values()) if (slot.pinned) count++;
    return count;
  }

  /** Aggregates brought back into memory from their rows, and let go of, so far (issue 33). */
  readonly residency = { activations: 0, passivations: 0 };
  /** The sweep that lets idle aggregates go (passivate), armed while the shard runs. */
  private sweepTimer: Timer | null = null;
  /** Commands since the last sweep, and aggregates let go of since the last collection. */
  private readonly sinceSweep = { commands: 0, released: 0 };

  private readonly seq = new Map<number, number>();
  /**
   * The CRC-32 of each partition's last record appended, which its next record links to
   * (record.ts), known as its seq is: from the fold, then from each append.
   */
  private readonly lastCheck = new Map<number, number>();
  private readonly sinceSnapshot = new Map<number, number>();
  private readonly applied = new Map<number, Promise<void>>();
  /** The snapshot being encoded and written, per partition (one at a time). */
  private readonly snapshotting = new Map<number, Promise<void>>();
  /** Seq and CRC-32 of the last record whose state was adopted, per partition. */
  private readonly adopted = new Map<number, number>();
  private readonly adoptedCheck = new Map<number, number>();
  private readonly deciders = new Map<string, AnyDecider>();
  private readonly checks: CommandChecks;
  private readonly scheduler: Scheduler;
  private inFlight = 0;
  private idle: (() => void) | null = null;
  /** Partitions folded (or read from a helper) and taking commands. */
  private readonly installed = new Set<number>();
  /** Commands of partitions being folded (here or by a helper), waiting until they are. */
  private readonly waiting = new Map<number, Job[]>();
  /** The claims shared with the helpers once the partitions are checked (check). */
  private warming: Elsewhere | null = null;
  private stopped = false;
  /** Partitions given away (release) and not adopted since: their commands are refused. */
  private readonly released = new Set<number>();
  /** Releases under way, each until its partition's states are forgotten (adopt waits). */
  private readonly releasing = new Map<number, Promise<void>>();
  /**
   * Partitions whose last append failed (its commit in doubt) or whose fold did: nothing of them
   * is decided until they are folded again from the log (doubt, refold).
   */
  private readonly doubted = new Set<number>();
  /** Per partition, the folds tried again in a row since its last that served (refoldLater). */
  private readonly refoldAttempts = new Map<number, number>();
  /** Doubts so far (doubt): a snapshot encoded across one is not written. */
  private doubts = 0;
  /** The refolds under way, one per partition. */
  private readonly refolding = new Set<number>();
  /** Folds under way of each partition (fold), which its release waits for. */
  private readonly foldsOf = new Map<number, number>();
  /** Folds under way (fold): a stop waits for them to let go of the log. */
  private readonly folding = new Set<Promise<void>>();
  private readonly recovered: RecoveryStats = {
    snapshots: 0,
    records: 0,
    aggregates: 0,
    helped: 0,
  };

  constructor(private readonly options: ShardOptions) {
    for (const d of options.deciders) this.deciders.set(d.type, d);
    this.checks = new CommandChecks(options.deciders);
    for (const p of options.partitions) {
      this.slots.set(p, new Map());
      this.seq.set(p, 0);
      this.lastCheck.set(p, 0);
      this.adopted.set(p, 0);
      this.adoptedCheck.set(p, 0);
      this.sinceSnapshot.set(p, 0);
      this.applied.set(p, Promise.resolve());
    }
    this.scheduler = new Scheduler(options.clock, (key, type) => this.tick(key, type));
    for (const p of options.released ?? []) this.released.add(p);
  }

  /**
   * Rebuilds every owned partition from its snapshot and the records after it: checks them all
   * (check), then folds them all (warm). The node itself answers in between (worker.ts).
   */
  async recover(elsewhere = Elsewhere.none(this.options.partitions)): Promise<RecoveryStats> {
    await this.check(elsewhere);
    const stats = await this.warm();
    if (stats === null) throw new RecoveryError('stopped before every partition was folded');
    return stats;
  }

  /**
   * Checks every owned partition, with the helpers that share `elsewhere`: every snapshot's
   * checksum and every record's after it (P14). Damage throws (RecoveryError): the node refuses
   * to start. Nothing is folded yet; commands may come once this resolves, each partition folded
   * when one first needs it (submit) or when the warm-up reaches it.
   */
  async check(elsewhere: Elsewhere): Promise<Checked> {
    // Partitions held elsewhere are claimed here first, so that neither this shard nor a helper
    // reads them.
    for (const p of this.released) {
      elsewhere.checks.claim(p);
      elsewhere.folds.claim(p);
    }
    const checked = checkPartitions(this.options.log, () => elsewhere.checks.fromFront());
    while (!elsewhere.allChecked) await elsewhere.pause();
    this.warming = elsewhere;
    return {
      snapshots: checked.snapshots + elsewhere.checked.snapshots,
      records: checked.records + elsewhere.checked.records,
    };
  }

  /**
   * Folds every partition `check` checked and nobody has folded yet, a few milliseconds per
   * event turn so that commands go on meanwhile, and reads those the helpers fold as they come
   * (folding those they leave to it), until all are. Resolves with what recovery read, in all;
   * or null if the shard stopped first.
   */
  async warm(): Promise<RecoveryStats | null> {
    const elsewhere = this.warming;
    if (elsewhere === null) throw new Error('a warm-up before the partitions were checked');
    // A helper's failure is fatal at once (onFatal), not once this shard's own folds are done.
    const handedOver = this.takeHandedOver(elsewhere).catch((error: unknown) => {
      this.options.onFatal(error);
      throw error;
    });
    for (let p = elsewhere.folds.fromFront(); p !== undefined && !this.stopped;) {
      await this.fold(p).catch((error: unknown) => this.foldFailed(p!, error));
      // A fold short enough to take no turn of its own still lets commands in after it.
      await nextTurn();
      p = elsewhere.folds.fromFront();
    }
    await handedOver;
    // The last folds started for commands, or for partitions the helpers left.
    // Every partition is folded here, or held by another instance.
    const accounted = () => this.installed.size + this.released.size + this.doubted.size;
    while (!this.stopped && accounted() < this.options.partitions.length) await elsewhere.pause();
    return this.stopped ? null : this.recovered;
  }

  /**
   * Takes the partitions the helpers hand over as they come (every few milliseconds, beside
   * this shard's own folds), folding those they leave to it, until every helper is done.
   */
  private async takeHandedOver(elsewhere: Elsewhere): Promise<void> {
    while (!this.stopped) {
      // Read before what arrived is taken: a helper's last partitions come with its `done`.
      const finished = elsewhere.finished;
      for (const [p, framed] of elsewhere.arrived()) {
        if (framed === undefined) this.fold(p).catch((error) => this.foldFailed(p, error));
        else {
          this.install(p, unframeFolded(framed, p, this.into(p)));
          this.recovered.helped++;
        }
      }
      if (finished) return;
      await elsewhere.pause();
    }
  }

  /**
   * Folds partition `p` (claimed by this shard) over event turns and takes it; nothing if the
   * shard stops first. Commands of the partition wait meanwhile (submit).
   */
  private fold(p: number): Promise<void> {
    // A read that throws at once (the snapshot's) rejects the fold as a later one would.
    const folding = Promise.resolve()
      .then(() =>
        foldInTurns(this.options.log, this.deciders, p, this.into(p), {
          turnMs: WARM_TURN_MS,
          cancelled: () => this.stopped,
          ...(this.options.turnClock === undefined ? {} : { now: this.options.turnClock }),
        }),
      )
      .then((folded) => {
        if (folded !== null) this.install(p, folded);
      });
    this.foldsOf.set(p, (this.foldsOf.get(p) ?? 0) + 1);
    const tracked = folding.finally(() => {
      this.folding.delete(tracked);
      this.foldsOf.set(p, this.foldsOf.get(p)! - 1);
    });
    this.folding.add(tracked);
    return tracked;
  }

  /** Where recovery puts a partition's states: its slots, each new one with an empty mailbox. */
  private into(p: number): FoldInto<Slot> {
    const used = this.options.clock.now();
    return {
      held: this.slots.get(p)!,
      hold: (type, state) => slotOf(type, state, false, used),
    };
  }

  /**
   * Takes a partition recovered into its slots: its seq, and the deadlines of its states (those
   * passed while it waited fire now); then the commands that waited for it.
   */
  private install(p: number, folded: FoldedPartition): void {
    this.refoldAttempts.delete(p);
    const slots = this.slots.get(p)!;
    // Held elsewhere (a helper folded it before this shard claimed it away): not taken.
    if (this.released.has(p)) {
      slots.clear();
      this.refuseWaiting(p);
      return;
    }
    this.seq.set(p, folded.seq);
    this.lastCheck.set(p, folded.check);
    this.adopted.set(p, folded.seq);
    this.adoptedCheck.set(p, folded.check);
    // Records replayed since the snapshot count towards the next one (a shutdown writes it).
    this.sinceSnapshot.set(p, folded.records);
    // The deadlines of its aggregates out of memory from their rows; those in memory from their
    // states (of one folded from a snapshot written before the rows were, the state alone).
    this.scheduleRows(p);
    for (const [key, slot] of slots) {
      this.scheduleFor(key, slot);
      this.measure(key, slot);
    }
    // Those folded from records that wrote their rows may leave memory again.
    this.armSweep();
    const stats = this.recovered;
    if (folded.snapshot) stats.snapshots++;
    stats.records += folded.records;
    stats.aggregates += slots.size;
    this.installed.add(p);
    const waited = this.waiting.get(p) ?? [];
    this.waiting.delete(p);
    for (const job of waited)
      this.enqueue(job.routed, job.redone ?? 0, job.arrived).then(job.resolve, job.reject);
    this.settled(waited.length);
  }

  /**
   * Whether partition `p` takes commands now (folded). If not, its fold is started here unless
   * somebody (the warm-up, a helper) holds it already: its commands wait for it either way. A
   * fold that finds damage is fatal; one the log could not serve leaves the partition doubted.
   */
  private folded(p: number): boolean {
    if (this.installed.has(p)) return true;
    if (this.warming === null) throw new Error('a command before the partitions were checked');
    if (this.warming.folds.claim(p)) this.fold(p).catch((error) => this.foldFailed(p, error));
    return false;
  }

  /** Runs a command on its aggregate's mailbox. */
  submit(routed: RoutedCommand): Promise<CommandResult> {
    return this.enqueue(routed, 0);
  }

  /**
   * `submit` for a command decided again `redone` times already (decideAgain): one that waited
   * for its partition's refold keeps its count, so that COMMIT_REDO_MAX bounds it across refolds,
   * and the time it `arrived`, so that its wait counts from then.
   */
  private enqueue(
    routed: RoutedCommand,
    redone: number,
    arrived = performance.now(),
  ): Promise<CommandResult> {
    const p = partitionOf(routed.key);
    const slots = this.slots.get(p);
    if (slots === undefined) throw new Error(`partition ${p} is not owned by this shard`);
    if (this.released.has(p)) return Promise.reject(new MovedError(p));
    if (this.doubted.has(p) || !this.folded(p)) {
      // Counted as in flight, so that a drain waits for it too.
      this.inFlight++;
      const waited = new Promise<CommandResult>((resolve, reject) => {
        const waiting = this.waiting.get(p) ?? [];
        waiting.push({ routed, resolve, reject, redone, arrived });
        this.waiting.set(p, waiting);
      });
      if (this.doubted.has(p)) this.refold(p);
      return waited;
    }
    let slot = slots.get(routed.key);
    if (slot === undefined) {
      try {
        slot = this.activate(routed.key, routed.aggregate);
      } catch (error) {
        if (unreachable(error)) return Promise.resolve(unavailable());
        return Promise.reject(error);
      }
      slots.set(routed.key, slot);
    }
    slot.used = this.options.clock.now();
    this.sinceSweep.commands++;
    if (slot.queue.length >= this.options.mailboxDepthMax) {
      return Promise.resolve(
        refused(
          refusal('path.core.unavailable', 'too many commands are waiting for this object', {
            retry_after_seconds: 1,
          }),
        ),
      );
    }
    return new Promise((resolve, reject) => {
      slot!.queue.push({ routed, resolve, reject, redone, arrived });
      if (!slot!.busy) void this.run(routed.key, p, slot!);
    });
  }

  /** Resolves once no command is running or waiting. */
  drained(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.idle = resolve;
    });
  }

  /** Writes a snapshot of every owned partition (on shutdown, so that the next start is quick). */
  async snapshotAll(): Promise<void> {
    // A fold under way ends at its next turn once stopped; none may read the log after this.
    await Promise.allSettled([...this.folding]);
    for (const p of this.options.partitions) {
      // One already under way was reported (onFatal) if it failed; the last one is written here.
      await this.snapshotting.get(p)?.catch(() => undefined);
      if (this.sinceSnapshot.get(p)! > 0) await this.snapshot(p).catch(unlessMoved);
    }
  }

  /**
   * Gives partition `p` away (cluster mode): from now on its commands are refused (MovedError);
   * those already running or waiting finish; then its snapshot is written, so that the next
   * owner starts from it, and its states and deadlines are forgotten.
   */
  async release(p: number): Promise<void> {
    const slots = this.slots.get(p);
    if (slots === undefined) throw new Error(`partition ${p} is not owned by this shard`);
    if (this.released.has(p)) return this.releasing.get(p);
    this.released.add(p);
    this.refuseWaiting(p);
    const releasing = this.drainAndForget(p, slots);
    this.releasing.set(p, releasing);
    try {
      await releasing;
    } finally {
      if (this.releasing.get(p) === releasing) this.releasing.delete(p);
    }
  }

  /** A release's work: its commands answered, its snapshot written, its states forgotten. */
  private async drainAndForget(p: number, slots: Map<string, Slot>): Promise<void> {
    const busy = () =>
      (this.waiting.get(p)?.length ?? 0) > 0 ||
      [...slots.values()].some((slot) => slot.busy || slot.queue.length > 0);
    // A fold of it under way is waited for; a doubted partition is not (its refold may wait on
    // the database, and its next owner folds it from the log all the same), nor one whose fold
    // ended finding it released (it installed nothing): waiting for it to be installed, the
    // release never ended, and since an adopt waits for a release (issue 30), neither did that.
    const unsettled = () =>
      !this.installed.has(p) && !this.doubted.has(p) && (this.foldsOf.get(p) ?? 0) > 0;
    while (!this.stopped && (busy() || unsettled())) await nextTurn();
    await this.applied.get(p);
    await this.snapshotting.get(p)?.catch(() => undefined);
    try {
      if (this.installed.has(p) && this.sinceSnapshot.get(p)! > 0)
        await this.snapshot(p).catch(unlessMoved);
    } finally {
      // Forgotten whatever became of the snapshot (the database away): the next owner, this
      // shard again among them, folds the partition from the log, never onto what is held here
      // (found by the simulator, issue 30: a snapshot refused for want of the database left the
      // states held, and the partition adopted again counted every event twice).
      this.forget(p);
    }
  }

  /** A partition taken over by another instance while held here (an append refused). */
  private lose(p: number): void {
    this.released.add(p);
    this.refuseWaiting(p);
    this.forget(p);
  }

  /**
   * The commands waiting for a fold of partition `p`, now given away, refused as moved: none of
   * them ran, and its holder takes them (router.ts). Left waiting, they were answered by no one
   * and their partition's release, waiting for them, never ended (found by the simulator,
   * issue 30: a command waiting for its partition's fold when an orderly stop released it).
   */
  private refuseWaiting(p: number): void {
    const waited = this.waiting.get(p) ?? [];
    this.waiting.delete(p);
    for (const job of waited) job.reject(new MovedError(p));
    this.settled(waited.length);
  }

  private forget(p: number): void {
    const slots = this.slots.get(p)!;
    this.scheduler.forget((key) => partitionOf(key) === p);
    slots.clear();
    this.installed.delete(p);
    for (const counter of [
      this.seq,
      this.lastCheck,
      this.adopted,
      this.adoptedCheck,
      this.sinceSnapshot,
    ])
      counter.set(p, 0);
  }

  /**
   * Takes partition `p` back after another instance held it: folds it from its snapshot and the
   * records after it, every checksum checked (P14), before its commands run; those that come
   * meanwhile wait for it.
   */
  async adopt(p: number): Promise<void> {
    // A release of `p` still under way (its commands draining) forgets its states when it ends:
    // the fold waits for it, else it would fold the records again onto the states still held,
    // counting every event twice (issue 30: a partition given up, then taken again while its
    // release waited on a commit).
    await this.releasing.get(p)?.catch(() => undefined);
    if (!this.released.has(p)) return;
    this.released.delete(p);
    this.forget(p);
    // A doubt of the partition from before it left is over: this fold starts from the log.
    // Kept, it sent the first command after the adopt to fold the partition again beside this
    // fold, and commands decided on the two folds appended the same seq twice (found by the
    // simulator, issue 30, cluster seed 21: a chain the next start refused as broken).
    this.doubted.delete(p);
    this.refoldAttempts.delete(p);
    await this.fold(p).catch((error: unknown) => this.foldFailed(p, error));
    // Released again while it was folded (taken over, or given back): nothing to adopt.
    if (this.released.has(p)) return;
    if (!this.installed.has(p) && !this.doubted.has(p))
      throw new RecoveryError(`partition ${p} was not adopted`);
  }

  /**
   * An append of partition `p` failed with its commit in doubt: what this shard holds of `p` may
   * be behind the log (the commit landed) or ahead of it (it did not). Nothing more of `p` is
   * decided; once what runs has ended, `p` is folded again from the log (refold).
   */
  private doubt(p: number, error: unknown): void {
    if (this.doubted.has(p)) return;
    this.doubted.add(p);
    this.doubts++;
    this.options.onTrouble?.(error, p);
    this.refold(p);
  }

  /**
   * Folds a doubted partition again once nothing of it runs, then lets its waiting commands in;
   * if the log cannot serve the fold yet they are answered 503, and the next command tries again.
   */
  private refold(p: number): void {
    if (this.refolding.has(p) || this.stopped) return;
    this.refolding.add(p);
    const slots = this.slots.get(p)!;
    const busy = () => [...slots.values()].some((slot) => slot.busy);
    const again = async () => {
      while (busy() && !this.stopped) await nextTurn();
      await this.applied.get(p);
      if (this.stopped) return;
      if (this.released.has(p)) return this.refuseWaiting(p);
      this.forget(p);
      this.doubted.delete(p);
      await this.fold(p);
    };
    // Ended before its failure is told: a command it answers 503 may come straight back.
    void again().then(
      () => this.refolding.delete(p),
      (error: unknown) => {
        this.refolding.delete(p);
        this.foldFailed(p, error);
      },
    );
  }

  /** Commands taken from a doubted partition's mailbox: they run once it is folded again. */
  private awaitRefold(p: number, jobs: Job[]): void {
    this.inFlight += jobs.length;
    this.waiting.set(p, [...(this.waiting.get(p) ?? []), ...jobs]);
    if (this.released.has(p)) this.refuseWaiting(p);
    else this.refold(p);
  }

  /**
   * A fold that failed: damage is fatal (the log is proven inconsistent); a log that could not
   * serve it leaves the partition doubted, its waiting commands answered 503.
   */
  private foldFailed(p: number, error: unknown): void {
    if (!unreachable(error)) return this.options.onFatal(error);
    this.options.onTrouble?.(error, p);
    this.doubted.add(p);
    const waited = this.waiting.get(p) ?? [];
    this.waiting.delete(p);
    for (const job of waited) job.resolve(unavailable());
    this.settled(waited.length);
    this.refoldLater(p);
  }

  /**
   * A partition whose fold the log could not serve is folded again once it may answer, not only
   * at its next command: its deadlines are scheduled by its fold, and one due meanwhile (an
   * instruction's expiry) would otherwise never fire while no command came (found by the
   * simulator, issue 30: an instruction open 34 minutes past its expiry after the database came
   * back). Tried again after DATABASE_RETRY_BASE_MS, doubling to DATABASE_RETRY_MAX_MS.
   */
  private refoldLater(p: number): void {
    const attempt = this.refoldAttempts.get(p) ?? 0;
    this.refoldAttempts.set(p, attempt + 1);
    const waitMs = Math.min(DATABASE_RETRY_BASE_MS * 2 ** attempt, DATABASE_RETRY_MAX_MS);
    this.options.clock.setTimer(() => {
      if (!this.stopped && this.doubted.has(p) && !this.released.has(p)) this.refold(p);
    }, waitMs);
  }

  /** Stops the deadlines, and the warm-up: no partition is folded from now on. */
  stop(): void {
    this.scheduler.stop();
    this.sweepTimer?.cancel();
    this.sweepTimer = null;
    this.stopped = true;
    // The helpers fold nothing more either: each ends after the partition it holds.
    this.warming?.folds.claimAll();
  }

  /** `count` commands in flight are answered (or moved on): a drain may be waiting for none. */
  private settled(count: number): void {
    this.inFlight -= count;
    if (this.inFlight === 0 && this.idle !== null) {
      this.idle();
      this.idle = null;
    }
  }

  /** The state of one aggregate (tests and diagnostics). */
  /**
   * Whether the states of partition `p` are in memory as the log holds them: folded, not given
   * away, not waiting to be folded again (a doubted partition is folded by its next command).
   */
  holdsFolded(p: number): boolean {
    return this.installed.has(p) && !this.doubted.has(p) && !this.released.has(p);
  }

  stateOf(key: string): unknown {
    const slot = this.slots.get(partitionOf(key))?.get(key);
    if (slot !== undefined) return slot.state;
    // Out of memory (issue 33): as its row holds it, read without bringing it back.
    return this.holdsFolded(partitionOf(key)) ? (this.storedState(key)?.s ?? null) : null;
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
      if (this.doubted.has(p)) {
        this.awaitRefold(p, slot.queue.splice(0));
        break;
      }
      const jobs = slot.queue.splice(0, this.batchSize(slot));
      const taken = jobs.length;
      this.inFlight += taken;
      // The first job of the batch came first: it waited longest behind the commits before it.
      const waited = (performance.now() - jobs[0]!.arrived) / 1000; // tidy: format (ms to s)
      try {
        const results = await this.executeBatch(
          key,
          p,
          slot,
          jobs.map((j) => j.routed),
          waited,
        );
        // Those the batch ended before (decideAll) are decided next, first in the mailbox.
        slot.queue.unshift(...jobs.splice(results.length));
        jobs.forEach((job, i) => job.resolve(results[i]!));
      } catch (error) {
        if (error instanceof BatchNotWritten) this.decideAgain(slot, jobs, error);
        else if (unreachable(error)) for (const job of jobs) job.resolve(unavailable());
        else for (const job of jobs) job.reject(error);
      } finally {
        this.settled(taken);
      }
    }
    slot.busy = false;
    if (slot.state === null) this.slots.get(p)!.delete(key);
  }

  /**
   * How many waiting commands are decided together: a command that reads committed views goes
   * in a batch of its own, since the views reflect only what is durable, not the draft.
   */
  private batchSize(slot: Slot): number {
    const max = Math.min(slot.queue.length, this.options.limits.batch_commands_max);
    for (let i = 0; i < max; i++)
      if (this.readsViews(slot.queue[i]!.routed, slot.state)) return i === 0 ? 1 : i;
    return max;
  }

  /** Whether deciding `routed` on `state` reads committed views. */
  private readsViews(routed: RoutedCommand, state: unknown): boolean {
    const decider = this.deciders.get(routed.aggregate);
    return (decider?.reads?.(routed.command as never, state, NO_VIEWS) ?? []).length > 0;
  }

  /**
   * A batch refused with nothing written: the command whose claim was taken answers so, the
   * others go back to the front of the mailbox, decided again on the partition as the log holds
   * it (after a refold, where one is under way), at most COMMIT_REDO_MAX times each.
   */
  private decideAgain(slot: Slot, jobs: Job[], refused: BatchNotWritten): void {
    const again: Job[] = [];
    jobs.forEach((job, i) => {
      if (i === refused.taken) job.resolve(takenResult(refused.kind!));
      else if ((job.redone ?? 0) >= COMMIT_REDO_MAX) job.resolve(unavailable());
      else again.push({ ...job, redone: (job.redone ?? 0) + 1 });
    });
    slot.queue.unshift(...again);
  }

  private async executeBatch(
    key: string,
    p: number,
    slot: Slot,
    commands: RoutedCommand[],
    waited: number,
  ): Promise<CommandResult[]> {
    const results: CommandResult[] = [];
    const entries: LogEntry[] = [];
    const writes: TableWrite[] = [];
    const draft = { state: slot.state, type: slot.type };
    const before = { seq: this.seq.get(p)!, check: this.lastCheck.get(p)! };
    const rowing = this.rowing(key, slot);
    try {
      this.decideAll(key, p, { draft, commands, results, entries, writes, rowing });
    } catch (error) {
      // Nothing was appended: the partition's next record takes the seq it would have taken.
      this.seq.set(p, before.seq);
      this.lastCheck.set(p, before.check);
      throw error;
    }
    if (entries.length === 0) {
      if (writes.length > 0) await this.options.log.write(writes);
      return results;
    }
    // The head in the same commit: one small row per batch (chain.ts).
    const check = this.lastCheck.get(p)!;
    writes.push(headRows.head(p, { seq: entries[entries.length - 1]!.seq, check }));
    // So is the aggregate's deadline where the batch set, moved or cleared it (issue 33), and
    // its state whole, where it may leave memory: what it comes back from.
    writes.push(...this.deadlineMoved(key, p, slot, draft));
    let pin = false;
    if (rowing === 'write') {
      const q = entries[entries.length - 1]!.seq;
      const state = planted('stale-state-row') && slot.state !== null ? slot.state : draft.state;
      const row = stateRows.write(key, { a: draft.type, q, s: state });
      writes.push(row);
      pin = row.bytes!.length > this.options.limits.state_row_bytes_max;
    } else if (rowing === 'stop') writes.push({ table: 'states', key, bytes: null });
    const rowed = rowing === 'write';
    const appending = performance.now();
    if (planted('evolve-before-commit')) {
      slot.type = draft.type;
      slot.state = draft.state;
    }
    try {
      const appended = this.appendInOrder(p, entries, writes);
      if (planted('answer-before-flush')) appended.catch(() => undefined);
      else await appended;
    } catch (error) {
      if (!(error instanceof ClaimTakenError || error instanceof NotWrittenError)) throw error;
      throw this.notWritten(p, before, entries[entries.length - 1]!.seq, { commands, error });
    }
    const seconds = (performance.now() - appending) / 1000;
    results[results.length - 1]!.commit = { seconds, commands: entries.length, waited };
    slot.type = draft.type;
    slot.state = draft.state;
    slot.rowed = rowed;
    // Past the bound: the next commit stops the row (this one's row holds its state exactly).
    if (pin) slot.pinned = true;
    if (rowed) this.armSweep();
    this.adopted.set(p, entries[entries.length - 1]!.seq);
    this.adoptedCheck.set(p, check);
    this.scheduleFor(key, slot);
    for (let i = 0; i < entries.length; i++) this.countForSnapshot(p);
    return results;
  }

  /**
   * An append refused with nothing written. Where no append of `p` followed it, the partition's
   * next record takes the seq this one would have taken; else `p` is folded again (its later
   * appends will be refused as not following on).
   */
  private notWritten(
    p: number,
    before: { seq: number; check: number },
    lastSeq: number,
    refused: { commands: RoutedCommand[]; error: ClaimTakenError | NotWrittenError },
  ): BatchNotWritten {
    // The log's records of `p` are not what this shard took them to be (PN002): only a fold of
    // `p` from the log says where it stands.
    const unsure = refused.error instanceof NotFollowingError;
    if (this.seq.get(p) === lastSeq && !this.doubted.has(p) && !unsure) {
      this.seq.set(p, before.seq);
      this.lastCheck.set(p, before.check);
    } else if (!this.doubted.has(p)) {
      this.doubted.add(p);
      this.doubts++;
      this.refold(p);
    }
    const { commands, error } = refused;
    if (!(error instanceof ClaimTakenError)) return new BatchNotWritten(-1, null);
    const taken = commands.findIndex((routed) =>
      claimsOf(routed).some((c) => c.table === error.table && c.key === error.key),
    );
    return new BatchNotWritten(
      taken,
      taken === -1
        ? null
        : claimsOf(commands[taken]!).find((c) => c.table === error.table && c.key === error.key)!
            .kind,
    );
  }

  /** Decides a batch's commands one after another against the draft, gathering what commits. */
  private decideAll(
    key: string,
    p: number,
    batch: {
      draft: { state: unknown; type: string };
      commands: RoutedCommand[];
      results: CommandResult[];
      entries: LogEntry[];
      writes: TableWrite[];
      rowing: Rowing;
    },
  ): void {
    const { draft, commands, results, entries, writes, rowing } = batch;
    // The state the batch starts from: what a record that stops the row carries (`s`).
    const before = draft.state;
    const claimed = new Set<string>();
    for (const routed of commands) {
      // A command that reads committed views, once an earlier one of the batch has changed the
      // state, ends the batch: the views it reads are not yet what the draft says (a receipt
      // issued and its transition behind it, in one batch, read no envelope; found by the
      // simulator, issue 30, cluster seed 5075). It is decided next, on what is then durable.
      if (entries.length > 0 && this.readsViews(routed, draft.state)) break;
      // A claim one command of the batch makes is not another's (only one commit takes it).
      const again = claimsOf(routed).find((c) => claimed.has(`${c.table}\u0000${c.key}`));
      if (again !== undefined) {
        results.push(takenResult(again.kind));
        continue;
      }
      // The seq its record takes if it commits one: its views and usage rows name it.
      const position = { partition: p, seq: this.seq.get(p)! + 1 };
      const outcome = this.decideOne(key, draft, routed, position);
      if (outcome.kind === 'answered') {
        results.push(outcome.result);
        // A follow-up decided without a change is done all the same: its row goes.
        if (routed.followUp !== undefined)
          writes.push({ table: 'followups', key: routed.followUp, bytes: null });
        continue;
      }
      const seq = this.seq.get(p)! + 1;
      const record: LogRecord =
        rowing === 'write'
          ? { ...outcome.record, w: 1 }
          : rowing === 'stop' && entries.length === 0
            ? { ...outcome.record, s: before }
            : outcome.record;
      const bytes = frameRecord(record, this.lastCheck.get(p)!);
      this.seq.set(p, seq);
      const check = recordCheck(bytes);
      this.lastCheck.set(p, check);
      entries.push({ partition: p, seq, bytes });
      writes.push(...outcome.writes);
      // A directory change names its record: the directory image's position (issue 34).
      const { result } = outcome;
      const changed = result.directory.length > 0;
      results.push(changed ? { ...result, directoryAt: { partition: p, seq, check } } : result);
      for (const c of claimsOf(routed)) claimed.add(`${c.table}\u0000${c.key}`);
    }
  }

  /** The answer of a command its decider is not to be asked about, or null. */
  private answerBefore(routed: RoutedCommand, now: number): CommandResult | null {
    const problem = this.checks.problem(routed);
    if (problem !== null) return refused(problem);
    // A request whose replay window ended while it waited is decided no more (P5): its mark's
    // claim, made by an earlier sending of it, may have lapsed with the window, and a commit now
    // would run the request twice (found by the simulator, issue 30: a charge sent twice, the
    // second delayed past the window, committed twice). Its caller hears it as replayed.
    if (routed.replay !== undefined && routed.replay.until <= now) return takenResult('replay');
    return null;
  }

  /** Decides one command against the draft; evolves the draft when it commits something. */
  private decideOne(
    key: string,
    draft: { state: unknown; type: string },
    routed: RoutedCommand,
    position: RecordPosition,
  ): Decided {
    const decider = this.deciders.get(routed.aggregate);
    if (decider === undefined || (draft.state !== null && draft.type !== routed.aggregate)) {
      return {
        kind: 'answered',
        result: refused(refusal('path.core.not_found', 'no such object')),
      };
    }
    const now = this.options.clock.now();
    const before = this.answerBefore(routed, now);
    if (before !== null) return { kind: 'answered', result: before };
    const command = routed.command as CommandOf<CommandSchemas>;
    const decision = decider.decide(command, draft.state, {
      now,
      member: this.options.member,
      signer: this.options.signer(),
      newId: this.options.newId,
      limits: this.options.limits,
      dev: this.options.dev ?? false,
      views: this.readViews(decider, command, draft.state, now),
      ...(this.options.unseal === undefined ? {} : { unseal: this.options.unseal }),
    });
    if (isRefusal(decision)) return { kind: 'answered', result: refused(decision) };
    const reply = replyOf(decision.answer, decision.meta);
    if (decision.events.length === 0) {
      return {
        kind: 'answered',
        result: { reply, committed: false, outbox: [], directory: [], followUps: [] },
      };
    }
    for (const event of decision.events) draft.state = decider.evolve(draft.state, event);
    draft.type = routed.aggregate;
    const publications = [
      ...(decision.publications ?? []),
      ...(decider.publications?.(draft.state) ?? []),
    ];
    const newId = () => this.options.newId('evt').slice(4);
    const followUps = pendingFollowUps(decision, newId);
    const outbox = keptOutbox(decision, this.options.operatorWebhooks ?? true);
    const writes = decisionWrites({
      decision,
      outbox,
      publications,
      routed,
      reply,
      now,
      newId,
      followUps,
      position,
      retentionMs: this.options.limits.idempotency_retention_ms,
      directoryChanges: this.options.directoryChanges ?? false,
    });
    return {
      kind: 'committed',
      record: { a: decider.type, k: key, e: decision.events, t: now },
      writes,
      result: {
        reply,
        committed: true,
        outbox: outbox.map((e) => e.id),
        directory: decision.directory ?? [],
        followUps,
      },
    };
  }

  /**
   * Appends a batch; records of one partition are adopted in sequence order, so a snapshot taken
   * between two adoptions is exactly the fold of the records up to its seq.
   */
  private async appendInOrder(p: number, entries: LogEntry[], writes: TableWrite[]): Promise<void> {
    const appended = this.options.log.append(entries, writes);
    // Heard at once: an append refused while an earlier one of its partition is still under way
    // (a write the store refused, a log closed by a stop) is answered through `ready` once that
    // one is; left unheard until then, it would end the process as an unhandled rejection (a
    // defect the simulator found, issue 30: seed 5 of `npm run simulate -- --cluster`).
    appended.catch(() => undefined);
    const ready = this.applied.get(p)!.then(() => appended);
    this.applied.set(
      p,
      ready.catch(() => undefined),
    );
    try {
      await ready;
    } catch (error) {
      // Cluster mode: another instance holds the partition now. Nothing of this was written and
      // no state was adopted from it; what this shard held of the partition is forgotten.
      if (error instanceof NotHeldError) {
        this.lose(p);
        throw new MovedError(p);
      }
      // Refused with nothing written: certain, so nothing is in doubt (executeBatch).
      if (error instanceof ClaimTakenError || error instanceof NotWrittenError) throw error;
      // Committed or not, nobody can say here: the log can, once it answers again.
      this.doubt(p, error);
      throw unreachable(error) ? error : new UnavailableError(`partition ${p}: append failed`);
    }
  }

  /** The committed views a decision asked for, asked again while each round names new keys. */
  private readViews(
    decider: AnyDecider,
    command: CommandOf<CommandSchemas>,
    state: unknown,
    now: number,
  ): ReadonlyMap<string, ReadView> {
    // Most commands read nothing: they share one empty map and allocate nothing here.
    const first = decider.reads?.(command, state, NO_VIEWS) ?? [];
    if (first.length === 0) return NO_VIEWS;
    const views = new Map<string, ReadView>();
    const asked = new Set<string>();
    for (let round = 0; round < DECISION_READ_ROUNDS_MAX; round++) {
      const named = round === 0 ? first : decider.reads!(command, state, views);
      const fresh = named.filter((k) => !asked.has(k));
      if (fresh.length === 0) break;
      for (const key of fresh) {
        asked.add(key);
        const bytes = this.options.log.get('views', key);
        if (bytes === undefined) continue;
        // A damaged view is not an absent one: deciding on it would act on unverified state (P14).
        const view = decodeView(bytes);
        if (view === null) throw new DamagedRowError('views', key);
        views.set(key, readView(view, now));
      }
    }
    return views;
  }

  /** The deadline of a state of `type`, or null (none, or no state). */
  private deadlineOf(type: string, state: unknown): number | null {
    if (state === null) return null;
    return this.deciders.get(type)?.deadline?.(state) ?? null;
  }

  /**
   * The `deadlines` rows a batch changes (rows.ts, deadlineRows): the row of the deadline its
   * aggregate had taken away, and that of the one it has now put in, when they differ. Removing
   * a row never written (a state stored before the rows were) changes nothing.
   */
  private deadlineMoved(
    key: string,
    p: number,
    slot: Slot,
    draft: { type: string; state: unknown },
  ): TableWrite[] {
    const before = this.deadlineOf(slot.type, slot.state);
    const after = this.deadlineOf(draft.type, draft.state);
    if (before === after) return [];
    const writes: TableWrite[] = [];
    if (before !== null && !planted('keep-old-deadline-row'))
      writes.push(deadlineRows.removal(p, before, key));
    if (after !== null) writes.push(deadlineRows.row(p, after, key, draft.type));
    return writes;
  }

  private scheduleFor(key: string, slot: Slot): void {
    const decider = this.deciders.get(slot.type);
    if (decider?.deadline === undefined || slot.state === null) return;
    this.scheduler.schedule(key, decider.deadline(slot.state), slot.type);
  }

  /** The deadlines of partition `p` as its `deadlines` rows keep them (issue 33). */
  private scheduleRows(p: number): void {
    for (const { key, bytes } of this.options.log.scan('deadlines', deadlineRows.of(p))) {
      const due = deadlineRows.parse(key);
      this.scheduler.schedule(due.key, due.at, deadlineRows.read(key, bytes).a);
    }
  }

  /** An aggregate's `states` row, read and checked (a damaged one throws DamagedRowError). */
  private storedState(key: string): StateRow | undefined {
    return this.storedRow(key)?.row;
  }

  /** The row, and whether it is past `state_row_bytes_max` (its next commit stops it). */
  private storedRow(key: string): { row: StateRow; past: boolean } | undefined {
    const bytes = this.options.log.get('states', key);
    if (bytes === undefined) return undefined;
    const past = bytes.length > this.options.limits.state_row_bytes_max;
    return { row: stateRows.read(key, bytes), past };
  }

  /** What the next batch of `slot` does for its row. */
  private rowing(key: string, slot: Slot): Rowing {
    if (this.deciders.get(slot.type)?.passivates !== true) return 'none';
    this.measure(key, slot);
    if (slot.pinned) return slot.rowed ? 'stop' : 'none';
    return 'write';
  }

  /**
   * Pins one that keeps rows but that its row does not hold (folded from a snapshot, or from
   * records that wrote none) when its state is past the bound; one within it has its row
   * written from its next commit on.
   */
  private measure(key: string, slot: Slot): void {
    if (slot.rowed || slot.pinned || slot.state === null) return;
    if (this.deciders.get(slot.type)?.passivates !== true) return;
    const max = this.options.limits.state_row_bytes_max;
    // Each value it holds takes a byte at least: one with more is past without being encoded.
    slot.pinned =
      holdsMoreValuesThan(slot.state, max) ||
      stateRows.write(key, { a: slot.type, q: 0, s: slot.state }).bytes!.length > max;
  }

  /**
   * The slot of an aggregate not in memory (issue 33): of a type that keeps its state as a row,
   * from that row, else (or with none yet) a new aggregate's, with no state.
   */
  private activate(key: string, type: string): Slot {
    const used = this.options.clock.now();
    const fresh = slotOf(type, null, false, used);
    if (this.deciders.get(type)?.passivates !== true) return fresh;
    const stored = this.storedRow(key);
    if (stored === undefined) return fresh;
    this.residency.activations++;
    this.armSweep();
    const slot = slotOf(stored.row.a, stored.row.s, true, used);
    slot.pinned = stored.past;
    return slot;
  }

  /**
   * Arms the next sweep (passivate) unless one is armed or the shard has stopped: while it holds
   * aggregates that may leave memory, and only then (an idle shard sets no timer).
   */
  private armSweep(): void {
    if (this.stopped || this.sweepTimer !== null) return;
    this.sweepTimer = this.options.clock.setTimer(() => {
      this.sweepTimer = null;
      const before = this.residency.passivations;
      const left = this.passivate();
      const since = this.sinceSweep;
      since.released += this.residency.passivations - before;
      // Idle since the last sweep, and many let go of: their memory goes back now.
      if (since.commands === 0 && since.released >= COLLECT_AFTER_PASSIVATIONS) {
        this.options.collect?.();
        since.released = 0;
      }
      since.commands = 0;
      // Once all are let go of, one more sweep waits for the quiet the collection needs.
      if (left > 0 || since.released >= COLLECT_AFTER_PASSIVATIONS) this.armSweep();
    }, this.options.limits.passivation_sweep_interval_ms);
  }

  /**
   * Lets go of the aggregates that may leave memory (issue 33): each idle for aggregate_idle_ms,
   * then, while the shard holds more than its share of aggregates_in_memory_max, the least
   * recently used. Only one whose row holds its state as committed, with no command running or
   * waiting, in a partition held and folded: the next command brings it back from its row.
   * Answers how many that may leave memory it still holds.
   */
  passivate(): number {
    const limits = this.options.limits;
    const now = this.options.clock.now();
    const share = Math.ceil(
      (limits.aggregates_in_memory_max * this.options.partitions.length) / PARTITION_COUNT,
    );
    let held = this.aggregatesInMemory();
    let rowed = 0;
    const candidates: { p: number; key: string; used: number }[] = [];
    for (const [p, slots] of this.slots) {
      if (!this.holdsFolded(p)) continue;
      for (const [key, slot] of slots) {
        if (slot.rowed) rowed++;
        if (!(slot.rowed || planted('passivate-unrowed')) || slot.busy || slot.queue.length > 0)
          continue;
        if (now - slot.used >= limits.aggregate_idle_ms) {
          slots.delete(key);
          this.residency.passivations++;
          held--;
          rowed--;
        } else if (held > share) candidates.push({ p, key, used: slot.used });
      }
    }
    if (held > share) {
      candidates.sort((a, b) => a.used - b.used);
      for (const { p, key } of candidates) {
        if (held <= share) break;
        this.slots.get(p)!.delete(key);
        this.residency.passivations++;
        held--;
        rowed--;
      }
    }
    return rowed;
  }

  private tick(key: string, type: string): void {
    const slot = this.slots.get(partitionOf(key))?.get(key);
    const aggregate = slot?.type ?? type;
    if (aggregate === '') return;
    this.submit({
      aggregate,
      key,
      command: { name: 'tick', input: null, caller: null },
    }).then(
      (result) => {
        if (result.committed) this.options.onEffects?.(result);
        // Refused for want of the log: asked again later (a refold schedules it anew as well).
        else if (result.reply.status === 503) this.retryTick(key, aggregate);
      },
      (error: unknown) => {
        if (error instanceof MovedError) return;
        this.options.onTrouble?.(error, partitionOf(key));
        this.retryTick(key, aggregate);
      },
    );
  }

  private retryTick(key: string, type: string): void {
    const at = this.options.clock.now() + DATABASE_RETRY_AFTER_SECONDS * 1000;
    this.scheduler.schedule(key, at, type);
  }

  private countForSnapshot(p: number): void {
    const count = this.sinceSnapshot.get(p)! + 1;
    this.sinceSnapshot.set(p, count);
    // While one is under way the count goes on, and the next record after it starts another.
    if (count >= this.options.snapshotEveryRecords && !this.snapshotting.has(p))
      this.snapshot(p).catch((error: unknown) => this.snapshotFailed(p, error));
  }

  /**
   * A snapshot refused because the partition moved loses it here; any other failure is told and
   * costs only time: the records it would have summed stay in the log, and the next record
   * starts another.
   */
  private snapshotFailed(p: number, error: unknown): void {
    if (error instanceof NotHeldError) return this.lose(p);
    this.options.onTrouble?.(error, p);
    const since = this.sinceSnapshot.get(p)!;
    this.sinceSnapshot.set(p, Math.max(since, this.options.snapshotEveryRecords - 1));
  }

  /**
   * The states are taken synchronously after the last adoption, so they are the fold up to
   * `seq`; being immutable values, they stay so while they are encoded a slice at a time. Not
   * of a partition in doubt: an append of it failed with its commit unknown while later ones of
   * it landed, so its states may lack a record before `seq` (or hold one never written). Such a
   * snapshot would be read as the fold up to `seq` and the record skipped by every later fold
   * (found by the simulator, issue 30: a mandate consumed past its max_total). Nor is one
   * written whose partition fell in doubt while it was encoded; the refold's states are
   * snapshotted later.
   */
  private snapshot(p: number): Promise<void> {
    if (this.doubted.has(p)) return Promise.resolve();
    const doubts = this.doubts;
    const aggregates: SnapshotBody['aggregates'] = [];
    // Not those whose rows hold them (issue 33): a fold leaves them there, as they are on disk.
    for (const [key, slot] of this.slots.get(p)!)
      if (slot.state !== null && !slot.rowed) aggregates.push([key, slot.type, slot.state]);
    const body: SnapshotBody = {
      seq: this.adopted.get(p)!,
      check: this.adoptedCheck.get(p)!,
      aggregates,
    };
    this.sinceSnapshot.set(p, 0);
    const written = frameSnapshot(body)
      .then((bytes) =>
        this.doubted.has(p) || this.doubts !== doubts
          ? undefined
          : this.options.log.writeSnapshot(p, bytes),
      )
      .finally(() => this.snapshotting.delete(p));
    this.snapshotting.set(p, written);
    return written;
  }
}

/**
 * Rethrows all but a snapshot refused because its partition moved (cluster mode): the new owner
 * snapshots it, and what this shard held of it is not the last word.
 */
function unlessMoved(error: unknown): void {
  if (!(error instanceof NotHeldError)) throw error;
}

/** The answer to a command the log could not take now (P7): retried after a moment. */
function unavailable(): CommandResult {
  return refused(
    refusal('path.core.unavailable', 'the database does not answer; try again shortly', {
      retry_after_seconds: DATABASE_RETRY_AFTER_SECONDS,
    }),
  );
}

function refused(r: Refusal): CommandResult {
  return { reply: errorReply(r), committed: false, outbox: [], directory: [], followUps: [] };
}
