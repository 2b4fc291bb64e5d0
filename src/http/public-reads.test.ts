// Public reads routed natively by uWebSockets.js (HttpServer.mountPublicReads) answer exactly
// what the route table would: over a real server on a loopback port, every request here is
// answered by the route the table matches (or the table's refusal), whichever way it went in.
import { DatabaseHealth } from '../log/unavailable.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { API_VERSION, DEFAULT_LIMITS } from '../config.js';
import { Authenticator } from './auth.js';
import { Router, type RouteSpec } from './router.js';
import { HttpServer, type Answered, type Handler } from './server.js';

/** Every handler answers its operation and the parameters it was given. */
const echo =
  (operation: string): Handler =>
  (context) => ({
    status: 200,
    body: JSON.stringify({ operation, params: context.params, query: context.query }),
    signed: false,
  });

const route = (
  operation: string,
  method: 'GET' | 'POST',
  path: string,
  auth: RouteSpec<Handler>['auth'] = 'public',
): RouteSpec<Handler> => ({
  operation,
  method,
  path,
  auth,
  responses: {},
  handler: echo(operation),
});

// A literal beside a parameter (`/items/special`, GET and POST), a literal that shadows the
// parameter only for a deeper path (`/items/deep/more`), two parameters in a row, and a public
// GET whose path an asset also serves.
const ROUTES = [
  route('read_item', 'GET', '/items/:id'),
  route('special', 'GET', '/items/special'),
  route('post_only', 'POST', '/items/posted', 'member'),
  route('deep', 'GET', '/items/deep/more'),
  route('pair', 'GET', '/pairs/:left/:right'),
  route('asset_shadow', 'GET', '/files/:name', 'public'),
];
const PREFIXES = ['/v1', '/v2'];
const ASSET = {
  status: 200,
  body: 'asset bytes',
  signed: false,
  headers: { 'content-type': 'text/css' },
};

let server: HttpServer;
let base: string;
const answered: Answered[] = [];

beforeAll(async () => {
  server = new HttpServer({
    routes: ROUTES,
    prefixes: PREFIXES,
    authenticator: new Authenticator({ skewMs: 1_000, replayEntriesPerCredentialMax: 10 }),
    claims: { stored: () => undefined, settle: () => null, taken: async () => undefined },
    health: new DatabaseHealth(),
    limits: DEFAULT_LIMITS,
    logger: pino({ level: 'silent' }),
    now: Date.now,
    assets: new Map([['/v1/files/page.css', ASSET]]),
    onAnswered: (a) => answered.push({ ...a }),
  });
  base = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
});

afterAll(async () => {
  await server?.close(100);
});

async function get(path: string, headers: Record<string, string> = {}) {
  const res = await fetch(base + path, { headers });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

describe('public reads routed by uWebSockets.js', () => {
  const table = new Router(ROUTES, PREFIXES);
  const cases = [
    '/v1/items/it_1',
    '/v2/items/it_1',
    '/v1/items/special',
    '/v1/items/posted',
    '/v1/items/deep',
    '/v1/items/deep/more',
    '/v1/items/',
    '/v1/items/it_1/',
    '/v1/items//',
    '/v1/pairs/a/b',
    '/v1/pairs/a/',
    '/v1/pairs/a%2Fb/c',
    '/v1/items/it_1?x=1&y=2',
    '/v1/files/other.css',
  ];

  it.each(cases)('GET %s answers what the route table matches', async (target) => {
    const [path, query = ''] = target.split('?');
    const match = table.match('GET', path!);
    const answer = await get(target);
    if (match.kind === 'found') {
      expect(answer.status).toBe(200);
      const operation = match.route.operation;
      expect(JSON.parse(answer.body)).toEqual({ operation, params: match.params, query });
    } else {
      expect(answer.status).toBe(match.kind === 'not_found' ? 404 : 405);
      expect(JSON.parse(answer.body).error.code).toBe(
        match.kind === 'not_found' ? 'path.core.not_found' : 'path.core.method_not_allowed',
      );
    }
  });

  it('an asset whose path a public read also matches is served as the asset', async () => {
    const answer = await get('/v1/files/page.css');
    expect(answer).toMatchObject({ status: 200, body: 'asset bytes' });
    expect(answer.headers.get('content-type')).toBe('text/css');
  });

  it('P10/P20: the head is the one the table path writes, with a request id each', async () => {
    const fast = await get('/v1/items/it_1');
    // A pinned version goes through the table: its head differs only in the pinned flag.
    const pinned = await get('/v1/items/it_1', { 'path-version': API_VERSION });
    expect(pinned.body).toBe(fast.body);
    for (const answer of [fast, pinned]) {
      expect(answer.headers.get('path-version')).toBe(API_VERSION);
      expect(answer.headers.get('access-control-allow-origin')).toBe('*');
      expect(answer.headers.get('access-control-expose-headers')).toContain('path-request-id');
      expect(answer.headers.get('content-type')).toBe('application/json');
    }
    expect(fast.headers.get('path-version-pinned')).toBe('false');
    expect(pinned.headers.get('path-version-pinned')).toBe('true');
    expect(fast.headers.get('path-request-id')).not.toBe(pinned.headers.get('path-request-id'));
  });

  it('P10: an unknown pinned version is refused on a public read as anywhere', async () => {
    const answer = await get('/v1/items/it_1', { 'path-version': '1999-01-01.none' });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body).error.code).toBe('path.core.version_unknown');
  });

  it('P21: the access log and the metrics are told of each public read', async () => {
    answered.length = 0;
    await get('/v2/pairs/x/y');
    expect(answered).toHaveLength(1);
    expect(answered[0]).toMatchObject({
      method: 'GET',
      operation: 'pair',
      status: 200,
      member: null,
    });
    expect(answered[0]!.seconds).toBeGreaterThanOrEqual(0);
  });

  it('a HEAD of a public read is its GET without the body', async () => {
    const res = await fetch(base + '/v1/items/it_1', { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe(
      String((await get('/v1/items/it_1')).body.length),
    );
    expect(await res.text()).toBe('');
  });
});

describe('Router.literalsBeside', () => {
  it('names, for each parameter, the literals the table takes in its place', () => {
    const table = new Router(ROUTES, PREFIXES);
    expect(table.literalsBeside('/v1/items/:id')).toEqual([new Set(['special', 'posted', 'deep'])]);
    expect(table.literalsBeside('/v1/pairs/:left/:right')).toEqual([new Set(), new Set()]);
  });
});
