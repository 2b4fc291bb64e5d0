// The front end's side of the shards: starts one worker per shard, routes each command to the
// worker that owns its aggregate's partition, and matches answers to callers.
import { once } from 'node:events';
import { availableParallelism } from 'node:os';
import { Worker, type Transferable } from 'node:worker_threads';
import { PARTITION_COUNT, partitionOf } from '../log/log.js';
import type { Holding } from '../log/log.js';
import { refusal } from '../protocol/errors.js';
import {
  RECOVERY_HELPERS_PER_WORKER_MAX,
  WORKER_MESSAGE_CHUNK_MAX,
  WORKER_YOUNG_GENERATION_MB,
  type Limits,
} from '../config.js';
import { startHelpers, type Checked, type Helped } from './recovery.js';
import {
  turnBatcher,
  type FromWorker,
  type Residency,
  type ToWorker,
  type WorkerData,
} from './messages.js';
import { MovedError } from './moved.js';
import { UnavailableError } from '../log/unavailable.js';
import type { RecoveryStats } from './shard.js';
import type { CommandResult, CommitFigures, PendingFollowUp, RoutedCommand } from './types.js';
import { carryOut } from './follow-ups.js';
import type { AnswerBody } from '../domain/budget/budget.js';
import type { hashKeys, KeyItem } from '../protocol/identifiers.js';

/** A call to a worker awaiting its answer. */
interface Pending {
  resolve: (value: never) => void;
  reject: (e: Error) => void;
}

export interface PoolOptions {
  workers: number;
  dataDir: string;
  store: string | null;
  /** Cluster mode: partitions held by other instances at start, adopted when they come here. */
  released?: readonly number[];
  /** Cluster mode: what the workers' appends are checked against (the partitions held). */
  holding?: Holding;
  member: string;
  seedHex: string;
  sealingKeyHex: string;
  pepperHex: string;
  limits: Limits;
  /** The node runs with `--dev` (its deciders allow plain-http and loopback webhook targets). */
  dev: boolean;
  /** The node has operator webhook endpoints: every event has a target (decision.ts keptOutbox). */
  operatorWebhooks: boolean;
  /** The node cannot go on (a worker lost durability or died). */
  onFatal: (message: string) => void;
  /** A failure a worker lives through (issue 29): the node logs it. */
  onTrouble?: (trouble: Extract<FromWorker, { t: 'trouble' }>) => void;
  /**
   * The one fan-out after every commit, whoever caused it (a call, a follow-up, a tick): the
   * front end refreshes its reads, delivers the outbox events and applies index rows. What it
   * returns, if anything, the command's answer waits for.
   */
  afterCommit: (result: CommandResult) => Promise<void> | undefined;
  /** Told of each durable commit's duration and size (the operator's metrics, P21). */
  onCommit?: (commit: CommitFigures) => void;
}

/** How a command travels to its worker. */
export interface SubmitOptions {
  /**
   * Buffers of the command moved to the worker rather than copied (a large packed input): the
   * caller gives them up, and reads them no more once the command is sent.
   */
  transfer?: readonly Transferable[];
}

/** What the front end's routes ask of the shards: a pool's, or in cluster mode the router's. */
export type Commands = Pick<ShardPool, 'submit' | 'hashKeys' | 'signAnswers'>;

export class ShardPool {
  private readonly workers: Worker[] = [];
  private readonly pending = new Map<number, Pending>();
  /** Each worker's messages of this turn, posted together (messages.ts). */
  private readonly senders: ((message: ToWorker, transfer?: readonly Transferable[]) => void)[] =
    [];

  /** Commands and other calls sent to the workers and not yet answered. */
  get pendingCount(): number {
    return this.pending.size;
  }
  /** Each worker's warm-up: settled by its `recovered` message. */
  private readonly folded: Settled<RecoveryStats>[] = [];
  /** Recovery helper threads: they end once nothing is left to claim (at once on a drain). */
  private readonly helpers: Promise<unknown>[] = [];
  /** The helper threads themselves, ended at once when a start is abandoned. */
  private readonly helperThreads: Worker[] = [];
  private nextId = 1;
  /** Round robin for stateless work (any worker will do). */
  private nextStateless = 0;
  private stopping = false;
  /** The workers that checked their partitions: a fatal failure of one of them ends the node. */
  private readonly checkedWorkers = new Set<number>();
  /** Where follow-ups go: this pool, or in cluster mode the owners of their partitions. */
  private route: (routed: RoutedCommand) => Promise<CommandResult> = (routed) =>
    this.submit(routed);

