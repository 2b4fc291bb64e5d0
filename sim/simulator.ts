// One run of the simulator (issue 30): the node's real shards, deciders, follow-ups, deadlines,
// claims and (cluster mode) lease moves, over the simulated store, driven step by step by one
// seed. Nothing inside a run waits on real time, a thread or a socket: the node's clock is the
// world's, which moves only when a step moves it; the store answers when a step flushes it; and
// between steps the event loop is drained a fixed number of turns, so that the same seed takes
// the same steps in the same order, and prints the same trace and digest.
import { unreachable } from '../src/log/unavailable.js';
import { createHash } from 'node:crypto';
import { SimulatedClock } from '../src/clock.js';
import { DECIDERS } from '../src/domain/index.js';
import { plant, type Plant } from '../src/actors/planted.js';
import { Shard } from '../src/actors/shard.js';
import { foldPartition, type Held } from '../src/actors/fold.js';
import { partitionOf } from '../src/log/log.js';
import { Model, SKEW_MAX_MS, seededViews, type States, type Violation } from './model.js';
import { Random } from './random.js';
import { ALL_PARTITIONS, MEMBER, SIM_LIMITS, T0, World, type SimInstance } from './world.js';
import type { Damage } from './disk.js';

export interface RunOptions {
  seed: number;
  cluster: boolean;
  /**
   * Cluster mode with scripted leases: the run moves partitions itself (a rebalance, a lapse)
   * rather than the node's lease rounds doing it; moves come far more often.
   */
  scripted?: boolean;
  /** Steps before the run heals its faults and checks every invariant. */
  steps: number;
  /** A known bug planted for this run alone (the simulator's own test). */
  plant?: Plant | null;
  /** Told every line of the trace as it is written (--trace). */
  onLine?: (line: string) => void;
}

export interface RunResult {
  seed: number;
  cluster: boolean;
  scripted: boolean;
  steps: number;
  /** SHA-256 of the whole trace: the same seed prints the same digest. */
  digest: string;
  violation: Violation | null;
  /** The last steps before the end (or the violation). */
  tail: string[];
  /** Simulated time the run covered, ms. */
  simulatedMs: number;
  /** How many of each fault the run injected. */
  faults: Record<string, number>;
}

/** Event-loop turns between two steps: enough for a command to run to its next wait. */
const DRAIN_TURNS = 12;
/** Rounds of flushing and moving time at the end, until everything is answered. */
const QUIESCE_ROUNDS = 300;
const TAIL_LINES = 40;

const drain = async () => {
  for (let i = 0; i < DRAIN_TURNS; i++) await new Promise<void>((r) => setImmediate(r));
};

/** A key as the trace shows it: its kind and its last digits. */
const short = (key: string) => key.slice(0, 4) + key.slice(-3);

class Trace {
  private readonly hash = createHash('sha256');
  readonly tail: string[] = [];
  private closed = false;

  constructor(private readonly onLine?: (line: string) => void) {}

  line(text: string): void {
    // What a run's leftovers say once it is over (its instances stopped) is not the run's.
    if (this.closed) return;
    this.onLine?.(text);
    this.hash.update(text + '\n');
    this.tail.push(text);
    if (this.tail.length > TAIL_LINES) this.tail.shift();
  }

  digest(): string {
    this.closed = true;
    return this.hash.digest('hex');
  }
}

export async function simulate(options: RunOptions): Promise<RunResult> {
  plant(options.plant ?? null);
  const run = new Run(options);
  // A promise rejected with nobody to hear it ends the node's process (or its worker thread).
  const crash = (error: unknown) =>
    run.crashed(error instanceof Error ? (error.stack ?? String(error)) : String(error));
  process.on('unhandledRejection', crash);
  // A run throws errors by the hundred thousand (every statement while the database is away):
  // their stacks are kept short, the four frames a crash's report shows.
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 4;
  try {
    return await run.go();
  } finally {
    Error.stackTraceLimit = limit;
    process.off('unhandledRejection', crash);
    plant(null);
  }
}

class Run {
  private readonly random: Random;
  private readonly world: World;
  private readonly model: Model;
  private readonly trace: Trace;
  private readonly faults: Record<string, number> = {};
  private violation: Violation | null = null;
  private step = 0;
  /** Requests whose answer has not come, by instance incarnation. */
  private readonly unanswered = new Map<number, { instance: SimInstance; incarnation: number }>();
  private dead: SimInstance[] = [];

