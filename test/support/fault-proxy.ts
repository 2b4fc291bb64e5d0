// Test support: a TCP proxy on a loopback port between cluster instances and their PostgreSQL
// (issue 29 item 4), whose mode is switched while it runs, to bring the network faults a
// database is reached through into a test: `pass` forwards at once; `latency(ms)` delays every
// chunk in either direction by ms, order kept; `blackhole()` keeps every socket open and forwards
// nothing, new connections accepted and held silent, as a network path that drops every packet;
// `reset()` ends every open connection with a TCP RST and refuses new ones the same way.
//
// What a blackhole held goes the way TCP takes it: `pass()` delivers it late and in order (a path
// healed within TCP's retransmission time, so no stream ever has a hole in it, which no network
// makes and a protocol cannot read), and `reset()` drops it with its connections (a path that
// never healed). Bytes are queued without back-pressure: the traffic of a test is small.
import { createServer, Socket, type Server } from 'node:net';

export type FaultMode =
  { kind: 'pass' } | { kind: 'latency'; ms: number } | { kind: 'blackhole' } | { kind: 'reset' };

/** What a direction of a connection has yet to write: a chunk, or the end of its stream. */
interface Pending {
  chunk: Buffer | null;
  /** When it may be written (ms, performance.now()). */
  at: number;
}

/** One direction of a proxied connection: bytes read from `from`, written to `to`, in order. */
class Direction {
  private readonly queue: Pending[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly to: Socket,
    private readonly held: () => boolean,
  ) {}

  push(chunk: Buffer | null, delayMs: number): void {
    const last = this.queue.at(-1)?.at ?? 0;
    this.queue.push({ chunk, at: Math.max(performance.now() + delayMs, last) });
    this.pump();
  }

  /** Writes what is due, unless held; waits for the next one that is not due yet. */
  pump(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.held()) return;
    const now = performance.now();
    while (this.queue.length > 0 && this.queue[0]!.at <= now) {
      const { chunk } = this.queue.shift()!;
      if (this.to.destroyed || this.to.writableEnded) return;
      if (chunk === null) this.to.end();
      else this.to.write(chunk);
    }
    const next = this.queue[0];
    if (next !== undefined) this.timer = setTimeout(() => this.pump(), next.at - now);
  }

  clear(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
  }
}

/** A client's connection and the proxy's own to the target, with a direction each way. */
class Pair {
  readonly toTarget: Direction;
  readonly toClient: Direction;

  constructor(
    readonly client: Socket,
    readonly target: Socket,
    held: () => boolean,
  ) {
    this.toTarget = new Direction(target, held);
    this.toClient = new Direction(client, held);
  }

  pump(): void {
    this.toTarget.pump();
    this.toClient.pump();
  }

  /** Both sockets ended with an RST; what they had yet to write is dropped. */
  reset(): void {
    this.toTarget.clear();
    this.toClient.clear();
    if (!this.client.destroyed) this.client.resetAndDestroy();
    if (!this.target.destroyed) this.target.resetAndDestroy();
  }
}

export class FaultProxy {
  private mode: FaultMode = { kind: 'pass' };
  private readonly pairs = new Set<Pair>();
  /** Connections accepted so far, and those refused with an RST while in `reset`. */
  accepted = 0;
  refused = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** A proxy on a free loopback port, forwarding to `target`. */
  static async start(target: { host: string; port: number }): Promise<FaultProxy> {
    const server = createServer({ noDelay: true, allowHalfOpen: true });
    let proxy: FaultProxy | null = null;
    server.on('connection', (client) => proxy!.accept(client, target));
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : 0);
      });
    });
    proxy = new FaultProxy(server, port);
    return proxy;
  }

  /** `url` (a postgres:// URL) with its host and port replaced by the proxy's. */
  url(url: string): string {
    const through = new URL(url);
    through.hostname = '127.0.0.1';
    through.port = String(this.port);
    return through.toString();
  }

  get current(): FaultMode {
    return this.mode;
  }

  /** Connections open through the proxy now. */
  get open(): number {
    return this.pairs.size;
  }

  pass(): void {
    this.mode = { kind: 'pass' };
    for (const pair of this.pairs) pair.pump();
  }

  latency(ms: number): void {
    this.mode = { kind: 'latency', ms };
    for (const pair of this.pairs) pair.pump();
  }

  blackhole(): void {
    this.mode = { kind: 'blackhole' };
  }

  reset(): void {
    this.mode = { kind: 'reset' };
    for (const pair of [...this.pairs]) pair.reset();
    this.pairs.clear();
  }

  async close(): Promise<void> {
    for (const pair of [...this.pairs]) pair.reset();
    this.pairs.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: { host: string; port: number }): void {
    if (this.mode.kind === 'reset') {
      this.refused++;
      client.resetAndDestroy();
      return;
    }
    this.accepted++;
    client.setNoDelay(true);
    const upstream = new Socket({ allowHalfOpen: true });
    upstream.setNoDelay(true);
    const pair = new Pair(client, upstream, () => this.mode.kind === 'blackhole');
    this.pairs.add(pair);
    const delay = () => (this.mode.kind === 'latency' ? this.mode.ms : 0);
    client.on('data', (chunk: Buffer) => pair.toTarget.push(chunk, delay()));
    upstream.on('data', (chunk: Buffer) => pair.toClient.push(chunk, delay()));
    client.on('end', () => pair.toTarget.push(null, delay()));
    upstream.on('end', () => pair.toClient.push(null, delay()));
    // A side that fails takes the other with it, as the connection it stands for is gone; one
    // that closes cleanly has ended both ways, its last bytes forwarded or still on their way.
    const settled = () => {
      if (client.closed && upstream.closed) this.pairs.delete(pair);
    };
    const failed = () => {
      this.pairs.delete(pair);
      pair.reset();
    };
    for (const socket of [client, upstream]) {
      socket.on('error', failed);
      socket.on('close', settled);
    }
    upstream.connect(target.port, target.host);
  }
}
