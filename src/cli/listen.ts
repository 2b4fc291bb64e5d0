// `path-node listen`: a local webhook receiver for operators and developers (P11). Each delivery
// is verified under both schemes: `v1` with the webhook secrets still signing, `v1a` with the
// operator's published keys, either taken from a data directory (`--data-dir`, the node's own
// records) or from a node (`--base-url`, its keys document; `--secret` for `v1`). Each delivery
// is printed as one JSON line; with `--forward-to` it is passed on unchanged (body and signed
// headers) and answered with the forward's status, so a local handler sees real deliveries.
// A delivery that verifies under neither scheme is answered 400 and not forwarded.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhook, PathError, type KeysDocument } from '@path-node/client';
import { DEFAULT_LIMITS, LISTEN_FORWARD_TIMEOUT_MS } from '../config.js';
import { keysDocument } from '../http/routes/fixed.js';
import { withStore } from '../log/open.js';
import { NodeStore, signingSecrets } from '../store.js';

export interface ListenOptions {
  port: number;
  host: string;
  dataDir?: string;
  baseUrl?: string;
  secret?: string;
  forwardTo?: string;
}

type Verdict = { valid: true } | { valid: false; reason: string } | null;

/** What a delivery is checked with: the secrets still signing and the keys document. */
interface Material {
  secrets: string[];
  keys: KeysDocument | null;
}

const FORWARDED = ['content-type', 'path-event-id', 'webhook-id', 'webhook-timestamp'];

export function listen(options: ListenOptions): Promise<number> {
  const server = createServer((req, res) => void receive(req, res, options));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () =>
      resolve((server.address() as AddressInfo).port),
    );
  });
}

/**
 * Read afresh for each delivery, since secrets and keys rotate: from the data directory in one
 * opening of it, or from a node's keys document and the secret given.
 */
async function materialOf(options: ListenOptions): Promise<Material> {
  const { dataDir, baseUrl, secret } = options;
  const given = secret === undefined ? [] : [secret];
  if (baseUrl !== undefined) {
    const res = await fetch(`${baseUrl.replace(/\/+$/, '')}/.well-known/path-keys`);
    return { secrets: given, keys: (await res.json()) as KeysDocument };
  }
  if (dataDir === undefined) return { secrets: given, keys: null };
  return withStore({ dataDir, store: null }, ({ tables }) => {
    const store = new NodeStore(tables);
    const overlapMs = DEFAULT_LIMITS.webhook_secret_overlap_ms;
    const kept = signingSecrets(store.webhookSecrets(), Date.now(), overlapMs);
    return {
      secrets: secret === undefined ? kept.map((s) => s.secret) : given,
      // The keys document the node publishes, from its own records (the member name is no part
      // of a webhook's check).
      keys: JSON.parse(keysDocument('', store.signingKeys())) as KeysDocument,
    };
  });
}

async function receive(
  req: IncomingMessage,
  res: ServerResponse,
  options: ListenOptions,
): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  const headers = req.headers as Record<string, string>;
  const { secrets, keys } = await materialOf(options);
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
