// Webhook receivers for tests: a real node:http server on loopback that records each delivery's
// raw text (signatures cover it), its JSON and the status it answered.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export function readDelivery(req: IncomingMessage): Promise<{ raw: string; body: unknown }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try { body = JSON.parse(raw); } catch { body = undefined; }
      resolve({ raw, body });
    });
  });
}


export interface Delivery { method: string; path: string; headers: IncomingHttpHeaders; raw: string; body: any; status: number; at: number }

/** A webhook receiver on loopback that can go down and come back on the same port. */
export class Receiver {
  readonly deliveries: Delivery[] = [];
  /** Status to answer; `nth` counts deliveries of the same webhook-id, this one included. */
  respond: (d: Delivery, nth: number) => number = () => 200;
  private server: Server | null = null;
  port = 0;

  async open(port = 0): Promise<this> {
    const server = createServer((req, res) => {
      void readDelivery(req).then(({ raw, body }) => {
        const d: Delivery = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, raw, body, status: 0, at: Date.now() };
        const id = req.headers['webhook-id'];
        const nth = this.deliveries.filter((x) => x.headers['webhook-id'] === id).length + 1;
        d.status = this.respond(d, nth);
        this.deliveries.push(d);
        res.statusCode = d.status;
        res.end();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    return this;
  }

  url(path = '/hooks'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server === null) return;
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }

  of(event: string, reference?: string): Delivery[] {
    return this.deliveries.filter((d) => d.body?.event === event && (reference === undefined || d.body?.data?.reference === reference));
  }

  acknowledged(event: string, reference?: string): Delivery[] {
    return this.of(event, reference).filter((d) => d.status >= 200 && d.status < 300);
  }
}

