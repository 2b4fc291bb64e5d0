// STYLE 12 over the real node: "when a receipt naming an instruction commits, the instruction is
// used" survives a kill -9 between the two commits. Receipts are posted at once with idempotency
// keys, the node is killed mid-flight, and after the restart every receipt is retried with its
// key: whether it was answered, replayed or made now, its instruction must be used.
import { describe, expect, it } from 'vitest';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { Client, createCredential, startNode, tempDir, type NodeProcess } from './support/harness.js';

const BOOK = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const RECEIPTS = 120;

const { running, dirs } = cleanedUpAfterEach();

async function boot(dir: string): Promise<NodeProcess> {
  const node = await startNode({ dataDir: dir, args: ['--workers', '2'] });
  running.push(node);
  return node;
}

/** A payee address with a live book EUR target, and `count` open instructions for it. */
async function openInstructions(client: Client, count: number): Promise<string[]> {
  const subject = await client.post('/subjects', { subject_type: 'legal_entity' }, { timestamp: stamp() });
  const address = await client.post('/addresses', { subject_id: subject.json.id, profile: 'directory', discoverability: 'network' }, { timestamp: stamp() });
  expect(address.status, address.text).toBe(201);
  const target = await client.post(`/addresses/${address.json.id}/targets`,
    { ...BOOK, account_kind: 'own_ledger', account_ref: 'acct-eur-1', is_default: true }, { timestamp: stamp() });
  expect(target.status, target.text).toBe(201);
  const references: string[] = [];
  for (let i = 0; i < count; i += 20) {
    const batch = await Promise.all(Array.from({ length: Math.min(20, count - i) }, () =>
      client.post('/instructions', { address: address.json.address, via: BOOK }, { timestamp: stamp() })));
    for (const res of batch) {
      expect(res.status, res.text).toBe(201);
      references.push(res.json.reference);
    }
  }
  return references;
}

const receiptFor = (instruction: string) => ({
  issued_by: 'payee', instruction, via: BOOK, received: { value: '10.00', asset_type: 'fiat', asset_code: 'EUR' },
  rail_references: [{ type: 'book_entry', value: `BE-${instruction.slice(4, 12)}` }],
});

describe('STYLE 12: a follow-up survives a crash between the two commits', () => {
  it('kill -9 under concurrent receipts naming instructions: after the restart and the retries, every instruction is used', async () => {
    const dir = tempDir('follow-ups');
    dirs.push(dir);
    const credential = createCredential(dir, 'local', { local: true });
    let node = await boot(dir);
    let client = new Client(node.baseUrl, credential);
    const instructions = await openInstructions(client, RECEIPTS);

    // Every receipt at once; the node dies while they are being decided and committed.
    const inFlight = instructions.map((instruction, i) =>
      client.post('/receipts', receiptFor(instruction), { timestamp: stamp(), idempotencyKey: `receipt-${i}` }).catch(() => null));
    await new Promise((r) => setTimeout(r, 40));
    await node.kill9();
    await Promise.all(inFlight);

    node = await boot(dir);
    client = new Client(node.baseUrl, credential);
    for (let i = 0; i < instructions.length; i += 20) {
      const retries = await Promise.all(instructions.slice(i, i + 20).map((instruction, j) =>
        client.post('/receipts', receiptFor(instruction), { timestamp: stamp(), idempotencyKey: `receipt-${i + j}` })));
      for (const res of retries) expect(res.status, res.text).toBe(201);
    }
    const reads = await Promise.all(instructions.map((instruction) => client.get(`/instructions/${instruction}`)));
    const open = reads.filter((res) => res.status !== 410 || res.json.error.code !== 'path.instruction.used');
    expect(open.map((res) => res.text)).toEqual([]);
  });
});
