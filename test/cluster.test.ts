// Three instances of one operator on the test run's PostgreSQL (P22), each a real node process on
// loopback with a data directory of its own: writes through any instance are read the same from
// every other; one winner of a 40-way `complete` race spread over all three; one run of one
// idempotency key sent to all three at once; a key registered
// through one is found by lookups through the others; `kill -9` of an instance under load loses
// no acknowledged write and its partitions answer again within the lease time; an instance paused
// with SIGSTOP past its lease cannot append after SIGCONT (the fence), so it never decides on the
// state it held before.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { partitionOf } from '../src/log/log.js';
import {
  Client,
  CLI,
  createCredential,
  removeDir,
  spawnUntilListening,
  startNode,
  tempDir,
  type Answer,
  type Credential,
  type NodeProcess,
} from './support/harness.js';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { freshDatabase } from './support/postgres.js';
import { payeeReceipt as receipt } from './support/bodies.js';
import { Receiver } from './support/receiver.js';
import { sleep, waitFor } from './support/wait.js';

const LEASE_MS = 1_500;
const { running, dirs } = cleanedUpAfterEach();

/** The node processes and directories a cluster registers, to be removed with it. */
interface Owned {
  running: NodeProcess[];
  dirs: string[];
}

interface Instance {
  node: NodeProcess;
  /** Its id in the leases table (the `listening` line's `instance`). */
  id: string;
  local: Client;
  beta: Client;
  gamma: Client;
}

interface Cluster {
  store: string;
  instances: Instance[];
  /** Each live instance's partitions, as the leases table says now. */
  owners(): Promise<Map<string, Set<number>>>;
  close(): Promise<void>;
}

async function instance(
  store: string,
  creds: Record<'own' | 'beta' | 'gamma', Credential>,
  args: string[],
  env: Record<string, string>,
  owned: Owned,
): Promise<Instance> {
  const dataDir = tempDir('path-cluster');
  owned.dirs.push(dataDir);
  const node = await startNode({
    dataDir,
    store,
    workers: 2,
    env,
    args: [
      '--lease-ms',
      String(LEASE_MS),
      '--internal-port',
      '0',
      '--lookup-budget-base',
      '1000000',
      ...args,
    ],
  });
  owned.running.push(node);
  const id = (await node.line('listening')).instance as string;
  return {
    node,
    id,
    local: new Client(node.baseUrl, creds.own),
    beta: new Client(node.baseUrl, creds.beta),
    gamma: new Client(node.baseUrl, creds.gamma),
  };
}

/** Three instances on a fresh database, once the partitions are shared out among them. */
async function threeInstances(
  args: string[] = [],
  env: Record<string, string> = {},
  owned: Owned = { running, dirs },
): Promise<Cluster> {
  const store = await freshDatabase(inject('postgresUrl'));
  const cliDir = tempDir('path-cluster-cli');
  owned.dirs.push(cliDir);
  const creds = {
    own: createCredential(cliDir, 'local', { local: true, store }),
    beta: createCredential(cliDir, 'beta', { local: false, store }),
    gamma: createCredential(cliDir, 'gamma', { local: false, store }),
  };
  // Started together, as a deployment's instances are: the partitions are shared out below.
  const instances = await Promise.all(
    [0, 1, 2].map(() => instance(store, creds, args, env, owned)),
  );
  const db = new pg.Client({ connectionString: store });
  await db.connect();
  const owners = async () => {
    const rows = await db.query<{ owner: string; partition: number }>(
      'select owner, partition from leases where owner is not null and expires_at > now()',
    );
    const map = new Map<string, Set<number>>();
    for (const { owner, partition } of rows.rows)
      map.set(owner, (map.get(owner) ?? new Set()).add(partition));
    return map;
  };
  await waitFor(
    'the partitions shared out among three instances',
    async () => {
      const map = await owners();
      return instances.every((i) => (map.get(i.id)?.size ?? 0) >= 84);
    },
    LEASE_MS * 10,
  );
  return { store, instances, owners, close: () => db.end() };
}

/** A payment request opened through `requestVia`, and a checkout session of it through `sessionVia`. */
async function openSession(requestVia: Instance, sessionVia: Instance): Promise<Answer> {
  const request = await requestVia.local.post(
    '/requests',
    { accepts: [{ rail: 'book', asset_type: 'fiat', asset_code: 'EUR' }] },
    { timestamp: stamp() },
  );
  expect(request.status, request.text).toBe(201);
  const session = await sessionVia.local.post(
    '/checkout/sessions',
    {
      request_reference: request.json.reference,
      success_url: 'https://shop.example/ok',
      cancel_url: 'https://shop.example/cancel',
    },
    { timestamp: stamp() },
  );
  expect(session.status, session.text).toBe(201);
  return session;
}

