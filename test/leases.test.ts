// Partition leases and fencing (P22) on the test run's PostgreSQL: instances share the partitions
// fairly, a lease that lapses (a paused instance) is taken over, and the instance that lost it can
// no longer append there; an orderly stop gives its partitions back at once.
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import type * as ShardModule from '../src/actors/shard.js';
import type * as LeasesModule from '../src/cluster/leases.js';
import { PARTITION_COUNT } from '../src/log/log.js';
import type * as PostgresLogModule from '../src/log/postgres-log.js';
import type * as UnavailableModule from '../src/log/unavailable.js';
import { freshDatabase } from './support/postgres.js';
import { fixedShard, issueReceipt, settleReceipt } from './support/shards.js';

// The compiled modules: the log's reader thread is a file beside it.
const compiled = (path: string) => import(new URL(`../dist/src/${path}`, import.meta.url).href);
const { Leases, sharedEpochs } = (await compiled('cluster/leases.js')) as typeof LeasesModule;
const { Shard } = (await compiled('actors/shard.js')) as typeof ShardModule;
const { PostgresLog, NotHeldError } = (await compiled(
  'log/postgres-log.js',
)) as typeof PostgresLogModule;
const { DatabaseHealth } = (await compiled('log/unavailable.js')) as typeof UnavailableModule;

const LEASE_MS = 900;
const record = (partition: number, seq: number) => ({
  partition,
  seq,
  bytes: Buffer.from(`${partition}/${seq}`),
});

type Instance = {
  leases: LeasesModule.Leases;
  log: PostgresLogModule.PostgresLog;
  epochs: BigInt64Array;
};
const running: Instance[] = [];
afterEach(async () => {
  for (const { leases, log } of running.splice(0)) {
    await leases.stop().catch(() => undefined);
    await log.close().catch(() => undefined);
  }
});

async function instance(
  url: string,
  name: string,
  hooks: Partial<LeasesModule.LeaseOptions> = {},
): Promise<Instance> {
  const epochs = sharedEpochs();
  // The log first: it brings the schema (the lease table) to this build's version.
  const log = await PostgresLog.open(url, { holding: { holder: name, epochs } });
  const leases = await Leases.start({
    url,
    instance: name,
    address: `http://127.0.0.1/${name}`,
    leaseMs: LEASE_MS,
    fingerprint: 'test',
    epochs,
    ...hooks,
  });
  const started = { leases, log, epochs };
  running.push(started);
  return started;
}

