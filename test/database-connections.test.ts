// Every PostgreSQL connection of a cluster instance lives through a lost or silent database
// (issue 29, P22): connections and statements are bounded in time, a failure of reachability
// reaches the caller as an UnavailableError (a 503, P7) and never as an uncaught error, and
// what was lost is opened again. Faults are made for real on the run's PostgreSQL: another
// session's table lock (a statement that never answers), `pg_terminate_backend` (every
// connection lost at once), a loopback port that accepts and never answers (a blackhole).
import { execFile } from 'node:child_process';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import type * as PostgresLogModule from '../src/log/postgres-log.js';
import type * as UnavailableModule from '../src/log/unavailable.js';
import pino from 'pino';
import type { RoutedCommand } from '../src/actors/types.js';
import type * as ChannelModule from '../src/cluster/channel.js';
import type * as InstanceModule from '../src/cluster/instance.js';
import type * as LeasesModule from '../src/cluster/leases.js';
import { DATABASE_RETRY_AFTER_SECONDS, type Config } from '../src/config.js';
import type { LocalDirectory } from '../src/directory/directory.js';
import type { WebhookDelivery } from '../src/events/delivery.js';
import { freshDatabase, serverBin, startPostgres } from './support/postgres.js';
import { sleep, waitFor } from './support/wait.js';

// The compiled modules: the log's reader thread is a file beside it.
const compiled = (path: string) => import(new URL(`../dist/src/${path}`, import.meta.url).href);
const { PostgresLog, listenToNotes } = (await compiled(
  'log/postgres-log.js',
)) as typeof PostgresLogModule;
const { Hearing } = (await compiled('cluster/instance.js')) as typeof InstanceModule;
const { Leases, sharedEpochs } = (await compiled('cluster/leases.js')) as typeof LeasesModule;
const { ChannelClient, ChannelListener, channelKey } = (await compiled(
  'cluster/channel.js',
)) as typeof ChannelModule;
const { DatabaseHealth, UnavailableError, unreachable } = (await compiled(
  'log/unavailable.js',
)) as typeof UnavailableModule;

type Log = PostgresLogModule.PostgresLog;

const record = (partition: number, seq: number) => ({
  partition,
  seq,
  bytes: Buffer.from(`${partition}/${seq}`),
});

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function openLog(url: string): Promise<Log> {
  const log = await PostgresLog.open(url);
  cleanups.push(() => log.close());
  return log;
}

/** A session of the test's own on `url`, closed after the test. */
async function session(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  cleanups.push(() => client.end());
  return client;
}

/** Ends every other connection to the database, as a server restart would. */
const TERMINATE_OTHERS =
  'select pg_terminate_backend(pid) from pg_stat_activity ' +
  'where datname = current_database() and pid <> pg_backend_pid()';

async function terminateOthers(url: string): Promise<number> {
  const admin = await session(url);
  return (await admin.query(TERMINATE_OTHERS)).rowCount ?? 0;
}

/** Holds an exclusive lock on `table` in another session until the returned call. */
async function lockTable(url: string, table: string): Promise<() => Promise<void>> {
  const holder = await session(url);
  await holder.query('begin');
  await holder.query(`lock table ${table} in access exclusive mode`);
  return async () => {
    await holder.query('rollback');
  };
}

/** A loopback port that takes connections and never answers a byte: a blackholed database. */
async function blackhole(): Promise<string> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  const { port } = server.address() as { port: number };
  return `postgres://postgres@127.0.0.1:${port}/silent`;
}

/** A replay mark's claim on its own (PostgresLog.claim), held for a minute. */
const mark = (key: string) =>
  ({ table: 'replay', key, bytes: Buffer.from('m'), until: Date.now() + 60_000 }) as const;