  constructor(private readonly options: RunOptions) {
    this.trace = new Trace(options.onLine);
    this.random = new Random(options.seed);
    this.world = new World(options.cluster, this.random, options.scripted ?? false);
    this.model = new Model(this.random);
    this.world.onChannel = (fault) => {
      if (fault !== 'none')
        this.faults[`channel-${fault}`] = (this.faults[`channel-${fault}`] ?? 0) + 1;
    };
    const watched = new Set(this.model.keys().map((key) => partitionOf(key)));
    this.world.onGrant = (p, to, epoch) => {
      if (watched.has(p)) this.trace.line(`${this.step} lease ${p} to ${to.name} at ${epoch}`);
    };
  }

  private fault(name: string, detail = ''): void {
    this.faults[name] = (this.faults[name] ?? 0) + 1;
    this.trace.line(`${this.step} fault ${name}${detail === '' ? '' : ' ' + detail}`);
  }

  /** An unhandled rejection: the process would have ended there. */
  crashed(stack: string): void {
    const where = stack
      .split('\n')
      .slice(0, 4)
      .map((l) => l.trim())
      .join(' | ');
    this.fail({ invariant: 'no-crash', detail: where });
  }

  private fail(violation: Violation): void {
    this.violation ??= violation;
    this.trace.line(`${this.step} VIOLATION ${violation.invariant}: ${violation.detail}`);
  }

  async go(): Promise<RunResult> {
    await this.world.disk.store.write(
      seededViews().map(({ key, bytes }) => ({ table: 'views' as const, key, bytes })),
    );
    await this.world.start();
    for (this.step = 1; this.step <= this.options.steps && this.violation === null; this.step++) {
      await this.act();
      await drain();
      this.watch();
    }
    if (this.violation === null) await this.heal();
    // Nothing of a run outlives it: a release still draining, a lease round, a retry.
    for (const instance of this.world.instances) instance.kill();
    return {
      seed: this.options.seed,
      cluster: this.options.cluster,
      scripted: this.options.cluster && (this.options.scripted ?? false),
      steps: Math.min(this.step, this.options.steps),
      digest: this.trace.digest(),
      violation: this.violation,
      tail: this.trace.tail,
      simulatedMs: this.world.clock.now() - T0,
      faults: this.faults,
    };
  }

  private live(): SimInstance[] {
    return this.world.instances.filter((i) => i.alive);
  }

  /**
   * One step, as the seed chooses it among the steps open now (weighted): the parts' own, then
   * the clients', the disk's, time's, and the faults'.
   */
  private async act(): Promise<void> {
    const cluster = this.options.cluster;
    const paused = this.world.instances.filter((i) => i.alive && i.paused);
    const own = this.world.parts.flatMap((part) => part.steps?.() ?? []);
    const steps: (readonly [number, () => unknown])[] = [
      ...own.map(([weight, run]) => [weight, () => this.partStep(run)] as const),
      [40, () => this.request()],
      [22, () => this.flush()],
      [12, () => this.time()],
      [5, () => this.read()],
      [2, () => this.kill(this.random.pick(this.world.instances), false)],
      [1, () => this.kill(null, true)],
      [1, () => this.damage()],
      [1, () => this.damagedRead()],
      [this.dead.length > 0 ? 6 : 0, () => this.restart(this.random.pick(this.dead))],
    ];
    const scripted = this.world.leaseTable === null;
    if (cluster)
      steps.push(
        scripted ? [3, () => this.move()] : [1, () => this.leave()],
        [1, () => this.pause()],
        [paused.length > 0 ? 4 : 0, () => this.resume(this.random.pick(paused))],
        [this.world.disk.down ? 6 : 1, () => this.database()],
        [1, () => this.skew()],
      );
    await this.random.weighted(steps)();
  }

  private async partStep(run: () => string | null | Promise<string | null>): Promise<void> {
    const line = await run();
    if (line !== null) this.trace.line(`${this.step} ${line}`);
  }

  /** The disk makes every commit so far durable, and their appends are answered. */
  private flush(): void {
    if (this.world.disk.unflushed > 0)
      this.trace.line(`${this.step} flush ${this.world.disk.unflushed}`);
    this.world.disk.flush();
  }

  /** Time passes: mostly moments, now and then hours (deadlines due, a new day's allowances). */
  private async time(): Promise<void> {
    const r = this.random;
    const ms = r.weighted([
      [60, r.int(1, 500)],
      [30, r.int(500, 10_000)],
      [10, r.int(10_000, 120_000)],
      [1, r.int(3 * 3600_000, 9 * 3600_000)],
    ]);
    this.trace.line(`${this.step} time +${ms}`);
    await this.world.advance(ms);
  }

