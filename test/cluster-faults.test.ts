// A cluster that rides out its database (issue 29 item 3, CLUSTER.md "what it must give" 4):
// three instances under a signed write load on a PostgreSQL of this file's own, which the tests
// crash and start again, or reach through a fault proxy (test/support/fault-proxy.ts) that adds
// latency, holds every byte, or resets every connection. Through each fault every instance stays
// the same process; health, keys and reads held in memory keep answering (within 50 ms under the
// proxy's faults); what needs the database answers 503 with Retry-After and
// `path.core.unavailable` (P7), never 500, and `/readyz` says `database_unreachable` (P21); once
// the database is back, writes answer 201 again and every acknowledged write is there, once (P14,
// P7 idempotency), read the same through every instance (P22).
import { execFileSync } from 'node:child_process';
import { createHash, createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Client,
  createCredential,
  PREFIX,
  startNode,
  tempDir,
  type Answer,
  type Credential,
  type NodeProcess,
} from './support/harness.js';
import { payeeReceipt as receipt } from './support/bodies.js';
import { FaultProxy } from './support/fault-proxy.js';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { freshDatabase, serverBin, startPostgres, type Postgres } from './support/postgres.js';
import { sleep, waitFor } from './support/wait.js';

const LEASE_MS = 1_500;
/** What the issue asks of health, keys and cached reads during a fault, per request. */
const PROBE_ANSWER_MS = 50;
/** How long a probe is given before it counts as unanswered. */
const PROBE_GIVE_UP_MS = 500;
/** How long one attempt of a write is given before the client tries again with its key. */
const WRITE_ATTEMPT_MS = 5_000;
/** How long a writer retries one idempotency key before it gives the key up. */
const WRITE_KEY_MS = 30_000;
/** A writer's pause between two writes: keeps the load, and so the read-back, bounded. */
const WRITE_PAUSE_MS = 250;
const WRITERS = 6;
/** One acknowledged key in this many is sent again after the faults, to see it replayed. */
const REPLAYED_SAMPLE = 10;
const OUTAGE_MS = 5_000;
/** From the database's return to writes answered 201 through every instance (issue 29 item 4). */
const BACK_WITHIN_MS = 10_000;
/** From the standby's promotion to writes answered 201 through every instance (item 4). */
const SWITCHED_WITHIN_MS = 30_000;

const { running, dirs } = cleanedUpAfterEach();
let postgres: Postgres;

beforeAll(async () => {
  postgres = await startPostgres();
});
afterAll(() => postgres?.stop());

interface Instance {
  node: NodeProcess;
  n: number;
  /** The process id it started with: riding out a fault means keeping it. */
  pid: number;
  /** The operator's own member: Client checks each answer against the OpenAPI document (P19). */
  local: Client;
  /** The same member through the load's lighter signer. */
  writer: Writer;
  public: Client;
  admin: string;
}

interface Cluster {
  /** The database's URL without the proxy, for the test's own statements. */
  direct: string;
  instances: Instance[];
  /**
   * The test's own connections, which the database's faults end too: a pool makes new ones
   * (replaced by one to the new primary after a switchover).
   */
  db: pg.Pool;
}

/** A pool of the test's own, whose lost connections are no error: the tests cause them. */
function pool(url: string): pg.Pool {
  const db = new pg.Pool({ connectionString: url, max: 2 });
  db.on('error', () => undefined);
  return db;
}

/**
 * Three instances on a fresh database, given the store URL `storeOf` makes of the database's
 * own (through the proxy, or naming a standby beside it).
 */
async function threeInstances(storeOf: (direct: string) => string): Promise<Cluster> {
  const direct = await freshDatabase(postgres.url);
  const store = storeOf(direct);
  const cliDir = tempDir('path-faults-cli');
  dirs.push(cliDir);
  const own = createCredential(cliDir, 'local', { local: true, store: direct });
  createCredential(cliDir, 'beta', { local: false, store: direct });
  const instances: Instance[] = [];
  for (let n = 0; n < 3; n++) {
    const dataDir = tempDir('path-faults');
    dirs.push(dataDir);
    const node = await startNode({
      dataDir,
      store,
      workers: 2,
      args: ['--lease-ms', String(LEASE_MS), '--internal-port', '0'],
    });
    running.push(node);
    instances.push({
      node,
      n,
      pid: node.process.pid!,
      local: new Client(node.baseUrl, own),
      writer: new Writer(node.baseUrl, own),
      public: new Client(node.baseUrl),
      admin: `http://127.0.0.1:${node.adminPort}`,
    });
  }
  const db = pool(direct);
  await waitFor(
    'the partitions shared out among three instances',
    async () => {
      const held = await db.query<{ n: number }>(
        'select count(distinct owner)::int as n from leases ' +
          'where owner is not null and expires_at > now()',
      );
      return held.rows[0]!.n === 3;
    },
    LEASE_MS * 10,
  );
  return { direct, instances, db };
}

