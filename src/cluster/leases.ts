// Partition ownership in cluster mode (P22): each partition is leased to one instance at a time,
// with an epoch that every takeover raises. An instance heartbeats, renews its leases, takes free
// or expired partitions up to its fair share of the live instances, and gives back what is above
// that share once its commands there are drained. The epochs it holds are written to a shared
// array that its threads' logs fence their appends with (postgres-log.ts, Fence): an instance
// that lost a lease (paused, cut off) cannot append to that partition, because the database
// checks the epoch under a lock on the lease row in the same transaction as the append.
//
// Times are the database's (`now()`), so the instances' clocks need not agree.
//
// A lost connection (a restart of the database, a switchover, a network fault) is opened again
// with backoff and jitter, and the first round on it renews first (issue 29). Meanwhile nothing
// is renewed and the leases may lapse: a partition taken by another instance meanwhile is given
// up when the renewal finds its epoch moved, and until then the fence keeps this instance's
// appends to it out. The instance itself goes on: failed renewals never end it.
//
// The rounds are this file's; the statements are a port (LeaseStore): the cluster's database
// (postgres-leases.ts), or the simulator's table (issue 30), which runs these rounds on its clock.
import { systemClock, type Clock, type Timer } from '../clock.js';
import {
  DATABASE_RETRY_BASE_MS,
  DATABASE_RETRY_MAX_MS,
  LEASE_EXPIRY_MARGIN_MS,
  OWNERS_READ_EVERY_MS,
} from '../config.js';
import { PARTITION_COUNT } from '../log/log.js';
import {
  backoffMs,
  UnavailableError,
  unreachable,
  type DatabaseHealth,
} from '../log/unavailable.js';
import { postgresLeases } from './postgres-leases.js';

/** A partition's lease as the table has it: its epoch now. */
export interface LeaseRow {
  partition: number;
  epoch: bigint;
}

/** A partition's holder as the table has it, and how long its lease has left. */
export interface OwnerRow {
  partition: number;
  owner: string;
  address: string;
  leftMs: number;
}

/**
 * One connection to the leases table: the statements of a round (postgres-leases.ts on the
 * cluster's database; the simulator's table in a run, sim/leases.ts).
 */
export interface LeaseSession {
  /** Whether a live instance runs with another fingerprint. */
  strangers(leaseMs: number, fingerprint: string): Promise<boolean>;
  /** Renews this instance's leases of `partitions`; those it still holds, at their epochs. */
  renew(instance: string, leaseMs: number, partitions: number[]): Promise<LeaseRow[]>;
  /** This instance seen now; the live instances counted; those long gone forgotten. */
  heartbeat(
    seen: { instance: string; address: string; fingerprint: string },
    leaseMs: number,
    forgetMs: number,
  ): Promise<number>;
  /** Up to `count` free or lapsed partitions taken, each at a new epoch. */
  take(instance: string, count: number, leaseMs: number): Promise<LeaseRow[]>;
  /** The partitions freed for the next instance at once. */
  give(instance: string, partitions: number[]): Promise<void>;
  /** The live leases and their holders. */
  owners(): Promise<OwnerRow[]>;
  /** Every partition freed and the instance's row removed (an orderly stop). */
  leave(instance: string): Promise<void>;
  end(): Promise<void>;
}

/** Where sessions come from; `lost` is told once a session fails or ends. */
export interface LeaseStore {
  open(lost: () => void): Promise<LeaseSession>;
}

export interface LeaseOptions {
  /** The cluster's database (its leases table), unless `store` is given. */
  url: string;
  /** Where the sessions come from: the database at `url` unless said (the simulator's). */
  store?: LeaseStore;
  /** Timers and `now` (the simulator's): the system's unless said. */
  clock?: Clock;
  /** The jitter of reconnections: Math.random unless said. */
  random?: () => number;
  /** This process's instance id, unique per start. */
  instance: string;
  /** Where the other instances reach this one. */
  address: string;
  leaseMs: number;
  /**
   * What every instance of the cluster must share (member, pepper, sealing key), digested: an
   * instance whose fingerprint differs from a live one's is refused at start.
   */
  fingerprint: string;
  /** Per partition, the epoch of this instance's lease, 0 where it holds none (shared). */
  epochs: BigInt64Array;
  onGained?: (partitions: number[]) => void;
  onLost?: (partitions: number[]) => void;
  /** Before partitions are given back to balance the cluster: their commands are drained. */
  onGiving?: (partitions: number[]) => Promise<void>;
  /** Told whether the database answered the leases' last statement or connection (/readyz). */
  health?: DatabaseHealth;
}

/** A new shared array of epochs, one per partition. */
export function sharedEpochs(): BigInt64Array {
  return new BigInt64Array(new SharedArrayBuffer(PARTITION_COUNT * 8));
}

export class ClusterConfigError extends Error {
  override name = 'ClusterConfigError';
}

/**
 * Refuses to join a cluster whose live instances run with another member name or other secrets:
 * they would sign as another issuer, hash identifiers differently, or refuse this one's calls.
 */
