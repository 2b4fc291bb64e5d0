// The simulated deployment: one store, one or more instances of the node over it, the leases that
// say which instance holds which partition (cluster mode, P22), and the front end each request
// comes through. An instance is the node's real Shard, with every decider, over a connection to
// the store, on a clock of its own (skewed as the seed says) that moves only with the world's.
// A crash (kill -9) leaves nothing of an instance's memory; its restart recovers as the node does:
// every partition checked and folded, then the follow-ups its log holds carried out again.
import { SimulatedClock, type Clock, type Timer } from '../src/clock.js';
import { DEFAULT_LIMITS, WARM_TURN_MS, type Limits } from '../src/config.js';
import { DECIDERS } from '../src/domain/index.js';
import { carryOut, unfinishedFollowUps } from '../src/actors/follow-ups.js';
import { MovedError, Shard } from '../src/actors/shard.js';
import type { CommandResult, PendingFollowUp, RoutedCommand } from '../src/actors/types.js';
import { PARTITION_COUNT, partitionOf, type Holding } from '../src/log/log.js';
import { claimedInCommits, claimedInProcess } from '../src/deployment.js';
import type { RequestClaims, StoredAnswer } from '../src/http/server.js';
import { signingKeyFromSeed } from '../src/protocol/signing.js';
import type { ReferencePrefix } from '../src/protocol/ids.js';
import { SimDisk, type SimLog } from './disk.js';
import type { Random } from './random.js';
import { SimFeed } from './feed.js';
import { SimDelivery } from './delivery.js';
import { SimDirectory } from './directory.js';
import type { SimPart } from './part.js';
import { unreachable } from '../src/log/unavailable.js';

export const ALL_PARTITIONS = Array.from({ length: PARTITION_COUNT }, (_, p) => p);
export const T0 = Date.parse('2026-11-21T12:00:00Z');
const SIGNER = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
export const MEMBER = 'local';

/** The node's limits in a run: small ceilings, so that runs reach them. */
export const SIM_LIMITS: Limits = { ...DEFAULT_LIMITS, payee_check_daily_max: 12 };

/** An instance's clock: the world's, skewed; its timers die with its incarnation. */
class InstanceClock implements Clock {
  alive = true;

  constructor(
    private readonly world: SimulatedClock,
    readonly skew: number,
  ) {}

  now(): number {
    return this.world.now() + this.skew;
  }

  setTimer(callback: () => void, delayMs: number): Timer {
    return this.world.setTimer(() => {
      if (this.alive) callback();
    }, delayMs);
  }
}

/** What a client was answered. */
export interface Answer {
  status: number;
  body: string;
  committed: boolean;
  /** An answer the front end gave without a run of its own (none: the run's answer). */
  kind?: 'stored' | 'replayed' | 'stale' | 'in-progress';
}

const answerOf = (r: CommandResult): Answer => ({
  status: r.reply.status,
  body: String(r.reply.body),
  committed: r.committed,
});

const UNAVAILABLE: Answer = { status: 503, body: '', committed: false };
const REPLAYED: Answer = { status: 401, body: 'replayed', committed: false, kind: 'replayed' };
const STALE: Answer = { status: 401, body: 'stale', committed: false, kind: 'stale' };
const IN_PROGRESS: Answer = {
  status: 409,
  body: 'in progress',
  committed: false,
  kind: 'in-progress',
};

export class SimInstance {
  readonly holding: Holding | null;
  alive = false;
  paused = false;
  incarnation = 0;
  skew = 0;
  /** Fatal errors the shard raised (the node would exit): expected only of damaged data. */
  readonly fatal: unknown[] = [];
  /**
   * Replay marks this process has seen (the authenticator's memory: lost with the process, taken
   * back from the `replay` table at start).
   */
  private marks = new Set<string>();
  /** Callers waiting on a command here, told when this process dies. */
  private readonly dying: (() => void)[] = [];
  /** Idempotency scopes of calls running here (server.ts). */
  private readonly inFlight = new Set<string>();
  private claims!: RequestClaims;
  private clock!: InstanceClock;
  log!: SimLog;
  shard!: Shard;

