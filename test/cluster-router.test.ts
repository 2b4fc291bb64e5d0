// Commands routed between two instances (P22) on the test run's PostgreSQL: each instance is a
// shard on its fenced PostgreSQL log, its leases, the internal channel and the router. A command
// sent to either instance runs on the owner of its partition; when an instance is paused, its
// partitions are taken over and served by the other within the lease time; the channel refuses
// calls not signed with the cluster's key.
import { afterEach, describe, expect, inject, it } from 'vitest';
import type * as ShardModule from '../src/actors/shard.js';
import type { CommandResult } from '../src/actors/types.js';
import type * as ChannelModule from '../src/cluster/channel.js';
import type * as LeasesModule from '../src/cluster/leases.js';
import type * as RouterModule from '../src/cluster/router.js';
import { PARTITION_COUNT, partitionOf } from '../src/log/log.js';
import type * as PostgresLogModule from '../src/log/postgres-log.js';
import { freshDatabase } from './support/postgres.js';
import { fixedShard, issueReceipt, settleReceipt } from './support/shards.js';

// The compiled modules, one copy of each class (MovedError, NotHeldError) as in a running node.
const compiled = (path: string) => import(new URL(`../dist/src/${path}`, import.meta.url).href);
const { Shard } = (await compiled('actors/shard.js')) as typeof ShardModule;
const { Leases, sharedEpochs } = (await compiled('cluster/leases.js')) as typeof LeasesModule;
const { ChannelClient, ChannelListener, channelKey } = (await compiled(
  'cluster/channel.js',
)) as typeof ChannelModule;
const { ClusterRouter } = (await compiled('cluster/router.js')) as typeof RouterModule;
const { PostgresLog } = (await compiled('log/postgres-log.js')) as typeof PostgresLogModule;

const LEASE_MS = 900;
const KEY = channelKey(Buffer.alloc(32, 7));

interface Instance {
  name: string;
  shard: ShardModule.Shard;
  leases: LeasesModule.Leases;
  router: RouterModule.ClusterRouter;
  /** What a paused process does: it renews no lease and answers no call. */
  pause(): Promise<void>;
  close(): Promise<void>;
}
const running: Instance[] = [];
afterEach(async () => {
  for (const i of running.splice(0)) await i.close();
});

async function instance(url: string, name: string, made: { count: number }): Promise<Instance> {
  const epochs = sharedEpochs();
  const log = await PostgresLog.open(url, { holding: { holder: name, epochs } });
  const shard = new Shard(fixedShard(log, { made }).options);
  await shard.recover();
  // Nothing is held before the leases say so.
  for (let p = 0; p < PARTITION_COUNT; p++) await shard.release(p);
  let paused = false;
  let closing = false;
  const moves = new Set<Promise<unknown>>();
  /** Moves under way, awaited by close: none may read the log after it is closed. */
  const moving = (start: () => Promise<void>[]): Promise<void> => {
    if (closing) return Promise.resolve();
    const all = Promise.all(start()).then(() => undefined);
    const tracked = all.catch(() => undefined).finally(() => moves.delete(tracked));
    moves.add(tracked);
    return all;
  };
  const listener = await ChannelListener.start({
    host: '127.0.0.1',
    port: 0,
    key: KEY,
    // A paused instance takes calls (its kernel accepts them) and answers none.
    submit: (routed) => (paused ? new Promise<never>(() => undefined) : shard.submit(routed)),
  });
  const leases = await Leases.start({
    url,
    instance: name,
    address: `http://127.0.0.1:${listener.port}`,
    leaseMs: LEASE_MS,
    fingerprint: 'test',
    epochs,
    // Partitions move while the instance runs; once it closes, its log is gone and nothing moves.
    onGained: (ps) => moving(() => ps.map((p) => shard.adopt(p))),
    onGiving: (ps) => moving(() => ps.map((p) => shard.release(p))),
    onLost: (ps) => void moving(() => ps.map((p) => shard.release(p))),
  });
  const client = new ChannelClient(KEY);
  const router = new ClusterRouter({
    self: name,
    local: shard,
    leases,
    client,
    moveWaitMs: LEASE_MS * 4,
    callTimeoutMs: LEASE_MS,
  });
  const started: Instance = {
    name,
    shard,
    leases,
    router,
    async pause() {
      leases.halt();
      paused = true;
    },
    async close() {
      closing = true;
      await leases.stop().catch(() => undefined);
      await Promise.all(moves);
      shard.stop();
      client.close();
      await listener.close();
      await log.close().catch(() => undefined);
    },
  };
  running.push(started);
  return started;
}

