// The fault proxy of the cluster fault tests (test/support/fault-proxy.ts), over a real echo
// server on loopback: each mode does to the bytes and the connections what it says, and `pass`
// brings the proxy back.
import { createServer, Socket, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultProxy } from './support/fault-proxy.js';
import { sleep, waitFor } from './support/wait.js';

const opened: { proxy?: FaultProxy; echo?: Server; sockets: Socket[] } = { sockets: [] };

afterEach(async () => {
  for (const socket of opened.sockets.splice(0)) socket.destroy();
  await opened.proxy?.close();
  await new Promise<void>((resolve) =>
    opened.echo ? opened.echo.close(() => resolve()) : resolve(),
  );
  opened.proxy = undefined;
  opened.echo = undefined;
});

/** An echo server and a proxy in front of it. */
async function proxied(): Promise<FaultProxy> {
  const echo = createServer((socket) => {
    // The proxy's resets reach the echo server's side too.
    socket.on('error', () => undefined);
    socket.pipe(socket);
  });
  opened.echo = echo;
  const port = await new Promise<number>((resolve) =>
    echo.listen(0, '127.0.0.1', () => resolve((echo.address() as { port: number }).port)),
  );
  opened.proxy = await FaultProxy.start({ host: '127.0.0.1', port });
  return opened.proxy;
}

/** A client of the proxy: what it has read so far, and how its connection ended. */
interface Peer {
  socket: Socket;
  read: () => string;
  error: () => string | null;
  closed: () => boolean;
}

async function connect(proxy: FaultProxy): Promise<Peer> {
  const socket = new Socket();
  opened.sockets.push(socket);
  let read = '';
  let error: string | null = null;
  let closed = false;
  socket.on('data', (d: Buffer) => (read += d.toString()));
  socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
  socket.on('close', () => (closed = true));
  await new Promise<void>((resolve) => {
    socket.once('connect', () => resolve());
    socket.once('close', () => resolve());
    socket.connect(proxy.port, '127.0.0.1');
  });
  return { socket, read: () => read, error: () => error, closed: () => closed };
}

describe('the fault proxy', () => {
  it('pass: bytes go through both ways, in order', async () => {
    const proxy = await proxied();
    const peer = await connect(proxy);
    const sent = Array.from({ length: 50 }, (_, i) => `chunk-${i};`);
    for (const s of sent) peer.socket.write(s);
    await waitFor('the echo of every chunk', () => peer.read() === sent.join(''), 5_000);
  });

  it('latency: nothing arrives before the delay, each way; then all of it, in order', async () => {
    const proxy = await proxied();
    const peer = await connect(proxy);
    proxy.latency(300);
    const sent = Array.from({ length: 20 }, (_, i) => `late-${i};`);
    const started = performance.now();
    for (const s of sent) peer.socket.write(s);
    await waitFor('the delayed echo', () => peer.read() === sent.join(''), 5_000, 5);
    // The echo crossed the proxy twice, each crossing held for the delay.
    expect(performance.now() - started).toBeGreaterThanOrEqual(600 - 5);
    proxy.pass();
    peer.socket.write('now;');
    await waitFor('the echo after pass', () => peer.read().endsWith('now;'), 5_000);
  });

  it('blackhole: sockets stay open and silent, new ones are accepted and held; pass delivers what was held', async () => {
    const proxy = await proxied();
    const before = await connect(proxy);
    proxy.blackhole();
    before.socket.write('held;');
    const during = await connect(proxy);
    during.socket.write('also held;');
    await sleep(400);
    expect(before.read(), 'nothing through an open socket').toBe('');
    expect(during.read(), 'nothing through a new one').toBe('');
    expect([before.closed(), during.closed()], 'both still open').toEqual([false, false]);
    expect(proxy.accepted, 'the new connection was accepted').toBe(2);
    expect(proxy.open).toBe(2);
    proxy.pass();
    await waitFor('the held bytes', () => before.read() === 'held;', 5_000);
    await waitFor('the held bytes', () => during.read() === 'also held;', 5_000);
  });

  it('reset: open sockets get an RST, new ones are refused with one, until pass', async () => {
    const proxy = await proxied();
    const before = await connect(proxy);
    before.socket.write('x');
    await waitFor('the echo', () => before.read() === 'x', 5_000);
    proxy.reset();
    await waitFor('the open socket reset', () => before.closed(), 5_000);
    expect(before.error()).toBe('ECONNRESET');
    const refused = await connect(proxy);
    await waitFor('the new socket reset', () => refused.closed(), 5_000);
    expect(refused.error()).toBe('ECONNRESET');
    expect(proxy.refused).toBe(1);
    expect(proxy.open).toBe(0);
    proxy.pass();
    const after = await connect(proxy);
    after.socket.write('back');
    await waitFor('the echo after pass', () => after.read() === 'back', 5_000);
  });

  it('a clean close from either side closes the other, and the connection is forgotten', async () => {
    const proxy = await proxied();
    const peer = await connect(proxy);
    peer.socket.end();
    await waitFor('the connection closed', () => peer.closed() && proxy.open === 0, 5_000);
    expect(peer.error()).toBeNull();
  });
});
