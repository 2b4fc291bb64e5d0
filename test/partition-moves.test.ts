// A partition handed over between two instances' shard pools (cluster mode, P22) through the
// database: real worker threads, each on its own PostgreSQL log in a database of the test run's
// PostgreSQL. The instance that gives it away drains it and writes its snapshot; the one that
// adopts it folds the snapshot and the records after it, and goes on from there; commands sent to
// the one that gave it away are refused as moved.
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import type * as Pool from '../src/actors/pool.js';
import type { CommandResult } from '../src/actors/types.js';
import { DEFAULT_LIMITS } from '../src/config.js';
import { PARTITION_COUNT, partitionOf } from '../src/log/log.js';
import { removeDir, tempDir } from './support/harness.js';
import { freshDatabase } from './support/postgres.js';
import { issueReceipt, settleReceipt } from './support/shards.js';

const { ShardPool } = (await import(
  new URL('../dist/src/actors/pool.js', import.meta.url).href
)) as typeof Pool;

const SEED = '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60';
const HEX32 = 'ab'.repeat(32);

const pools: Pool.ShardPool[] = [];
const dir = tempDir('path-node-moves');
afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.drain();
});
afterAll(() => removeDir(dir));

async function instance(
  store: string,
  dataDir: string,
  released: number[] = [],
): Promise<Pool.ShardPool> {
  const { pool } = await ShardPool.start({
    workers: 2,
    dataDir,
    store,
    released,
    member: 'local',
    seedHex: SEED,
    sealingKeyHex: HEX32,
    pepperHex: HEX32,
    limits: DEFAULT_LIMITS,
    dev: false,
    operatorWebhooks: false,
    onFatal: (message) => {
      throw new Error(message);
    },
    afterCommit: () => undefined,
  });
  pools.push(pool);
  await pool.recovered;
  return pool;
}

const body = (result: CommandResult) => JSON.parse(result.reply.body) as Record<string, unknown>;

describe('a partition moves between two instances through the database (P22)', () => {
  it('is drained and snapshotted by one, adopted by the other, and refused as moved by the first', async () => {
    const store = await freshDatabase(inject('postgresUrl'));
    // In cluster mode the workers keep nothing in the data directory.
    const a = await instance(store, dir);
    // The second starts with every partition held elsewhere: it reads none of them.
    const all = Array.from({ length: PARTITION_COUNT }, (_, p) => p);
    const b = await instance(store, dir, all);
    const reference = `rcp_${'c'.repeat(32)}`;
    const p = partitionOf(reference);
    await expect(b.submit(issueReceipt(reference))).rejects.toMatchObject({ name: 'MovedError' });
    const issued = await a.submit(issueReceipt(reference));
    expect(issued.reply.status).toBe(201);
    await a.release(p);
    await expect(a.submit(settleReceipt(reference))).rejects.toMatchObject({
      name: 'MovedError',
      partition: p,
    });
    await b.adopt(p);
    // The adopting instance answers from the state the first one left: issued there, settled here.
    const settled = await b.submit(settleReceipt(reference));
    expect(settled.reply.status).toBe(201);
    expect(body(settled)).toMatchObject({ reference, status: 'settled' });
  });
});
