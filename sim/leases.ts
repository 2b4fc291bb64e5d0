// Cluster mode's leases and channel in a run (issue 30): the node's own lease rounds
// (src/cluster/leases.ts, Leases) over a simulated leases table, and its own router
// (src/cluster/router.ts, ClusterRouter) over a simulated internal channel.
//
// The table keeps what the database's does (postgres-leases.ts): an epoch per partition raised at
// every takeover, an owner and an expiry on the database's clock (the world's, never an
// instance's skewed one), the instances seen and when. Its statements fail while the database is
// away, wait while their instance is paused, and never answer once it is gone; the epoch is the
// one the store's appends are fenced with (disk.ts, leaseEpochs).
//
// The channel carries a command to the instance listening at an address and its answer back, as
// the owner answers it (channel.ts, ownersAnswer) and its caller takes it (callersResult), the
// command and the answer through msgpack; the seed delays a call, sends it twice, or loses its
// answer after the owner ran it. A call to an instance that is gone is refused before it is made
// (ECONNREFUSED); one to a paused instance waits until its caller's time is up.
import { pack, unpack } from 'msgpackr';
import type { CommandResult, RoutedCommand } from '../src/actors/types.js';
import {
  callersResult,
  ChannelError,
  ownersAnswer,
  type Answer,
  type Channel,
} from '../src/cluster/channel.js';
import type { LeaseRow, LeaseSession, LeaseStore, OwnerRow } from '../src/cluster/leases.js';
import { PARTITION_COUNT } from '../src/log/log.js';
import { unanswered, type SimDisk } from './disk.js';
import type { Random } from './random.js';

interface Seen {
  address: string;
  seenAt: number;
  fingerprint: string;
}

/** The leases and instances tables of the cluster's database. */
export class SimLeaseTable {
  readonly owner: (string | null)[] = new Array<string | null>(PARTITION_COUNT).fill(null);
  readonly expires: number[] = new Array<number>(PARTITION_COUNT).fill(-Infinity);
  readonly instances = new Map<string, Seen>();
  /** When a lease last changed hands (taken, given back), on the database's clock. */
  changedAt = -Infinity;

  constructor(private readonly disk: SimDisk) {}

  private now(): number {
    return this.disk.now();
  }

  /** The holder of `p` now, as the table says: none once its lease has lapsed. */
  holderOf(p: number): string | null {
    return this.expires[p]! > this.now() ? this.owner[p]! : null;
  }

  strangers(leaseMs: number, fingerprint: string): boolean {
    const since = this.now() - leaseMs;
    return [...this.instances.values()].some(
      (i) => i.seenAt > since && i.fingerprint !== fingerprint,
    );
  }

  renew(instance: string, leaseMs: number, partitions: number[]): LeaseRow[] {
    const rows: LeaseRow[] = [];
    for (const p of partitions)
      if (this.owner[p] === instance) {
        this.expires[p] = this.now() + leaseMs;
        rows.push({ partition: p, epoch: this.disk.leaseEpochs[p]! });
      }
    return rows;
  }

  heartbeat(
    seen: { instance: string; address: string; fingerprint: string },
    leaseMs: number,
    forgetMs: number,
  ): number {
    const now = this.now();
    const before = this.instances.get(seen.instance);
    this.instances.set(seen.instance, {
      address: seen.address,
      seenAt: now,
      fingerprint: before?.fingerprint ?? seen.fingerprint,
    });
    const live = [...this.instances.values()].filter((i) => i.seenAt > now - leaseMs).length;
    for (const [id, i] of this.instances) if (i.seenAt < now - forgetMs) this.instances.delete(id);
    return live;
  }

  take(instance: string, count: number, leaseMs: number): LeaseRow[] {
    const now = this.now();
    const rows: LeaseRow[] = [];
    for (let p = 0; p < PARTITION_COUNT && rows.length < count; p++) {
      if (this.owner[p] !== null && this.expires[p]! >= now) continue;
      const epoch = this.disk.leaseEpochs[p]! + 1n;
      this.disk.leaseEpochs[p] = epoch;
      this.owner[p] = instance;
      this.expires[p] = now + leaseMs;
      this.changedAt = now;
      rows.push({ partition: p, epoch });
    }
    return rows;
  }