/** What a client does with 503 and Retry-After: the same call again, a bounded number of times. */
async function retried(call: () => Promise<Answer>): Promise<Answer> {
  for (let attempt = 0; ; attempt++) {
    const answer = await call();
    if (answer.status !== 503 || attempt === 5) return answer;
    await sleep(Number(answer.headers.get('retry-after') ?? 1) * 100);
  }
}

/**
 * A subject registered through `via` with `phones` discoverable by the network, each call tried
 * again on 503 (an instance's partitions may be moving); its id.
 */
async function subjectWith(via: Instance, phones: string[]): Promise<string> {
  const subject = await retried(() =>
    via.local.post('/subjects', { subject_type: 'natural_person' }, { timestamp: stamp() }),
  );
  expect(subject.status, subject.text).toBe(201);
  for (const identifier of phones) {
    const body = {
      subject_id: subject.json.id,
      identifier_type: 'phone',
      identifier,
      discoverability: 'network',
    };
    const res = await retried(() => via.local.post('/identifiers', body, { timestamp: stamp() }));
    expect(res.status, res.text).toBe(201);
  }
  return subject.json.id as string;
}

/** A checkout session opened through `via`, on one of the partitions `held` (tried until so). */
async function sessionHeldBy(via: Instance, held: Set<number>) {
  for (let tries = 0; tries < 64; tries++) {
    const session = await openSession(via, via);
    if (held.has(partitionOf(session.json.reference)))
      return session.json as { id: string; reference: string };
  }
  throw new Error('no session landed on the partitions asked for');
}

