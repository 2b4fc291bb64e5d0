// A throwaway PostgreSQL for the test run and the benchmarks (cluster mode, P22): `initdb` in a
// temporary directory, `pg_ctl` on a free loopback port, trust authentication on loopback only,
// removed at the end. The test run starts one (vitest's global set-up,
// test/support/postgres-setup.ts) and each test file makes databases of its own in it. A machine without PostgreSQL's server programs fails the run: the
// cluster tests are never skipped (`.ci/run` installs the Debian package when it is missing).
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Postgres {
  /** A connection URL for the cluster's superuser, to the `postgres` database. */
  url: string;
  /** Stops the server as a crash would (`pg_ctl -m immediate`: no checkpoint) and starts it again. */
  crashAndRestart(): void;
  /** Stops the server as a crash would (`pg_ctl -m immediate`), leaving it down. */
  stopServer(): void;
  /** Starts a server `stopServer` stopped; returns once it takes connections. */
  startServer(): void;
  stop(): void;
}

/** The server programs' directory: PATH_PG_BIN, or the newest of Debian's versions. */
export function serverBin(): string {
  const named = process.env.PATH_PG_BIN;
  if (named !== undefined && named !== '') return named;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error(
      'PostgreSQL server programs not found (no /usr/lib/postgresql/*/bin/initdb): ' +
        'install the Debian package `postgresql` (.ci/run does) or set PATH_PG_BIN',
    );
  }
  return join(root, versions[0]!, 'bin');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** initdb refuses to run as root: as root the cluster is made and run as the `postgres` user. */
function asServer(program: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  const [file, argv] = root
    ? ['runuser', ['-u', 'postgres', '--', program, ...args]]
    : [program, args];
  execFileSync(file, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * `fsync`: whether the server flushes its writes to the disk (default: it does, as in service;
 * the benchmarks measure that). The tests turn it off: they crash PostgreSQL's processes, never
 * the machine, and a commit in the kernel's page cache outlives a crash of the processes. It
 * spares the test run the waits of a disk other work is busy on (CI prepares its other Node.js
 * versions meanwhile).
 */
export async function startPostgres(settings: { fsync?: boolean } = {}): Promise<Postgres> {
  const bin = serverBin();
  const dir = mkdtempSync(join(tmpdir(), 'path-node-pg-'));
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const user = 'path_test';
  asServer(join(bin, 'initdb'), [
    '-D',
    data,
    '-U',
    user,
    '--auth=trust',
    '-E',
    'UTF8',
    '--no-locale',
  ]);
  const port = await freePort();
  const options = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    `-c unix_socket_directories=${dir}`,
    '-c max_connections=200',
    `-c fsync=${settings.fsync === false ? 'off' : 'on'}`,
    '-c synchronous_commit=on',
  ].join(' ');
  const start = () =>
    asServer(join(bin, 'pg_ctl'), [
      '-D',
      data,
      '-o',
      options,
      '-l',
      join(dir, 'server.log'),
      '-w',
      'start',
    ]);
  start();
  let stopped = false;
  let down = false;
  const crash = () => asServer(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
  return {
    url: `postgres://${user}@127.0.0.1:${port}/postgres`,
    crashAndRestart: () => {
      crash();
      start();
    },
    stopServer: () => {
      crash();
      down = true;
    },
    startServer: () => {
      start();
      down = false;
    },
    stop: () => {
      if (stopped) return;
      stopped = true;
      try {
        if (!down) crash();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** A new, empty database in the test cluster; its URL. Names are unique within a run. */
/**
 * Writes every dirty page now (CHECKPOINT): a figure measured next does not pay for the writes
 * of the one before it, which the server would otherwise flush while it runs.
 */
export async function checkpoint(adminUrl: string): Promise<void> {
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query('checkpoint');
  } finally {
    await admin.end();
  }
}

export async function freshDatabase(adminUrl: string): Promise<string> {
  const { default: pg } = await import('pg');
  const name = `path_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
