// The simulated deployment: one store, one or more instances of the node over it, the leases that
// say which instance holds which partition (cluster mode, P22), and the front end each request
// comes through. An instance is the node's real Shard, with every decider, over a connection to
// the store, on a clock of its own (skewed as the seed says) that moves only with the world's.
// A crash (kill -9) leaves nothing of an instance's memory; its restart recovers as the node does:
// every partition checked and folded, then the follow-ups its log holds carried out again.
import { SimulatedClock, type Clock, type Timer } from '../src/clock.js';
import {
  DATABASE_RETRY_BASE_MS,
  DATABASE_RETRY_MAX_MS,
  DEFAULT_LIMITS,
  WARM_TURN_MS,
  type Limits,
} from '../src/config.js';
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
import { backoffMs, unreachable } from '../src/log/unavailable.js';
import { Leases } from '../src/cluster/leases.js';
import { ClusterRouter } from '../src/cluster/router.js';
import { isRefusal, statusOf } from '../src/protocol/errors.js';
import { SimLeaseTable, simChannel, simLeases, type ChannelFault } from './leases.js';

export const ALL_PARTITIONS = Array.from({ length: PARTITION_COUNT }, (_, p) => p);
export const T0 = Date.parse('2026-11-21T12:00:00Z');
const SIGNER = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
export const MEMBER = 'local';

/** How a failed take-up is tried again (instance.ts: the database's retry). */
const ADOPT_RETRY = { baseMs: DATABASE_RETRY_BASE_MS, maxMs: DATABASE_RETRY_MAX_MS };

/** A lease's time in a run (cluster mode): the node's default. */
export const SIM_LEASE_MS = 10_000;

/** The node's limits in a run: small ceilings, so that runs reach them. */
export const SIM_LIMITS: Limits = {
  ...DEFAULT_LIMITS,
  payee_check_daily_max: 12,
  // Aggregates leave memory within seconds, and a few at most stay (issue 33): most commands
  // and reads find theirs out of memory, to be brought back from its row.
  aggregate_idle_ms: 2_000,
  aggregates_in_memory_max: 8,
  // A subject with more than a few identifiers and addresses stays in memory, its row stopped.
  state_row_bytes_max: 1_650,
};

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

/** A process gone under a command it was running: its caller hears the connection drop. */
class GoneError extends Error {
  override name = 'GoneError';
}

export class SimInstance {
  /** What its appends are fenced with (cluster mode): new at every start with real leases. */
  holding: Holding | null;
  /** Cluster mode with the node's own leases: its lease rounds and its router, while it runs. */
  leases: Leases | null = null;
  private router: ClusterRouter | null = null;
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
    // A new process is a new owner in the leases table, with nothing held (instance.ts).
    if (this.world.leaseTable !== null)
      this.holding = {
        holder: `${this.name}.${incarnation}`,
        epochs: new BigInt64Array(PARTITION_COUNT),
      };
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
      // A fatal error ends the node's process: the shard stops with it (a start waiting on a
      // fold that failed so ends, refused, rather than waiting for ever).
      onFatal: (error) => {
        if (this.incarnation !== incarnation || this.log.dead) return;
        this.fatal.push(error);
        this.shard.stop();
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
    if (this.world.leaseTable !== null && !(await this.join(incarnation))) return false;
    for (const f of unfinishedFollowUps(this.log)) void this.carryOut(f);
    return true;
  }

  /**
   * Joins the cluster as instance.ts does (joinCluster): the node's own lease rounds on this
   * instance's clock over the simulated table, a partition that comes adopted, one given back
   * drained first, one lost let go; and the node's own router over the simulated channel.
   */
  private async join(incarnation: number): Promise<boolean> {
    const table = this.world.leaseTable!;
    const holding = this.holding!;
    const log = this.log;
    const release = (ps: number[]) =>
      Promise.all(ps.map((p) => this.shard.release(p).catch(() => undefined))).then(
        () => undefined,
      );
    try {
      this.leases = await Leases.start({
        url: '',
        store: simLeases(table, this.world.disk, log),
        clock: this.clock,
        random: () => this.world.random.fraction(),
        instance: holding.holder,
        address: holding.holder,
        leaseMs: SIM_LEASE_MS,
        fingerprint: MEMBER,
        epochs: holding.epochs,
        onGained: (ps) => {
          for (const p of ps) {
            this.world.onGrant?.(p, this, holding.epochs[p]!);
            void this.world.takeUp(p, this);
          }
        },
        onGiving: release,
        onLost: (ps) => void release(ps),
      });
    } catch (error) {
      // The node does not start without its leases (the database away meanwhile).
      if (this.incarnation === incarnation && !log.dead) this.fatal.push(error);
      this.kill();
      return false;
    }
    this.router = new ClusterRouter({
      self: holding.holder,
      local: { submit: (routed) => this.runHere(routed) },
      leases: this.leases,
      client: simChannel(this.world, this.world.random, this, (fault) =>
        this.world.onChannel?.(fault),
      ),
      moveWaitMs: SIM_LEASE_MS * 2,
      callTimeoutMs: SIM_LEASE_MS,
      onRemote: (result) => {
        if (this.alive) for (const part of this.world.parts) part.committed?.(this, result);
        return undefined;
      },
      now: () => this.now(),
      wait: (ms) => this.sleep(ms),
    });
    return true;
  }

