// A cluster instance's front end rides out its database (issue 29), one real node process on the
// test run's PostgreSQL each. Reached through a relay the test cuts, the database gone: /readyz
// says database_unreachable, /healthz, the keys and a receipt it has read still answer, a view
// never read is a 503 with Retry-After, and it is ready again once the relay mends. With every
// session ended by the server (pg_terminate_backend, as a restart ends them), again and again for
// a while: the process stays up, the same reads answer 200, and it serves a signed write after.
import { createServer, connect, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { Client, createCredential, startNode, tempDir } from './support/harness.js';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { freshDatabase } from './support/postgres.js';
import { payeeReceipt as receipt } from './support/bodies.js';
import { sleep, waitFor } from './support/wait.js';

const LEASE_MS = 1_500;
/** How long the server keeps ending the instance's sessions: several credentials polls. */
const FAULT_MS = 3_000;
const { running, dirs } = cleanedUpAfterEach();

const TERMINATE =
  'select pg_terminate_backend(pid) from pg_stat_activity ' +
  'where datname = current_database() and pid <> pg_backend_pid()';

/**
 * A TCP relay between the instance and its database that the test can cut: every connection
 * through it reset and new ones refused, as a database gone away; then let through again.
 */
async function relay(
  target: URL,
): Promise<{ url: string; cut(): void; mend(): void; close(): void }> {
  let open = true;
  const sockets = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    if (!open) return void inbound.destroy();
    const outbound = connect(Number(target.port), target.hostname);
    for (const socket of [inbound, outbound]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    cut: () => {
      open = false;
      for (const socket of sockets) socket.resetAndDestroy();
    },
    mend: () => {
      open = true;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

describe('a cluster instance whose database goes away and comes back (issue 29)', () => {
  it('says database_unreachable on /readyz, answers from memory, and is ready again', async () => {
    const store = await freshDatabase(inject('postgresUrl'));
    const way = await relay(new URL(store));
    const cliDir = tempDir('path-front-cli');
    const dataDir = tempDir('path-front');
    dirs.push(cliDir, dataDir);
    try {
      const own = createCredential(cliDir, 'local', { local: true, store });
      const node = await startNode({
        dataDir,
        store: way.url,
        workers: 2,
        args: ['--lease-ms', '5000', '--internal-port', '0'],
      });
      running.push(node);
      const client = new Client(node.baseUrl, own);
      const issued = await client.post('/receipts', receipt('1.00'), { timestamp: stamp() });
      expect(issued.status, issued.text).toBe(201);
      const read = () => fetch(`${node.baseUrl}/api/path/v1/receipts/${issued.json.reference}`);
      expect((await read()).status).toBe(200);
      const admin = (path: string) => fetch(`http://127.0.0.1:${node.adminPort}${path}`);
      expect((await admin('/readyz')).status).toBe(200);

      way.cut();
      // The credentials poll (every 500 ms) finds the database gone.
      const down = await waitFor(
        '/readyz to say the database is unreachable',
        async () => {
          const res = await admin('/readyz');
          return res.status === 503 ? ((await res.json()) as { status: string }) : undefined;
        },
        10_000,
      );
      expect(down.status).toBe('database_unreachable');
      expect((await admin('/healthz')).status).toBe(200);
      expect((await fetch(`${node.baseUrl}/.well-known/path-keys`)).status).toBe(200);
      const cached = await read();
      expect(cached.status).toBe(200);
      expect(await cached.json()).toEqual(issued.json);
      const unknown = await fetch(`${node.baseUrl}/api/path/v1/receipts/rcp_${'c'.repeat(32)}`);
      expect(unknown.status).toBe(503);
      expect(unknown.headers.get('retry-after')).not.toBe(null);

      way.mend();
      await waitFor(
        '/readyz to say ready again',
        async () => (await admin('/readyz')).status === 200,
        15_000,
      );
      expect(node.process.exitCode).toBe(null);
      expect(node.output()).not.toContain('"msg":"request failed"');
    } finally {
      way.close();
    }
  }, 90_000);
});

describe('a cluster instance whose database sessions are ended (issue 29)', () => {
  it('stays up, answers from memory meanwhile, and serves writes again', async () => {
    const store = await freshDatabase(inject('postgresUrl'));
    const cliDir = tempDir('path-front-cli');
    const dataDir = tempDir('path-front');
    dirs.push(cliDir, dataDir);
    const own = createCredential(cliDir, 'local', { local: true, store });
    const node = await startNode({
      dataDir,
      store,
      workers: 2,
      args: ['--lease-ms', String(LEASE_MS), '--internal-port', '0'],
    });
    running.push(node);
    const client = new Client(node.baseUrl, own);
    const issued = await client.post('/receipts', receipt('1.00'), { timestamp: stamp() });
    expect(issued.status, issued.text).toBe(201);
    const reference = issued.json.reference as string;
    const read = () => fetch(`${node.baseUrl}/api/path/v1/receipts/${reference}`);
    expect((await read()).status).toBe(200);

    const db = new pg.Client({ connectionString: store });
    await db.connect();
    try {
      const until = Date.now() + FAULT_MS;
      while (Date.now() < until) {
        await db.query(TERMINATE);
        const [health, keys, receiptRead] = await Promise.all([
          fetch(`http://127.0.0.1:${node.adminPort}/healthz`),
          fetch(`${node.baseUrl}/.well-known/path-keys`),
          read(),
        ]);
        expect(health.status).toBe(200);
        expect(keys.status).toBe(200);
        // Read here before: its fresh bytes, or the last this instance read (publicView).
        expect(receiptRead.status).toBe(200);
        await sleep(100);
      }
    } finally {
      await db.end();
    }
    expect(node.process.exitCode).toBe(null);
    expect(node.process.signalCode).toBe(null);

    const again = await waitFor(
      'a signed write served again by the same process',
      async () => {
        const answer = await client.post('/receipts', receipt('2.00'), { timestamp: stamp() });
        return answer.status === 201 ? answer : undefined;
      },
      30_000,
      200,
    );
    expect(again.status).toBe(201);
    const fresh = await fetch(`${node.baseUrl}/api/path/v1/receipts/${again.json.reference}`);
    expect(fresh.status).toBe(200);
    expect(node.process.exitCode).toBe(null);
    // No request was answered 500 meanwhile: a lost database is not the node's internal error.
    expect(node.output()).not.toContain('"msg":"request failed"');
  }, 90_000);
});