const status = (result: CommandResult) =>
  (JSON.parse(result.reply.body) as { status: string }).status;
const reference = (i: number) => `rcp_${i.toString(16).padStart(32, 'f')}`;

async function until(withinMs: number, check: () => boolean): Promise<boolean> {
  const started = performance.now();
  while (performance.now() - started < withinMs && !check())
    await new Promise((resolve) => setTimeout(resolve, 50));
  return check();
}

async function twoInstances() {
  const url = await freshDatabase(inject('postgresUrl'));
  const made = { count: 0 };
  const a = await instance(url, 'a', made);
  const b = await instance(url, 'b', made);
  const split = () => a.leases.partitions().length === PARTITION_COUNT / 2;
  expect(
    await until(
      LEASE_MS * 4,
      () => split() && b.leases.partitions().length === PARTITION_COUNT / 2,
    ),
  ).toBe(true);
  return { a, b };
}

describe('commands routed between instances (P22)', () => {
  it('a command sent to either instance runs once, on the owner of its partition', async () => {
    const { a, b } = await twoInstances();
    const references = Array.from({ length: 16 }, (_, i) => reference(i));
    const owners = new Set<string>();
    for (const [i, r] of references.entries()) {
      const [to, other] = i % 2 === 0 ? [a, b] : [b, a];
      expect((await to.router.submit(issueReceipt(r))).reply.status).toBe(201);
      const settled = await other.router.submit(settleReceipt(r));
      expect(settled.reply.status).toBe(201);
      expect(status(settled)).toBe('settled');
      const owner = a.leases.holds(partitionOf(r)) ? a : b;
      owners.add(owner.name);
      // The state is held by the owner alone.
      expect(owner.shard.stateOf(r)).not.toBeNull();
      expect((owner === a ? b : a).shard.stateOf(r)).toBeNull();
    }
    // Both instances own some of them: the commands did cross the channel.
    expect(owners).toEqual(new Set(['a', 'b']));
  });

  it("a paused instance's partitions are served by the other within the lease time", async () => {
    const { a, b } = await twoInstances();
    const r = Array.from({ length: 64 }, (_, i) => reference(100 + i)).find((x) =>
      a.leases.holds(partitionOf(x)),
    )!;
    expect((await b.router.submit(issueReceipt(r))).reply.status).toBe(201);
    await a.pause();
    const paused = performance.now();
    // Sent through the other instance: a call the paused owner took and never answered is
    // refused with 503 (it may have reached it), and the client's retry runs once the lease
    // is taken over.
    let settled: CommandResult | null = null;
    let refused = 0;
    while (settled === null) {
      try {
        settled = await b.router.submit(settleReceipt(r));
      } catch (error) {
        expect(error).toMatchObject({ code: 'path.core.unavailable' });
        refused++;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    const tookMs = performance.now() - paused;
    expect(settled.reply.status).toBe(201);
    expect(status(settled)).toBe('settled');
    expect(b.leases.holds(partitionOf(r))).toBe(true);
    expect(tookMs).toBeLessThan(LEASE_MS * 3);
    expect(refused).toBeLessThanOrEqual(2);
  });

  it('the channel refuses a call not signed with the cluster key, and runs nothing', async () => {
    const { a, b } = await twoInstances();
    const r = Array.from({ length: 64 }, (_, i) => reference(200 + i)).find((x) =>
      b.leases.holds(partitionOf(x)),
    )!;
    const stranger = new ChannelClient(channelKey(Buffer.alloc(32, 8)));
    await a.leases.refreshOwners();
    const address = a.leases.ownerOf(partitionOf(r))?.address;
    expect(address).toBeDefined();
    await expect(stranger.send(address!, issueReceipt(r), 5_000)).rejects.toThrow(
      /not a call of this cluster/,
    );
    stranger.close();
    expect(b.shard.stateOf(r)).toBeNull();
  });

  it("an owner's refusal made before it ran the command reaches the caller as it is", async () => {
    const busy = {
      code: 'path.core.unavailable',
      message: 'the node has too many commands in flight',
      detail: { retry_after_seconds: 1 },
    };
    const listener = await ChannelListener.start({
      host: '127.0.0.1',
      port: 0,
      key: KEY,
      submit: () => Promise.reject(busy),
    });
    const client = new ChannelClient(KEY);
    try {
      await expect(
        client.send(`http://127.0.0.1:${listener.port}`, issueReceipt(reference(300)), 5_000),
      ).rejects.toEqual(busy);
    } finally {
      client.close();
      await listener.close();
    }
  });
});