  /** A client reads a state in memory: mostly of a key just written to, its commit under way. */
  private read(): void {
    const r = this.random;
    const recent = this.model.sent.slice(-4).map((s) => s.routed.key);
    const key = recent.length > 0 && r.chance(0.6) ? r.pick(recent) : r.pick(this.model.keys());
    const holder = this.world.holderOf(key);
    if (holder === null || !holder.alive || holder.paused) return;
    let state: unknown;
    try {
      state = holder.shard.stateOf(key);
    } catch (error) {
      // One out of memory is read from its row (issue 33): not while the database is away.
      if (!unreachable(error)) throw error;
      this.trace.line(`${this.step} read ${short(key)} unavailable`);
      return;
    }
    this.model.saw(key, state);
    const status = (state as { status?: string } | null)?.status ?? '-';
    this.trace.line(`${this.step} read ${short(key)} ${status}`);
  }

  /** A partition drains and moves to another instance (a rebalance). */
  private move(): void {
    const p = this.random.pick(ALL_PARTITIONS);
    const to = this.random.pick(this.world.instances);
    if (!to.alive || to.paused) return;
    this.trace.line(`${this.step} move ${p} to ${to.name}`);
    void this.world.move(p, to);
  }

  /**
   * An orderly stop of one instance (the node's leases): its partitions released and given
   * back, taken by the others' rounds; it starts again later (a rolling restart).
   */
  private leave(): void {
    const live = this.live().filter((i) => !i.paused && i.leases !== null);
    if (live.length < 2) return;
    const instance = this.random.pick(live);
    this.fault('leave', instance.name);
    void instance.leave().then(() => {
      if (!instance.alive && !this.dead.includes(instance)) this.dead.push(instance);
    });
  }

  /**
   * An instance stops running (its statements wait): its leases lapse to the others, at once
   * with scripted leases, else as the others' rounds find them lapsed.
   */
  private pause(): void {
    const live = this.live().filter((i) => !i.paused);
    if (live.length < 2) return;
    const instance = this.random.pick(live);
    instance.pause();
    if (this.world.leaseTable !== null) return this.fault('pause', instance.name);
    const taken = this.world.lapse(instance);
    this.fault('pause', `${instance.name} (${taken.length} leases lapse)`);
  }

  /** A paused instance runs again and finds, at its next renewal, the leases it lost. */
  private resume(instance: SimInstance): void {
    instance.resume();
    if (this.world.leaseTable === null) this.world.renew(instance);
    this.trace.line(`${this.step} resume ${instance.name}`);
  }

  /** The database goes away, or comes back. */
  private database(): void {
    this.world.disk.down = !this.world.disk.down;
    this.fault(this.world.disk.down ? 'database-down' : 'database-up');
  }

  /** An instance's clock is stepped, forwards or backwards. */
  private skew(): void {
    const instance = this.random.pick(this.world.instances);
    const ms = this.random.int(-SKEW_MAX_MS / 2, SKEW_MAX_MS / 2);
    instance.setSkew(ms);
    this.fault('clock-skew', `${instance.name} ${ms}`);
  }

  private request(): void {
    const live = this.live();
    if (live.length === 0) return;
    const instance = this.random.pick(live);
    const sent = this.model.next(instance.now());
    const n = this.model.sent.length - 1;
    const { incarnation } = instance;
    this.unanswered.set(n, { instance, incarnation });
    const scope = sent.routed.idempotency?.scope;
    this.trace.line(
      `${this.step} send #${n} ${sent.op.kind} ${short(sent.routed.key)} via ${instance.name}` +
        `${scope === undefined ? '' : ` key ${scope}`} mark ${sent.routed.replay?.key ?? '-'}`,
    );
    instance.request(sent.routed).then(
      (answer) => {
        this.unanswered.delete(n);
        // A process that died meanwhile answers nobody: its client saw the connection drop.
        const heard = instance.alive && instance.incarnation === incarnation ? answer : null;
        this.model.answered(sent, heard, instance.now());
        this.trace.line(
          `${this.step} answer #${n} ${heard === null ? 'none' : `${heard.status}${heard.committed ? ' committed' : ''}`}`,
        );
        if (heard !== null && heard.status >= 500 && heard.status !== 503)
          this.fail({
            invariant: 'no-internal-error',
            detail: `#${n} answered ${heard.status} ${heard.body.slice(0, 120)}`,
          });
      },
      (error: unknown) => {
        this.unanswered.delete(n);
        this.model.answered(sent, null, instance.now());
        // What a process's leftovers run into once it is gone is nobody's answer.
        if (instance.alive && instance.incarnation === incarnation)
          this.fail({ invariant: 'no-internal-error', detail: `#${n} threw ${String(error)}` });
        else this.trace.line(`${this.step} answer #${n} none`);
      },
    );
  }

