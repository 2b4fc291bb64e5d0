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
import { DATABASE_QUERY_TIMEOUT_MS } from '../src/config.js';
import { NodeStore } from '../src/store.js';
import { waitFor } from './support/wait.js';
import { freshDatabase, startPostgres } from './support/postgres.js';

// The compiled modules: the log's reader thread is a file beside it (postgres-reader.js).
const compiled = (path: string) => import(new URL(`../dist/src/log/${path}`, import.meta.url).href);
const { PostgresLog } = (await compiled('postgres-log.js')) as {
  PostgresLog: typeof PostgresLogType;
};
const { MIGRATIONS, SchemaError } = (await compiled('postgres-schema.js')) as typeof Schema;
/** The reason of the one rejected of settled promises. */
const rejection = (settled: PromiseSettledResult<unknown>[]) =>
  (settled.find((s) => s.status === 'rejected') as PromiseRejectedResult).reason as unknown;

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
    // No table of flights (schema version 3, issue 29): a request's claims ride in its commit.
    expect(tables.map((t) => t.name)).toEqual([
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

  it('gives a commit time for its bytes: 8 MiB waiting 4.5 s on a lock commits', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const log = await openLog(url);
    // Another session holds the records table against writes for longer than a statement's
    // bound, as a slow database takes long over a large commit.
    const holder = sql(
      url,
      'begin; lock table records in exclusive mode; select pg_sleep(4.5); commit',
    );
    await waitFor(
      'the lock taken',
      async () => {
        const held = await sql(
          url,
          "select 1 from pg_locks where mode = 'ExclusiveLock' and relation = 'records'::regclass",
        );
        return held.length === 1;
      },
      5_000,
    );
    const big = Buffer.alloc(8 * 1024 * 1024, 5);
    const started = performance.now();
    await log.append([record(1, 1)], [{ table: 'views', key: 'big', bytes: big }]);
    expect(performance.now() - started).toBeGreaterThan(DATABASE_QUERY_TIMEOUT_MS);
    await holder;
    log.refresh();
    expect(log.peek('views', 'big', (bytes) => Buffer.compare(bytes, big))).toBe(0);
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
    const { NotWrittenError } = (await compiled('log.js')) as typeof import('../src/log/log.js');
    // A partition with no record starts at 1: seq 2 leaves a hole where an append in doubt was.
    // Refused with nothing written, which the writer knows for certain (NotWrittenError).
    const first = log.append([record(5, 2)], [view('a')]);
    await expect(first).rejects.toBeInstanceOf(NotWrittenError);
    await expect(first).rejects.toThrow('an earlier append of partition 5 did not commit');
    await log.append([record(5, 1)], []);
    // After a record: a hole, an overlap (an append in doubt that landed), a hole inside the batch.
    await expect(log.append([record(5, 3)], [view('b')])).rejects.toThrow(/5 did not commit/);
    await expect(log.append([record(5, 1), record(5, 2)], [])).rejects.toThrow(
      'an earlier append of partition 5 committed unseen',
    );
    await expect(log.append([record(5, 2), record(5, 4)], [view('c')])).rejects.toThrow(
      NotWrittenError,
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

  it('claims made together (one statement a turn): each key is won once, again once its time is past', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const [a, b] = await Promise.all([openLog(url), openLog(url)]);
    const until = Date.now() + 60_000;
    const mark = (key: string, at = until) =>
      ({ table: 'replay', key, bytes: Buffer.from('mark'), until: at }) as const;
    // Two logs (two instances), each with the same key twice in one turn, and a key of its own.
    const claims = await Promise.all([
      a.claim(mark('k1')),
      a.claim(mark('k1')),
      a.claim(mark('ka')),
      b.claim(mark('k1')),
      b.claim(mark('kb')),
    ]);
    expect(claims.filter((won, i) => won && [0, 1, 3].includes(i))).toHaveLength(1);
    expect([claims[2], claims[4]]).toEqual([true, true]);
    expect(await a.claim(mark('ka'))).toBe(false);
    // A claim whose time is past is another's to take, once.
    expect(await a.claim(mark('old', Date.now() - 1_000))).toBe(true);
    const retaken = await Promise.all([b.claim(mark('old')), a.claim(mark('old'))]);
    expect(retaken.filter(Boolean)).toHaveLength(1);
  });

  it('issue 29: an append claims its rows in its commit; a claim held elsewhere refuses it whole', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const [a, b] = await Promise.all([openLog(url), openLog(url)]);
    const { ClaimTakenError, NotWrittenError } = (await compiled(
      'log.js',
    )) as typeof import('../src/log/log.js');
    const until = Date.now() + 60_000;
    const claim = (key: string, text: string, at = until) =>
      ({ table: 'idempotency', key, bytes: Buffer.from(text), until: at }) as const;
    const view = (key: string) => ({ table: 'views' as const, key, bytes: Buffer.from(key) });
    await a.append([record(1, 1)], [claim('s1', 'first'), view('v1')]);
    // Another instance's commit of the same claim: refused, naming it, and nothing of it written.
    const refused = b.append([record(2, 1)], [claim('s1', 'second'), view('v2')]);
    await expect(refused).rejects.toBeInstanceOf(ClaimTakenError);
    await expect(refused).rejects.toMatchObject({ table: 'idempotency', key: 's1' });
    b.refresh();
    expect(b.get('idempotency', 's1')?.toString()).toBe('first');
    expect(b.get('views', 'v2')).toBeUndefined();
    expect([...b.read(2, 0)]).toEqual([]);
    // A claim taken on its own is one an append cannot take either, and the other way round.
    expect(await b.claim(claim('s1', 'x'))).toBe(false);
    expect(await b.claim(claim('s2', 'own'))).toBe(true);
    await expect(a.append([record(1, 2)], [claim('s2', 'late')])).rejects.toThrow(ClaimTakenError);
    // Appends committed together (one statement): the one with a claim taken is refused, with
    // the one of its partition after it (its records would follow on from the refused one's);
    // another partition's append in the same turn commits.
    const together = await Promise.allSettled([
      a.append([record(3, 1)], [claim('s1', 'again')]),
      a.append([record(3, 2)], [view('v3')]),
      a.append([record(4, 1)], [claim('s4', 'fresh'), view('v4')]),
    ]);
    expect(together.map((t) => t.status)).toEqual(['rejected', 'rejected', 'fulfilled']);
    expect((together[0] as PromiseRejectedResult).reason).toBeInstanceOf(ClaimTakenError);
    expect((together[1] as PromiseRejectedResult).reason).toBeInstanceOf(NotWrittenError);
    a.refresh();
    expect([...a.read(3, 0)]).toEqual([]);
    expect(a.get('views', 'v3')).toBeUndefined();
    expect(a.get('idempotency', 's4')?.toString()).toBe('fresh');
    // A claim whose time is past is taken by the next commit that claims it.
    expect(await a.claim(claim('s5', 'lapsed', Date.now() - 1))).toBe(true);
    await b.append([record(6, 1)], [claim('s5', 'taken')]);
    a.refresh();
    expect(a.get('idempotency', 's5')?.toString()).toBe('taken');
    // A commit whose own claim's time is already past by the database's clock is refused as
    // taken, nothing of it written (schema version 4, P5: a request decided after its replay
    // window ended must not commit beside the lapsed claim of an earlier sending).
    const late = b.append([record(9, 1)], [claim('s9', 'too late', Date.now() - 1), view('v9')]);
    await expect(late).rejects.toBeInstanceOf(ClaimTakenError);
    await expect(late).rejects.toMatchObject({ table: 'idempotency', key: 's9' });
    b.refresh();
    expect(b.get('idempotency', 's9')).toBeUndefined();
    expect(b.get('views', 'v9')).toBeUndefined();
    expect([...b.read(9, 0)]).toEqual([]);
    // Two instances committing one claim at once: exactly one commit takes it.
    const race = await Promise.allSettled([
      a.append([record(7, 1)], [claim('s7', 'a')]),
      b.append([record(8, 1)], [claim('s7', 'b')]),
    ]);
    expect(race.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(rejection(race)).toBeInstanceOf(ClaimTakenError);
  });
});