describe('PostgreSQL connections bounded in time (issue 29)', () => {
  it('a statement that gets no answer ends as unavailable, on every path of the log', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const log = await openLog(url);
    await log.append([record(1, 1)], [{ table: 'views', key: 'v', bytes: Buffer.from('v') }]);
    log.refresh();
    expect(log.health.reachable).toBe(true);
    const release = await lockTable(url, 'rows');
    // The front end's reads (the read pool) and the synchronous reads (the reader thread).
    await expect(log.load('views', 'v')).rejects.toBeInstanceOf(UnavailableError);
    expect(() => log.get('views', 'v')).toThrow(UnavailableError);
    expect(log.health.reachable).toBe(false);
    // A claim (the claims' pool) and a commit (the write pool) wait on the same lock.
    await expect(log.claim(mark('k'))).rejects.toBeInstanceOf(UnavailableError);
    await expect(log.append([record(1, 2)], [])).rejects.toBeInstanceOf(UnavailableError);
    await release();
    // Once the database answers again, so does every path, on connections opened anew.
    expect((await log.load('views', 'v'))?.toString()).toBe('v');
    log.refresh();
    expect(log.get('views', 'v')?.toString()).toBe('v');
    expect(log.health.reachable).toBe(true);
  });

  it('a database that accepts connections and never answers refuses the start, in time', async () => {
    const silent = await blackhole();
    const refused = await PostgresLog.open(silent).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).not.toBeNull();
    expect(unreachable(refused)).toBe(true);
  });
});

describe('PostgreSQL connections lost and opened again (issue 29)', () => {
  it('the log reads, loads, claims and appends again after every connection was ended', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const log = await openLog(url);
    await log.append([record(2, 1)], [{ table: 'views', key: 'w', bytes: Buffer.from('w') }]);
    expect((await log.load('views', 'w'))?.toString()).toBe('w');
    expect(await log.claim(mark('a'))).toBe(true);
    log.refresh();
    expect(log.get('views', 'w')?.toString()).toBe('w');
    expect(await terminateOthers(url)).toBeGreaterThanOrEqual(3);
    // Each path may fail once, as unavailable, while it learns its connection is gone; then
    // it opens another.
    const again = async <T>(what: string, action: () => Promise<T>) =>
      waitFor(what, async () => {
        try {
          return { value: await action() };
        } catch (error) {
          expect(error).toBeInstanceOf(UnavailableError);
          return undefined;
        }
      });
    await again('an append', () => log.append([record(2, 2)], []));
    expect((await again('a load', () => log.load('views', 'w'))).value?.toString()).toBe('w');
    expect((await again('a claim', () => log.claim(mark('b')))).value).toBe(true);
    const read = await again('a read', async () => {
      log.refresh();
      return [...log.read(2, 0)].map((r) => r.seq);
    });
    expect(read.value).toEqual([1, 2]);
  });

  it("a connection held for the node's tables that is lost rejects its work, and nothing crashes", async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const log = await openLog(url);
    const tables = log.nodeTables();
    let inside!: () => void;
    const entered = new Promise<void>((resolve) => (inside = resolve));
    const alone = tables.alone(async () => {
      inside();
      await new Promise((resolve) => setTimeout(resolve, 500));
      return 'done';
    });
    await entered;
    await terminateOthers(url);
    await expect(alone).rejects.toBeInstanceOf(UnavailableError);
    // The lock went with its session: the next holder takes it at once.
    expect(await waitFor('the lock', () => tables.alone(async () => 'again'))).toBe('again');
  });
});