  constructor(
    readonly name: string,
    private readonly world: World,
  ) {
    this.holding = world.cluster
      ? { holder: name, epochs: new BigInt64Array(PARTITION_COUNT) }
      : null;
  }

  now(): number {
    return this.clock.now();
  }

  /** Resolves after `ms` on this instance's clock (never, once it is gone). */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.clock.setTimer(resolve, ms));
  }

  /** Starts (again): recovers from the store; false where the node refused to start. */
  async start(): Promise<boolean> {
    const incarnation = ++this.incarnation;
    this.clock = new InstanceClock(this.world.clock, this.skew);
    this.log = this.world.disk.connect(this.holding);
    this.inFlight.clear();
    const retention = SIM_LIMITS.idempotency_retention_ms;
    const now = () => this.now();
    this.claims = this.world.cluster
      ? claimedInCommits(this.log, retention, now)
      : claimedInProcess(this.log, retention, now);
    let turns = 0;
    const released =
      this.holding === null ? [] : ALL_PARTITIONS.filter((p) => this.holding!.epochs[p] === 0n);
    this.shard = new Shard({
      partitions: ALL_PARTITIONS,
      log: this.log,
      deciders: DECIDERS,
      clock: this.clock,
      member: MEMBER,
      signer: () => SIGNER,
      newId: (prefix: ReferencePrefix) => this.world.newId(prefix),
      snapshotEveryRecords: 16,
      mailboxDepthMax: 64,
      limits: SIM_LIMITS,
      released,
      turnClock: () => (turns++ * WARM_TURN_MS) / 8,
      // A process killed meanwhile is gone: what its leftovers run into is nobody's.
      onFatal: (error) => {
        if (this.incarnation === incarnation && !this.log.dead) this.fatal.push(error);
      },
    });
    try {
      await this.shard.recover();
    } catch (error) {
      if (!this.log.dead) this.fatal.push(error);
    }
    if (this.fatal.length > 0) {
      this.kill();
      return false;
    }
    this.alive = true;
    this.marks = new Set([...this.log.scan('replay')].map((row) => row.key));
    for (const part of this.world.parts) part.started?.(this);
    for (const f of unfinishedFollowUps(this.log)) void this.carryOut(f);
    return true;
  }

  /** kill -9: nothing of the process is left; its statements in flight never answer. */
  kill(): void {
    this.alive = false;
    for (const hear of this.dying.splice(0)) hear();
    this.paused = false;
    if (this.log !== undefined) this.log.dead = true;
    if (this.clock !== undefined) this.clock.alive = false;
    this.shard?.stop();
  }

  pause(): void {
    this.paused = true;
    this.log.pause();
  }

  resume(): void {
    this.paused = false;
    this.log.resume();
  }

  setSkew(ms: number): void {
    this.skew = ms;
    // The running clock follows at once (a clock stepped under the process).
    if (this.clock !== undefined) (this.clock as { skew: number }).skew = ms;
  }

  /** A command run here, its follow-ups carried out before it is answered (pool.ts). */
  async run(routed: RoutedCommand): Promise<CommandResult | null> {
    if (!this.alive) return null;
    const incarnation = this.incarnation;
    let result: CommandResult;
    const gone = () => !this.alive || this.incarnation !== incarnation;
    try {
      // A caller on another instance hears the connection drop when this process dies.
      const died = new Promise<null>((resolve) => this.dying.push(() => resolve(null)));
      const answered = await Promise.race([this.shard.submit(routed), died]);
      if (answered === null) return null;
      result = answered;
    } catch (error) {
      // Moved away, or the process died under the call: its caller hears no answer (router.ts).
      if (error instanceof MovedError || gone()) return null;
      throw error;
    }
    if (gone()) return null;
    if (result.committed) for (const part of this.world.parts) part.committed?.(this, result);
    await Promise.all(result.followUps.map((f) => this.carryOut(f)));
    return result;
  }

  carryOut(f: PendingFollowUp): Promise<void> {
    const incarnation = this.incarnation;
    return carryOut(f, {
      submit: async (routed) => {
        const result = await this.world.route(routed, this);
        return result ?? this.world.unavailableResult();
      },
      retryMs: SIM_LIMITS.follow_up_retry_ms,
      retryMaxMs: SIM_LIMITS.follow_up_retry_max_ms,
      stopped: () => !this.alive || this.incarnation !== incarnation,
      wait: (ms) => this.sleep(ms),
    });
  }

  /**
   * A client's request as the front end takes it (server.ts): the authenticator's replay memory,
   * then the node's own RequestClaims (deployment.ts: in one process, the stored answer read
   * before the run; in cluster mode, both claimed in the commit), a key in flight refused as in
   * progress, and a run that committed nothing settled before it is answered.
   */
  async request(routed: RoutedCommand): Promise<Answer | null> {
    if (!this.alive) return null;
    const mark = routed.replay;
    // A request whose timestamp is no longer fresh is refused before anything (P5, auth.ts).
    if (mark !== undefined && mark.until < this.now()) return STALE;
    if (mark !== undefined) {
      if (this.marks.has(mark.key)) return REPLAYED;
      this.marks.add(mark.key);
    }
    const scope = routed.idempotency?.scope;
    if (scope !== undefined) {
      const found = await this.claims.stored(scope);
      if (found !== undefined) return storedAnswer(found);
      if (this.inFlight.has(scope)) return IN_PROGRESS;
      this.inFlight.add(scope);
    }
    try {
      return await this.world.route(routed, this).then(async (result) => {
        if (result === null) return UNAVAILABLE;
        if (result.committed && this.alive && this.world.holderOf(routed.key) !== this)
          for (const part of this.world.parts) part.committed?.(this, result);
        if (result.taken === 'replay' || (result.taken !== undefined && scope === undefined))
          return REPLAYED;
        if (result.taken === 'idempotency') {
          const stored = await this.claims.taken(scope!);
          return stored === undefined ? IN_PROGRESS : storedAnswer(stored);
        }
        const answer = answerOf(result);
        if (answer.committed || answer.status >= 500) return answer;
        const settled = this.claims.settle(mark, scope, false);
        if (settled === null) return answer;
        const { replayed, stored } = await settled;
        if (replayed) return REPLAYED;
        return stored === undefined ? answer : storedAnswer(stored);
      });
    } catch (error) {
      // The database away: 503, as the server answers an unreachable database.
      if (unreachable(error)) return UNAVAILABLE;
      throw error;
    } finally {
      if (scope !== undefined) this.inFlight.delete(scope);
    }
  }
}