/**
 * Signed POSTs (P5) for the write load, signed with node:crypto's native Ed25519: the harness's
 * pure-JS signer and answer checks cost the test process milliseconds a write, which would be
 * counted in the timed probes that share its event loop. The outage's own writes go through
 * Client, whose answers are checked against the OpenAPI document.
 */
class Writer {
  private readonly key: KeyObject;

  constructor(
    private readonly baseUrl: string,
    private readonly credential: Credential,
  ) {
    const pkcs8 = Buffer.concat([
      Buffer.from('302e020100300506032b657004220420', 'hex'),
      Buffer.from(credential.seedHex, 'hex'),
    ]);
    this.key = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  }

  async post(path: string, body: object, idempotencyKey: string): Promise<Answer> {
    const target = PREFIX + path;
    const bytes = Buffer.from(JSON.stringify(body));
    const timestamp = stamp();
    const digest = createHash('sha256').update(bytes).digest('hex');
    const text = ['path-request-v1', 'POST', target, timestamp, idempotencyKey, digest].join('\n');
    const res = await fetch(this.baseUrl + target, {
      method: 'POST',
      body: bytes,
      headers: {
        'content-type': 'application/json',
        'path-idempotency-key': idempotencyKey,
        'path-key-id': this.credential.keyId,
        'path-timestamp': timestamp,
        'path-signature': sign(null, Buffer.from(text), this.key).toString('hex'),
      },
    });
    const answer = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(answer);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text: answer, json };
  }
}

/** `promise`, or a rejection once `ms` have passed (its late outcome is dropped). */
function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => (clearTimeout(timer), resolve(value)),
      (error) => (clearTimeout(timer), reject(error)),
    );
  });
}

/** Why `answer` is not a proper refusal for a database out of reach, or null when it is one. */
function notUnavailable(answer: Answer): string | null {
  if (answer.status !== 503) return `status ${answer.status}: ${answer.text.slice(0, 200)}`;
  if (answer.json?.error?.code !== 'path.core.unavailable')
    return `503 with code ${answer.json?.error?.code}`;
  if (answer.headers.get('retry-after') === null) return '503 without Retry-After';
  return null;
}

/** The process of every instance is the one it started as, and has not exited. */
function expectAlive(cluster: Cluster, when: string): void {
  for (const i of cluster.instances) {
    const { exitCode, signalCode } = i.node.process;
    expect(
      { pid: i.node.process.pid, exitCode, signalCode },
      `instance ${i.n} still running ${when}; why it ended:\n${lastWords(i.node)}`,
    ).toEqual({ pid: i.pid, exitCode: null, signalCode: null });
  }
}

/**
 * What a process that ended said last: its last error or fatal log line, and the exception it
 * ended on (Node's report of an uncaught one: where it was thrown, the error, its first frames).
 */
function lastWords(node: NodeProcess): string {
  const lines = node.output().trim().split('\n');
  const logged = lines.filter((l) => /"level":(50|60)/.test(l)).slice(-1);
  let thrown = -1;
  lines.forEach((l, at) => {
    if (/^\w*Error\b/.test(l)) thrown = at;
  });
  const from = thrown < 0 ? lines.length - 6 : thrown - 4;
  const exception = lines.slice(Math.max(0, from), from + 12);
  return [...logged, ...exception].map((l) => l.slice(0, 400)).join('\n');
}

/**
 * Six clients writing receipts through all three instances, each write with its own idempotency
 * key, tried again with that key on 503, on 409 in progress (an attempt of it still runs) and on
 * a lost connection or no answer, until acknowledged (201) or given up after WRITE_KEY_MS.
 */
