// A database that does not answer is a state the front end lives through (issue 29): what needed
// it answers 503 `path.core.unavailable` with Retry-After (P7), never 500 and never counted as an
// internal error; a public view this instance has read answers from memory meanwhile (P22
// cluster mode's read path, publicView); `/readyz` says `database_unreachable` and `/healthz`
// stays `alive`. Over real servers on loopback ports in this process, on a real LMDB log whose
// `load` is made to fail as PostgreSQL's does when the database is gone: an exception that
// escaped would end the test run itself.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DATABASE_RETRY_AFTER_SECONDS, DEFAULT_LIMITS } from '../config.js';
import { LmdbLog, openEnvironment } from '../log/lmdb-log.js';
import type { Log } from '../log/log.js';
import { DatabaseHealth, UnavailableError } from '../log/unavailable.js';
import { encodeView } from '../reads/views.js';
import { Metrics } from '../metrics.js';
import { AdminListener } from './admin.js';
import type { Authenticator } from './auth.js';
import { receiptRoutes } from '../domain/receipt/routes.js';
import type { RouteSpec } from './router.js';
import { HttpServer, type Handler } from './server.js';
import type { Services } from './services.js';

const AT_FIRST = { partition: 0, seq: 1 };
const RECEIPT = `rcp_${'a'.repeat(32)}`;
const NEVER_READ = `rcp_${'b'.repeat(32)}`;

/** How `load` behaves: as the log does, failing as a lost database, or never answering. */
type LoadMode = 'answer' | 'unreachable' | 'hang';

/**
 * A real LMDB log whose `load` is switched to fail as PostgreSQL's does when it is gone, and
 * whose peek version moves on each refresh, as PostgreSQL's does (its read cache is dropped).
 */
function switchedLoad(log: LmdbLog): {
  log: Log;
  mode: { current: LoadMode };
  loads: () => number;
} {
  const mode = { current: 'answer' as LoadMode };
  let loads = 0;
  let version = 0;
  const wrapped = Object.create(log) as Log;
  wrapped.peekVersion = () => version;
  wrapped.refresh = () => {
    version++;
    log.refresh();
  };
  wrapped.load = (table, key) => {
    loads++;
    if (mode.current === 'unreachable')
      return Promise.reject(new UnavailableError('the database did not answer'));
    if (mode.current === 'hang') return new Promise(() => undefined);
    return log.load(table, key);
  };
  return { log: wrapped, mode, loads: () => loads };
}

const ok: Handler = () => ({ status: 200, body: '{"ok":true}', signed: false });
/** A socket failure of a connection that was never made, as node-postgres reports it. */
const refused = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });

let handlerFails = false;
/** A command whose commit could not reach the database (once told to fail). */
const flaky: Handler = () =>
  handlerFails
    ? Promise.reject(new UnavailableError('commit not answered'))
    : Promise.resolve(ok({} as never));

const OWN_ROUTES: RouteSpec<Handler>[] = [
  {
    operation: 'flaky',
    method: 'POST',
    path: '/flaky',
    auth: 'public',
    idempotent: true,
    responses: {},
    handler: flaky,
  },
  {
    operation: 'create',
    method: 'POST',
    path: '/things',
    auth: 'public',
    idempotent: true,
    responses: {},
    handler: ok,
  },
  {
    operation: 'signed',
    method: 'POST',
    path: '/signed',
    auth: 'member',
    responses: {},
    handler: ok,
  },
];

/** Lets every signature through: the replay guard after it is what is tested. */
const passing = {
  authenticate: () => ({ member: 'alpha', local: true, replay: { key: 'r', c: 'k1' } }),
  replayed: () => {
    throw new Error('not reached');
  },
} as unknown as Authenticator;

let dir: string;
let lmdb: LmdbLog;
let switched: ReturnType<typeof switchedLoad>;
let health: DatabaseHealth;
let server: HttpServer;
let admin: AdminListener;
let base: string;
let adminBase: string;
let internalErrors = 0;
let storedFails = true;
let settleFails = false;
const lines: Record<string, unknown>[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'path-node-unavailable-'));
  lmdb = new LmdbLog(openEnvironment(dir));
  switched = switchedLoad(lmdb);
  health = new DatabaseHealth();
  const services = { log: switched.log, database: health } as unknown as Services;
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  server = new HttpServer({
    routes: [...OWN_ROUTES, ...receiptRoutes(services)],
    prefixes: ['/v1'],
    authenticator: passing,
    claims: {
      stored: () => (storedFails ? Promise.reject(refused()) : Promise.resolve(undefined)),
      // A call that committed nothing claims its mark on its own (cluster mode, issue 29).
      settle: () =>
        settleFails
          ? Promise.reject(refused())
          : Promise.resolve({ replayed: false, stored: undefined }),
      taken: async () => undefined,
    },
    limits: DEFAULT_LIMITS,
    logger: pino({ level: 'info' }, sink),
    now: Date.now,
    onInternalError: () => internalErrors++,
    health,
  });
  base = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}/v1`;
  admin = new AdminListener(new Metrics(), pino({ level: 'silent' }));
  admin.database = health;
  admin.state = 'ready';
  adminBase = `http://127.0.0.1:${await admin.listen('127.0.0.1', 0)}`;
});

afterAll(async () => {
  await server?.close(1_000);
  admin?.close();
  await lmdb?.close();
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  switched.mode.current = 'answer';
  health.succeeded();
});