  /** Fatal errors raised where no damage was made: the node stopped on sound data. */
  private watch(): void {
    for (const part of this.world.parts) for (const v of part.watch?.() ?? []) this.fail(v);
    for (const i of this.world.instances)
      if (i.alive && i.fatal.length > 0)
        this.fail({ invariant: 'no-fatal', detail: `${i.name}: ${String(i.fatal[0])}` });
  }

  /** kill -9 of one instance, or the power lost under all of them (unflushed commits lost). */
  private async kill(instance: SimInstance | null, power: boolean): Promise<void> {
    const victims = instance === null ? this.live() : instance.alive ? [instance] : [];
    if (victims.length === 0) return;
    for (const v of victims) v.kill();
    // A process that dies leaves its commits to the system, which flushes them; a power loss
    // drops them.
    if (power) this.fault('power-loss', `${this.world.disk.powerLoss()} commits lost`);
    else {
      this.world.disk.flush();
      this.fault('kill', victims.map((v) => v.name).join(','));
    }
    for (const v of victims) {
      if (this.world.cluster && this.world.leaseTable === null) this.world.lapse(v);
      this.dead.push(v);
    }
    // One process in most runs: it restarts at once, recovering from the store.
    if (!this.world.cluster) await this.restart(victims[0]!);
    else if (power) for (const v of victims) await this.restart(v);
  }

  private async restart(instance: SimInstance): Promise<void> {
    // A cluster instance does not start while its database is away: it is started again later.
    if (this.world.cluster && this.world.disk.down) return;
    this.dead = this.dead.filter((i) => i !== instance);
    const scripted = this.world.cluster && this.world.leaseTable === null;
    if (scripted) {
      // A new process holds nothing: it takes its share from the live ones (a rebalance).
      instance.holding!.epochs.fill(0n);
      if (this.live().length === 0) this.world.freeAll();
      const orphaned = ALL_PARTITIONS.filter(
        (p) => this.world.ownerOf(p) === null || this.world.ownerOf(p) === instance,
      );
      for (const p of orphaned) this.world.grant(p, instance);
    }
    if (!(await instance.start())) {
      this.fail({
        invariant: 'no-fatal',
        detail: `${instance.name} refused to start: ${String(instance.fatal[0])}`,
      });
      return;
    }
    this.trace.line(`${this.step} restart ${instance.name} #${instance.incarnation}`);
    if (scripted)
      for (const p of ALL_PARTITIONS)
        if (this.random.chance(0.2)) void this.world.move(p, instance);
    if (!this.world.cluster) await this.checkDurable('restart');
  }

  /**
   * Damage at rest: a start (every partition checked, P14) must refuse the damaged log, never
   * serve it. The damage is then undone, as a restore from backup would.
   */
  private async damage(): Promise<void> {
    const kind = this.random.pick(['flipped', 'torn', 'misdirected', 'snapshot'] as const);
    const damage: Damage | null = this.world.disk.damage(kind, (items) => this.random.pick(items));
    if (damage === null) return;
    this.fault(`damage-${kind}`, `p${damage.partition} seq ${damage.seq}`);
    if ((await this.freshFold()) !== null)
      this.fail({
        invariant: 'damage-refused',
        detail: `a start served a log with a ${kind} record (p${damage.partition} seq ${damage.seq})`,
      });
    this.world.disk.repair(damage);
  }

  /** A read that hands damaged bytes to a start must be refused, the stored bytes being sound. */
  private async damagedRead(): Promise<void> {
    if (this.world.disk.writtenPartitions().length === 0) return;
    const log = this.world.disk.connect(null, true);
    log.damageNextRead = true;
    this.fault('damaged-read');
    const served = await this.freshFold(log);
    if (log.damagedReads > 0 && served !== null)
      this.fail({ invariant: 'damage-refused', detail: 'a start served a record read damaged' });
  }