class WriteLoad {
  /** Every key sent, with its body: a key always goes with the same body. */
  readonly sent = new Map<string, object>();
  readonly acknowledged = new Map<string, Answer>();
  /** Answers no client should ever get, whatever the database does. */
  readonly wrong: string[] = [];
  refused = 0;
  private stopping = false;
  private abandoned = false;
  private workers: Promise<void>[] = [];

  constructor(private readonly instances: Instance[]) {}

  start(): void {
    this.workers = Array.from({ length: WRITERS }, (_, w) => this.worker(w));
  }

  /** Each client finishes the key it is on (retrying it, bounded), then stops. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.workers);
  }

  /** Stops every client at once (clean-up after a failed test). */
  abandon(): void {
    this.stopping = true;
    this.abandoned = true;
  }

  private async worker(w: number): Promise<void> {
    for (let n = 0; !this.stopping; n++) {
      const key = `load-${w}-${n}`;
      await this.write(key, receipt(`${(w + 1) * 10_000 + n}.00`), n);
      await sleep(WRITE_PAUSE_MS);
    }
  }

  /** Sends `body` with `key` until acknowledged; the answer, or null when given up. */
  async write(key: string, body: object, spread = 0): Promise<Answer | null> {
    this.sent.set(key, body);
    const deadline = performance.now() + WRITE_KEY_MS;
    for (let attempt = 0; !this.abandoned && performance.now() < deadline; attempt++) {
      const via = this.instances[(spread + attempt) % this.instances.length]!;
      const answer = await within(WRITE_ATTEMPT_MS, via.writer.post('/receipts', body, key)).catch(
        () => null,
      );
      if (answer?.status === 201) {
        this.acknowledged.set(key, answer);
        return answer;
      }
      if (answer !== null) this.judge(answer, via);
      await sleep(100);
    }
    return null;
  }

  /** A refusal a client may meet while the database is away, or one noted as wrong. */
  private judge(answer: Answer, via: Instance): void {
    this.refused++;
    const inProgress =
      answer.status === 409 && answer.json?.error?.code === 'path.core.idempotency_in_progress';
    const why = inProgress ? null : notUnavailable(answer);
    if (why !== null) this.wrong.push(`instance ${via.n}: ${why}`);
  }
}

/** Every acknowledged receipt read back 200, byte for byte, through each of `readers`. */
async function expectKept(load: WriteLoad, readers: Instance[], when: string): Promise<void> {
  const missing: string[] = [];
  const acknowledged = [...load.acknowledged.values()];
  for (let at = 0; at < acknowledged.length; at += 8) {
    await Promise.all(
      acknowledged.slice(at, at + 8).flatMap((issued) =>
        readers.map(async (via) => {
          const target = `${via.node.baseUrl}${PREFIX}/receipts/${issued.json.reference}`;
          const read = await within(5_000, fetch(target)).then(
            async (r) => ({ status: r.status, text: await r.text() }),
            (error: Error) => ({ status: 0, text: error.message }),
          );
          if (read.status !== 200 || read.text !== issued.text)
            missing.push(`instance ${via.n}: ${read.status} ${read.text.slice(0, 120)}`);
        }),
      ),
    );
  }
  expect(
    missing,
    `acknowledged receipts not read back ${when} (of ${acknowledged.length})`,
  ).toEqual([]);
}

/**
 * One receipt per idempotency key. Every key never acknowledged is sent again until it is (its
 * first attempts may or may not have committed: the answer says which receipt is its own), and
 * every REPLAYED_SAMPLE-th acknowledged one too, which must answer the acknowledged receipt again,
 * byte for byte (P7, also after the fault); then each key has its receipt, no two the same, and
 * the database holds exactly as many receipts as keys were sent, so no attempt, answered or not,
 * left a second one behind.
 */
