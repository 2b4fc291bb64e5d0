// Read-your-writes across the node's threads, over real HTTP and real LMDB: the front end answers
// public reads through a read transaction it holds across requests (lmdb-log.ts), and a write
// committed on a shard's worker thread is answered only after the front end has renewed it, so
// a client that got a write's answer reads that write at once, from any connection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Client,
  createCredential,
  removeDir,
  startNode,
  tempDir,
  type NodeProcess,
} from './support/harness.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };

let node: NodeProcess;
let dataDir: string;
let local: Client;
let anyone: Client;

beforeAll(async () => {
  dataDir = tempDir();
  const own = createCredential(dataDir, 'local', { local: true });
  // Two workers: the receipts below fall on both, so commits come from two threads.
  node = await startNode({ dataDir, workers: 2 });
  local = new Client(node.baseUrl, own);
  anyone = new Client(node.baseUrl);
});

afterAll(async () => {
  await node?.stop();
  removeDir(dataDir);
});

describe('read-your-writes on public reads', () => {
  it('a public read right after a move answers the moved receipt, never the earlier', async () => {
    for (let i = 0; i < 12; i++) {
      const issued = await local.post('/receipts', { issued_by: 'payer', via: EUR });
      expect(issued.status).toBe(201);
      const reference = issued.json.reference as string;
      // Read first, so the front end holds a read transaction from before the move.
      const before = await anyone.get(`/receipts/${reference}`);
      expect(before.json.status).toBe('pending');
      const moves = await anyone.get(`/receipts/${reference}/transitions`);
      expect(moves.json.transitions).toHaveLength(1);

      const settled = await local.post(`/receipts/${reference}/transitions`, {
        to: 'settled',
        rail_references: [{ type: 'book_entry', value: `late-${i}` }],
      });
      expect(settled.status, settled.text).toBe(201);
      const read = await anyone.get(`/receipts/${reference}`);
      expect(read.status).toBe(200);
      expect(read.text).toBe(settled.text);
      const listed = await anyone.get(`/receipts/${reference}/transitions`);
      expect(listed.json.transitions.map((t: { to: string }) => t.to)).toEqual([
        'pending',
        'settled',
      ]);

      const reversed = await local.post(`/receipts/${reference}/transitions`, { to: 'reversed' });
      expect(reversed.status, reversed.text).toBe(201);
      expect((await anyone.get(`/receipts/${reference}`)).text).toBe(reversed.text);
    }
  });

  it('a receipt is readable by anyone as soon as its issuer has the answer', async () => {
    const issued = await Promise.all(
      // Bodies differ: two equal requests signed in the same second are one replayed request.
      Array.from({ length: 16 }, (_, i) =>
        local.post('/receipts', {
          issued_by: 'payer',
          via: EUR,
          rail_references: [{ type: 'book_entry', value: `batch-${i}` }],
        }),
      ),
    );
    for (const answer of issued) {
      expect(answer.status, answer.text).toBe(201);
      const read = await anyone.get(`/receipts/${answer.json.reference as string}`);
      expect(read.text).toBe(answer.text);
    }
  });
});
