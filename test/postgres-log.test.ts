// The PostgreSQL log (cluster mode, P22) on a real PostgreSQL started for the run
// (support/postgres-setup.ts): the same contract suite as the LMDB and in-memory logs, then what
// is its own: the schema it creates and refuses, synchronous commits whatever the server's
// default, one commit per batch of appends, and nothing of a failed commit acknowledged.
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { logContract } from '../src/log/log.contract.js';
import type { Log } from '../src/log/log.js';
import type { PostgresLog as PostgresLogType } from '../src/log/postgres-log.js';
import type * as Schema from '../src/log/postgres-schema.js';
import { NodeStore } from '../src/store.js';
import { freshDatabase, startPostgres } from './support/postgres.js';

// The compiled modules: the log's reader thread is a file beside it (postgres-reader.js).
const compiled = (path: string) => import(new URL(`../dist/src/log/${path}`, import.meta.url).href);
const { PostgresLog } = (await compiled('postgres-log.js')) as {
  PostgresLog: typeof PostgresLogType;
};
const { MIGRATIONS, SchemaError } = (await compiled('postgres-schema.js')) as typeof Schema;

logContract(
  'PostgresLog',
  (() => {
    let url: string | null = null;
    let open: PostgresLogType | null = null;
    return {
      open: async () => {
        url = await freshDatabase(inject('postgresUrl'));
        open = await PostgresLog.open(url);
        return open;
      },
      reopen: async (log: Log) => {
        await log.close();
        open = await PostgresLog.open(url!);
        return open;
      },
      dispose: async () => {
        await open?.close();
        open = null;
      },
    };
  })(),
);

/** Runs statements on a database of the test cluster as its superuser. */
async function sql<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * A trigger of the test's own on the records table: for every record, the transaction that wrote
 * it and the session's synchronous_commit, as the server saw them.
 */
async function watchCommits(url: string): Promise<void> {
  await sql(
    url,
    `create table seen (txid bigint, sync text);
     create function note_commit() returns trigger language plpgsql as $$
     begin
       insert into seen values (txid_current(), current_setting('synchronous_commit'));
       return new;
     end $$;
     create trigger note_commit after insert on records for each row execute function note_commit();`,
  );
}

const record = (partition: number, seq: number) => ({
  partition,
  seq,
  bytes: Buffer.from(`${partition}/${seq}`),
});

