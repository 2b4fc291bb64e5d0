// Reading a webhook delivery on a test receiver: the raw text (signatures cover it) and its JSON.
import type { IncomingMessage } from 'node:http';

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