  /**
   * An orderly stop (instance.ts, leave): renewals stop, every partition is released (its
   * commands answered, its snapshot written), then the leases are given back.
   */
  async leave(): Promise<void> {
    const leases = this.leases;
    if (leases === null || !this.alive) return;
    leases.halt();
    await Promise.all(leases.partitions().map((p) => this.shard.release(p).catch(() => undefined)));
    await leases.stop().catch(() => undefined);
    this.kill();
  }

  /** kill -9: nothing of the process is left; its statements in flight never answer. */
  kill(): void {
    this.alive = false;
    this.leases?.halt();
    this.leases = null;
    this.router = null;
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

  /** A command run here; null where it was not (moved away, or the process died under it). */
  async run(routed: RoutedCommand): Promise<CommandResult | null> {
    try {
      return await this.runHere(routed);
    } catch (error) {
      if (error instanceof MovedError || error instanceof GoneError) return null;
      throw error;
    }
  }

  /**
   * A command run here as the pool runs it: its follow-ups carried out before it is answered
   * (pool.ts); refused where the partition is not held (MovedError); GoneError where the
   * process died under it (its caller hears the connection drop).
   */
  async runHere(routed: RoutedCommand): Promise<CommandResult> {
    if (!this.alive) throw new GoneError('the instance is gone');
    const incarnation = this.incarnation;
    const gone = () => !this.alive || this.incarnation !== incarnation;
    let result: CommandResult;
    try {
      const died = new Promise<null>((resolve) => this.dying.push(() => resolve(null)));
      const answered = await Promise.race([this.shard.submit(routed), died]);
      if (answered === null) throw new GoneError('the instance died under the command');
      result = answered;
    } catch (error) {
      if (gone() && !(error instanceof GoneError)) throw new GoneError('the instance is gone');
      throw error;
    }
    if (gone()) throw new GoneError('the instance died under the command');
    if (result.committed) for (const part of this.world.parts) part.committed?.(this, result);
    await Promise.all(result.followUps.map((f) => this.carryOut(f)));
    return result;
  }

  /**
   * A command sent where it runs, as this instance's front end sends it: with the node's leases,
   * through its router (the holder, or over the channel); null where it was not answered.
   */
  async send(routed: RoutedCommand): Promise<CommandResult | null> {
    if (this.router === null) return this.world.route(routed, this);
    try {
      return await this.router.submit(routed);
    } catch (error) {
      // A move that outlasted its wait, a holder that did not answer: 503 (router.ts).
      if (isRefusal(error)) return refusedResult(statusOf(error.code), error.code);
      if (error instanceof GoneError) return null;
      throw error;
    }
  }

  carryOut(f: PendingFollowUp): Promise<void> {
    const incarnation = this.incarnation;
    return carryOut(f, {
      submit: async (routed) => {
        const result = await this.send(routed);
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
      return await this.send(routed).then(async (result) => {
        if (result === null) return UNAVAILABLE;
        const scripted = this.router === null;
        if (scripted && result.committed && this.alive && this.world.holderOf(routed.key) !== this)
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

/** What a refusal before the run answers (the router's 503s). */
function refusedResult(status: number, code: string): CommandResult {
  const reply = { status, body: code, signed: false };
  return { reply, committed: false, outbox: [], directory: [], followUps: [] };
}

function storedAnswer(entry: StoredAnswer): Answer {
  return { status: entry.status, body: String(entry.body), committed: false, kind: 'stored' };
}

export class World {
  readonly clock = new SimulatedClock(T0);
  readonly disk: SimDisk;
  readonly instances: SimInstance[];
  /**
   * Cluster mode with the node's own lease rounds (sim/leases.ts): the leases table they share.
   * Null in embedded mode, and with scripted leases (`scripted`), where the run itself moves
   * partitions (grant, move, lapse, renew) more often than the rounds ever would.
   */
  readonly leaseTable: SimLeaseTable | null;
  /** Scripted leases: the instance holding each partition. */
  private readonly owner: (SimInstance | null)[] = new Array<SimInstance | null>(
    PARTITION_COUNT,
  ).fill(null);
  /** Partitions being moved by the script (one move at a time each). */
  readonly moving = new Set<number>();
  /** Partitions being taken up (adopted) after a lease came, by which incarnation. */
  private readonly takingUp = new Set<{ to: SimInstance; incarnation: number }>();
  private made = 0;
  /** The parts driven beside the shards (part.ts); the feed among them. */
  readonly parts: SimPart[];

  constructor(
    readonly cluster: boolean,
    readonly random: Random,
    scripted = false,
  ) {
    this.disk = new SimDisk(cluster, random, () => this.clock.now());
    this.leaseTable = cluster && !scripted ? new SimLeaseTable(this.disk) : null;
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

  /** Starts every instance; with scripted leases the partitions are first shared out. */
  async start(): Promise<void> {
    if (this.cluster && this.leaseTable === null)
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
    return this.ownerOf(partitionOf(key));
  }

  /** The instance holding partition `p` (cluster mode), as the leases table says. */
  ownerOf(p: number): SimInstance | null {
    if (this.leaseTable === null) return this.owner[p] ?? null;
    const holder = this.leaseTable.holderOf(p);
    return this.instances.find((i) => i.alive && i.holding?.holder === holder) ?? null;
  }

  /**
   * Time passes. With the node's leases it passes in slices of half a lease, the event
   * loop turning between them: the processes run as time goes, so their rounds renew as they
   * would (one jump of minutes would lapse every lease at once, a freeze of the whole cluster).
   * Scripted leases and embedded mode move at once.
   */
  async advance(ms: number): Promise<void> {
    if (this.leaseTable === null) return this.clock.advance(ms);
    const slice = SIM_LEASE_MS / 2;
    for (let left = ms; left > 0; left -= slice) {
      this.clock.advance(Math.min(slice, left));
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** Scripted leases: every partition free again (no instance runs). */
  freeAll(): void {
    this.owner.fill(null);
  }

  /** Whether partitions are still moving (the run's end waits for none). */
  settling(): boolean {
    const live = (t: { to: SimInstance; incarnation: number }) =>
      t.to.alive && t.to.incarnation === t.incarnation;
    if (this.moving.size > 0 || [...this.takingUp].some(live)) return true;
    // With the node's leases: until every partition is held and folded by a live instance, and
    // no lease has changed hands for two lease times (a rebalance after restarts takes rounds).
    const table = this.leaseTable;
    if (table === null) return false;
    if (this.clock.now() - table.changedAt < 2 * SIM_LEASE_MS) return true;
    return ALL_PARTITIONS.some((p) => !this.ownerOf(p)?.shard.holdsFolded(p));
  }

  /** The channel's end: the instance listening at `address`, while it runs. */
  at(address: string) {
    const i = this.instances.find((c) => c.alive && c.holding?.holder === address);
    if (i === undefined) return null;
    return {
      running: () => i.log.statement(async () => undefined),
      submit: (routed: RoutedCommand) => i.runHere(routed),
    };
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
  onChannel?: (fault: ChannelFault) => void;

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
  async takeUp(p: number, to: SimInstance): Promise<void> {
    const incarnation = to.incarnation;
    const holds = () =>
      to.alive &&
      to.incarnation === incarnation &&
      (to.leases === null ? this.owner[p] === to : to.leases.holds(p));
    const taking = { to, incarnation };
    this.takingUp.add(taking);
    try {
      // The lease is held from now (its epoch in the holding), the partition taken up once the
      // instance's lease round has told its workers: a while later.
      await to.sleep(this.random.int(0, 3_000));
      // What fails is tried again later while the partition is still held (instance.ts).
      for (let attempt = 0; holds(); attempt++) {
        try {
          await to.shard.adopt(p);
          for (const part of this.parts) await part.tookUp?.(to, p);
          return;
        } catch (error) {
          if (to.leases === null) {
            if (to.alive) to.fatal.push(error);
            return;
          }
          await to.sleep(
            backoffMs(attempt, { ...ADOPT_RETRY, random: () => this.random.fraction() }),
          );
        }
      }
    } finally {
      this.takingUp.delete(taking);
    }
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
