// `path-node listen`: a local webhook receiver for operators and developers (P11). Each delivery
// is verified under both schemes: `v1` with the webhook secrets still signing, `v1a` with the
// operator's published keys, either taken from a data directory (`--data-dir`, the node's own
// records) or from a node (`--base-url`, its keys document; `--secret` for `v1`). Each delivery
// is printed as one JSON line; with `--forward-to` it is passed on unchanged (body and signed
// headers) and answered with the forward's status, so a local handler sees real deliveries.
// A delivery that verifies under neither scheme is answered 400 and not forwarded.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhook, PathError, type KeysDocument } from '../client/index.js';
import { DEFAULT_LIMITS, LISTEN_FORWARD_TIMEOUT_MS } from '../config.js';
import { keysDocument } from '../http/routes/fixed.js';
import { openEnvironment } from '../log/lmdb-log.js';
import { NodeStore } from '../store.js';

export interface ListenOptions {
  port: number;
  host: string;
  dataDir?: string;
  baseUrl?: string;
  secret?: string;
  forwardTo?: string;
}

type Verdict = { valid: true } | { valid: false; reason: string } | null;

/** The secrets and keys a delivery is checked with, read afresh for each (they rotate). */
interface Verifiers {
  secrets(): Promise<string[]>;
  keys(): Promise<KeysDocument | null>;
}

const FORWARDED = ['content-type', 'path-event-id', 'webhook-id', 'webhook-timestamp'];

export function listen(options: ListenOptions): Promise<number> {
  const verifiers = verifiersOf(options);
  const server = createServer((req, res) => void receive(req, res, options, verifiers));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () =>
      resolve((server.address() as AddressInfo).port),
    );
  });
}

function verifiersOf(options: ListenOptions): Verifiers {
  const { dataDir, baseUrl, secret } = options;
  return {
    async secrets() {
      if (secret !== undefined) return [secret];
      if (dataDir === undefined) return [];
      return fromStore(dataDir, (store) => {
        const now = Date.now();
        const overlap = DEFAULT_LIMITS.webhook_secret_overlap_ms;
        return store
          .webhookSecrets()
          .filter((s) => s.retired_at === null || Date.parse(s.retired_at) + overlap > now)
          .map((s) => s.secret);
      });
    },
    async keys() {
      if (baseUrl !== undefined) {
        const res = await fetch(`${baseUrl.replace(/\/+$/, '')}/.well-known/path-keys`);
        return (await res.json()) as KeysDocument;
      }
      if (dataDir === undefined) return null;
      // The keys document the node publishes, from its own records (the member name is no part
      // of a webhook's check).
      return fromStore(dataDir, (store) => JSON.parse(keysDocument('', store.signingKeys())));
    },
  };
}

async function fromStore<T>(dataDir: string, read: (store: NodeStore) => T): Promise<T> {
  const env = openEnvironment(dataDir);
  try {
    return read(new NodeStore(env));
  } finally {
    await env.root.close();
  }
}

async function receive(
  req: IncomingMessage,
  res: ServerResponse,
  options: ListenOptions,
  verifiers: Verifiers,
): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  const headers = req.headers as Record<string, string>;
  const secrets = await verifiers.secrets();
  const keys = await verifiers.keys();
  const v1 =
    secrets.length === 0 ? null : check(() => verifyWebhook(raw, headers, { secret: secrets }));
  const v1a = keys === null ? null : check(() => verifyWebhook(raw, headers, { keys }));
  const verified = v1?.valid === true || v1a?.valid === true;
  let status = verified ? 200 : 400;
  if (verified && options.forwardTo !== undefined)
    status = await forward(options.forwardTo, raw, headers);
  const body = parsed(raw);
  process.stdout.write(
    `${JSON.stringify({
      received_at: new Date().toISOString(),
      webhook_id: headers['webhook-id'] ?? null,
      event: body?.event ?? null,
      v1,
      v1a,
      answered: status,
      body,
    })}\n`,
  );
  res.statusCode = status;
  res.end();
}

function check(verify: () => unknown): Verdict {
  try {
    verify();
    return { valid: true };
  } catch (error) {
    const reason =
      error instanceof PathError ? String(error.detail?.reason ?? error.code) : 'error';
    return { valid: false, reason };
  }
}

async function forward(url: string, raw: string, headers: Record<string, string>): Promise<number> {
  const passed: Record<string, string> = {};
  for (const name of [...FORWARDED, 'webhook-signature'])
    if (headers[name] !== undefined) passed[name] = headers[name];
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: passed,
      body: raw,
      signal: AbortSignal.timeout(LISTEN_FORWARD_TIMEOUT_MS),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 502;
  }
}

function parsed(raw: string): { event?: string } | null {
  try {
    return JSON.parse(raw) as { event?: string };
  } catch {
    return null;
  }
}