describe('PostgresLog (P22)', () => {
  const opened: PostgresLogType[] = [];
  afterEach(async () => {
    for (const log of opened.splice(0)) await log.close();
  });
  const openLog = async (url: string) => {
    const log = await PostgresLog.open(url);
    opened.push(log);
    return log;
  };

  it('creates its schema once, at the version this build knows, however many open it together', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    await Promise.all([openLog(url), openLog(url), openLog(url)]);
    const versions = await sql<{ version: number }>(url, 'select version from path_schema');
    expect(versions).toEqual([{ version: MIGRATIONS.length }]);
    const tables = await sql<{ name: string }>(
      url,
      "select table_name as name from information_schema.tables where table_schema = 'public' order by 1",
    );
    expect(tables.map((t) => t.name)).toEqual([
      'flights',
      'instances',
      'leases',
      'path_schema',
      'records',
      'rows',
      'snapshots',
    ]);
  });

  it('refuses a database whose schema is newer than this build, and writes nothing to it', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    await (await openLog(url)).close();
    opened.length = 0;
    await sql(url, 'update path_schema set version = $1', [MIGRATIONS.length + 1]);
    await expect(PostgresLog.open(url)).rejects.toThrow(SchemaError);
    await expect(PostgresLog.open(url)).rejects.toThrow(/newer than this build/);
    const versions = await sql<{ version: number }>(url, 'select version from path_schema');
    expect(versions).toEqual([{ version: MIGRATIONS.length + 1 }]);
  });

  it('P14: commits synchronously even where the database defaults to asynchronous commits', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const name = new URL(url).pathname.slice(1);
    await sql(url, `alter database ${name} set synchronous_commit = off`);
    const log = await openLog(url);
    await watchCommits(url);
    await log.append([record(1, 1)], []);
    expect(await sql<{ sync: string }>(url, 'select sync from seen')).toEqual([{ sync: 'on' }]);
  });

  it('commits appends issued together in fewer transactions than appends (group commit)', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const log = await openLog(url);
    await watchCommits(url);
    await Promise.all(Array.from({ length: 50 }, (_, i) => log.append([record(2, i + 1)], [])));
    const commits = await sql<{ n: string }>(url, 'select count(distinct txid) as n from seen');
    expect(Number(commits[0]!.n)).toBeLessThanOrEqual(2);
    expect([...log.read(2, 0)].map((r) => r.seq)).toEqual(
      Array.from({ length: 50 }, (_, i) => i + 1),
    );
  });

  it('acknowledges nothing of a commit that fails: a record already there rejects its whole batch', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const log = await openLog(url);
    await log.append([record(3, 1)], []);
    const view = { table: 'views' as const, key: 'v', bytes: Buffer.from('view') };
    const outcomes = await Promise.allSettled([
      log.append([record(3, 1)], [view]),
      log.append([record(4, 1)], []),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
    log.refresh();
    expect(log.get('views', 'v')).toBeUndefined();
    expect([...log.read(4, 0)]).toEqual([]);
    // The log goes on: the next commit lands.
    await log.append([record(4, 1)], [view]);
    expect(log.get('views', 'v')?.toString()).toBe('view');
  });

  it('P14: every append acknowledged before the database server crashed is there after its restart', async () => {
    const server = await startPostgres();
    try {
      const url = await freshDatabase(server.url);
      // Asynchronous commits by default: only the log's own session setting keeps it durable, and
      // an immediate stop loses what was acknowledged but not yet flushed from the WAL buffers.
      await sql(
        url,
        `alter database ${new URL(url).pathname.slice(1)} set synchronous_commit = off`,
      );
      const log = await PostgresLog.open(url);
      const acknowledged: [number, number][] = [];
      let failed = 0;
      // Eight writers, each appending one record after another to its own partition until one
      // fails: the crash finds commits under way.
      const writers = Array.from({ length: 8 }, async (_, partition) => {
        for (let seq = 1; ; seq++) {
          const view = {
            table: 'views' as const,
            key: `v${partition}/${seq}`,
            bytes: Buffer.from('x'),
          };
          try {
            await log.append([record(partition, seq)], [view]);
          } catch {
            failed++;
            return;
          }
          acknowledged.push([partition, seq]);
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      server.crashAndRestart();
      await Promise.all(writers);
      await log.close().catch(() => undefined);
      const reopened = await PostgresLog.open(url);
      try {
        expect(failed).toBe(8);
        expect(acknowledged.length).toBeGreaterThan(8);
        const missing = acknowledged.filter(
          ([p, seq]) =>
            ![...reopened.read(p, seq - 1)].some((r) => r.seq === seq) ||
            reopened.get('views', `v${p}/${seq}`)?.toString() !== 'x',
        );
        expect(missing).toEqual([]);
      } finally {
        await reopened.close();
      }
    } finally {
      server.stop();
    }
  });

  it("issue 29: an append that does not follow on from its partition's last record is refused whole", async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const log = await openLog(url);
    const view = (key: string) => ({ table: 'views' as const, key, bytes: Buffer.from(key) });
    const { UnavailableError } = (await import(
      new URL('../dist/src/log/unavailable.js', import.meta.url).href
    )) as typeof import('../src/log/unavailable.js');
    // A partition with no record starts at 1: seq 2 leaves a hole where an append in doubt was.
    const first = log.append([record(5, 2)], [view('a')]);
    await expect(first).rejects.toBeInstanceOf(UnavailableError);
    await expect(first).rejects.toThrow('an earlier append of partition 5 did not commit');
    await log.append([record(5, 1)], []);
    // After a record: a hole, an overlap (an append in doubt that landed), a hole inside the batch.
    await expect(log.append([record(5, 3)], [view('b')])).rejects.toThrow(/5 did not commit/);
    await expect(log.append([record(5, 1), record(5, 2)], [])).rejects.toThrow(
      'an earlier append of partition 5 committed unseen',
    );
    await expect(log.append([record(5, 2), record(5, 4)], [view('c')])).rejects.toThrow(
      UnavailableError,
    );
    // The database answered each refusal: it is not taken for unreachable (/readyz).
    expect(log.health.reachable).toBe(true);
    // Nothing of a refused append landed: neither its records nor its rows.
    log.refresh();
    expect([...log.read(5, 0)].map((r) => r.seq)).toEqual([1]);
    expect(['a', 'b', 'c'].map((key) => log.get('views', key))).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    // What follows on lands, beside another partition's first record in the same commit.
    await log.append([record(5, 2), record(5, 3), record(6, 1)], [view('d')]);
    log.refresh();
    expect([...log.read(5, 0)].map((r) => r.seq)).toEqual([1, 2, 3]);
    expect(log.get('views', 'd')?.toString()).toBe('d');
  });

  it('issue 29: a database of schema version 1 is brought to the append that checks continuity', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    await sql(
      url,
      `create table path_schema (version integer not null); insert into path_schema values (1);
       ${MIGRATIONS[0]!}`,
    );
    const log = await openLog(url);
    expect(await sql(url, 'select version from path_schema')).toEqual([
      { version: MIGRATIONS.length },
    ]);
    await expect(log.append([record(1, 2)], [])).rejects.toThrow(/partition 1 did not commit/);
    await log.append([record(1, 1)], []);
  });

  it('instances starting together on an empty database make one set of keys, found by all', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const stores = await Promise.all(
      [1, 2, 3].map(async () => new NodeStore((await openLog(url)).nodeTables())),
    );
    const made = await Promise.all(stores.map((s) => s.ensureSecrets({ now: Date.now() })));
    const seen = made.map((m) => [m.signingKey.kid, m.pepper.hex, m.sealingKey.toString('hex')]);
    expect(seen[1]).toEqual(seen[0]);
    expect(seen[2]).toEqual(seen[0]);
    for (const store of stores) {
      expect(store.signingKeys().filter((k) => k.status === 'active')).toHaveLength(1);
      expect(store.webhookSecrets()).toHaveLength(1);
    }
  });

  it('claims made together (one statement a turn): each key is won once, a flight until released or lapsed', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const [a, b] = await Promise.all([openLog(url), openLog(url)]);
    const mark = Buffer.from('mark');
    // Two logs (two instances), each with the same key twice in one turn, and a key of its own.
    const claims = await Promise.all([
      a.claim('replay', 'k1', mark),
      a.claim('replay', 'k1', mark),
      a.claim('replay', 'ka', mark),
      b.claim('replay', 'k1', mark),
      b.claim('replay', 'kb', mark),
    ]);
    expect(claims.filter((won, i) => won && [0, 1, 3].includes(i))).toHaveLength(1);
    expect([claims[2], claims[4]]).toEqual([true, true]);
    expect(await a.claim('replay', 'ka', mark)).toBe(false);
    // Flights: one call of a scope wins it until it is released; the answer is read with it.
    const flights = await Promise.all([
      a.claimFlight('s1', 60_000),
      a.claimFlight('s1', 60_000),
      b.claimFlight('s1', 60_000),
      b.claimFlight('s2', 60_000),
    ]);
    expect(flights.filter((f) => f !== 'in-flight')).toHaveLength(2);
    expect(flights[3]).toBeUndefined();
    await a.write([{ table: 'idempotency', key: 's2', bytes: Buffer.from('answer') }]);
    expect(await a.claimFlight('s2', 60_000)).toBe('in-flight');
    await b.releaseFlight('s2');
    expect((await a.claimFlight('s2', 60_000)) as Buffer).toEqual(Buffer.from('answer'));
    // A claim lapses after its time, should its instance die.
    expect(await a.claimFlight('s3', 50)).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await b.claimFlight('s3', 60_000)).toBeUndefined();
  });
});
