// The front end's side of the shards: starts one worker per shard, routes each command to the
// worker that owns its aggregate's partition, and matches answers to callers.
import { Worker } from 'node:worker_threads';
import { PARTITION_COUNT, partitionOf } from '../log/log.js';
import type { Limits } from '../config.js';
import type { FromWorker, ToWorker, WorkerData } from './messages.js';
import type { RecoveryStats } from './shard.js';
import type { CommandResult, RoutedCommand } from './types.js';
import type { AnswerBody } from '../domain/budget/budget.js';
import type { hashKeys, KeyItem } from '../protocol/identifiers.js';

interface Pending { resolve: (r: CommandResult) => void; reject: (e: Error) => void }

export interface PoolOptions {
  workers: number;
  dataDir: string;
  member: string;
  seedHex: string;
  sealingKeyHex: string;
  pepperHex: string;
  limits: Limits;
  /** The node cannot go on (a worker lost durability or died). */
  onFatal: (message: string) => void;
  /** What a worker's time-driven command committed (outbox events, index rows). */
  onEffects: (result: CommandResult) => void;
}

export class ShardPool {
  private readonly workers: Worker[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private nextSigner = 0;
  private readonly signing = new Map<number, { resolve: (text: string) => void; reject: (e: Error) => void }>();
  private readonly hashing = new Map<number, { resolve: (outcome: ReturnType<typeof hashKeys>) => void; reject: (e: Error) => void }>();
  private stopping = false;

  private constructor(private readonly options: PoolOptions) {}

  /** Starts the workers and waits until each has recovered its partitions. */
  static async start(options: PoolOptions): Promise<{ pool: ShardPool; stats: RecoveryStats }> {
    const pool = new ShardPool(options);
    const recovered = await Promise.all(Array.from({ length: options.workers }, (_, i) => pool.spawn(i)));
    const stats: RecoveryStats = { snapshots: 0, records: 0, aggregates: 0, discardedTails: 0 };
    for (const s of recovered) {
      stats.snapshots += s.snapshots;
      stats.records += s.records;
      stats.aggregates += s.aggregates;
      stats.discardedTails += s.discardedTails;
    }
    return { pool, stats };
  }

  pendingCount(): number {
    return this.pending.size;
  }

  submit(routed: RoutedCommand): Promise<CommandResult> {
    const id = this.nextId++;
    const worker = this.workers[partitionOf(routed.key) % this.workers.length]!;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ t: 'command', id, routed } satisfies ToWorker);
    });
  }

  /** Signs lookup answers on the next worker in turn (stateless work, spread over the shards). */
  signAnswers(answers: AnswerBody[], requester: string, signedAt: string): Promise<string> {
    const id = this.nextId++;
    const worker = this.workers[this.nextSigner++ % this.workers.length]!;
    return new Promise((resolve, reject) => {
      this.signing.set(id, { resolve, reject });
      worker.postMessage({ t: 'sign-answers', id, answers, requester, signedAt } satisfies ToWorker);
    });
  }

  /** Normalises and hashes lookup keys on the next worker in turn (stateless work). */
  hashKeys(items: KeyItem[], offset: number): Promise<ReturnType<typeof hashKeys>> {
    const id = this.nextId++;
    const worker = this.workers[this.nextSigner++ % this.workers.length]!;
    return new Promise((resolve, reject) => {
      this.hashing.set(id, { resolve, reject });
      worker.postMessage({ t: 'hash-keys', id, items, offset } satisfies ToWorker);
    });
  }

  setSigningKey(seedHex: string): void {
    for (const w of this.workers) w.postMessage({ t: 'signing-key', seedHex } satisfies ToWorker);
  }

  /** Lets every worker finish its commands, snapshot and close the log. */
  async drain(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.workers.map((w) => new Promise<void>((resolve) => {
      w.on('message', (m: FromWorker) => { if (m.t === 'drained') resolve(); });
      w.on('exit', () => resolve());
      w.postMessage({ t: 'drain' } satisfies ToWorker);
    })));
    await Promise.all(this.workers.map((w) => w.terminate()));
  }

  private spawn(index: number): Promise<RecoveryStats> {
    const partitions = [];
    for (let p = index; p < PARTITION_COUNT; p += this.options.workers) partitions.push(p);
    const data: WorkerData = {
      index, dataDir: this.options.dataDir, partitions, member: this.options.member,
      seedHex: this.options.seedHex, sealingKeyHex: this.options.sealingKeyHex, pepperHex: this.options.pepperHex, limits: this.options.limits,
    };
    const worker = new Worker(new URL('./worker.js', import.meta.url), {
      workerData: data,
      resourceLimits: { maxOldGenerationSizeMb: this.options.limits.worker_heap_mb },
    });
    this.workers[index] = worker;
    return new Promise((resolve, reject) => {
      worker.on('message', (m: FromWorker) => {
        switch (m.t) {
          case 'ready': resolve(m.stats); break;
          case 'result': this.settle(m.id)?.resolve(m.result); break;
          case 'failed': this.settle(m.id)?.reject(new Error(m.message)); break;
          case 'fatal': reject(new Error(m.message)); this.options.onFatal(`shard ${index}: ${m.message}`); break;
          case 'effects': this.options.onEffects(m.result); break;
          case 'signed': { const s = this.signing.get(m.id); this.signing.delete(m.id); s?.resolve(m.text); break; }
          case 'hashed': { const h = this.hashing.get(m.id); this.hashing.delete(m.id); h?.resolve(m.outcome); break; }
          case 'drained': break;
        }
      });
      worker.on('error', (error) => { reject(error); this.options.onFatal(`shard ${index}: ${error.message}`); });
      worker.on('exit', (code) => {
        if (!this.stopping) this.options.onFatal(`shard ${index} exited with code ${code}`);
      });
    });
  }

  private settle(id: number): Pending | undefined {
    const p = this.pending.get(id);
    this.pending.delete(id);
    return p;
  }
}