async function expectOnePerKey(load: WriteLoad, cluster: Cluster): Promise<void> {
  const references = new Map<string, string>();
  const again = [...load.sent].filter(([key], k) => {
    const acknowledged = load.acknowledged.get(key);
    if (acknowledged !== undefined) references.set(key, acknowledged.json.reference);
    return acknowledged === undefined || k % REPLAYED_SAMPLE === 0;
  });
  for (let at = 0; at < again.length; at += WRITERS) {
    await Promise.all(
      again.slice(at, at + WRITERS).map(async ([key, body], k) => {
        const first = load.acknowledged.get(key);
        const answer = await load.write(key, body, k);
        expect(answer?.status, `key ${key} sent again`).toBe(201);
        if (first !== undefined)
          expect(answer!.text, `key ${key}: the acknowledged receipt again`).toBe(first.text);
        references.set(key, answer!.json.reference as string);
      }),
    );
  }
  expect(new Set(references.values()).size, 'a receipt of its own for every key').toBe(
    load.sent.size,
  );
  const stored = await cluster.db.query<{ n: number }>(
    "select count(*)::int as n from rows where tbl = 'views' and key ~ '^rcp_[0-9a-f]{32}$'",
  );
  expect(stored.rows[0]!.n, 'receipts in the database, one per key sent').toBe(load.sent.size);
}

/** A write through each instance answers 201 before `deadline` (performance.now()). */
async function expectWritesBack(load: WriteLoad, cluster: Cluster, deadline: number, when: string) {
  for (const via of cluster.instances) {
    await waitFor(
      `a write through instance ${via.n} answered 201 ${when}`,
      async () => {
        const key = `back-${via.n}-${performance.now().toFixed(0)}`;
        const body = receipt(`${90_000 + load.sent.size}.00`);
        load.sent.set(key, body);
        const answer = await within(
          Math.max(1, deadline - performance.now()),
          via.local.post('/receipts', body, { idempotencyKey: key, timestamp: stamp() }),
        ).catch(() => null);
        if (answer?.status === 201) load.acknowledged.set(key, answer);
        return answer?.status === 201;
      },
      Math.max(0, deadline - performance.now()),
      200,
    );
  }
}

/** A probe's answer: its status and JSON body, or status 0 and what became of it. */
interface Probed {
  status: number;
  json: any;
  ms: number;
  failure: string;
}

/** A GET of `url`, given up after `ms`. */
async function probe(url: string, ms: number): Promise<Probed> {
  const started = performance.now();
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(ms) });
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, json, ms: performance.now() - started, failure: '' };
  } catch (error) {
    const e = error as Error & { cause?: { code?: string } };
    const failure =
      e.name === 'TimeoutError'
        ? `no answer in ${ms} ms`
        : `connection failed (${e.cause?.code ?? e.message})`;
    return { status: 0, json: undefined, ms: performance.now() - started, failure };
  }
}

/** Whether a probe was answered 200 within PROBE_ANSWER_MS. */
function inTime(p: Probed): boolean {
  return p.status === 200 && p.ms < PROBE_ANSWER_MS;
}

/** A probe's status, or what became of it when it had none. */
function answered(p: Probed): number | string {
  return p.status === 0 ? p.failure : p.status;
}