async function refuseStrangers(session: LeaseSession, options: LeaseOptions): Promise<void> {
  if (await session.strangers(options.leaseMs, options.fingerprint))
    throw new ClusterConfigError(
      'the instances running on this database use another --member, PATH_PEPPER or ' +
        'PATH_SEALING_KEY: every instance of one cluster must use the same',
    );
}

/** How many renewals fit in one lease: a lease survives two missed renewals. */
const RENEWALS_PER_LEASE = 3;
/** An instance row not seen for this many leases is removed. */
const FORGET_AFTER_LEASES = 10;

/** Who holds a partition now, as the leases table says: the instance and where it listens. */
export interface Owner {
  instance: string;
  address: string;
}

export class Leases {
  private readonly held = new Map<number, bigint>();
  /** Per partition, its holder when last read (one object per holder). */
  private owners: (Owner | undefined)[] = [];
  private ownersRead = -Infinity;
  private readingOwners: Promise<void> | null = null;
  /** The next round of renewals, while renewing. */
  private timer: Timer | null = null;
  /** A round at the moment another instance's lease would lapse unrenewed. */
  private expiryTimer: Timer | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = false;
  /** The connection, or null while it is being opened again. */
  private client: LeaseSession | null = null;
  /** The next attempt to open a lost connection, and how many have failed since it was lost. */
  private reconnecting: Timer | null = null;
  private attempts = 0;
  private readonly store: LeaseStore;
  private readonly clock: Clock;

  private constructor(private readonly options: LeaseOptions) {
    this.store = options.store ?? postgresLeases(options.url);
    this.clock = options.clock ?? systemClock;
  }

  /** Connects, takes a first share and renews from then on. */
  static async start(options: LeaseOptions): Promise<Leases> {
    const leases = new Leases(options);
    try {
      await refuseStrangers(await leases.open(), options);
      await leases.tick();
    } catch (error) {
      await leases.stop();
      throw error;
    }
    leases.resume();
    return leases;
  }

  /** Opens the connection; one that fails or ends from then on is opened again (`lose`). */
  private async open(): Promise<LeaseSession> {
    let session: LeaseSession | null = null;
    let lostEarly = false;
    session = await this.store.open(() => {
      if (session === null) lostEarly = true;
      else this.lose(session);
    });
    if (this.stopped || lostEarly) {
      void session.end().catch(() => undefined);
      throw new UnavailableError(
        this.stopped ? 'the leases were stopped' : "the leases' connection was lost",
      );
    }
    this.client = session;
    return session;
  }

  /** The connection now; while it is being opened again, a statement fails at once. */
  private session(): LeaseSession {
    if (this.client === null)
      throw new UnavailableError("the leases' connection to the database is being opened again");
    return this.client;
  }

  /**
   * Forgets a connection that failed, ended or stopped answering (`end` destroys the socket of
   * one whose statement timed out), and opens another after a wait.
   */
  private lose(client: LeaseSession): void {
    if (this.client !== client) return;
    this.client = null;
    void client.end().catch(() => undefined);
    if (this.stopped) return;
    this.options.health?.failed(new UnavailableError("the leases' connection was lost"));
    this.reconnectLater();
  }

  /** The next attempt, after a wait with full jitter, never longer than a renewal period. */
  private reconnectLater(): void {
    if (this.stopped || this.reconnecting !== null) return;
    const maxMs = Math.min(DATABASE_RETRY_MAX_MS, this.options.leaseMs / RENEWALS_PER_LEASE);
    const waitMs = backoffMs(this.attempts++, {
      baseMs: DATABASE_RETRY_BASE_MS,
      maxMs,
      ...(this.options.random === undefined ? {} : { random: this.options.random }),
    });
    this.reconnecting = this.clock.setTimer(() => {
      this.reconnecting = null;
      void this.reconnect();
    }, waitMs);
  }

  /** Opens the connection again and, unless renewals are halted, renews at once. */
  private async reconnect(): Promise<void> {
    try {
      await this.open();
    } catch (error) {
      this.options.health?.failed(error);
      this.reconnectLater();
      return;
    }
    this.attempts = 0;
    this.options.health?.succeeded();
    if (this.timer !== null) await this.tick().catch(() => undefined);
  }

  /** A failed statement: one of reachability is told to `health` and its connection dropped. */
  private failed(error: unknown): void {
    if (!unreachable(error)) return;
    this.options.health?.failed(error);
    if (this.client !== null) this.lose(this.client);
  }

  /** The partitions held now, in order. */
  partitions(): number[] {
    return [...this.held.keys()].sort((a, b) => a - b);
  }

  /**
   * One round: renew first (what a round after a lost connection must do before anything else),
   * heartbeat, then take or give back towards the fair share.
   */
  tick(): Promise<void> {
    this.ticking ??= this.round()
      .then(
        () => this.options.health?.succeeded(),
        (error: unknown) => {
          this.failed(error);
          throw error;
        },
      )
      .finally(() => {
        this.ticking = null;
      });
    return this.ticking;
  }