  give(instance: string, partitions: readonly number[]): void {
    for (const p of partitions)
      if (this.owner[p] === instance) {
        this.owner[p] = null;
        this.expires[p] = -Infinity;
        this.changedAt = this.now();
      }
  }

  owners(): OwnerRow[] {
    const now = this.now();
    const rows: OwnerRow[] = [];
    for (let p = 0; p < PARTITION_COUNT; p++) {
      const owner = this.owner[p]!;
      const seen = owner === null ? undefined : this.instances.get(owner);
      if (seen === undefined || this.expires[p]! <= now) continue;
      rows.push({ partition: p, owner, address: seen.address, leftMs: this.expires[p]! - now });
    }
    return rows;
  }

  leave(instance: string): void {
    this.give(
      instance,
      this.owner.flatMap((o, p) => (o === instance ? [p] : [])),
    );
    this.instances.delete(instance);
  }
}

/** How one instance's statements reach the database: now, once it runs again, or never. */
export interface Gate {
  /** Runs `statement` as the instance's connection would (disk.ts, SimLog). */
  statement<T>(run: () => Promise<T>): Promise<T>;
}

/** One instance's connections to the leases table. */
export function simLeases(table: SimLeaseTable, disk: SimDisk, gate: Gate): LeaseStore {
  const reachable = () => {
    if (disk.down) throw unanswered();
  };
  const run = <T>(statement: () => T) =>
    gate.statement(async () => {
      reachable();
      return statement();
    });
  return {
    open: () =>
      run((): LeaseSession => ({
        strangers: (leaseMs, fingerprint) => run(() => table.strangers(leaseMs, fingerprint)),
        renew: (i, leaseMs, ps) => run(() => table.renew(i, leaseMs, ps)),
        heartbeat: (seen, leaseMs, forgetMs) => run(() => table.heartbeat(seen, leaseMs, forgetMs)),
        take: (i, count, leaseMs) => run(() => table.take(i, count, leaseMs)),
        give: (i, ps) => run(() => table.give(i, ps)),
        owners: () => run(() => table.owners()),
        leave: (i) => run(() => table.leave(i)),
        end: () => Promise.resolve(),
      })),
  };
}

/** What the channel reaches: the instance listening at an address, while it runs. */
export interface Listening {
  /** The instance at `address` now, or null where none listens there (gone, or never). */
  at(address: string): {
    /** Resolves once the instance runs again (at once, when it runs). */
    running(): Promise<void>;
    submit(routed: RoutedCommand): Promise<CommandResult>;
  } | null;
}

export type ChannelFault = 'none' | 'delay' | 'duplicate' | 'lost';

/** The internal channel as one instance sends on it. */
export function simChannel(
  listening: Listening,
  random: Random,
  caller: { sleep(ms: number): Promise<void> },
  onFault: (fault: ChannelFault) => void,
): Channel {
  return {
    async send(address, routed, timeoutMs) {
      const fault = random.weighted([
        [90, 'none'],
        [5, 'delay'],
        [3, 'duplicate'],
        [2, 'lost'],
      ] as const);
      onFault(fault);
      if (fault === 'delay') await caller.sleep(random.int(1, 2_000));
      const owner = listening.at(address);
      if (owner === null) throw new ChannelError(`connect ECONNREFUSED ${address}`);
      const body = pack(routed);
      const call = async (): Promise<Answer> => {
        await owner.running();
        const [, answered] = await ownersAnswer(unpack(body) as RoutedCommand, (r) =>
          owner.submit(r),
        );
        return unpack(pack(answered)) as Answer;
      };
      if (fault === 'duplicate') void call().catch(() => undefined);
      const answered = await Promise.race([call(), caller.sleep(timeoutMs).then(() => null)]);
      if (answered === null) throw new ChannelError('the owner did not answer in time');
      if (fault === 'lost') throw new ChannelError('socket hang up');
      return callersResult(answered);
    },
  };
}