describe('a cluster that rides out its database (issue 29)', () => {
  it('a crash and restart of PostgreSQL under write load: the same processes serve again, no acknowledged write lost or doubled', async () => {
    const cluster = await threeInstances((direct) => direct);
    const load = new WriteLoad(cluster.instances);
    let down = false;
    try {
      load.start();
      await waitFor(
        'writes acknowledged before the crash',
        () => load.acknowledged.size >= 30,
        20_000,
      );
      postgres.stopServer();
      down = true;
      const stoppedAt = performance.now();
      await sleep(1_000);
      expectAlive(cluster, 'one second into the outage');
      await expectOutageAnswers(cluster, load);
      await sleep(Math.max(0, stoppedAt + OUTAGE_MS - performance.now()));
      expectAlive(cluster, `at the end of the outage (${OUTAGE_MS} ms)`);
      postgres.startServer();
      down = false;
      const backAt = performance.now();
      await expectWritesBack(load, cluster, backAt + BACK_WITHIN_MS, 'after the restart');
      expectAlive(cluster, 'after the restart');
      for (const via of cluster.instances) {
        const ready = await probe(`${via.admin}/readyz`, 2_000);
        expect(answered(ready), `instance ${via.n} /readyz after the restart`).toBe(200);
      }
      await within(WRITE_KEY_MS + 5_000, load.stop());
      expect(load.wrong, 'answers to the load other than 201, 503 unavailable or 409').toEqual([]);
      await expectKept(load, cluster.instances, 'after the restart');
      await expectOnePerKey(load, cluster);
      console.log(
        `restart: ${load.acknowledged.size} of ${load.sent.size} keys acknowledged, ` +
          `${load.refused} refusals met by the load and retried`,
      );
    } finally {
      load.abandon();
      if (down) postgres.startServer();
      await cluster.db.end().catch(() => undefined);
    }
  }, 90_000);

  it('under a fault proxy (500 ms latency, a 5 s blackhole, reset connections): health, keys and a cached read answer within 50 ms on every instance; writes come back; nothing acknowledged is lost', async () => {
    const target = new URL(postgres.url);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    let cluster: Cluster | null = null;
    let load: WriteLoad | null = null;
    try {
      cluster = await threeInstances((direct) => proxy.url(direct));
      load = new WriteLoad(cluster.instances);
      load.start();
      await waitFor(
        'writes acknowledged before the faults',
        () => load!.acknowledged.size >= 12,
        20_000,
      );
      const cached = await cachedRead(cluster, load);
      // The same probes with the proxy passing everything, a control printed beside the
      // verdicts: a miss here is the machine's or the load's, not a fault's.
      const control = await probeDuring(cluster, cached, performance.now() + 1_000, 3);
      console.log(
        `control, before any fault: ${control.length === 0 ? 'every probe' : 'not every probe'} ` +
          `answered 200 within ${PROBE_ANSWER_MS} ms ${control.join('; ')}`,
      );
      // The blackhole ends by delivering what it held, late and in order (a path healed): a
      // commit its instance gave up on (answered 503) then lands after a retry of its request
      // may have run elsewhere, and after its partition was folded again. Both commits claim the
      // request's idempotency answer (issue 29), so only one of them commits (expectOnePerKey);
      // the next append of that partition is refused as not following on (PN002), and the
      // partition is folded again before its commands are decided again (expectWritesBack).
      const faults = [
        { name: '500 ms latency', begin: () => proxy.latency(500), ms: 4_000 },
        { name: 'a 5 s blackhole', begin: () => proxy.blackhole(), ms: 5_000 },
        { name: 'reset connections', begin: () => proxy.reset(), ms: 3_000 },
      ];
      for (const [f, fault] of faults.entries()) {
        const began = performance.now();
        fault.begin();
        const slow = await probeDuring(cluster, cached, began + fault.ms, 20);
        expect
          .soft(slow, `${fault.name}: probes not answered 200 within ${PROBE_ANSWER_MS} ms`)
          .toEqual([]);
        await sleep(Math.max(0, began + fault.ms - performance.now()));
        proxy.pass();
        expectAlive(cluster, `after ${fault.name}`);
        await expectWritesBack(load, cluster, performance.now() + 15_000, `after ${fault.name}`);
        await expectKept(load, [cluster.instances[f]!], `after ${fault.name}`);
      }
      await within(WRITE_KEY_MS + 5_000, load.stop());
      expect(load.wrong, 'answers to the load other than 201, 503 unavailable or 409').toEqual([]);
      await expectKept(load, cluster.instances, 'after the faults');
      await expectOnePerKey(load, cluster);
      console.log(
        `proxy faults: ${load.acknowledged.size} of ${load.sent.size} keys acknowledged, ` +
          `${load.refused} refusals met by the load and retried, ` +
          `${proxy.accepted} connections through the proxy, ${proxy.refused} refused`,
      );
    } finally {
      load?.abandon();
      proxy.pass();
      await cluster?.db.end().catch(() => undefined);
      await proxy.close();
    }
  }, 90_000);

  it('a switchover to the synchronous standby (the primary stopped as a crash, the standby promoted) under write load: the same processes serve again within 30 s, no acknowledged write lost or doubled', async () => {
    const standby = await synchronousStandby(postgres);
    let cluster: Cluster | null = null;
    let load: WriteLoad | null = null;
    let switched = false;
    try {
      cluster = await threeInstances((direct) => bothHosts(direct, standby));
      load = new WriteLoad(cluster.instances);
      load.start();
      await waitFor(
        'writes acknowledged before the switchover',
        () => load!.acknowledged.size >= 30,
        20_000,
      );
      postgres.stopServer();
      switched = true;
      standby.promote();
      const promotedAt = performance.now();
      await expectWritesBack(
        load,
        cluster,
        promotedAt + SWITCHED_WITHIN_MS,
        'after the switchover',
      );
      expectAlive(cluster, 'after the switchover');
      await within(WRITE_KEY_MS + 5_000, load.stop());
      expect(load.wrong, 'answers to the load other than 201, 503 unavailable or 409').toEqual([]);
      await cluster.db.end();
      cluster.db = pool(standby.url(cluster.direct));
      await expectKept(load, cluster.instances, 'after the switchover');
      await expectOnePerKey(load, cluster);
      console.log(
        `switchover: ${load.acknowledged.size} of ${load.sent.size} keys acknowledged, ` +
          `${load.refused} refusals met by the load and retried`,
      );
    } finally {
      load?.abandon();
      await cluster?.db.end().catch(() => undefined);
      for (const node of running) if (node.process.exitCode === null) await node.kill9();
      standby.stop();
      // A primary still running must not wait for the standby just stopped.
      if (!switched) await unnameStandby(postgres);
    }
  }, 90_000);
});

