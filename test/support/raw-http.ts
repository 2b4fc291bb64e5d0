// Test support: HTTP/1.1 over a bare node:net socket, for requests fetch cannot express (two
// Content-Length headers, a body announced and never sent, a chunked body that never ends,
// garbage request lines) and for watching when the node answers and when it closes.
import net from 'node:net';

export interface RawResponse {
  status: number;
  /** Header names lower-cased; a repeated header keeps its last value. */
  headers: Record<string, string>;
  body: string;
  /** The body parsed as JSON, or undefined. */
  json: any;
}

/** One connection: what it received, and when (ms after connecting) it was answered and closed. */
export class RawConnection {
  received = Buffer.alloc(0);
  firstByteAtMs: number | null = null;
  closedAtMs: number | null = null;
  error: string | null = null;
  readonly socket: net.Socket;
  private readonly startedAt = Date.now();
  private readonly closed: Promise<void>;
  private waiters: (() => void)[] = [];

  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.on('data', (data: Buffer) => {
      this.firstByteAtMs ??= Date.now() - this.startedAt;
      this.received = Buffer.concat([this.received, data]);
      this.notify();
    });
    this.socket.on('error', (error: NodeJS.ErrnoException) => {
      this.error = error.code ?? error.message;
    });
    this.closed = new Promise((resolve) => this.socket.on('close', () => {
      this.closedAtMs = Date.now() - this.startedAt;
      this.notify();
      resolve();
    }));
  }

  static async open(port: number): Promise<RawConnection> {
    const c = new RawConnection(port);
    await new Promise<void>((resolve, reject) => {
      c.socket.once('connect', resolve);
      c.socket.once('error', reject);
    });
    return c;
  }

  get isClosed(): boolean {
    return this.closedAtMs !== null;
  }

  /** Writes unless the node already closed the connection (then the bytes are dropped). */
  write(data: string | Buffer): void {
    if (!this.socket.destroyed && this.socket.writable) this.socket.write(data);
  }

  /** Resolves when `ready()` holds, the connection closes, or `timeoutMs` passes. */
  async until(ready: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!ready() && !this.isClosed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }

  /** Resolves true when the node closed the connection within `timeoutMs`. */
  async closedWithin(timeoutMs: number): Promise<boolean> {
    await Promise.race([this.closed, new Promise((resolve) => setTimeout(resolve, timeoutMs))]);
    return this.isClosed;
  }

  /** The complete final (non-1xx) answers received so far. */
  responses(): RawResponse[] {
    return parseResponses(this.received.toString('latin1')).filter((r) => r.status >= 200);
  }

  /** The first final answer, waiting up to `timeoutMs` for it to be complete. */
  async response(timeoutMs: number): Promise<RawResponse | undefined> {
    await this.until(() => this.responses().length > 0, timeoutMs);
    return this.responses()[0];
  }

  destroy(): void {
    this.socket.destroy();
  }

  private notify(): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const wake of waiting) wake();
  }
}

/** Every complete answer in `text` (Content-Length or chunked bodies), up to an incomplete one. */
export function parseResponses(text: string): RawResponse[] {
  const out: RawResponse[] = [];
  let at = 0;
  while (at < text.length) {
    const headEnd = text.indexOf('\r\n\r\n', at);
    if (headEnd === -1) break;
    const [statusLine, ...lines] = text.slice(at, headEnd).split('\r\n');
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? '')?.[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const body = readBody(text, headEnd + 4, status, headers);
    if (body === null) break;
    out.push({ status, headers, body: body.text, json: jsonOrUndefined(body.text) });
    at = body.end;
  }
  return out;
}

function jsonOrUndefined(latin1: string): any {
  try {
    return JSON.parse(Buffer.from(latin1, 'latin1').toString('utf8'));
  } catch {
    return undefined;
  }
}

type Body = { text: string; end: number } | null;
type Headers = Record<string, string>;

function readBody(text: string, start: number, status: number, headers: Headers): Body {
  if (status < 200) return { text: '', end: start };
  if (headers['transfer-encoding'] === 'chunked') {
    let body = '';
    let at = start;
    for (;;) {
      const lineEnd = text.indexOf('\r\n', at);
      if (lineEnd === -1) return null;
      const size = parseInt(text.slice(at, lineEnd), 16);
      if (size === 0) return text.length >= lineEnd + 4 ? { text: body, end: lineEnd + 4 } : null;
      if (text.length < lineEnd + 2 + size + 2) return null;
      body += text.slice(lineEnd + 2, lineEnd + 2 + size);
      at = lineEnd + 2 + size + 2;
    }
  }
  const length = Number(headers['content-length'] ?? 0);
  if (text.length < start + length) return null;
  return { text: text.slice(start, start + length), end: start + length };
}

/** The JSON of the first chunk of a chunked answer whose end has not come yet. */
export function firstChunkJson(text: string): any {
  const headEnd = text.indexOf('\r\n\r\n');
  if (headEnd === -1) return undefined;
  const lineEnd = text.indexOf('\r\n', headEnd + 4);
  const size = parseInt(text.slice(headEnd + 4, lineEnd), 16);
  return jsonOrUndefined(text.slice(lineEnd + 2, lineEnd + 2 + size));
}

/** A request head: request line, `host`, the given headers in order, and the blank line. */
export function requestHead(
  method: string, target: string, headers: [string, string | number][],
): string {
  const lines = headers.map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return `${method} ${target} HTTP/1.1\r\nhost: 127.0.0.1\r\n${lines}\r\n`;
}