function storedAnswer(entry: StoredAnswer): Answer {
  return { status: entry.status, body: String(entry.body), committed: false, kind: 'stored' };
}

export class World {
  readonly clock = new SimulatedClock(T0);
  readonly disk: SimDisk;
  readonly instances: SimInstance[];
  /** Cluster mode: the instance holding each partition, as the leases table says. */
  readonly owner: (SimInstance | null)[] = new Array<SimInstance | null>(PARTITION_COUNT).fill(
    null,
  );
  /** Partitions being moved (one move at a time each). */
  readonly moving = new Set<number>();
  private made = 0;
  /** The parts driven beside the shards (part.ts); the feed among them. */
  readonly parts: SimPart[];

  constructor(
    readonly cluster: boolean,
    readonly random: Random,
  ) {
    this.disk = new SimDisk(cluster, random, () => this.clock.now());
    this.parts = [
      new SimFeed(this, random),
      new SimDelivery(this, random),
      new SimDirectory(this, random),
    ];
    const count = cluster ? 3 : 1;
    this.instances = Array.from({ length: count }, (_, i) => new SimInstance(`i${i}`, this));
  }

  newId(prefix: string): string {
    return `${prefix}_${(++this.made).toString(16).padStart(32, '0')}`;
  }

  /** Starts every instance; in cluster mode the partitions are first shared out. */
  async start(): Promise<void> {
    if (this.cluster)
      for (const p of ALL_PARTITIONS) this.grant(p, this.instances[p % this.instances.length]!);
    for (const instance of this.instances)
      if (!(await instance.start()))
        throw new Error(`${instance.name} did not start on a new store`);
  }

  /** The lease of `p` granted to `to` at a new epoch (the store's leases table and its holding). */
  grant(p: number, to: SimInstance): void {
    const epoch = this.disk.leaseEpochs[p]! + 1n;
    this.disk.leaseEpochs[p] = epoch;
    this.owner[p] = to;
    to.holding!.epochs[p] = epoch;
    this.onGrant?.(p, to, epoch);
  }