/** During the outage: health, keys, readiness and writes, each as the issue says. */
async function expectOutageAnswers(cluster: Cluster, load: WriteLoad): Promise<void> {
  for (const via of cluster.instances) {
    const health = await probe(`${via.admin}/healthz`, 2_000);
    expect(answered(health), `instance ${via.n} /healthz during the outage`).toBe(200);
    const keys = await probe(`${via.node.baseUrl}/.well-known/path-keys`, 2_000);
    expect(answered(keys), `instance ${via.n} /.well-known/path-keys during the outage`).toBe(200);
  }
  for (const via of cluster.instances) {
    const ready = await waitFor(
      `instance ${via.n} /readyz to say database_unreachable`,
      async () => {
        const answer = await probe(`${via.admin}/readyz`, 1_000);
        return answer.json?.status === 'database_unreachable' ? answer : false;
      },
      3_000,
      100,
    ).catch(() => probe(`${via.admin}/readyz`, 1_000));
    expect(
      { status: answered(ready), said: ready.json?.status },
      `instance ${via.n} /readyz during the outage`,
    ).toEqual({ status: 503, said: 'database_unreachable' });
  }
  for (const via of cluster.instances) {
    const key = `outage-${via.n}`;
    const body = receipt(`${80_000 + via.n}.00`);
    load.sent.set(key, body);
    const answer = await within(
      WRITE_ATTEMPT_MS,
      via.local.post('/receipts', body, { idempotencyKey: key, timestamp: stamp() }),
    ).catch((error: Error) => error.message);
    const why = typeof answer === 'string' ? answer : notUnavailable(answer);
    expect(why, `instance ${via.n}: a write during the outage answers 503 unavailable`).toBeNull();
  }
}

/** An acknowledged receipt, read once through every instance's public route: now cached. */
async function cachedRead(cluster: Cluster, load: WriteLoad): Promise<string> {
  const [issued] = load.acknowledged.values();
  const path = `${PREFIX}/receipts/${issued!.json.reference}`;
  for (const via of cluster.instances) {
    const read = await via.public.get(path, { root: true });
    expect(read.status, `instance ${via.n} reads the receipt before the faults`).toBe(200);
  }
  return path;
}

/**
 * `rounds` rounds of probes spread until `until`: each instance's `/healthz`, keys and the cached
 * read, one at a time, each timed; what did not answer 200 within PROBE_ANSWER_MS twice in a
 * row. Probing stops after the first round with a miss, since a node that waits on its database
 * waits on every one.
 */