describe('the notes of other instances heard through a lost connection (issue 29)', () => {
  it('one loop opens it again with backoff while the database refuses, and gap is told once', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const name = new URL(url).pathname.slice(1);
    const log = await openLog(url);
    const notes: string[] = [];
    let gaps = 0;
    const health = new DatabaseHealth();
    const listener = await listenToNotes(url, {
      note: (note) => notes.push(note.kind),
      gap: () => gaps++,
      health,
      retryMaxMs: 200,
    });
    cleanups.push(() => listener.close());
    const view = { table: 'views' as const, key: 'n', bytes: Buffer.from('n') };
    await log.write([view]);
    await waitFor('the first note', () => notes.length > 0);
    // The database refuses new sessions for a while, and every session is ended: each attempt
    // to listen again fails (a failed attempt emits both an error and an end).
    const inside = await session(url);
    const admin = await session(inject('postgresUrl'));
    await admin.query(`alter database ${name} with allow_connections false`);
    cleanups.push(() => admin.query(`alter database ${name} with allow_connections true`));
    await inside.query(TERMINATE_OTHERS);
    await waitFor('the loss noticed', () => !health.reachable);
    await sleep(1_000);
    expect(gaps).toBe(0);
    await admin.query(`alter database ${name} with allow_connections true`);
    await waitFor('the listener back', () => gaps > 0);
    // Heard again, and told of the gap once: not once per attempt that failed.
    const heard = notes.length;
    await waitFor('a write after the return', () =>
      log.write([view]).then(
        () => true,
        () => false,
      ),
    );
    await waitFor('a note after the return', () => notes.length > heard);
    await sleep(1_000);
    expect(gaps).toBe(1);
    expect(health.reachable).toBe(true);
  });

  it('a note or a reading again that fails is logged without its words and tried again', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const log = await openLog(url);
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const config = { store: url, leaseMs: 900 } as Config;
    const hearing = await Hearing.start(config, logger, log);
    cleanups.push(() => hearing.close());
    // A reference in the errors: it must reach no log line.
    const secret = `rcp_${'5'.repeat(32)}`;
    let loads = 0;
    const directory = {
      applyHashes: () => {
        throw new Error(`directory read failed for ${secret}`);
      },
      load: async () => {
        loads++;
        if (loads === 1) throw new UnavailableError(`no answer for ${secret}`);
        return 0;
      },
    };
    const events = { notify: () => undefined, start: () => undefined, adopt: () => undefined };
    hearing.attach(directory as unknown as LocalDirectory, events as unknown as WebhookDelivery);
    // A directory change heard: applying it fails, so the index is read again, and once more
    // after the first reading fails.
    await log.write([{ table: 'directory', key: 'hash1/row', bytes: Buffer.from('row') }]);
    await waitFor('the index read again after a failure', () => loads >= 2);
    const said = lines.join('');
    expect(said).toContain('a change of another instance was not applied');
    expect(said).toContain('changes of other instances not read again yet');
    expect(said).not.toContain(secret);
  });
});

describe('a command sent to an owner whose database is away (issue 29)', () => {
  it('is refused as unavailable with Retry-After, as the owner itself would answer', async () => {
    const key = channelKey(Buffer.alloc(32, 1));
    const listener = await ChannelListener.start({
      host: '127.0.0.1',
      port: 0,
      key,
      submit: () => Promise.reject(new UnavailableError('the database did not answer')),
    });
    cleanups.push(() => listener.close());
    const client = new ChannelClient(key);
    cleanups.push(async () => client.close());
    const routed = { key: `rcp_${'7'.repeat(32)}` } as unknown as RoutedCommand;
    await expect(
      client.send(`http://127.0.0.1:${listener.port}`, routed, 5_000),
    ).rejects.toMatchObject({
      code: 'path.core.unavailable',
      detail: { retry_after_seconds: DATABASE_RETRY_AFTER_SECONDS },
    });
  });
});

describe('a restart of the database under writes (issue 29)', () => {
  it('leases, the notes and the log come back on their own, and every acknowledged append is kept', async () => {
    const server = await startPostgres();
    cleanups.push(async () => server.stop());
    const url = await freshDatabase(server.url);
    const epochs = sharedEpochs();
    const health = new DatabaseHealth();
    const log = await PostgresLog.open(url, { holding: { holder: 'a', epochs }, health });
    cleanups.push(() => log.close());
    const leases = await Leases.start({
      url,
      instance: 'a',
      address: 'http://127.0.0.1/a',
      leaseMs: 900,
      fingerprint: 'test',
      epochs,
      health,
    });
    cleanups.push(() => leases.stop());
    let gaps = 0;
    let notes = 0;
    const listener = await listenToNotes(url, {
      note: () => notes++,
      gap: () => gaps++,
      health,
      retryMaxMs: 300,
    });
    cleanups.push(() => listener.close());
    // One writer appends to partition 3 until told to stop; after a failure it reads where the
    // partition ends (an append in doubt may have landed) and goes on from there.
    const acknowledged: number[] = [];
    let failures = 0;
    let writing = true;
    const writer = (async () => {
      let next = 1;
      while (writing) {
        try {
          await log.append(
            [record(3, next)],
            [{ table: 'views', key: 'w', bytes: Buffer.alloc(1) }],
          );
          acknowledged.push(next++);
        } catch {
          failures++;
          await sleep(50);
          try {
            next = log.lastSeq(3) + 1;
          } catch {
            // Still away: the next attempt reads again.
          }
        }
      }
    })();
    await waitFor('appends under way', () => acknowledged.length >= 20);
    const data = (await sql(server.url, 'show data_directory'))[0]!.data_directory as string;
    await restart(data);
    const expiry = async () =>
      (await sql(url, "select max(expires_at) as at from leases where owner = 'a'"))[0]!.at as Date;
    const restarted = Date.now();
    await waitFor('the leases renewed', async () => (await expiry()).getTime() > restarted);
    await waitFor('the notes heard again', () => gaps > 0);
    const ackedAtReturn = acknowledged.length;
    await waitFor('appends again', () => acknowledged.length > ackedAtReturn + 20);
    writing = false;
    await writer;
    expect(failures).toBeGreaterThan(0);
    expect(gaps).toBe(1);
    expect(notes).toBeGreaterThan(0);
    expect(leases.partitions()).toHaveLength(256);
    expect(health.reachable).toBe(true);
    log.refresh();
    const stored = new Set([...log.read(3, 0)].map((r) => r.seq));
    expect(acknowledged.filter((seq) => !stored.has(seq))).toEqual([]);
    const seqs = [...stored].sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
  });
});

