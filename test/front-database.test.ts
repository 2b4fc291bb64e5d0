// A cluster instance's front end rides out its database's connections ending (issue 29): with
// every session of the instance ended by the server (pg_terminate_backend, as a restart or a
// network fault ends them), again and again for a while, the process stays up, health answers,
// the keys and a receipt it has read answer (from memory where the database fails them), and once the sessions may live again a
// signed write is served by the same process. One real node process on the test run's PostgreSQL.
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
