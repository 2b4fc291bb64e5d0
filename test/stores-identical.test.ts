// P22: the embedded store and the cluster's store give the same answers, byte for byte. The same
// runtime (a shard with every decider), a fixed clock and ids made in the same order, run once on
// the LMDB log in a temporary directory and once on the PostgreSQL log in a database of the test
// run's PostgreSQL: every answer, every record and every row written must be the same bytes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Shard } from '../src/actors/shard.js';
import type { RoutedCommand } from '../src/actors/types.js';
import { LmdbLog, openEnvironment } from '../src/log/lmdb-log.js';
import { PARTITION_COUNT, TABLES, type Log } from '../src/log/log.js';
import type { PostgresLog as PostgresLogType } from '../src/log/postgres-log.js';
import { freshDatabase } from './support/postgres.js';
import { fixedShard } from './support/shards.js';

// The compiled module: the log's reader thread is a file beside it.
const { PostgresLog } = (await import(
  new URL('../dist/src/log/postgres-log.js', import.meta.url).href
)) as { PostgresLog: typeof PostgresLogType };

const ALL = Array.from({ length: PARTITION_COUNT }, (_, p) => p);
const LOCAL = { member: 'alpha', local: true };
const BETA = { member: 'beta', local: false };
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };

/** The same commands, one after another: receipts issued, settled and superseded, with keys. */
function commands(): RoutedCommand[] {
  const out: RoutedCommand[] = [];
  for (let i = 1; i <= 12; i++) {
    const reference = `rcp_${i.toString(16).padStart(32, 'a')}`;
    out.push({
      aggregate: 'receipt',
      key: reference,
      command: {
        name: 'issue',
        input: {
          reference,
          issued_by: i % 2 === 0 ? 'payee' : 'payer',
          via: EUR,
          received: { value: `${i}.00`, asset_type: 'fiat', asset_code: 'EUR' },
          rail_references: [{ type: 'book_entry', value: `BE-${i}` }],
        },
        caller: i % 3 === 0 ? BETA : LOCAL,
      },
      idempotency: { scope: `local/key-${i}`, requestHash: `h${i}` },
    });
    out.push({
      aggregate: 'receipt',
      key: reference,
      command: {
        name: 'transition',
        input: { to: 'settled', rail_references: [{ type: 'book_entry', value: `S-${i}` }] },
        caller: LOCAL,
      },
    });
  }
  return out;
}

/** Everything a log holds: each partition's records, each table's rows, the snapshots. */
function contents(log: Log) {
  log.refresh();
  const records = ALL.map((p) => [...log.read(p, 0)].map((r) => [r.seq, r.bytes.toString('hex')]));
  const tables = Object.fromEntries(
    TABLES.map((t) => [t, [...log.scan(t)].map((r) => [r.key, r.bytes.toString('hex')])]),
  );
  const snapshots = ALL.map((p) => log.readSnapshot(p)?.toString('hex') ?? null);
  return { records, tables, snapshots };
}

/**
 * Both runs' clock starts here: a whole second of today, since the cluster's store judges whether
 * a claim (an idempotency answer) is still in force by the database's own clock (schema version
 * 4), as it would in service; a clock days behind it would find every claim lapsed at its commit.
 */
const START = Math.floor(Date.now() / 1000) * 1000;

async function run(log: Log) {
  const { options, clock } = fixedShard(log, {
    member: 'alpha',
    snapshotEveryRecords: 5,
    startAt: START,
  });
  const shard = new Shard(options);
  await shard.recover();
  const answers: string[] = [];
  for (const command of commands()) {
    const result = await shard.submit(command);
    answers.push(JSON.stringify(result.reply));
    clock.advance(1_000);
  }
  shard.stop();
  await shard.drained();
  // What a SIGTERM does: every partition written since its last snapshot is snapshotted.
  await shard.snapshotAll();
  return { answers, ...contents(log) };
}

describe('P22: the same commands on the embedded and the cluster store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'path-node-identical-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('give the same answers, records and rows, byte for byte', async () => {
    const lmdb = new LmdbLog(openEnvironment(dir));
    const embedded = await run(lmdb);
    await lmdb.close();
    const postgres = await PostgresLog.open(await freshDatabase(inject('postgresUrl')));
    const cluster = await run(postgres);
    await postgres.close();

    // The run did what it says: answers created and settled, records, views and snapshots written.
    const created = embedded.answers.filter(
      (a) => (JSON.parse(a) as { status: number }).status === 201,
    );
    expect(embedded.answers).toHaveLength(24);
    expect(created.length).toBeGreaterThanOrEqual(12);
    expect(embedded.records.flat().length).toBeGreaterThanOrEqual(created.length);
    expect(embedded.tables.views.length).toBeGreaterThanOrEqual(12);
    expect(embedded.tables.idempotency).toHaveLength(12);
    expect(embedded.snapshots.filter((s) => s !== null).length).toBeGreaterThan(0);

    expect(cluster.answers).toEqual(embedded.answers);
    expect(cluster.records).toEqual(embedded.records);
    expect(cluster.tables).toEqual(embedded.tables);
    expect(cluster.snapshots).toEqual(embedded.snapshots);
  });
});
