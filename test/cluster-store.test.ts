// Cluster mode's store (P22) over real HTTP, a real node process and a real PostgreSQL started for
// the run: `serve --store postgres://…` answers signed writes and public reads from the database;
// everything it holds (the log, the views, its keys, credentials and secrets) is in the database,
// not in the data directory; acknowledged writes survive kill -9; the command line works against
// the same database while the node runs.
import { afterEach, describe, expect, inject, it } from 'vitest';
import {
  Client,
  PREFIX,
  signRequest,
  createCredential,
  publishedKey,
  removeDir,
  runCli,
  startNode,
  tempDir,
  type NodeProcess,
} from './support/harness.js';
import { freshDatabase } from './support/postgres.js';
import { payeeReceipt as receipt } from './support/bodies.js';
import { verifiesWith } from './support/verify.js';

const nodes: NodeProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const node of nodes.splice(0)) await node.stop();
  for (const dir of dirs.splice(0)) removeDir(dir);
});

/** A node on the database with a data directory of its own, empty when it starts. */
async function instance(store: string): Promise<NodeProcess> {
  const dataDir = tempDir('path-node-cluster');
  dirs.push(dataDir);
  // Its port for the other instances' commands a free one, as every other port of a test's node.
  const node = await startNode({ dataDir, store, workers: 2, args: ['--internal-port', '0'] });
  nodes.push(node);
  return node;
}

/** A fresh database, and the operator's own credential made in it with the command line. */
async function freshCluster() {
  const store = await freshDatabase(inject('postgresUrl'));
  const cliDir = tempDir('path-node-cli');
  dirs.push(cliDir);
  return { store, cliDir, own: createCredential(cliDir, 'local', { local: true, store }) };
}

