// Recovery spread over spare cores (src/actors/recovery.ts) over the real node and real LMDB: a
// node with one worker on a machine of more cores shares the claims of its partitions with a
// helper thread at start, the helper given the last partition before any claim. After a kill -9
// under writes every acknowledged receipt is recovered byte for byte, and a damaged record in the
// helper's partition refuses the start as it does in any other (P14).
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { PARTITION_COUNT, partitionOf } from '../src/log/log.js';
import { Client, createCredential, startNode, tempDir } from './support/harness.js';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { damageLastRecord } from './support/damage.js';

const { running, dirs } = cleanedUpAfterEach();
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const RECEIPTS = 120;
/** One worker owns all 256 partitions; a helper claims some of them where a core is spare. */
const SPARE = availableParallelism() > 1;
/** The partition a helper folds first (the worker's last), where there is one. */
const GIVEN = PARTITION_COUNT - 1;
/** Receipts issued at most while waiting for one in a given partition (1 in 256 is). */
const RECEIPTS_MAX = 4000;

/** A data directory of its own, removed after the test, with the operator's credential. */
function freshDir(name: string) {
  const dataDir = tempDir(name);
  dirs.push(dataDir);
  return { dataDir, credential: createCredential(dataDir, 'local', { local: true }) };
}

/** Every receipt issued is served byte for byte as it was answered. */
async function expectServed(node: { baseUrl: string }, issued: ReadonlyMap<string, string>) {
  const reader = new Client(node.baseUrl);
  for (const [reference, text] of issued) expect((await reader.get(`/receipts/${reference}`)).text).toBe(text);
}

/** A node of one worker, once every partition is folded: what recovery read, in all. */
async function oneWorker(dataDir: string) {
  const node = await startNode({ dataDir, workers: 1 });
  running.push(node);
  return { node, recovery: (await node.line('recovered')).recovery };
}

/** Receipts, RECEIPTS at least and until one is in `partition` if given; then a kill -9. */
async function receiptsThenKill9(
  dataDir: string, credential: ReturnType<typeof createCredential>, partition?: number,
) {
  const { node, issued } = await receiptsOn(dataDir, credential, partition);
  await node.kill9();
  return issued;
}

async function receiptsOn(
  dataDir: string, credential: ReturnType<typeof createCredential>, partition?: number,
) {
  const { node } = await oneWorker(dataDir);
  const client = new Client(node.baseUrl, credential);
  const issued = new Map<string, string>();
  const reached = () => partition === undefined || [...issued.keys()].some((r) => partitionOf(r) === partition);
  for (let i = 0; (i < RECEIPTS || !reached()) && i < RECEIPTS_MAX; i += 20) {
    const batch = await Promise.all(Array.from({ length: 20 }, (_, j) => client.post('/receipts', {
      issued_by: 'payee', via: EUR, received: { value: `${i + j}.00`, asset_type: 'fiat', asset_code: 'EUR' },
      rail_references: [{ type: 'book_entry', value: `BE-${i + j}` }],
    }, { timestamp: stamp() })));
    for (const res of batch) {
      expect(res.status, res.text).toBe(201);
      issued.set(res.json.reference, res.text);
    }
  }
  return { node, issued };
}