async function probeDuring(
  cluster: Cluster,
  cachedPath: string,
  until: number,
  rounds: number,
): Promise<string[]> {
  const spacing = Math.max(0, (until - performance.now() - 500) / rounds);
  await sleep(300);
  const slow: string[] = [];
  for (let round = 0; round < rounds && slow.length === 0; round++) {
    for (const via of cluster.instances) {
      for (const url of [
        `${via.admin}/healthz`,
        `${via.node.baseUrl}/.well-known/path-keys`,
        `${via.node.baseUrl}${cachedPath}`,
      ]) {
        const first = await probe(url, PROBE_GIVE_UP_MS);
        if (inTime(first)) continue;
        // Asked again at once: a front end that waits on its database misses again, as the fault
        // lasts seconds; a moment the shared machine gave the instance no core does not.
        const again = await probe(url, PROBE_GIVE_UP_MS);
        const what = new URL(url).pathname.replace(/rcp_[0-9a-f]+/, 'rcp_…');
        const told = (p: Probed) => `${answered(p)}, ${p.ms.toFixed(0)} ms`;
        const line = `round ${round}, instance ${via.n} ${what}: ${told(first)}, then ${told(again)}`;
        if (inTime(again))
          console.log(`a probe missed once, answered in time when asked again: ${line}`);
        else slow.push(line);
      }
    }
    await sleep(spacing);
  }
  return slow;
}

/** A synchronous standby of the file's PostgreSQL, on a loopback port of its own. */
interface Standby {
  port: number;
  /** `url` (a database of the primary) on the standby instead. */
  url(url: string): string;
  promote(): void;
  stop(): void;
}

/** Runs a server program as the `postgres` user when the tests run as root (initdb refuses root). */
function asServer(program: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  const [file, argv] = root
    ? ['runuser', ['-u', 'postgres', '--', program, ...args]]
    : [program, args];
  execFileSync(file, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A standby made with `pg_basebackup -R` from the primary, streaming from it, then named by the
 * primary's `synchronous_standby_names`, so that no commit is acknowledged before the standby has
 * it; returns once the primary reports it `sync`.
 */
async function synchronousStandby(primary: Postgres): Promise<Standby> {
  const bin = serverBin();
  const dir = mkdtempSync(join(tmpdir(), 'path-faults-standby-'));
  if (process.getuid?.() === 0) {
    const id = (flag: string) =>
      Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }));
    chownSync(dir, id('-u'), id('-g'));
  }
  const data = join(dir, 'data');
  const from = new URL(primary.url);
  const port = await freePort();
  // As the primary runs (test/support/postgres.ts): a standby may not have fewer connections.
  const options = [
    `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir}`,
    '-c max_connections=200 -c fsync=off -c synchronous_commit=on',
  ].join(' ');
  const log = join(dir, 'server.log');
  try {
    asServer(join(bin, 'pg_basebackup'), [
      ...['-h', from.hostname, '-p', from.port, '-U', from.username],
      ...['-D', data, '-R', '-X', 'stream', '-c', 'fast'],
    ]);
    asServer(join(bin, 'pg_ctl'), ['-D', data, '-o', options, '-l', log, '-w', 'start']);
  } catch (error) {
    const said = existsSync(log) ? readFileSync(log, 'utf8').split('\n').slice(-8).join('\n') : '';
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`the standby did not start: ${(error as Error).message}\n${said}`);
  }
  const admin = pool(primary.url);
  try {
    await admin.query("alter system set synchronous_standby_names = '*'");
    await admin.query('select pg_reload_conf()');
    await waitFor(
      'the standby streaming, synchronous',
      async () =>
        (await admin.query<{ s: string }>('select sync_state as s from pg_stat_replication'))
          .rows[0]?.s === 'sync',
      10_000,
    );
  } finally {
    await admin.end();
  }
  let stopped = false;
  return {
    port,
    url: (url) => Object.assign(new URL(url), { port: String(port) }).toString(),
    promote: () => asServer(join(bin, 'pg_ctl'), ['-D', data, '-w', 'promote']),
    stop: () => {
      if (stopped) return;
      stopped = true;
      try {
        asServer(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** The primary's commits no longer wait for a standby. */
async function unnameStandby(primary: Postgres): Promise<void> {
  const admin = pool(primary.url);
  try {
    await admin.query('alter system reset synchronous_standby_names');
    await admin.query('select pg_reload_conf()');
  } finally {
    await admin.end();
  }
}

/**
 * `url` naming both servers, the primary first, for a client that connects to whichever of them
 * takes writes (libpq's multi-host form with target_session_attrs=read-write).
 */
function bothHosts(url: string, standby: Standby): string {
  const parsed = new URL(url);
  const hosts = `${parsed.hostname}:${parsed.port},${parsed.hostname}:${standby.port}`;
  return `postgres://${parsed.username}@${hosts}${parsed.pathname}?target_session_attrs=read-write`;
}
