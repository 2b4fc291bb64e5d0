// Issue 32: requests that proxies and odd clients send, over a bare socket on loopback. Each gets
// an answer in the P7 envelope, never a silent close: HTTP/1.0 (what nginx speaks upstream unless
// told otherwise) is 505 saying to speak HTTP/1.1, a malformed head 400, a method the node does
// not implement anywhere 501; no answer carries uWebSockets.js's own `uWebSockets` header.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startNode, tempDir, type NodeProcess } from './support/harness.js';
import { RawConnection, requestHead, type RawResponse } from './support/raw-http.js';

let node: NodeProcess;
let dataDir: string;

beforeAll(async () => {
  dataDir = tempDir('http-edges');
  node = await startNode({ dataDir });
});

afterAll(async () => {
  await node?.stop();
  removeDir(dataDir);
});

interface Exchange {
  res: RawResponse;
  statusLine: string;
  closed: boolean;
}

/** Sends `raw` on a connection of its own; the first answer, and whether the node closed. */
async function exchange(raw: string): Promise<Exchange> {
  const c = await RawConnection.open(node.port);
  c.write(Buffer.from(raw, 'latin1'));
  const res = await c.response(5_000);
  expect(res, `an answer to ${JSON.stringify(raw.slice(0, 60))}`).toBeDefined();
  const closed = await c.closedWithin(500);
  c.destroy();
  const statusLine = c.received.toString('latin1').split('\r\n')[0]!;
  return { res: res!, statusLine, closed };
}

function expectError(res: RawResponse, status: number, code: string): void {
  expect(res.status, res.body).toBe(status);
  expect(res.headers['content-type']).toBe('application/json');
  expect(res.headers).not.toHaveProperty('uwebsockets');
  expect(Object.keys(res.json)).toEqual(['error']);
  expect(res.json.error.code).toBe(code);
  expect(typeof res.json.error.message).toBe('string');
}

describe('HTTP edges over a raw socket (issue 32)', () => {
  it('HTTP/1.0 is 505 in JSON naming HTTP/1.1, then closed', async () => {
    const { res, statusLine, closed } = await exchange(
      'GET /.well-known/path-keys HTTP/1.0\r\n\r\n',
    );
    expectError(res, 505, 'path.core.http_version_not_supported');
    expect(statusLine).toBe('HTTP/1.1 505 HTTP Version Not Supported');
    expect(res.json.error.message).toContain('HTTP/1.1');
    expect(closed).toBe(true);
  });

  it('HTTP/1.0 with a Host and keep-alive, as nginx sends it, is 505 too', async () => {
    const raw =
      'GET /.well-known/path-keys HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n';
    expectError((await exchange(raw)).res, 505, 'path.core.http_version_not_supported');
  });

  it('a control character in a header value is 400 in JSON, then closed', async () => {
    const raw = requestHead('GET', '/.well-known/path-keys', [['x-note', 'a\x01b']]);
    const { res, closed } = await exchange(raw);
    expectError(res, 400, 'path.core.invalid_request');
    expect(closed).toBe(true);
  });

  it('a control character in the path is 400 in JSON', async () => {
    const raw = 'GET /.well-known/path\x01keys HTTP/1.1\r\nHost: x\r\n\r\n';
    expectError((await exchange(raw)).res, 400, 'path.core.invalid_request');
  });

  it('a request without Host is 400 in JSON, then closed', async () => {
    const { res, closed } = await exchange('GET /.well-known/path-keys HTTP/1.1\r\n\r\n');
    expectError(res, 400, 'path.core.invalid_request');
    expect(closed).toBe(true);
  });

  it('a head larger than the server reads is 431 in JSON, then closed; the node lives on', async () => {
    const raw = requestHead('GET', '/.well-known/path-keys', [['x-note', 'a'.repeat(64 * 1024)]]);
    const { res, statusLine, closed } = await exchange(raw);
    expectError(res, 431, 'path.core.header_fields_too_large');
    expect(statusLine).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(closed).toBe(true);
    const next = await exchange(requestHead('GET', '/.well-known/path-keys', []));
    expect(next.res.status).toBe(200);
  });

  it.each(['QUERY', 'FOO'])(
    '%s is 501 in JSON, on a known path and on an unknown one',
    async (m) => {
      for (const path of ['/.well-known/path-keys', '/api/path/v1/receipts', '/no/such/path']) {
        const { res, statusLine } = await exchange(requestHead(m, path, [['content-length', 0]]));
        expectError(res, 501, 'path.core.method_not_implemented');
        expect(statusLine).toBe('HTTP/1.1 501 Not Implemented');
        expect(res.json.error.detail).toEqual({ method: m });
      }
    },
  );

  it('a known method keeps its answers: 405 on a route without it, 404 on no route', async () => {
    const wrong = await exchange(requestHead('DELETE', '/.well-known/path-keys', []));
    expectError(wrong.res, 405, 'path.core.method_not_allowed');
    const none = await exchange(requestHead('GET', '/no/such/path', []));
    expectError(none.res, 404, 'path.core.not_found');
  });

  it('a plain HTTP/1.1 read is served without the uWebSockets header; the node lives on', async () => {
    const { res } = await exchange(requestHead('GET', '/.well-known/path-keys', []));
    expect(res.status).toBe(200);
    expect(res.headers).not.toHaveProperty('uwebsockets');
    expect(node.process.exitCode).toBeNull();
  });
});