const commit = async (key: string, text: string) => {
  const view = { status: 200, body: JSON.stringify({ text }), signed: true };
  await lmdb.write([{ table: 'views', key, bytes: encodeView(view, AT_FIRST) }]);
  switched.log.refresh();
};

async function expectUnavailable(res: Response): Promise<void> {
  expect(res.status).toBe(503);
  expect(res.headers.get('retry-after')).toBe(String(DATABASE_RETRY_AFTER_SECONDS));
  const body = (await res.json()) as {
    error: { code: string; detail: { retry_after_seconds: number } };
  };
  expect(body.error.code).toBe('path.core.unavailable');
  expect(body.error.detail.retry_after_seconds).toBe(DATABASE_RETRY_AFTER_SECONDS);
}

const post = (path: string, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: '{}',
  });

const SIGNED = {
  'path-key-id': 'k1',
  'path-timestamp': '2026-11-27T12:00:00Z',
  'path-signature': 'ab'.repeat(64),
};

describe('a request that needs a database that does not answer (issue 29, P7)', () => {
  it('an idempotency read that fails: 503 with Retry-After, not counted', async () => {
    storedFails = true;
    const errors = internalErrors;
    await expectUnavailable(await post('/things', { 'path-idempotency-key': 'k-1' }));
    expect(internalErrors).toBe(errors);
    expect(health.reachable).toBe(false);
    // Once the database answers, the same key runs: it was not left marked in flight.
    storedFails = false;
    const again = await post('/things', { 'path-idempotency-key': 'k-1' });
    expect(again.status).toBe(200);
  });

  it('a handler that fails so: 503; a retry with its key runs, not in progress', async () => {
    storedFails = false;
    handlerFails = true;
    await expectUnavailable(await post('/flaky', { 'path-idempotency-key': 'k-2' }));
    handlerFails = false;
    expect((await post('/flaky', { 'path-idempotency-key': 'k-2' })).status).toBe(200);
  });

  it('a replay mark that cannot be claimed, the database gone: 503, no 500 logged', async () => {
    settleFails = true;
    const errors = internalErrors;
    await expectUnavailable(await post('/signed', SIGNED));
    expect(internalErrors).toBe(errors);
    expect(lines.some((line) => line.msg === 'request failed')).toBe(false);
    settleFails = false;
    expect((await post('/signed', SIGNED)).status).toBe(200);
  });
});

describe('public reads of views in cluster mode (publicView)', () => {
  const read = (reference: string) => fetch(`${base}/receipts/${reference}`);

  it('a view never read here, with the database gone: 503 with Retry-After', async () => {
    await commit(NEVER_READ, 'never read');
    switched.mode.current = 'unreachable';
    const errors = internalErrors;
    await expectUnavailable(await read(NEVER_READ));
    expect(internalErrors).toBe(errors);
    expect(health.reachable).toBe(false);
  });

  it('a view read before answers from memory while the database is gone or silent', async () => {
    await commit(RECEIPT, 'first');
    const first = await read(RECEIPT);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ text: 'first' });
    // A commit elsewhere moves the peek version: the view is no longer known to be current.
    switched.log.refresh();
    switched.mode.current = 'unreachable';
    const gone = await read(RECEIPT);
    expect(gone.status).toBe(200);
    expect(await gone.json()).toEqual({ text: 'first' });
    // Known unreachable now: the next read answers from memory without asking again.
    expect(health.reachable).toBe(false);
    const before = switched.loads();
    expect((await read(RECEIPT)).status).toBe(200);
    expect(switched.loads()).toBe(before);
    // The database answers other reads again, but is slow for this one.
    health.succeeded();
    switched.log.refresh();
    switched.mode.current = 'hang';
    const loads = switched.loads();
    const silent = await read(RECEIPT);
    expect(switched.loads()).toBe(loads + 1);
    expect(silent.status).toBe(200);
    expect(await silent.json()).toEqual({ text: 'first' });
  });

  it('a view read at the current version answers without asking the database', async () => {
    await commit(RECEIPT, 'current');
    expect(await (await read(RECEIPT)).json()).toEqual({ text: 'current' });
    const loads = switched.loads();
    switched.mode.current = 'unreachable';
    const again = await read(RECEIPT);
    expect(again.status).toBe(200);
    expect(switched.loads()).toBe(loads);
  });

  it('a view committed anew is read fresh once the database answers', async () => {
    await commit(RECEIPT, 'before');
    expect(await (await read(RECEIPT)).json()).toEqual({ text: 'before' });
    await commit(RECEIPT, 'after');
    expect(await (await read(RECEIPT)).json()).toEqual({ text: 'after' });
  });
});

describe('/readyz and /healthz while the database does not answer (issue 29)', () => {
  it('readyz 503 database_unreachable, healthz 200 alive; ready once it answers', async () => {
    health.failed(new UnavailableError('the database did not answer'));
    const ready = await fetch(`${adminBase}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ status: 'database_unreachable' });
    const alive = await fetch(`${adminBase}/healthz`);
    expect(alive.status).toBe(200);
    expect(await alive.json()).toEqual({ status: 'alive' });
    health.succeeded();
    const back = await fetch(`${adminBase}/readyz`);
    expect(back.status).toBe(200);
    expect(await back.json()).toEqual({ status: 'ready' });
  });
});