  private constructor(private readonly options: PoolOptions) {}

  /**
   * Starts the workers and waits until each has checked its partitions (P14); they fold them
   * from then on, while the node answers (`recovered` says when all are).
   */
  static async start(options: PoolOptions): Promise<{ pool: ShardPool; checked: Checked }> {
    const pool = new ShardPool(options);
    const spawned = await Promise.allSettled(
      Array.from({ length: options.workers }, (_, i) => pool.spawn(i)),
    );
    const refused = spawned.find((s) => s.status === 'rejected');
    if (refused !== undefined) {
      // Every thread ends before the refusal goes up: the process then exits with none of them
      // midway through a read of the data file.
      await pool.abandon();
      throw refused.reason;
    }
    return {
      pool,
      checked: added(spawned.map((s) => (s as PromiseFulfilledResult<Checked>).value)),
    };
  }

  /** A start refused: its workers and their helpers ended (a helper may be mid-fold). */
  private async abandon(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.workers, ...this.helperThreads].map((w) => w.terminate()));
    await Promise.all(this.helpers);
  }

  /** Resolves once every worker has folded all its partitions, with what recovery read. */
  get recovered(): Promise<RecoveryStats> {
    return Promise.all(this.folded.map((f) => f.promise)).then(added);
  }

  /**
   * Runs a command on the worker that owns its aggregate's partition. The follow-ups its commit
   * wrote are carried out before the answer, so a caller sees their effect; were the node to
   * stop first, the next start carries them out from their rows (resumeFollowUps).
   */
  async submit(routed: RoutedCommand, options?: SubmitOptions): Promise<CommandResult> {
    const worker = partitionOf(routed.key) % this.workers.length;
    const message = (id: number): ToWorker => ({ t: 'command', id, routed });
    const result = await this.call<CommandResult>(worker, message, options?.transfer);
    const after = result.committed ? this.options.afterCommit(result) : undefined;
    if (after !== undefined) await after;
    if (result.followUps.length > 0)
      await Promise.all(result.followUps.map((f) => this.carryOut(f)));
    return result;
  }

  /**
   * Cluster mode (P22): the partition leaves this instance. Its commands running or waiting are
   * answered, its snapshot written; those that come later are refused with MovedError.
   */
  release(partition: number): Promise<void> {
    const worker = partition % this.workers.length;
    return this.call(worker, (id) => ({ t: 'release', id, partition }));
  }

  /** Cluster mode: the partition comes (back) to this instance, folded from the log first. */
  adopt(partition: number): Promise<void> {
    const worker = partition % this.workers.length;
    return this.call(worker, (id) => ({ t: 'adopt', id, partition }));
  }

  /** Cluster mode (P22): follow-ups are sent to the instance holding their partition. */
  routeFollowUps(route: (routed: RoutedCommand) => Promise<CommandResult>): void {
    this.route = route;
  }

  /** Carries out the follow-ups earlier runs wrote and did not finish (at start). */
  async resumeFollowUps(pending: Iterable<PendingFollowUp>): Promise<number> {
    const all = [...pending];
    await Promise.all(all.map((f) => this.carryOut(f)));
    return all.length;
  }

  private carryOut(f: PendingFollowUp): Promise<void> {
    const { limits } = this.options;
    return carryOut(f, {
      submit: (routed) => this.route(routed),
      retryMs: limits.follow_up_retry_ms,
      retryMaxMs: limits.follow_up_retry_max_ms,
      stopped: () => this.stopping,
    });
  }

  /** Signs lookup answers on the next worker in turn (stateless work, spread over the shards). */
  signAnswers(answers: AnswerBody[], requester: string, signedAt: string): Promise<string> {
    return this.call(this.nextWorker(), (id) => ({
      t: 'sign-answers',
      id,
      answers,
      requester,
      signedAt,
    }));
  }

  /** Normalises and hashes lookup keys on the next worker in turn (stateless work). */
  hashKeys(items: KeyItem[], offset: number): Promise<ReturnType<typeof hashKeys>> {
    return this.call(this.nextWorker(), (id) => ({ t: 'hash-keys', id, items, offset }));
  }

  /**
   * Aggregates held in memory by every worker's shard, and those brought back from their rows
   * and let go of since the start (issue 33); asked when the metrics are scraped.
   */
  async residency(): Promise<Residency> {
    const counts = this.workers.map((_, worker) =>
      this.call<Residency>(worker, (id) => ({ t: 'census', id })),
    );
    const total: Residency = {
      aggregates: 0,
      pinned: 0,
      activations: 0,
      passivations: 0,
      heapUsed: 0,
      heapTotal: 0,
      external: 0,
    };
    for (const count of await Promise.all(counts))
      for (const figure of Object.keys(total) as (keyof Residency)[])
        total[figure] += count[figure];
    return total;
  }

  private nextWorker(): number {
    return this.nextStateless++ % this.workers.length;
  }

  /**
   * Calls awaiting a worker are bounded (pending_commands_max): past it the caller is refused
   * with 503 and Retry-After (P7) instead of queueing without end while the workers catch up.
   */
  private call<T>(
    worker: number,
    message: (id: number) => ToWorker,
    transfer?: readonly Transferable[],
  ): Promise<T> {
    if (this.pending.size >= this.options.limits.pending_commands_max) {
      return Promise.reject(
        refusal('path.core.unavailable', 'the node has too many commands in flight', {
          retry_after_seconds: 1,
        }),
      );
    }
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: never) => void, reject });
      this.post(worker, message(id), transfer);
    });
  }

  /** Queues a message for a worker: it leaves with the others of this turn (turnBatcher). */
  private post(worker: number, message: ToWorker, transfer?: readonly Transferable[]): void {
    this.senders[worker]!(message, transfer);
  }

  setSigningKey(seedHex: string): void {
    this.workers.forEach((_, i) => this.post(i, { t: 'signing-key', seedHex }));
  }

  /** Lets every worker finish its commands, snapshot and close the log. */
  async drain(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.workers.map(
        (w, i) =>
          new Promise<void>((resolve) => {
            w.on('message', (messages: FromWorker[]) => {
              if (messages.some((m) => m.t === 'drained')) resolve();
            });
            w.on('exit', () => resolve());
            this.post(i, { t: 'drain' });
          }),
      ),
    );
    await Promise.all(this.workers.map((w) => w.terminate()));
    await Promise.all(this.helpers);
  }

  /** Threads that fold some of a worker's partitions beside it at start (recovery.ts). */
  private helpersOf(index: number, partitions: number[]): Helped {
    const { helped, threads } = startHelpers({
      dataDir: this.options.dataDir,
      store: this.options.store,
      partitions,
      helpers: recoveryHelpers(this.options.workers),
      heapMb: this.options.limits.worker_heap_mb,
      // A helper ended by an abandoned start (abandon) is no failure of the node.
      onFatal: (message) => {
        if (!this.stopping) this.options.onFatal(`shard ${index}: ${message}`);
      },
    });
    // Their ends, watched from the start: most have ended long before a drain.
    for (const t of threads) this.helpers.push(once(t, 'exit').catch(() => undefined));
    this.helperThreads.push(...threads);
    return helped;
  }

  private spawn(index: number): Promise<Checked> {
    this.folded[index] = settled<RecoveryStats>();
    const partitions = [];
    for (let p = index; p < PARTITION_COUNT; p += this.options.workers) partitions.push(p);
    const data: WorkerData = {
      index,
      dataDir: this.options.dataDir,
      store: this.options.store,
      partitions,
      released: partitions.filter((p) => this.options.released?.includes(p)),
      holding: this.options.holding ?? null,
      member: this.options.member,
      seedHex: this.options.seedHex,
      sealingKeyHex: this.options.sealingKeyHex,
      pepperHex: this.options.pepperHex,
      limits: this.options.limits,
      dev: this.options.dev,
      helped: this.helpersOf(index, partitions),
      operatorWebhooks: this.options.operatorWebhooks,
    };
    // The entry as bundled into one file (scripts/bundle.ts): it loads in a fraction of the time.
    const worker = new Worker(new URL('../bundled/worker.js', import.meta.url), {
      workerData: data,
      transferList: data.helped.ports,
      resourceLimits: {
        maxOldGenerationSizeMb: this.options.limits.worker_heap_mb,
        maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB,
      },
    });
    this.workers[index] = worker;
    this.senders[index] = turnBatcher<ToWorker>(
      (messages, transfer) => worker.postMessage(messages, transfer),
      WORKER_MESSAGE_CHUNK_MAX,
    ).send;
    return new Promise((resolve, reject) => {
      worker.on('message', (messages: FromWorker[]) => {
        for (const m of messages) this.received(index, m, { resolve, reject });
      });
      worker.on('error', (error) => {
        reject(error);
        if (this.checkedWorkers.has(index))
          this.options.onFatal(`shard ${index}: ${error.message}`);
      });
      worker.on('exit', (code) => {
        const message = `shard ${index} exited with code ${code}`;
        reject(new Error(message));
        if (!this.stopping && this.checkedWorkers.has(index)) this.options.onFatal(message);
      });
    });
  }

  /** One message of a worker; `started` settles its start. */
  private received(
    index: number,
    m: FromWorker,
    started: { resolve: (checked: Checked) => void; reject: (error: Error) => void },
  ): void {
    const { resolve, reject } = started;
    // The commit rides on the last result of its batch, committed or not (a read, a refusal).
    if ((m.t === 'result' || m.t === 'effects') && m.result.commit !== undefined)
      this.options.onCommit?.(m.result.commit);
    switch (m.t) {
      case 'ready':
        this.checkedWorkers.add(index);
        resolve(m.checked);
        break;
      case 'recovered':
        this.folded[index]!.resolve(m.stats);
        break;
      case 'result':
        this.settle(m.id)?.resolve(m.result as never);
        break;
      case 'signed':
        this.settle(m.id)?.resolve(m.text as never);
        break;
      case 'hashed':
        this.settle(m.id)?.resolve(m.outcome as never);
        break;
      case 'done':
        this.settle(m.id)?.resolve(undefined as never);
        break;
      case 'counted':
        this.settle(m.id)?.resolve({
          aggregates: m.aggregates,
          pinned: m.pinned,
          activations: m.activations,
          passivations: m.passivations,
          heapUsed: m.heapUsed,
          heapTotal: m.heapTotal,
          external: m.external,
        } as never);
        break;
      case 'failed':
        this.settle(m.id)?.reject(failure(m));
        break;
      case 'trouble':
        this.options.onTrouble?.(m);
        break;
      case 'fatal':
        reject(new Error(m.message));
        this.folded[index]!.reject(new Error(m.message));
        // Before the worker checked its partitions, the start's refusal carries it (start).
        if (this.checkedWorkers.has(index)) this.options.onFatal(`shard ${index}: ${m.message}`);
        break;
      case 'effects':
        void this.options.afterCommit(m.result);
        for (const f of m.result.followUps) void this.carryOut(f);
        break;
      case 'drained':
        break;
    }
  }

  private settle(id: number): Pending | undefined {
    const p = this.pending.get(id);
    this.pending.delete(id);
    return p;
  }
}

/** A worker's failed call as the error it was there: moved, the database gone, or other. */
function failure(m: Extract<FromWorker, { t: 'failed' }>): Error {
  if (m.moved !== undefined) return new MovedError(m.moved);
  return m.unavailable === true ? new UnavailableError(m.message) : new Error(m.message);
}

/** A promise and what settles it. */
interface Settled<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: Error) => void;
}

function settled<T>(): Settled<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  // A warm-up that fails is reported as fatal (onFatal): nobody need be waiting on it.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** Counts of several workers added up, field by field. */
function added<T extends { [K in keyof T]: number }>(counts: T[]): T {
  const sum = { ...counts[0]! };
  for (const c of counts.slice(1))
    for (const k of Object.keys(sum) as (keyof T)[]) sum[k] = (sum[k] + c[k]) as T[keyof T];
  return sum;
}

/**
 * Recovery helpers per worker at start: the cores the workers leave idle (the front end waits
 * for them meanwhile), shared out among the workers.
 */
function recoveryHelpers(workers: number): number {
  const spare = Math.max(0, availableParallelism() - workers);
  return Math.min(RECOVERY_HELPERS_PER_WORKER_MAX, Math.floor(spare / workers));
}