  private async round(): Promise<void> {
    const { instance, address, fingerprint, leaseMs } = this.options;
    await this.renew();
    const live = await this.session().heartbeat(
      { instance, address, fingerprint },
      leaseMs,
      leaseMs * FORGET_AFTER_LEASES,
    );
    const share = Math.ceil(PARTITION_COUNT / Math.max(1, live));
    if (this.held.size < share) await this.take(share - this.held.size);
    else if (this.held.size > share) await this.give(this.partitions().slice(share));
    await this.readOwners();
  }

  /** Whether this instance holds partition `p` now. */
  holds(p: number): boolean {
    return this.held.has(p);
  }

  /** The instance holding partition `p` when last read, or null where none does. */
  ownerOf(p: number): Owner | null {
    return this.owners[p] ?? null;
  }

  /** Reads the owners again, unless they were read in the last OWNERS_READ_EVERY_MS. */
  refreshOwners(): Promise<void> {
    if (this.clock.now() - this.ownersRead < OWNERS_READ_EVERY_MS) return Promise.resolve();
    this.readingOwners ??= this.readOwners()
      .catch((error: unknown) => {
        this.failed(error);
        throw error;
      })
      .finally(() => {
        this.readingOwners = null;
      });
    return this.readingOwners;
  }

  private async readOwners(): Promise<void> {
    const rows = await this.session().owners();
    const owners = new Array<Owner | undefined>(PARTITION_COUNT);
    const holders = new Map<string, Owner>();
    let soonest = Infinity;
    for (const r of rows) {
      let owner = holders.get(r.owner);
      if (owner === undefined) {
        owner = { instance: r.owner, address: r.address };
        holders.set(r.owner, owner);
      }
      owners[r.partition] = owner;
      if (r.owner !== this.options.instance) soonest = Math.min(soonest, r.leftMs);
    }
    this.owners = owners;
    this.ownersRead = this.clock.now();
    this.watchExpiry(soonest);
  }

  /**
   * Sets a round for just after the soonest lease of another instance would lapse. A live
   * instance renews long before, and this instance's next round (every third of a lease) sets
   * it again; it fires only for an instance that stopped renewing, so that its partitions are
   * taken as their leases lapse rather than up to a renewal period later.
   */
  private watchExpiry(leftMs: number): void {
    this.expiryTimer?.cancel();
    this.expiryTimer = null;
    if (this.timer === null || !Number.isFinite(leftMs)) return;
    this.expiryTimer = this.clock.setTimer(
      () => void this.tick().catch(() => undefined),
      Math.max(0, leftMs) + LEASE_EXPIRY_MARGIN_MS,
    );
  }

  private async renew(): Promise<void> {
    if (this.held.size === 0) return;
    const { instance, leaseMs } = this.options;
    const renewed = await this.session().renew(instance, leaseMs, this.partitions());
    const still = new Map(renewed.map((r) => [r.partition, r.epoch]));
    const lost = this.partitions().filter((p) => still.get(p) !== this.held.get(p));
    if (lost.length > 0) this.drop(lost);
  }

  private async take(count: number): Promise<void> {
    const { instance, leaseMs } = this.options;
    const taken = await this.session().take(instance, count, leaseMs);
    if (taken.length === 0) return;
    for (const { partition, epoch } of taken) {
      this.held.set(partition, epoch);
      this.options.epochs[partition] = epoch;
    }
    this.options.onGained?.(taken.map((r) => r.partition).sort((a, b) => a - b));
  }

  /** Drains, stops appending, then frees the partitions for the next instance at once. */
  private async give(partitions: number[]): Promise<void> {
    await this.options.onGiving?.(partitions);
    this.drop(partitions, false);
    await this.session().give(this.options.instance, partitions);
  }

  /** Stops appending to the partitions; `lost` tells onLost (a lease that lapsed or moved). */
  private drop(partitions: number[], lost = true): void {
    for (const p of partitions) {
      this.held.delete(p);
      this.options.epochs[p] = 0n;
    }
    if (lost) this.options.onLost?.(partitions);
  }

  /** Renews every third of a lease from now on. */
  resume(): void {
    if (this.timer !== null || this.stopped) return;
    const every = this.options.leaseMs / RENEWALS_PER_LEASE;
    const next = (): Timer =>
      this.clock.setTimer(() => {
        this.timer = next();
        void this.tick().catch(() => undefined);
      }, every);
    this.timer = next();
  }

  /** Stops renewing without giving anything back: what a paused or cut-off instance does. */
  halt(): void {
    this.timer?.cancel();
    this.timer = null;
    this.expiryTimer?.cancel();
    this.expiryTimer = null;
  }

  /** Gives every partition back and leaves the cluster (an orderly stop). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.halt();
    this.reconnecting?.cancel();
    this.reconnecting = null;
    await this.ticking?.catch(() => undefined);
    this.drop(this.partitions(), false);
    // Without a connection nothing can be given back: the leases lapse after their time.
    const client = this.client;
    if (client === null) return;
    try {
      await client.leave(this.options.instance);
    } finally {
      this.client = null;
      await client.end().catch(() => undefined);
    }
  }
}
