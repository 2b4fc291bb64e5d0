// Recovery spread over spare cores (src/actors/recovery.ts) over the real node and real LMDB: a
// node with one worker on a machine of more cores lends every other partition to a helper thread
// at start. After a kill -9 under writes every acknowledged receipt is recovered byte for byte,
// and a damaged record in a lent partition refuses the start as it does in any other (P14).
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { partitionOf } from '../src/log/log.js';
import { Client, createCredential, startNode, tempDir } from './support/harness.js';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { damageLastRecord } from './support/damage.js';

const { running, dirs } = cleanedUpAfterEach();
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const RECEIPTS = 120;
/** One worker owns all 256 partitions; one helper takes every other one where a core is spare. */
const LENT = availableParallelism() > 1 ? 128 : 0;

async function oneWorker(dataDir: string) {
  const node = await startNode({ dataDir, workers: 1 });
  running.push(node);
  const line = node.output().split('\n').find((l) => l.includes('"listening"'))!;
  return { node, recovery: JSON.parse(line).recovery };
}

async function receiptsThenKill9(dataDir: string, credential: ReturnType<typeof createCredential>) {
  const { node } = await oneWorker(dataDir);
  const client = new Client(node.baseUrl, credential);
  const issued = new Map<string, string>();
  for (let i = 0; i < RECEIPTS; i += 20) {
    const batch = await Promise.all(Array.from({ length: 20 }, (_, j) => client.post('/receipts', {
      issued_by: 'payee', via: EUR, received: { value: `${i + j}.00`, asset_type: 'fiat', asset_code: 'EUR' },
      rail_references: [{ type: 'book_entry', value: `BE-${i + j}` }],
    }, { timestamp: stamp() })));
    for (const res of batch) {
      expect(res.status, res.text).toBe(201);
      issued.set(res.json.reference, res.text);
    }
  }
  await node.kill9();
  return issued;
}

describe('recovery helpers at start', () => {
  it('after kill -9, one worker and its helper recover every receipt byte for byte', async () => {
    const dataDir = tempDir('path-helpers');
    dirs.push(dataDir);
    const credential = createCredential(dataDir, 'local', { local: true });
    const issued = await receiptsThenKill9(dataDir, credential);
    const { node, recovery } = await oneWorker(dataDir);
    expect(recovery.helped).toBe(LENT);
    expect(recovery.records).toBeGreaterThanOrEqual(RECEIPTS);
    const reader = new Client(node.baseUrl);
    for (const [reference, text] of issued) expect((await reader.get(`/receipts/${reference}`)).text).toBe(text);
  });

  it('a damaged record in a lent partition refuses the start, naming its partition and sequence', async () => {
    const dataDir = tempDir('path-helpers-damage');
    dirs.push(dataDir);
    const credential = createCredential(dataDir, 'local', { local: true });
    const issued = await receiptsThenKill9(dataDir, credential);
    // Partitions at odd positions are lent when there is a helper; with none, any will do.
    const partition = [...issued.keys()].map(partitionOf).find((p) => LENT === 0 || p % 2 === 1)!;
    const seq = await damageLastRecord(dataDir, partition);
    const started = await startNode({ dataDir, workers: 1 }).then((node) => node, (e: Error) => e);
    if (!(started instanceof Error)) await started.kill9();
    expect(started).toBeInstanceOf(Error);
    expect((started as Error).message).toContain(`log record ${seq} of partition ${partition} fails its checksum`);
  });
});
