// The route table's matcher (router.ts): literal segments before parameters, a segment matched
// whole (never a literal that is a prefix or an extension of it), parameters named per route,
// and the 404/405 distinction.
import { describe, expect, it } from 'vitest';
import { Router, type RouteSpec } from './router.js';

const route = (method: 'GET' | 'POST', path: string, root = false): RouteSpec<string> => ({
  operation: `${method} ${path}`,
  method,
  path,
  root,
  auth: 'public',
  responses: {},
  handler: `${method} ${path}`,
});

const router = new Router(
  [
    route('GET', '/requests/:id'),
    route('POST', '/requests'),
    route('GET', '/requests/:id/status'),
    route('GET', '/request/:reference'),
    route('GET', '/receipts/:reference'),
    route('GET', '/receipts/latest'),
    route('GET', '/checkout/sessions/:id'),
    route('POST', '/checkout/sessions/:reference/attempt'),
    route('GET', '/', true),
    route('GET', '/.well-known/path', true),
  ],
  ['/v1', '/api/path/v1'],
);

const found = (method: string, path: string) => {
  const match = router.match(method, path);
  return match.kind === 'found' ? { handler: match.route.handler, params: match.params } : match;
};

describe('Router', () => {
  it('matches literals whole, under each prefix, before parameters', () => {
    for (const prefix of ['/v1', '/api/path/v1']) {
      expect(found('POST', `${prefix}/requests`)).toEqual({
        handler: 'POST /requests',
        params: {},
      });
      expect(found('GET', `${prefix}/requests/r1`)).toEqual({
        handler: 'GET /requests/:id',
        params: { id: 'r1' },
      });
      expect(found('GET', `${prefix}/request/r2`)).toEqual({
        handler: 'GET /request/:reference',
        params: { reference: 'r2' },
      });
      expect(found('GET', `${prefix}/receipts/latest`)).toEqual({
        handler: 'GET /receipts/latest',
        params: {},
      });
      expect(found('GET', `${prefix}/receipts/latests`)).toEqual({
        handler: 'GET /receipts/:reference',
        params: { reference: 'latests' },
      });
      expect(found('GET', `${prefix}/receipts/lates`)).toEqual({
        handler: 'GET /receipts/:reference',
        params: { reference: 'lates' },
      });
    }
    expect(found('GET', '/')).toEqual({ handler: 'GET /', params: {} });
    expect(found('GET', '/.well-known/path')).toEqual({
      handler: 'GET /.well-known/path',
      params: {},
    });
  });

  it('names parameters per route where routes share a position', () => {
    expect(found('GET', '/v1/checkout/sessions/s1')).toEqual({
      handler: 'GET /checkout/sessions/:id',
      params: { id: 's1' },
    });
    expect(found('POST', '/v1/checkout/sessions/s2/attempt')).toEqual({
      handler: 'POST /checkout/sessions/:reference/attempt',
      params: { reference: 's2' },
    });
    expect(found('GET', '/v1/requests/r3/status')).toEqual({
      handler: 'GET /requests/:id/status',
      params: { id: 'r3' },
    });
  });

  it('refuses what no route has: 404 for the path, 405 with the methods for the method', () => {
    for (const path of [
      '/v2/requests',
      '/v1/requestsx',
      '/v1/request',
      '/v1/requests/',
      '/v1/requests//status',
      '/v1/receipts/a/b',
      '/v1',
      '/api/path',
      '/.well-known/pat',
      '/.well-known/paths',
    ]) {
      expect(router.match('GET', path)).toEqual({ kind: 'not_found' });
    }
    expect(router.match('GET', '/v1/requests')).toEqual({
      kind: 'method_not_allowed',
      allowed: ['POST'],
    });
    expect(router.match('PUT', '/v1/requests/r1')).toEqual({
      kind: 'method_not_allowed',
      allowed: ['GET'],
    });
  });
});