describe('three instances on one database (P22)', () => {
  // These tests leave their cluster whole (no stop, no kill, no other flags): they share one, each
  // on objects and keys of its own.
  describe('one cluster, left running', () => {
    const owned: Owned = { running: [], dirs: [] };
    let cluster: Cluster;
    beforeAll(async () => {
      cluster = await threeInstances([], {}, owned);
    });
    afterAll(async () => {
      await cluster?.close();
      for (const node of owned.running)
        if (node.process.exitCode === null && node.process.signalCode === null) await node.kill9();
      for (const dir of owned.dirs) removeDir(dir);
    });

    it('a write through any instance is read, byte for byte, through every other', async () => {
      const { instances } = cluster;
      const owners = await cluster.owners();
      const ownersSeen = new Set<string>();
      // Twelve writes at least, then on until every instance has owned one: twelve random
      // partitions miss one of three even owners one time in forty; forty-eight, never in practice.
      for (let i = 0; i < 48 && (i < 12 || ownersSeen.size < 3); i++) {
        const writer = instances[i % 3]!;
        const issued = await writer.local.post('/receipts', receipt(`${i + 1}.00`), {
          timestamp: stamp(),
        });
        expect(issued.status, issued.text).toBe(201);
        const p = partitionOf(issued.json.reference);
        ownersSeen.add([...owners].find(([, ps]) => ps.has(p))![0]);
        for (const reader of instances) {
          const read = await reader.beta.get(`/receipts/${issued.json.reference}`);
          expect(read.status, read.text).toBe(200);
          expect(read.text).toBe(issued.text);
        }
      }
      // The receipts landed on every instance's partitions: most calls crossed the channel.
      expect(ownersSeen.size).toBe(3);
      // Each instance's metrics say what it holds; together, every partition once.
      const held = await Promise.all(
        instances.map(async (i) => {
          const text = await (await fetch(`http://127.0.0.1:${i.node.adminPort}/metrics`)).text();
          return Number(/^path_partitions_held (\d+)$/m.exec(text)?.[1]);
        }),
      );
      expect(held.reduce((x, y) => x + y, 0)).toBe(256);
      for (const [n, count] of held.entries())
        expect(count).toBe(owners.get(instances[n]!.id)!.size);
    });

    it('40 completes of one session spread over the three instances: exactly one wins', async () => {
      const { instances } = cluster;
      const session = await openSession(instances[0]!, instances[1]!);
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) => {
          const via = instances[i % 3]!;
          return (i % 2 === 0 ? via.beta : via.gamma).post(
            `/checkout/sessions/${session.json.reference}/complete`,
            undefined,
            { timestamp: stamp() },
          );
        }),
      );
      const statuses = answers.map((a) => a.status);
      expect(
        statuses.filter((s) => s === 200),
        statuses.join(','),
      ).toHaveLength(1);
      for (const a of answers.filter((x) => x.status !== 200)) {
        expect(a.status, a.text).toBe(409);
        expect(a.json.error.code).toBe('path.checkout.session_not_open');
      }
      for (const via of instances) {
        const read = await via.local.get(`/checkout/sessions/${session.json.id}`);
        expect(read.json.status).toBe('completed');
      }
    });

    it('P7 across instances: one idempotency key sent to all three at once runs once', async () => {
      const { instances } = cluster;
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          instances[i % 3]!.local.post('/receipts', receipt('3.00'), {
            idempotencyKey: 'one-key',
            timestamp: stamp(),
          }),
        ),
      );
      const created = answers.filter((a) => a.status === 201);
      for (const a of answers.filter((x) => x.status !== 201)) {
        expect(a.status, a.text).toBe(409);
        expect(a.json.error.code).toBe('path.core.idempotency_in_progress');
      }
      expect(created.length).toBeGreaterThan(0);
      // One receipt: every 201 is the same answer, byte for byte, and so is every later retry.
      expect(new Set(created.map((a) => a.text)).size).toBe(1);
      for (const via of instances) {
        const again = await via.local.post('/receipts', receipt('3.00'), {
          idempotencyKey: 'one-key',
          timestamp: stamp(),
        });
        expect(again.status, again.text).toBe(201);
        expect(again.text).toBe(created[0]!.text);
        expect(again.headers.get('path-idempotent-replayed')).toBe('true');
      }
    });

    it('a key registered through one instance is found by lookups through the others', async () => {
      const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
      const phones = ['+44 20 7946 0811', '+44 20 7946 0812', '+44 20 7946 0813'];
      const lookup = (via: Instance, identifier: string) =>
        via.beta.post(
          '/sonar/lookup',
          { identifier_type: 'phone', identifier },
          { timestamp: stamp() },
        );
      for (const identifier of phones) expect((await lookup(b, identifier)).json.found).toBe(false);
      const subject = await subjectWith(a, phones);
      // The instance the write went through answers at once; the others as soon as they hear of it.
      for (const identifier of phones) expect((await lookup(a, identifier)).json.found).toBe(true);
      for (const via of [b, c])
        for (const identifier of phones)
          await waitFor(
            'the others to find the key',
            async () => (await lookup(via, identifier)).json.found === true,
            5_000,
          );
      // A withdrawal through another instance takes the keys out of every index.
      const withdrawn = await c.local.post(
        `/subjects/${subject}/withdraw`,
        {},
        { timestamp: stamp() },
      );
      expect(withdrawn.status, withdrawn.text).toBe(200);
      for (const via of [a, b, c])
        for (const identifier of phones)
          await waitFor(
            'every index to drop the key',
            async () => (await lookup(via, identifier)).json.found === false,
            5_000,
          );
    });

    it('a public read through an instance that neither wrote nor holds the object shows the change at once', async () => {
      const { instances } = cluster;
      const owners = await cluster.owners();
      const session = await openSession(instances[0]!, instances[0]!);
      const reference = session.json.reference as string;
      const owner = instances.find((i) => owners.get(i.id)!.has(partitionOf(reference)))!;
      const [writer, reader] = instances.filter((i) => i !== owner) as [Instance, Instance];
      const read = () =>
        fetch(`${reader.node.baseUrl}/path/${reference}`).then(
          (r) => r.json() as Promise<{ status: string }>,
        );
      // Read twice: the second comes from the reader's cache.
      expect((await read()).status).toBe('open');
      expect((await read()).status).toBe('open');
      const done = await writer.beta.post(`/checkout/sessions/${reference}/complete`, undefined, {
        timestamp: stamp(),
      });
      expect(done.status, done.text).toBe(200);
      // The commit's note drops the reader's cache as the commit lands: well within the second a
      // cache entry would otherwise live (READ_SNAPSHOT_HOLD_MS).
      const started = performance.now();
      await waitFor(
        'the reader to show the completion',
        async () => (await read()).status === 'completed',
        250,
        10,
      );
      console.log(
        `a public read through a third instance showed the change ${(performance.now() - started).toFixed(0)} ms after the writer answered`,
      );
    });
  });

  it('the network feed is written by one instance at a time: one entry per change, in order, and none lost when its writer dies', async () => {
    const cluster = await threeInstances();
    try {
      const { instances } = cluster;
      let phone = 900;
      const register = (via: Instance, count: number) =>
        subjectWith(
          via,
          Array.from({ length: count }, () => `+44 20 7946 0${phone++}`),
        );
      /** The feed as read through `via`, once it has `count` entries. */
      const feed = (via: Instance, count: number) =>
        waitFor(
          `${count} feed entries`,
          async () => {
            const page = await via.beta.get('/directory/feed?after=0&limit=1000');
            expect(page.status, page.text).toBe(200);
            return page.json.entries.length >= count ? page.json : undefined;
          },
          10_000,
        );
      for (const via of instances) await register(via, 2);
      for (const via of instances) {
        const page = await feed(via, 6);
        expect(page.entries.map((e: { seq: number }) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
        expect(
          new Set(page.entries.map((e: { identifier_hash: string }) => e.identifier_hash)).size,
        ).toBe(6);
        expect(page.last).toBe(6);
      }
      // The writer (the holder of partition 0) dies; the next holder goes on from the feed written.
      const owners = await cluster.owners();
      const writer = instances.find((i) => owners.get(i.id)?.has(0))!;
      await writer.node.kill9();
      const survivors = instances.filter((i) => i !== writer);
      await register(survivors[0]!, 1);
      await register(survivors[1]!, 1);
      for (const via of survivors) {
        const page = await feed(via, 8);
        expect(page.entries.map((e: { seq: number }) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
        expect(
          new Set(page.entries.map((e: { identifier_hash: string }) => e.identifier_hash)).size,
        ).toBe(8);
      }
    } finally {
      await cluster.close();
    }
  });

  it('each event is delivered by one instance, once', async () => {
    const receiver = await new Receiver().open();
    const cluster = await threeInstances(['--dev', '--webhook-urls', receiver.url()]);
    try {
      const { instances } = cluster;
      const references: string[] = [];
      for (let i = 0; i < 6; i++) {
        const via = instances[i % 3]!;
        const session = await openSession(via, instances[(i + 1) % 3]!);
        const done = await instances[(i + 2) % 3]!.beta.post(
          `/checkout/sessions/${session.json.reference}/complete`,
          undefined,
          { timestamp: stamp() },
        );
        expect(done.status, done.text).toBe(200);
        references.push(session.json.reference);
      }
      const completed = () =>
        receiver.deliveries.filter((d) => d.body?.event === 'checkout.session.completed');
      await waitFor(
        'every completion delivered',
        () => completed().length >= references.length,
        10_000,
      );
      // Time for a second delivery of any of them, were one to come.
      await sleep(LEASE_MS);
      expect(
        completed()
          .map((d) => d.body.data.reference)
          .sort(),
      ).toEqual([...references].sort());
      const ids = receiver.deliveries.map((d) => d.headers['webhook-id']);
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      await cluster.close();
      await receiver.close();
    }
  });

  it('an orderly stop hands its partitions over at once, and writes go on without waiting for a lease', async () => {
    const cluster = await threeInstances();
    try {
      const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
      const theirs = (await cluster.owners()).get(c.id)!;
      const stopped = performance.now();
      expect(await c.node.stop()).toBe(0);
      await waitFor(
        'the others to hold every partition',
        async () => {
          const owners = await cluster.owners();
          return (
            !owners.has(c.id) &&
            (owners.get(a.id)?.size ?? 0) + (owners.get(b.id)?.size ?? 0) === 256
          );
        },
        LEASE_MS,
      );
      const handedMs = performance.now() - stopped;
      // Writes landing on the stopped instance's partitions answer 201 at once, no 503.
      let onTheirs = 0;
      for (let i = 0; onTheirs < 3; i++) {
        const issued = await (i % 2 === 0 ? a : b).local.post('/receipts', receipt(`5${i}.00`), {
          timestamp: stamp(),
        });
        expect(issued.status, issued.text).toBe(201);
        if (theirs.has(partitionOf(issued.json.reference))) onTheirs++;
        expect(i).toBeLessThan(100);
      }
      console.log(
        `an orderly stop: its partitions held by the others ${handedMs.toFixed(0)} ms after SIGTERM (lease ${LEASE_MS} ms)`,
      );
    } finally {
      await cluster.close();
    }
  });

  it('an event its instance could not deliver before kill -9 is delivered by the next holder of its partition', async () => {
    const receiver = await new Receiver().open();
    receiver.respond = () => 503;
    const cluster = await threeInstances(['--dev', '--webhook-urls', receiver.url()], {
      PATH_LIMIT_WEBHOOK_FIRST_RETRY_MS: '300',
    });
    try {
      const { instances } = cluster;
      const session = await openSession(instances[0]!, instances[1]!);
      const done = await instances[2]!.beta.post(
        `/checkout/sessions/${session.json.reference}/complete`,
        undefined,
        { timestamp: stamp() },
      );
      expect(done.status, done.text).toBe(200);
      const completed = () =>
        receiver.deliveries.filter((d) => d.body?.event === 'checkout.session.completed');
      await waitFor('a refused attempt', () => completed().length >= 1, 10_000);
      // The instance delivering it (the holder of the event's partition) dies with it undelivered.
      const id = completed()[0]!.headers['webhook-id'] as string;
      const owners = await cluster.owners();
      const deliverer = instances.find((i) => owners.get(i.id)!.has(partitionOf(id)))!;
      await deliverer.node.kill9();
      const killedAt = completed().length;
      receiver.respond = () => 200;
      await waitFor(
        'the event delivered by the next holder',
        () => completed().some((d) => d.status === 200),
        LEASE_MS * 8,
      );
      expect(completed().length).toBeGreaterThan(killedAt);
      expect(new Set(completed().map((d) => d.headers['webhook-id']))).toEqual(new Set([id]));
    } finally {
      await cluster.close();
      await receiver.close();
    }
  });

  it('kill -9 of an instance under load: every acknowledged write is kept, its partitions answer again within the lease time', async () => {
    const cluster = await threeInstances();
    try {
      const { instances } = cluster;
      const victim = instances[2]!;
      const survivors = instances.slice(0, 2);
      const victimPartitions = (await cluster.owners()).get(victim.id)!;
      const acknowledged: Answer[] = [];
      let killedAt = 0;
      let refused = 0;
      let next = 0;
      const TOTAL = 240;
      // A client that retries with the same idempotency key on another instance when one fails.
      const worker = async () => {
        for (let n = next++; n < TOTAL; n = next++) {
          const key = `load-${n}`;
          for (let attempt = 0; ; attempt++) {
            const via =
              killedAt === 0 ? instances[(n + attempt) % 3]! : survivors[(n + attempt) % 2]!;
            let answer: Answer | null = null;
            try {
              answer = await via.local.post('/receipts', receipt(`${n + 1}.00`), {
                idempotencyKey: key,
                timestamp: stamp(),
              });
            } catch {
              answer = null; // the victim's socket, closed by the kill
            }
            if (answer !== null && answer.status === 201) {
              acknowledged.push(answer);
              break;
            }
            // Refused while the dead instance's partitions wait for a new owner (503), or while
            // its claim on the key lasts (409 in progress: the call it took may have run).
            if (answer !== null) {
              expect([503, 409], answer.text).toContain(answer.status);
              if (answer.status === 409)
                expect(answer.json.error.code).toBe('path.core.idempotency_in_progress');
              refused++;
            }
            expect(attempt).toBeLessThan(80);
            await sleep(100);
          }
        }
      };
      const load = Promise.all(Array.from({ length: 6 }, worker));
      await waitFor('a third of the load', () => acknowledged.length >= TOTAL / 3, 60_000);
      killedAt = performance.now();
      await victim.node.kill9();
      // Beside the load: a receipt sent after the kill, again and again, until one lands on a
      // partition the dead instance held. Its answer is the first from those partitions.
      let takeoverMs = 0;
      for (let n = 0; takeoverMs === 0; n++) {
        const sent = performance.now();
        const answer = await survivors[n % 2]!.local.post('/receipts', receipt(`9${n}.00`), {
          timestamp: stamp(),
        });
        if (answer.status === 201 && victimPartitions.has(partitionOf(answer.json.reference)))
          takeoverMs = performance.now() - killedAt;
        expect(sent - killedAt).toBeLessThan(LEASE_MS * 10);
      }
      await load;
      console.log(
        `kill -9 under load: ${acknowledged.length} of ${TOTAL} acknowledged, ${refused} refused meanwhile (503 or 409 in progress), the dead instance's partitions answered again ${takeoverMs.toFixed(0)} ms after the kill (lease ${LEASE_MS} ms)`,
      );
      expect(acknowledged).toHaveLength(TOTAL);
      // Taken as the lease lapses (a third of a lease after its last renewal at the latest),
      // then folded.
      expect(takeoverMs).toBeLessThan(LEASE_MS * 2);
      // Every acknowledged receipt, read through each survivor, is the one acknowledged.
      for (const issued of acknowledged)
        for (const via of survivors) {
          const read = await via.beta.get(`/receipts/${issued.json.reference}`);
          expect(read.text).toBe(issued.text);
        }
      const after = await cluster.owners();
      expect(after.has(victim.id)).toBe(false);
      expect([...after.values()].reduce((n, ps) => n + ps.size, 0)).toBe(256);
    } finally {
      await cluster.close();
    }
  });

  it('an instance paused with SIGSTOP past its lease cannot append after SIGCONT: it never decides on what it held', async () => {
    const cluster = await threeInstances();
    try {
      const [a, , c] = cluster.instances as [Instance, Instance, Instance];
      const held = (await cluster.owners()).get(c.id)!;
      const session = await sessionHeldBy(c, held);
      // The paused instance holds the session open in its memory.
      c.node.process.kill('SIGSTOP');
      await waitFor(
        "the paused instance's partitions taken over",
        async () => !(await cluster.owners()).has(c.id),
        LEASE_MS * 4,
      );
      // The new owner has the session in its memory too (a read is a command to the owner).
      const open = await retried(() => a.local.get(`/checkout/sessions/${session.id}`));
      expect(open.json.status, open.text).toBe('open');
      // Its renewals are held up in the database (a lock on its heartbeat row), so that on SIGCONT
      // it still believes it holds the session's partition: its memory says open, and only the
      // fence keeps it from appending a completion the new owner would never see.
      const stall = new pg.Client({ connectionString: cluster.store });
      await stall.connect();
      await stall.query('begin');
      await stall.query('select 1 from instances where id = $1 for update', [c.id]);
      const late = retried(() =>
        c.gamma.post(`/checkout/sessions/${session.reference}/complete`, undefined, {
          idempotencyKey: 'complete-late',
          timestamp: stamp(),
        }),
      );
      c.node.process.kill('SIGCONT');
      await sleep(LEASE_MS);
      await stall.query('rollback');
      await stall.end();
      const won = await late;
      expect(won.status, won.text).toBe(200);
      // The new owner saw that completion: a second one, through another instance, is refused.
      const again = await retried(() =>
        a.beta.post(`/checkout/sessions/${session.reference}/complete`, undefined, {
          idempotencyKey: 'complete-again',
          timestamp: stamp(),
        }),
      );
      expect(again.status, again.text).toBe(409);
      expect(again.json.error.code).toBe('path.checkout.session_not_open');
      for (const via of cluster.instances) {
        const read = await via.local.get(`/checkout/sessions/${session.id}`);
        expect(read.json).toMatchObject({
          status: 'completed',
          completed_at: won.json.completed_at,
        });
      }
      await c.node.line('partitions lost');
      // It takes its share again, and serves it.
      await waitFor(
        'the resumed instance to hold partitions again',
        async () => ((await cluster.owners()).get(c.id)?.size ?? 0) > 0,
        LEASE_MS * 6,
      );
      const issued = await c.local.post('/receipts', receipt('7.00'), { timestamp: stamp() });
      expect(issued.status, issued.text).toBe(201);
    } finally {
      await cluster.close();
    }
  });

  it('an instance with another member name is refused at start while the cluster runs', async () => {
    const cluster = await threeInstances();
    try {
      const dataDir = tempDir('path-cluster-stranger');
      dirs.push(dataDir);
      const args = [CLI, 'serve', '--store', cluster.store, '--data-dir', dataDir, '--port', '0'];
      const refused = await spawnUntilListening(
        [...args, '--member', 'other', '--internal-port', '0', '--external-port', '0'],
        { PATH_ADMIN_PORT: '0' },
      ).then(
        (started) => {
          started.child.kill('SIGKILL');
          return null;
        },
        (error: Error) => error.message,
      );
      expect(refused).toMatch(/use another --member, PATH_PEPPER or PATH_SEALING_KEY/);
      // The cluster goes on answering, with every partition held by its own instances.
      const issued = await cluster.instances[0]!.local.post('/receipts', receipt('8.00'), {
        timestamp: stamp(),
      });
      expect(issued.status, issued.text).toBe(201);
      const owners = await cluster.owners();
      expect([...owners.keys()].sort()).toEqual(cluster.instances.map((i) => i.id).sort());
    } finally {
      await cluster.close();
    }
  });
});
