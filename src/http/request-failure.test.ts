// No request can stop the node (issue 28): an exception met anywhere while one request is
// handled (a store read, the signature check, the body's callback, an answer that resolves
// later) answers that request 500 `path.core.internal` with its request id, is logged once with
// that id (no body, no message that could quote it) and counted, and the server goes on
// answering. Over a real server on a loopback port, in this process: an exception that escaped
// would end the test run itself.
import { DatabaseHealth } from '../log/unavailable.js';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { DEFAULT_LIMITS } from '../config.js';
import type { Authenticator } from './auth.js';
import type { RouteSpec } from './router.js';
import { HttpServer, type Handler } from './server.js';

const BODY_MARK = 'body-text-that-must-not-be-logged';

const ok: Handler = () => ({ status: 200, body: '{"ok":true}', signed: false });

const ROUTES: RouteSpec<Handler>[] = [
  { operation: 'read', method: 'GET', path: '/things', auth: 'public', responses: {}, handler: ok },
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
  {
    operation: 'later',
    method: 'POST',
    path: '/later',
    auth: 'public',
    responses: {},
    // An answer that resolves to something no answer can be made of.
    handler: () => Promise.resolve(null as never),
  },
];

/** A signature check that fails with an exception of its own, as a bug in it would. */
const failingAuthenticator = {
  authenticate: () => {
    throw new TypeError('signature check failed unexpectedly');
  },
  replayed: () => {
    throw new Error('not reached');
  },
} as unknown as Authenticator;

const lines: Record<string, unknown>[] = [];
let internalErrors = 0;
let server: HttpServer;
let base: string;

beforeAll(async () => {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  server = new HttpServer({
    routes: ROUTES,
    prefixes: ['/v1'],
    authenticator: failingAuthenticator,
    claims: {
      stored: () => {
        throw new RangeError('a stored answer could not be read');
      },
      settle: () => null,
      taken: async () => undefined,
    },
    health: new DatabaseHealth(),
    limits: DEFAULT_LIMITS,
    logger: pino({ level: 'info' }, sink),
    now: Date.now,
    onInternalError: () => internalErrors++,
  });
  base = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}/v1`;
});

afterAll(async () => {
  await server?.close(1_000);
});

const post = (path: string, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ note: BODY_MARK }),
  });

const SIGNED = {
  'path-key-id': 'k1',
  'path-timestamp': '2026-11-27T12:00:00Z',
  'path-signature': 'ab'.repeat(64),
};

describe('an exception while handling one request (issue 28)', () => {
  const cases: [string, () => Promise<Response>][] = [
    ['a store read that throws', () => post('/things', { 'path-idempotency-key': 'k-1' })],
    ['a signature check that throws', () => post('/signed', SIGNED)],
  ];
  for (const [what, send] of cases) {
    it(`${what}: 500 with its request id, logged once, counted; the node serves on`, async () => {
      const before = { errors: internalErrors, lines: lines.length };
      const res = await send();
      expect(res.status).toBe(500);
      const body = (await res.json()) as {
        error: { code: string; detail: { request_id: string } };
      };
      expect(body.error.code).toBe('path.core.internal');
      const requestId = body.error.detail.request_id;
      expect(res.headers.get('path-request-id')).toBe(requestId);
      expect(internalErrors).toBe(before.errors + 1);
      const logged = lines.slice(before.lines).filter((l) => l.msg === 'request failed');
      expect(logged).toHaveLength(1);
      expect(logged[0]!.request_id).toBe(requestId);
      expect(JSON.stringify(lines)).not.toContain(BODY_MARK);
      expect(JSON.stringify(logged[0])).not.toMatch(/failed unexpectedly|could not be read/);
      expect((await fetch(`${base}/things`)).status).toBe(200);
    });
  }

  it('an answer resolved to nothing usable fails alone; the node serves on', async () => {
    const before = internalErrors;
    const outcome = await post('/later').then(
      (res) => res.status,
      () => 'closed',
    );
    // Its answer had begun when it failed: the connection is closed, or 500 when nothing was out.
    expect([500, 'closed']).toContain(outcome);
    expect(internalErrors).toBe(before + 1);
    expect((await fetch(`${base}/things`)).status).toBe(200);
  });
});