describe('recovery helpers at start', () => {
  it('after kill -9, one worker and its helper recover every receipt byte for byte', async () => {
    const { dataDir, credential } = freshDir('path-helpers');
    const issued = await receiptsThenKill9(dataDir, credential);
    const { node, recovery } = await oneWorker(dataDir);
    // The helper folds at least the partition it is given; the claims share out the others.
    if (SPARE) expect(recovery.helped).toBeGreaterThan(0);
    else expect(recovery.helped).toBe(0);
    expect(recovery.records).toBeGreaterThanOrEqual(RECEIPTS);
    await expectServed(node, issued);
  });

  it('after a SIGTERM, partitions that a helper claims with nothing after their snapshot are folded by the worker', async () => {
    const { dataDir, credential } = freshDir('path-helpers-snapshots');
    const { node: first, issued } = await receiptsOn(dataDir, credential);
    expect(await first.stop()).toBe(0);
    const { node, recovery } = await oneWorker(dataDir);
    // The shutdown snapshotted every partition written to, and no record follows any snapshot:
    // a helper leaves those to the worker, and the partitions never written to as well.
    const written = new Set([...issued.keys()].map(partitionOf));
    expect(recovery.snapshots).toBeGreaterThanOrEqual(written.size);
    expect(recovery.records).toBe(0);
    expect(recovery.helped).toBe(0);
    await expectServed(node, issued);
  });

  it('after a kill -9 with a record after a snapshot, a helper folds that partition and leaves the rest', async () => {
    const { dataDir, credential } = freshDir('path-helpers-after-snapshot');
    // Pending receipts until one is in the helper's first partition, then a SIGTERM: every
    // partition written to is snapshotted, no record after any snapshot.
    const { node: first } = await oneWorker(dataDir);
    const payer = new Client(first.baseUrl, credential);
    let target: string | undefined;
    for (let i = 0; target === undefined && i < RECEIPTS_MAX; i += 20) {
      const batch = await Promise.all(Array.from({ length: 20 }, () => payer.post('/receipts', { issued_by: 'payer', via: EUR }, { timestamp: stamp() })));
      for (const res of batch) expect(res.status, res.text).toBe(201);
      target = batch.map((res) => res.json.reference as string).find((r) => !SPARE || partitionOf(r) === GIVEN);
    }
    if (target === undefined) throw new Error(`no receipt in partition ${GIVEN}`);
    expect(await first.stop()).toBe(0);
    // One record after that partition's snapshot, and a kill -9.
    const { node: second } = await oneWorker(dataDir);
    const moved = await new Client(second.baseUrl, credential).post(`/receipts/${target}/transitions`, { to: 'failed', reason_code: 'expired' }, { timestamp: stamp() });
    expect(moved.status, moved.text).toBe(201);
    await second.kill9();

    const { node, recovery } = await oneWorker(dataDir);
    expect(recovery.records).toBe(1);
    // The helper folds the one partition with a record to replay, its first, and leaves the
    // others (snapshots with nothing after them, or nothing at all) to the worker.
    expect(recovery.helped).toBe(SPARE ? 1 : 0);
    const read = await new Client(node.baseUrl).get(`/receipts/${target}`);
    expect(read.status).toBe(200);
    expect(read.json.status).toBe('failed');
  });

  it('answers as soon as the records are checked: transitions sent at once act on the recovered receipts', async () => {
    const { dataDir, credential } = freshDir('path-helpers-at-once');
    const { node: first } = await oneWorker(dataDir);
    const payer = new Client(first.baseUrl, credential);
    const pending = await Promise.all(Array.from({ length: RECEIPTS }, () => payer.post('/receipts', { issued_by: 'payer', via: EUR }, { timestamp: stamp() })));
    for (const res of pending) expect(res.status, res.text).toBe(201);
    const issued = new Set(pending.map((res) => res.json.reference as string));
    await first.kill9();
    const node = await startNode({ dataDir, workers: 1 });
    running.push(node);
    // Sent on the listening line, while partitions are still being folded (each folded for the
    // first command that needs it): a transition is valid only from the receipt's state.
    const client = new Client(node.baseUrl, credential);
    const moved = await Promise.all([...issued].map((reference) => client.post(`/receipts/${reference}/transitions`, {
      to: 'settled', rail_references: [{ type: 'book_entry', value: `BE-${reference}` }],
    }, { timestamp: stamp() })));
    for (const res of moved) expect(res.status, res.text).toBe(201);
    const listening = await node.line('listening');
    const { recovery } = await node.line('recovered');
    // The listening line counts the records checked; the recovered line, those folded: the same.
    expect(listening.recovery.records).toBeGreaterThanOrEqual(RECEIPTS);
    expect(recovery.records).toBe(listening.recovery.records);
    // None folded into memory: receipts come back from their `states` rows (issue 33).
    expect(recovery.aggregates).toBe(0);
    const reader = new Client(node.baseUrl);
    for (const reference of issued) expect((await reader.get(`/receipts/${reference}`)).json.status).toBe('settled');
  });

  it('a damaged record in the partition a helper checks first refuses the start, naming its partition and sequence', async () => {
    const { dataDir, credential } = freshDir('path-helpers-damage');
    // The helper checks from the worker's last partition; with no helper, any will do.
    const issued = await receiptsThenKill9(dataDir, credential, SPARE ? GIVEN : undefined);
    const partition = [...issued.keys()].map(partitionOf).find((p) => !SPARE || p === GIVEN);
    if (partition === undefined) throw new Error(`no receipt in partition ${GIVEN} of ${issued.size}`);
    const seq = await damageLastRecord(dataDir, partition);
    const started = await startNode({ dataDir, workers: 1 }).then((node) => node, (e: Error) => e);
    if (!(started instanceof Error)) await started.kill9();
    expect(started).toBeInstanceOf(Error);
    expect((started as Error).message).toContain(`log record ${seq} of partition ${partition} fails its checksum`);
  });
});
