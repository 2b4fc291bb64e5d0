// Crash safety over the real process and real LMDB: kill -9 under write load, then restart:
// every acknowledged receipt is there, byte for byte, and verifies (P14). SIGTERM drains, flushes,
// exits 0 and leaves snapshots for a quick start (P15).
import { afterAll, describe, expect, it } from 'vitest';
import { Client, createCredential, publishedKey, removeDir, startNode, tempDir } from './support/harness.js';
import { verifiesWith } from './support/verify.js';
import { waitFor } from './support/wait.js';
import { DATA_FILE_AHEAD_BYTES, VERIFY_CHUNK_MAX, WORKER_MESSAGE_CHUNK_MAX } from '../src/config.js';
import { ENV_FILE } from '../src/log/lmdb-log.js';
import { lastPageEnd } from './support/data-file.js';
import { statSync } from 'node:fs';
import { join } from 'node:path';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const body = (i: number) => ({
  issued_by: 'payee', via: EUR, received: { value: `${i}.00`, asset_type: 'fiat', asset_code: 'EUR' },
  rail_references: [{ type: 'book_entry', value: `BE-${i}` }],
});
const dirs: string[] = [];
afterAll(() => { for (const d of dirs) removeDir(d); });

/** A node on a data directory of its own, and a client signing as the operator's credential. */
async function writingNode(workers?: number) {
  const dataDir = tempDir();
  dirs.push(dataDir);
  const credential = createCredential(dataDir, 'local', { local: true });
  const node = await startNode({ dataDir, ...(workers === undefined ? {} : { workers }) });
  return { dataDir, credential, node, client: new Client(node.baseUrl, credential) };
}

describe('crash safety', () => {
  it('kill -9 under write load loses no acknowledged receipt', async () => {
    const { dataDir, node, client } = await writingNode(2);
    const acknowledged = new Map<string, string>();
    let stop = false;
    let serverErrors = 0;
    let counter = 0;
    const writer = async () => {
      while (!stop) {
        try {
          const res = await client.post('/receipts', body(counter++));
          if (res.status === 201) acknowledged.set(res.json.reference, res.text);
          else if (res.status >= 500) serverErrors++;
        } catch {
          return; // the connection died with the process: that answer was never acknowledged
        }
      }
    };
    const writers = Array.from({ length: 16 }, writer);
    // Killed while writes are in flight, once at least one was acknowledged: how many there are
    // by then depends on the machine's load, and every one of them is checked, whatever their
    // number (a test asserts behaviour, never speed).
    await waitFor('a first acknowledged receipt', () => acknowledged.size > 0, 30_000);
    await new Promise((r) => setTimeout(r, 1500));
    await node.kill9();
    stop = true;
    await Promise.all(writers);
    expect(acknowledged.size).toBeGreaterThan(0);
    expect(serverErrors).toBe(0);
    // The node kept its data file past its last page (growDataFile): the start after the kill
    // reads the file's header, not every page in use.
    const file = join(dataDir, ENV_FILE);
    expect(statSync(file).size - lastPageEnd(file)).toBeGreaterThanOrEqual(DATA_FILE_AHEAD_BYTES / 2);

    const restarted = await startNode({ dataDir, workers: 3 });
    try {
      const listening = JSON.parse(restarted.output().split('\n').find((l) => l.includes('"listening"'))!);
      expect(listening.data_file_every_page_read_ms).toBeUndefined();
      const reader = new Client(restarted.baseUrl);
      const key = await publishedKey(restarted.baseUrl);
      for (const [reference, text] of acknowledged) {
        const res = await reader.get(`/receipts/${reference}`);
        expect(res.status).toBe(200);
        expect(res.text).toBe(text);
        expect(verifiesWith(res.json, key)).toBe(true);
      }
    } finally {
      await restarted.stop();
    }
  });

  it('SIGTERM drains in-flight writes, exits 0, and the next start reads snapshots', async () => {
    const { dataDir, node, client } = await writingNode();
    const created = await Promise.all(Array.from({ length: 40 }, (_, i) => client.post('/receipts', body(i))));
    expect(created.every((r) => r.status === 201)).toBe(true);
    const inFlight = Array.from({ length: 20 }, (_, i) => client.post('/receipts', body(100 + i)).catch(() => null));
    const code = await node.stop();
    expect(code).toBe(0);
    const answered = (await Promise.all(inFlight)).filter((r) => r !== null && r.status === 201);

    const restarted = await startNode({ dataDir });
    try {
      const recovery = JSON.parse(restarted.output().split('\n').find((l) => l.includes('"listening"'))!).recovery;
      expect(recovery.snapshots).toBeGreaterThan(0);
      expect(recovery.records).toBe(0);
      const reader = new Client(restarted.baseUrl);
      for (const r of [...created, ...answered]) expect((await reader.get(`/receipts/${r!.json.reference}`)).text).toBe(r!.text);
    } finally {
      await restarted.stop();
    }
  });

  it('calls sent in several chunks: each durable when answered, its retry replays it', async () => {
    const { dataDir, credential, node, client } = await writingNode(1);
    // More calls at once than one chunk of signature checks or one message to the worker holds.
    const count = 3 * Math.max(VERIFY_CHUNK_MAX, WORKER_MESSAGE_CHUNK_MAX) + 5;
    const key = (i: number) => `chunked-${i}`;
    const post = (i: number) => client.post('/receipts', body(i), { idempotencyKey: key(i) });
    const first = await Promise.all(Array.from({ length: count }, (_, i) => post(i)));
    expect(first.map((r) => r.status)).toEqual(first.map(() => 201));
    expect(new Set(first.map((r) => r.json.reference)).size).toBe(count);
    // Killed at once after the last answer: whatever was answered was committed before it.
    await node.kill9();

    const restarted = await startNode({ dataDir, workers: 1 });
    try {
      const reader = new Client(restarted.baseUrl);
      const issuer = await publishedKey(restarted.baseUrl);
      const again = new Client(restarted.baseUrl, credential);
      for (let i = 0; i < count; i++) {
        const read = await reader.get(`/receipts/${first[i]!.json.reference}`);
        expect(read.text).toBe(first[i]!.text);
        expect(verifiesWith(read.json, issuer)).toBe(true);
        const retry = await again.post('/receipts', body(i), { idempotencyKey: key(i) });
        expect(retry.status).toBe(201);
        expect(retry.headers.get('path-idempotent-replayed')).toBe('true');
        expect(retry.text).toBe(first[i]!.text);
      }
    } finally {
      await restarted.stop();
    }
  });
});