  /**
   * A fresh start's fold of the store (a new process, every partition checked and folded): its
   * states, or null where it refused the log.
   */
  private async freshFold(log = this.world.disk.connect(null, true)): Promise<States | null> {
    let refused = false;
    const shard = new Shard({
      partitions: ALL_PARTITIONS,
      log,
      deciders: DECIDERS,
      clock: new SimulatedClock(this.world.clock.now()),
      member: MEMBER,
      signer: () => {
        throw new Error('a fold signs nothing');
      },
      newId: (prefix) => this.world.newId(prefix),
      snapshotEveryRecords: Number.MAX_SAFE_INTEGER,
      mailboxDepthMax: 1,
      limits: SIM_LIMITS,
      turnClock: () => 0,
      onFatal: () => {
        refused = true;
      },
    });
    await shard.recover().catch(() => {
      refused = true;
    });
    shard.stop();
    if (refused) return null;
    // The states are a replay of every record from the log's start, reading no snapshot and no
    // `states` row (issue 33): a row that is not the fold of its records shows against it.
    const deciders = new Map(DECIDERS.map((d) => [d.type, d]));
    const held = new Map<string, Held>();
    const into = {
      held,
      hold: (type: string, state: unknown) => ({ type, state }),
      everything: true,
    };
    try {
      for (const p of ALL_PARTITIONS) foldPartition(log, deciders, p, into, null);
    } catch {
      return null;
    }
    return (key) => held.get(key)?.state ?? null;
  }

  /** No acknowledged write lost, nothing read that is not in the log (after a restart, at the end). */
  private async checkDurable(when: string): Promise<void> {
    const durable = await this.freshFold();
    if (durable === null) {
      this.fail({ invariant: 'no-fatal', detail: `the store could not be folded (${when})` });
      return;
    }
    for (const v of this.model.acknowledgedKept(this.world, durable)) this.fail(v);
  }

  /**
   * The end of a run: every fault healed (the database back, paused instances running, dead ones
   * restarted), then the store flushed and time moved on until every request is answered; then
   * every invariant is checked against a fresh fold of the log.
   */
  private async heal(): Promise<void> {
    this.trace.line(`${this.step} heal`);
    if (this.world.disk.down) this.fault('database-up');
    this.world.disk.down = false;
    for (const i of this.world.instances)
      if (i.alive && i.paused) {
        i.resume();
        if (this.world.leaseTable === null) this.world.renew(i);
      }
    for (const i of [...this.dead]) await this.restart(i);
    for (let round = 0; round < QUIESCE_ROUNDS; round++) {
      this.world.disk.flush();
      await this.world.advance(1_000);
      await drain();
      const waiting = [...this.unanswered.values()].filter(
        (u) => u.instance.alive && u.instance.incarnation === u.incarnation,
      ).length;
      const followUps = [...this.world.disk.store.scan('followups')].length;
      if (
        waiting === 0 &&
        followUps === 0 &&
        this.world.disk.unflushed === 0 &&
        !this.world.settling()
      )
        break;
    }
    for (const part of this.world.parts) await part.heal?.();
    for (
      let round = 0;
      round < QUIESCE_ROUNDS && this.world.parts.some((p) => p.busy?.());
      round++
    ) {
      this.world.disk.flush();
      await this.world.advance(1_000);
      await drain();
    }
    await drain();
    this.watch();
    if (this.violation !== null) return;
    for (const [n, u] of this.unanswered)
      if (u.instance.alive && u.instance.incarnation === u.incarnation)
        this.fail({
          invariant: 'answered',
          detail: `#${n} sent to ${u.instance.name} never answered`,
        });
    const durable = await this.freshFold();
    if (durable === null)
      return this.fail({
        invariant: 'no-fatal',
        detail: 'the store could not be folded at the end',
      });
    // Partitions a holder has folded: one left doubted (the database was away) is folded again
    // by its next command, and holds nothing until then.
    const memory = (key: string) => {
      const holder = this.world.holderOf(key);
      if (holder === null || !holder.shard.holdsFolded(partitionOf(key))) return durable(key);
      return holder.shard.stateOf(key);
    };
    const now = this.world.clock.now();
    for (const v of [
      ...this.model.acknowledgedKept(this.world, durable),
      ...this.model.oneWinner(),
      ...this.model.oneAnswerPerKey(),
      ...this.model.replayRefused(),
      ...this.model.ceilingExact(this.world),
      ...this.model.followUpsDone(this.world, durable, now),
      ...this.model.deadlinesFired(now, durable),
      ...this.model.deadlineRowsExact(this.world, durable),
      ...this.model.foldEqual(memory, durable),
      ...this.world.parts.flatMap((part) => part.check?.() ?? []),
    ])
      this.fail(v);
    this.trace.line(`${this.step} checked`);
  }
}
