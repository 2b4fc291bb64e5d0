// P11 as amended: every delivery carries `v1` (HMAC-SHA256 with the node's `whsec_` secret)
// beside `v1a` (Ed25519 with the operator's key), so the Standard Webhooks library — which
// checks only `v1` — verifies real deliveries. The secret is printed and rotated by the command
// line while the node runs; a rotated secret keeps signing beside the new one for the overlap.
// Discovery names the `v1a` key as `webhook_public_key` (`whpk_` + base64 of the raw key).
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client, createCredential, publishedKey, removeDir, runCli, startNode, tempDir, type NodeProcess } from './support/harness.js';
import { cleanedUpAfterEach } from './support/lifecycle.js';
import { Receiver, type Delivery } from './support/receiver.js';
import { waitFor } from './support/wait.js';

ed.hashes.sha512 = sha512;

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '40.00', asset_type: 'fiat', asset_code: 'EUR' };

const cleanup = cleanedUpAfterEach();
const receiver = new Receiver();
beforeAll(async () => { await receiver.open(); });
afterAll(async () => { await receiver.close(); });
afterEach(() => { receiver.deliveries.splice(0); });

async function nodeWithReceiver(env: Record<string, string> = {}) {
  const dataDir = tempDir('path-whsec');
  cleanup.dirs.push(dataDir);
  const own = createCredential(dataDir, 'local', { local: true });
  const b = createCredential(dataDir, 'beta', { local: false });
  const node = await startNode({ dataDir, args: ['--dev', '--webhook-urls', receiver.url('/ops')], env });
  cleanup.running.push(node);
  return { node, dataDir, local: new Client(node.baseUrl, own), beta: new Client(node.baseUrl, b) };
}

/** A request created and marked paid: one `request.paid` delivery to the operator endpoint. */
async function paidDelivery(local: Client, beta: Client): Promise<Delivery> {
  const created = await local.post('/requests', { accepts: [EUR], amount: AMOUNT });
  expect(created.status, created.text).toBe(201);
  const paid = await beta.post(`/requests/${created.json.reference}/paid`);
  expect(paid.status, paid.text).toBe(200);
  return waitFor('the request.paid delivery', () =>
    receiver.deliveries.find((d) => d.body?.event === 'request.paid' && d.body?.data?.reference === created.json.reference));
}

const secretOf = (dataDir: string): string => JSON.parse(runCli(['webhooks', 'secret', '--data-dir', dataDir])).secret;

/** The Standard Webhooks library's own verification of `v1`; true when it accepts. */
function libraryVerifies(secret: string, d: Delivery): boolean {
  try {
    new Webhook(secret).verify(d.raw, d.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

async function waitForRotation(beta: Client, local: Client, secret: string): Promise<Delivery> {
  return waitFor('a delivery signed with the rotated secret', async () => {
    const d = await paidDelivery(local, beta);
    return libraryVerifies(secret, d) ? d : undefined;
  });
}

describe('P11 v1: the Standard Webhooks library verifies real deliveries', () => {
  let node: NodeProcess;
  let dataDir: string;
  let local: Client;
  let beta: Client;
  beforeAll(async () => {
    ({ node, dataDir, local, beta } = await nodeWithReceiver());
    // This node serves the whole block: the per-test clean-up must not take it or its directory.
    cleanup.running.splice(0);
    cleanup.dirs.splice(0);
  });
  afterAll(async () => {
    await node.stop();
    removeDir(dataDir);
  });

  it('a delivery verifies with the secret `webhooks secret` prints, and not with any other', async () => {
    const secret = secretOf(dataDir);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    const d = await paidDelivery(local, beta);
    const schemes = String(d.headers['webhook-signature']).split(' ').map((s) => s.split(',')[0]);
    expect(schemes).toEqual(['v1', 'v1a']);
    expect(libraryVerifies(secret, d)).toBe(true);
    const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    expect(libraryVerifies(other, d)).toBe(false);
    // A changed body is refused by the library: the signature covers it.
    expect(libraryVerifies(secret, { ...d, raw: d.raw.replace('"request.paid"', '"request.paid" ') })).toBe(false);
  });

  it('discovery names the v1a key as webhook_public_key, and it verifies v1a', async () => {
    const doc = (await (await fetch(`${node.baseUrl}/.well-known/path-configuration`)).json()) as { webhook_public_key: string };
    expect(doc.webhook_public_key).toMatch(/^whpk_/);
    const raw = Buffer.from(doc.webhook_public_key.slice(5), 'base64');
    expect(raw.toString('hex')).toBe(await publishedKey(node.baseUrl));
    const d = await paidDelivery(local, beta);
    const v1a = String(d.headers['webhook-signature']).split(' ').find((s) => s.startsWith('v1a,'))!;
    const content = Buffer.from(`${d.headers['webhook-id']}.${d.headers['webhook-timestamp']}.${d.raw}`);
    expect(ed.verify(Buffer.from(v1a.slice(4), 'base64'), content, raw, { zip215: false })).toBe(true);
  });

  it('rotate-secret while the node runs: deliveries verify with the new secret and, during the overlap, the old one', async () => {
    const old = secretOf(dataDir);
    const rotated = JSON.parse(runCli(['webhooks', 'rotate-secret', '--data-dir', dataDir]));
    expect(rotated.secret).not.toBe(old);
    expect(Date.parse(rotated.previous_signs_until) - Date.now()).toBeGreaterThan(23 * 3600_000);
    expect(secretOf(dataDir)).toBe(rotated.secret);
    const d = await waitForRotation(beta, local, rotated.secret);
    expect(libraryVerifies(old, d)).toBe(true);
    expect(String(d.headers['webhook-signature']).split(' ').filter((s) => s.startsWith('v1,'))).toHaveLength(2);
  });

  it('after a key rotation, discovery names the new key', async () => {
    const before = (await (await fetch(`${node.baseUrl}/.well-known/path-configuration`)).json()) as { webhook_public_key: string };
    const rotated = JSON.parse(runCli(['keys', 'rotate', '--data-dir', dataDir]));
    const expected = `whpk_${Buffer.from(rotated.public_key, 'hex').toString('base64')}`;
    expect(expected).not.toBe(before.webhook_public_key);
    await waitFor('discovery to name the new key', async () => {
      const doc = (await (await fetch(`${node.baseUrl}/.well-known/path-configuration`)).json()) as { webhook_public_key: string };
      return doc.webhook_public_key === expected;
    });
  });
});

describe('P11 v1: a rotated secret stops signing once the overlap has passed', () => {
  it('with a 1 ms overlap the old secret no longer verifies after rotation; the new one does', async () => {
    const { dataDir, local, beta } = await nodeWithReceiver({ PATH_LIMIT_WEBHOOK_SECRET_OVERLAP_MS: '1' });
    const old = secretOf(dataDir);
    expect(libraryVerifies(old, await paidDelivery(local, beta))).toBe(true);
    const rotated = JSON.parse(runCli(['webhooks', 'rotate-secret', '--data-dir', dataDir]));
    const d = await waitForRotation(beta, local, rotated.secret);
    expect(libraryVerifies(old, d)).toBe(false);
    expect(String(d.headers['webhook-signature']).split(' ').filter((s) => s.startsWith('v1,'))).toHaveLength(1);
  });
});