/** Polls `check` every `everyMs` for up to `withinMs`; the time it took, or null. */
async function within(
  withinMs: number,
  check: () => boolean,
  everyMs = 50,
): Promise<number | null> {
  const started = performance.now();
  while (performance.now() - started < withinMs) {
    if (check()) return performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  return check() ? performance.now() - started : null;
}

describe('partition leases (P22)', () => {
  it('one instance holds every partition; a second joins and they split them, disjoint', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const a = await instance(url, 'a');
    expect(a.leases.partitions()).toHaveLength(PARTITION_COUNT);
    expect([...a.epochs].every((e) => e === 1n)).toBe(true);
    const b = await instance(url, 'b');
    const split = await within(LEASE_MS * 4, () => {
      const [ha, hb] = [a.leases.partitions(), b.leases.partitions()];
      return ha.length === PARTITION_COUNT / 2 && hb.length === PARTITION_COUNT / 2;
    });
    expect(split).not.toBeNull();
    const both = [...a.leases.partitions(), ...b.leases.partitions()].sort((x, y) => x - y);
    expect(both).toEqual(Array.from({ length: PARTITION_COUNT }, (_, p) => p));
    // Each appends to its own partitions, and is refused another's before it asks the database.
    const mine = b.leases.partitions()[0]!;
    const theirs = a.leases.partitions()[0]!;
    await b.log.append([record(mine, 1)], []);
    await expect(b.log.append([record(theirs, 1)], [])).rejects.toThrow(NotHeldError);
  });

  it('a paused instance loses its partitions after its lease and cannot append there after', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const a = await instance(url, 'a');
    const partition = 7;
    await a.log.append([record(partition, 1)], []);
    // Paused: no renewal, but its threads still think they hold the partition.
    a.leases.halt();
    const paused = performance.now();
    const b = await instance(url, 'b');
    const tookOver = await within(LEASE_MS * 4, () => b.leases.partitions().includes(partition));
    expect(tookOver).not.toBeNull();
    expect(performance.now() - paused).toBeGreaterThanOrEqual(LEASE_MS * 0.9);
    expect(a.epochs[partition]).toBe(1n);
    expect(b.epochs[partition]).toBe(2n);
    // The paused instance's append is refused by the database; the new owner's lands.
    await expect(a.log.append([record(partition, 2)], [])).rejects.toThrow(NotHeldError);
    await b.log.append([record(partition, 2)], []);
    expect([...b.log.read(partition, 0)].map((r) => r.bytes.toString())).toEqual(['7/1', '7/2']);
    // Once it renews again it learns of the loss and holds no more than its share.
    a.leases.resume();
    await a.leases.tick();
    expect(a.epochs[partition]).toBe(0n);
  });

  it('rows made at one epoch of their partition are refused at another (the feed, issue 30)', async () => {
    // The feed's writer makes its rows at the epoch it resynced under; a round that goes out
    // after the partition left and came back (a pause) must not write over the entries the
    // writer in between appended (found by the simulator, cluster seed 744488173).
    const url = await freshDatabase(inject('postgresUrl'));
    const a = await instance(url, 'a');
    const partition = 0;
    const epoch = a.epochs[partition]!;
    expect(epoch).toBeGreaterThan(0n);
    const row = (key: string) => ({ table: 'feed' as const, key, bytes: Buffer.from(key) });
    await a.log.writeHolding(partition, [row('00000001')], epoch);
    await expect(a.log.writeHolding(partition, [row('00000002')], epoch - 1n)).rejects.toThrow(
      NotHeldError,
    );
    await expect(a.log.writeHolding(partition, [row('00000003')], epoch + 1n)).rejects.toThrow(
      NotHeldError,
    );
    expect(a.log.get('feed', '00000001')?.toString()).toBe('00000001');
    expect(a.log.get('feed', '00000002')).toBeUndefined();
  });

  it("another instance's partitions are taken as its lease lapses, not a renewal period later", async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const a = await instance(url, 'a');
    const b = await instance(url, 'b');
    expect(
      await within(LEASE_MS * 4, () => b.leases.partitions().length === PARTITION_COUNT / 2),
    ).not.toBeNull();
    // a renews now and stops; b's rounds (every third of a lease) are set to fall well before
    // and well after the lapse of a's leases: 5/18 of a lease after a's last renewal, and so on.
    await a.leases.tick();
    a.leases.halt();
    b.leases.halt();
    await new Promise((resolve) => setTimeout(resolve, (LEASE_MS * 5) / 18));
    b.leases.resume();
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const lapse = await db.query<{ left_ms: number }>(
      "select extract(epoch from max(expires_at) - now())::float8 * 1000 as left_ms from leases where owner = 'a'",
    );
    await db.end();
    const lapsesAt = performance.now() + lapse.rows[0]!.left_ms;
    const tookAll = await within(
      LEASE_MS * 4,
      () => b.leases.partitions().length === PARTITION_COUNT,
      5,
    );
    expect(tookAll).not.toBeNull();
    // Taken within a few milliseconds of the lapse, not at b's next round (5/18 of a lease later).
    expect(performance.now() - lapsesAt).toBeLessThan(LEASE_MS / 6);
  });

  it('an orderly stop gives the partitions back at once, not after the lease', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const a = await instance(url, 'a');
    const b = await instance(url, 'b');
    await within(LEASE_MS * 4, () => b.leases.partitions().length === PARTITION_COUNT / 2);
    await a.leases.stop();
    const stopped = performance.now();
    await b.leases.tick();
    expect(b.leases.partitions()).toHaveLength(PARTITION_COUNT);
    expect(performance.now() - stopped).toBeLessThan(LEASE_MS);
  });

  it('a shard whose partition was taken over refuses its commands as moved and goes on', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const a = await instance(url, 'a');
    const fatal: unknown[] = [];
    const shard = new Shard(fixedShard(a.log, { onFatal: (error) => fatal.push(error) }).options);
    await shard.recover();
    const reference = `rcp_${'e'.repeat(32)}`;
    const issued = await shard.submit(issueReceipt(reference));
    expect(issued.reply.status).toBe(201);
    const p = (await import('../src/log/log.js')).partitionOf(reference);
    a.leases.halt();
    const b = await instance(url, 'b');
    expect(await within(LEASE_MS * 4, () => b.leases.partitions().includes(p))).not.toBeNull();
    const settle = settleReceipt(reference);
    await expect(shard.submit(settle)).rejects.toMatchObject({ name: 'MovedError', partition: p });
    await expect(shard.submit(settle)).rejects.toMatchObject({ name: 'MovedError', partition: p });
    expect(shard.stateOf(reference)).toBeNull();
    expect(fatal).toEqual([]);
    // Nor can it replace the new owner's snapshot with what it held.
    await expect(a.log.writeSnapshot(p, Buffer.from('stale'))).rejects.toThrow(NotHeldError);
    await b.log.writeSnapshot(p, Buffer.from('fresh'));
    expect(b.log.readSnapshot(p)?.toString()).toBe('fresh');
    shard.stop();
  });

  it('issue 29: leases live through a lost connection: opened again, renewed, a move found', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const failures: unknown[] = [];
    const health = new (class extends DatabaseHealth {
      override failed(error: unknown): boolean {
        failures.push(error);
        return super.failed(error);
      }
    })();
    const lost: number[][] = [];
    const a = await instance(url, 'a', { health, onLost: (ps) => lost.push(ps) });
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const expiry = async () =>
        (
          await db.query<{ at: Date }>("select max(expires_at) as at from leases where owner = 'a'")
        ).rows[0]!.at.getTime();
      const before = await expiry();
      // Every connection ends (a restart, a switchover); meanwhile another instance takes
      // partition 7, its epoch raised as a takeover raises it.
      await db.query(
        'select pg_terminate_backend(pid) from pg_stat_activity ' +
          'where datname = current_database() and pid <> pg_backend_pid()',
      );
      await db.query(
        "update leases set owner = 'b', epoch = epoch + 1, expires_at = now() + interval '1 hour' where partition = 7",
      );
      // The leases' connection is opened again and renews: their expiry moves on.
      expect(await within(LEASE_MS * 6, () => failures.length > 0)).not.toBeNull();
      let after = before;
      for (let n = 0; n < 60 && after <= before + LEASE_MS / 2; n++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        after = await expiry();
      }
      expect(after).toBeGreaterThan(before + LEASE_MS / 2);
      // The moved partition is given up (fenced as today); every other one is still held.
      expect(await within(LEASE_MS * 4, () => a.epochs[7] === 0n)).not.toBeNull();
      expect(lost.flat()).toContain(7);
      expect(a.leases.holds(7)).toBe(false);
      expect(a.leases.partitions()).toHaveLength(PARTITION_COUNT - 1);
      expect(health.reachable).toBe(true);
      // The instance's log appends again to a partition it still holds.
      let landed = false;
      for (let n = 0; n < 40 && !landed; n++) {
        landed = await a.log.append([record(8, 1)], []).then(
          () => true,
          () => false,
        );
        if (!landed) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(landed).toBe(true);
    } finally {
      await db.end();
    }
  });
});