  /** Told of every lease granted (the trace shows those of the partitions a run writes to). */
  onGrant?: (p: number, to: SimInstance, epoch: bigint) => void;

  /** Where a command runs: the holder of its partition (cluster mode), or the one instance. */
  holderOf(key: string): SimInstance | null {
    if (!this.cluster) return this.instances[0]!;
    return this.owner[partitionOf(key)] ?? null;
  }

  /** Routes a command to its holder; null where it could not be run there (moved, gone). */
  async route(routed: RoutedCommand, from?: SimInstance): Promise<CommandResult | null> {
    const holder = this.holderOf(routed.key);
    if (holder === null || !holder.alive) return null;
    if (from === undefined || from === holder || !this.cluster) return holder.run(routed);
    // The internal channel between two instances (router.ts), as the seed has it: a call
    // delayed (and so reordered), sent twice, or its answer lost after the holder ran it.
    const fault = this.random.weighted([
      [90, 'none'],
      [5, 'delay'],
      [3, 'duplicate'],
      [2, 'lost'],
    ] as const);
    this.onChannel?.(fault);
    if (fault === 'delay') await from.sleep(this.random.int(1, 2_000));
    if (fault === 'duplicate') void holder.run(routed).catch(() => undefined);
    const result = await (this.holderOf(routed.key) ?? holder).run(routed);
    return fault === 'lost' ? null : result;
  }

  /** Told of each fault of the internal channel (the run counts them). */
  onChannel?: (fault: 'none' | 'delay' | 'duplicate' | 'lost') => void;

  unavailableResult(): CommandResult {
    const reply = { status: 503, body: '', signed: false };
    return { reply, committed: false, outbox: [], directory: [], followUps: [] };
  }

  /**
   * An orderly move of `p` (a rebalance): its holder drains and releases it, the lease moves on
   * at a new epoch, and the new holder adopts it, folded from the log.
   */
  async move(p: number, to: SimInstance): Promise<void> {
    const from = this.owner[p];
    if (from === to || this.moving.has(p) || !to.alive) return;
    this.moving.add(p);
    try {
      if (from !== null && from.alive && !from.paused) {
        await from.shard.release(p).catch(() => undefined);
        from.holding!.epochs[p] = 0n;
      }
      this.grant(p, to);
      await this.takeUp(p, to);
    } finally {
      this.moving.delete(p);
    }
  }

  /**
   * The leases of `from` lapse (it is paused, or gone): each of its partitions is taken over by
   * a live instance at a new epoch, while `from` still believes it holds them.
   */
  lapse(from: SimInstance): number[] {
    const taken: number[] = [];
    const live = this.instances.filter((i) => i !== from && i.alive && !i.paused);
    if (live.length === 0) return taken;
    for (const p of ALL_PARTITIONS) {
      if (this.owner[p] !== from || this.moving.has(p)) continue;
      const to = live[p % live.length]!;
      this.grant(p, to);
      taken.push(p);
      void this.takeUp(p, to);
    }
    return taken;
  }

  /** A partition taken up (instance.ts, takeUp): folded, then told to the parts (the feed's). */
  private async takeUp(p: number, to: SimInstance): Promise<void> {
    // The lease is held from now (its epoch in the holding), the partition taken up once the
    // instance's lease round has told its workers: a while later.
    await to.sleep(this.random.int(0, 3_000));
    if (!to.alive || this.owner[p] !== to) return;
    try {
      await to.shard.adopt(p);
    } catch (error) {
      if (to.alive) to.fatal.push(error);
      return;
    }
    for (const part of this.parts) await part.tookUp?.(to, p);
  }

  /**
   * An instance that runs again finds, at its next renewal, the leases it lost: it lets go of
   * each (instance.ts, onLost), where an append refused by the fence has not already.
   */
  renew(instance: SimInstance): void {
    for (const p of ALL_PARTITIONS) {
      if (instance.holding!.epochs[p] === 0n || this.owner[p] === instance) continue;
      instance.holding!.epochs[p] = 0n;
      void instance.shard.release(p).catch(() => undefined);
    }
  }
}