/** Runs statements on a database of a test server as its superuser. */
async function sql(url: string, text: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}

/**
 * Stops the server as a crash would and starts it again (`pg_ctl -m immediate restart`, with the
 * options it was started with), without blocking this thread: the instance's parts run through
 * the outage as they would in production.
 */
async function restart(data: string): Promise<void> {
  const pgCtl = join(serverBin(), 'pg_ctl');
  // Its log to a file, as at its start: a server writing to this process's pipes would hold
  // them open, and the restart would never be seen to end.
  const args = [
    '-D',
    data,
    '-m',
    'immediate',
    '-l',
    join(dirname(data), 'server.log'),
    '-w',
    'restart',
  ];
  const [file, argv] =
    process.getuid?.() === 0
      ? ['runuser', ['-u', 'postgres', '--', pgCtl, ...args]]
      : [pgCtl, args];
  await promisify(execFile)(file, argv);
}

describe('a database URL of several hosts (issue 29, a switchover)', () => {
  it('every connection goes to the host that takes writes, past one that is down and a standby', async () => {
    const url = await freshDatabase(inject('postgresUrl'));
    const name = new URL(url).pathname.slice(1);
    // A second server whose database of the same name says it is a standby: its own
    // pg_is_in_recovery, found before pg_catalog's.
    const standby = await startPostgres();
    cleanups.push(async () => standby.stop());
    await sql(standby.url, `create database ${name}`);
    const standbyDb = new URL(standby.url);
    standbyDb.pathname = `/${name}`;
    await sql(
      standbyDb.toString(),
      `create function public.pg_is_in_recovery() returns boolean language sql as 'select true';
       alter database ${name} set search_path = public, pg_catalog`,
    );
    const down = await refusingPort();
    const primary = new URL(url);
    const hosts = [`127.0.0.1:${down}`, new URL(standby.url).host, primary.host].join(',');
    const several = `postgres://${primary.username}@${hosts}/${name}?target_session_attrs=read-write`;
    const log = await PostgresLog.open(several);
    cleanups.push(() => log.close());
    await log.append([record(4, 1)], [{ table: 'views', key: 'h', bytes: Buffer.from('h') }]);
    expect(log.get('views', 'h')?.toString()).toBe('h');
    expect(await log.claim(mark('h'))).toBe(true);
    const leases = await Leases.start({
      url: several,
      instance: 'a',
      address: 'http://127.0.0.1/a',
      leaseMs: 900,
      fingerprint: 'test',
      epochs: sharedEpochs(),
    });
    cleanups.push(() => leases.stop());
    let notes = 0;
    const listener = await listenToNotes(several, { note: () => notes++, gap: () => undefined });
    cleanups.push(() => listener.close());
    await log.write([{ table: 'views', key: 'i', bytes: Buffer.from('i') }]);
    await waitFor('a note', () => notes > 0);
    // All of it on the primary; nothing reached the standby.
    expect(await sql(url, 'select count(*)::int as n from records')).toEqual([{ n: 1 }]);
    expect(await sql(url, "select count(*)::int as n from instances where id = 'a'")).toEqual([
      { n: 1 },
    ]);
    expect(await sql(standbyDb.toString(), "select to_regclass('records') as t")).toEqual([
      { t: null },
    ]);
  });
});

/** A loopback port that nothing listens on: a host that refuses connections. */
async function refusingPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