describe('serve --store postgres://… (P22)', () => {
  it('keeps all it answers in the database: a node on a fresh data directory answers the same', async () => {
    const { store, own } = await freshCluster();
    const first = await instance(store);
    const key = await publishedKey(first.baseUrl);
    const issued = await new Client(first.baseUrl, own).post('/receipts', receipt('10.00'), {
      idempotencyKey: 'idem-1',
    });
    expect(issued.status).toBe(201);
    expect(verifiesWith(issued.json, key)).toBe(true);
    const read = await new Client(first.baseUrl).get(`/receipts/${issued.json.reference}`);
    expect(read.status).toBe(200);
    expect(read.text).toBe(issued.text);
    await nodes.pop()!.stop();

    const second = await instance(store);
    // The same signing key, the same credential, the same receipt, the same stored answer.
    expect(await publishedKey(second.baseUrl)).toBe(key);
    expect((await new Client(second.baseUrl).get(`/receipts/${issued.json.reference}`)).text).toBe(
      issued.text,
    );
    const again = await new Client(second.baseUrl, own).post('/receipts', receipt('10.00'), {
      idempotencyKey: 'idem-1',
    });
    expect(again.status).toBe(201);
    expect(again.text).toBe(issued.text);
  });

  it('P14: every write acknowledged before a kill -9 is answered by the next start', async () => {
    const { store, own } = await freshCluster();
    const node = await instance(store);
    const client = new Client(node.baseUrl, own);
    const acknowledged: string[] = [];
    await Promise.all(
      Array.from({ length: 4 }, async (_, writer) => {
        for (let i = 0; i < 10; i++) {
          const res = await client.post('/receipts', receipt(`${writer}.${i + 10}`));
          expect(res.status).toBe(201);
          acknowledged.push(res.json.reference);
        }
      }),
    );
    await node.kill9();
    nodes.pop();
    const next = await instance(store);
    const reader = new Client(next.baseUrl);
    for (const reference of acknowledged) {
      expect((await reader.get(`/receipts/${reference}`)).status).toBe(200);
    }
  });

  it('takes the command line against the same database while it runs', async () => {
    const { store, cliDir, own } = await freshCluster();
    const node = await instance(store);
    const beta = createCredential(cliDir, 'beta', { local: false, store });
    const client = new Client(node.baseUrl, own);
    // A credential added while the node runs is taken up within its poll interval.
    const asBeta = new Client(node.baseUrl, beta);
    const until = async (check: () => Promise<boolean>) => {
      for (let i = 0; i < 100 && !(await check()); i++)
        await new Promise((r) => setTimeout(r, 100));
      return check();
    };
    expect(
      await until(async () => (await asBeta.post('/receipts', receipt('1.00'))).status !== 401),
    ).toBe(true);
    runCli([
      'credentials',
      'revoke',
      '--store',
      store,
      '--data-dir',
      cliDir,
      '--key-id',
      beta.keyId,
    ]);
    expect(
      await until(async () => (await asBeta.post('/receipts', receipt('1.00'))).status === 401),
    ).toBe(true);
    expect((await client.post('/receipts', receipt('5.00'))).status).toBe(201);
    // The signing key rotated from the command line is published by the running node.
    const rotated = JSON.parse(runCli(['keys', 'rotate', '--store', store, '--data-dir', cliDir]));
    expect(await until(async () => (await publishedKey(node.baseUrl)) === rotated.public_key)).toBe(
      true,
    );
    // Events are read from the database; a backup of the data directory is refused with the reason.
    const events = runCli(['events', 'list', '--store', store, '--data-dir', cliDir]);
    expect(events).not.toMatch(/error/i);
    expect(() =>
      runCli(['backup', '--store', store, '--data-dir', cliDir, '--out', `${cliDir}/b`]),
    ).toThrow(/cluster mode/);
  });

  it('P7: one idempotency key sent many times at once runs once; the rest replay or wait', async () => {
    const { store, own } = await freshCluster();
    const node = await instance(store);
    const client = new Client(node.baseUrl, own);
    const signedAt = Date.now();
    const answers = await Promise.all(
      // Each signed at its own time: twelve requests, not one request twelve times (P5).
      Array.from({ length: 12 }, (_, i) =>
        client.post('/receipts', receipt('3.00'), {
          idempotencyKey: 'once',
          timestamp: new Date(signedAt - i * 10).toISOString(),
        }),
      ),
    );
    const created = answers.filter((a) => a.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(new Set(created.map((a) => a.json.reference)).size).toBe(1);
    expect(new Set(created.map((a) => a.text)).size).toBe(1);
    for (const a of answers.filter((x) => x.status !== 201)) {
      expect(a.status).toBe(409);
      expect(a.json.error.code).toBe('path.core.idempotency_in_progress');
    }
    // Once answered, every later call replays it.
    const later = await client.post('/receipts', receipt('3.00'), { idempotencyKey: 'once' });
    expect(later.text).toBe(created[0]!.text);
    expect(later.headers.get('path-idempotent-replayed')).toBe('true');
  });

  it('P5: a request is remembered in the database before it runs: a replay to the next start is refused', async () => {
    const { store, own } = await freshCluster();
    // A request that changes nothing durable: refused for its body after it was authenticated.
    const body = Buffer.from(JSON.stringify({ issued_by: 'payee' }));
    const target = `${PREFIX}/receipts`;
    const headers = {
      'content-type': 'application/json',
      ...signRequest(own, { method: 'POST', target, timestamp: new Date().toISOString(), body }),
    };
    const send = (base: string) => fetch(base + target, { method: 'POST', headers, body });
    const first = await instance(store);
    const refused = await send(first.baseUrl);
    expect(refused.status).toBe(400);
    // Gone without a word: nothing it held in memory reaches the database now.
    await first.kill9();
    nodes.splice(nodes.indexOf(first), 1);
    const next = await instance(store);
    const replayed = await send(next.baseUrl);
    expect(replayed.status).toBe(401);
    expect(
      ((await replayed.json()) as { error: { detail: { reason: string } } }).error.detail.reason,
    ).toBe('replayed');
  });

  it('issue 29: a request and its replay sent to two running instances at once: one runs, the other is refused as replayed', async () => {
    const { store, own } = await freshCluster();
    const [a, b] = await Promise.all([instance(store), instance(store)]);
    const target = `${PREFIX}/receipts`;
    for (let round = 0; round < 4; round++) {
      const body = Buffer.from(JSON.stringify(receipt(`${round + 1}.00`)));
      const headers = {
        'content-type': 'application/json',
        ...signRequest(own, { method: 'POST', target, timestamp: new Date().toISOString(), body }),
      };
      // The same signed bytes to both: neither instance has seen them, nothing is asked of the
      // database before the run (one round trip a write); the commit's claim of the mark decides.
      const answers = await Promise.all(
        [a, b].map((node) => fetch(node.baseUrl + target, { method: 'POST', headers, body })),
      );
      const statuses = answers.map((r) => r.status).sort();
      expect(statuses).toEqual([201, 401]);
      const refused = answers.find((r) => r.status === 401)!;
      const reason = ((await refused.json()) as { error: { detail: { reason: string } } }).error
        .detail.reason;
      expect(reason).toBe('replayed');
    }
  });

  it('issue 29: an idempotency key answered through one instance is replayed through another; racing instances make one receipt', async () => {
    const { store, own } = await freshCluster();
    const [a, b] = await Promise.all([instance(store), instance(store)]);
    const first = await new Client(a.baseUrl, own).post('/receipts', receipt('7.00'), {
      idempotencyKey: 'across',
    });
    expect(first.status).toBe(201);
    // Through the other instance, signed anew: the receipt it would make is refused in its
    // commit (the key's answer is another commit's claim), and the stored answer is replayed.
    const again = await new Client(b.baseUrl, own).post('/receipts', receipt('7.00'), {
      idempotencyKey: 'across',
    });
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('path-idempotent-replayed')).toBe('true');
    // A different request under the key: a conflict, whichever instance it reaches.
    const other = await new Client(b.baseUrl, own).post('/receipts', receipt('8.00'), {
      idempotencyKey: 'across',
    });
    expect(other.status).toBe(422);
    expect(other.json.error.code).toBe('path.core.idempotency_conflict');
    // Both instances at once, a new key: one receipt made; every answer is that receipt, or in
    // progress on the instance where the same key is already running.
    const racing = await Promise.all(
      [a, b, a, b].map((node) =>
        new Client(node.baseUrl, own).post('/receipts', receipt('9.00'), {
          idempotencyKey: 'race',
        }),
      ),
    );
    const made = racing.filter((r) => r.status === 201);
    expect(made.length).toBeGreaterThanOrEqual(1);
    expect(new Set(made.map((r) => r.json.reference)).size).toBe(1);
    for (const r of racing.filter((x) => x.status !== 201))
      expect(r.json.error.code).toBe('path.core.idempotency_in_progress');
  });
});
