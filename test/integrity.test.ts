// Log integrity over the real node and real LMDB (issue 28): a record taken out of the log is
// found, whether from its end (the partition's head names a record the log no longer holds) or
// from its middle (the next record no longer links to the one before it), and the start is
// refused with the way back (P14), the process exiting non-zero. Damage behind a snapshot, which
// no start reads, is found by the scrub while the node serves (a log line, the metric, `/readyz`
// degraded) and by `path-node verify` on the stopped directory.
import { spawn, spawnSync } from 'node:child_process';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { join } from 'node:path';
import { open } from 'lmdb';
import { describe, expect, it } from 'vitest';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { damageFirstRow, damageRecord, removeRecord } from './support/damage.js';
import { waitFor } from './support/wait.js';
import { CLI, Client, createCredential, startNode, tempDir, type Credential } from './support/harness.js';
import { partitionOf } from '../src/log/log.js';

const { running, dirs } = cleanedUpAfterEach();

interface Setup { dir: string; local: Credential; beta: Credential }

function setup(label: string): Setup {
  const dir = tempDir(label);
  dirs.push(dir);
  return { dir, local: createCredential(dir, 'local', { local: true }), beta: createCredential(dir, 'beta', { local: false }) };
}

/** A connection of `beta` under a ceiling of 20.00 EUR, consumed 20 times by 1.00: used up. */
async function usedUpConnection(baseUrl: string, { local, beta }: Setup): Promise<string> {
  const owner = new Client(baseUrl, local);
  const subject = await owner.post('/subjects', { subject_type: 'natural_person' }, { timestamp: stamp() });
  expect(subject.status, subject.text).toBe(201);
  const created = await owner.post('/connect/connections', {
    grantee: 'beta', subject_id: subject.json.id, capabilities: { payment_request: true }, mode: 'persistent_consent',
    max_single: '10', max_total: '20.00', currency: 'EUR', expires_at: new Date(Date.now() + 7_200_000).toISOString(),
  }, { timestamp: stamp() });
  expect(created.status, created.text).toBe(201);
  const reference = created.json.reference as string;
  const grantee = new Client(baseUrl, beta);
  for (let i = 0; i < 20; i++) {
    const consumed = await grantee.post(`/connect/connections/${reference}/consume`,
      { capability: 'payment_request', amount: '1.00', currency: 'EUR', operation_ref: `op-${i}` }, { timestamp: stamp() });
    expect(consumed.status, consumed.text).toBe(200);
  }
  const over = await grantee.post(`/connect/connections/${reference}/consume`,
    { capability: 'payment_request', amount: '1.00', currency: 'EUR', operation_ref: 'op-over' }, { timestamp: stamp() });
  expect(over.status, over.text).toBe(403);
  return reference;
}

/** `serve` on `dir` run to its end: its exit code and what it printed. */
function serveUntilExit(dir: string): Promise<{ code: number | null; signal: string | null; output: string }> {
  const args = [CLI, 'serve', '--data-dir', dir, '--port', '0', '--external-port', '0', '--workers', '2'];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH_ADMIN_PORT: '0' } });
  let output = '';
  child.stdout.on('data', (d: Buffer) => { output += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { output += d.toString(); });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) => child.on('close', (code, signal) => {
    clearTimeout(timer);
    resolve({ code, signal, output });
  }));
}

describe('issue 28: a record taken out of the log refuses the start', () => {
  it('the last record of a connection taken off after kill -9: the head names it, the start is refused', async () => {
    const set = setup('removed-tail');
    const node = await startNode({ dataDir: set.dir });
    running.push(node);
    const reference = await usedUpConnection(node.baseUrl, set);
    await node.kill9();
    const partition = partitionOf(reference);
    const seq = await removeRecord(set.dir, partition);

    const refused = await serveUntilExit(set.dir);
    expect(refused.output).not.toContain('"msg":"listening"');
    expect(refused.code).not.toBe(0);
    expect(refused.signal, refused.output).toBeNull();
    expect(refused.output).toContain(`the head of partition ${partition} names record ${seq}, but its log ends at record ${seq - 1}`);
    expect(refused.output).toContain('restore the data directory from the latest backup');
  });

  it('a record taken from the middle of a partition: the next one does not link, the start is refused', async () => {
    const set = setup('removed-middle');
    const node = await startNode({ dataDir: set.dir });
    running.push(node);
    const reference = await usedUpConnection(node.baseUrl, set);
    await node.kill9();
    const partition = partitionOf(reference);
    // The connection's partition holds its creation and 20 consumes at least: 10 is in the middle.
    expect(await removeRecord(set.dir, partition, 10)).toBe(10);

    const refused = await serveUntilExit(set.dir);
    expect(refused.output).not.toContain('"msg":"listening"');
    expect(refused.code).not.toBe(0);
    expect(refused.signal, refused.output).toBeNull();
    expect(refused.output).toContain(`log record 11 of partition ${partition} does not follow record 9 before it`);
    expect(refused.output).toContain('restore the data directory from the latest backup');
  });

  it('a data directory of a build before the chain (records, no layout recorded) is refused as such', async () => {
    const set = setup('layout');
    const node = await startNode({ dataDir: set.dir });
    running.push(node);
    const created = await new Client(node.baseUrl, set.local).post('/subjects', { subject_type: 'natural_person' }, { timestamp: stamp() });
    expect(created.status, created.text).toBe(201);
    expect(await node.stop()).toBe(0);
    const env = open({ path: join(set.dir, 'node.mdb'), maxDbs: 32, compression: false });
    expect(await env.openDB({ name: 'meta' }).remove('log_format')).toBe(true);
    await env.flushed;
    await env.close();

    const refused = await serveUntilExit(set.dir);
    expect(refused.code).not.toBe(0);
    expect(refused.signal, refused.output).toBeNull();
    expect(refused.output).toContain('the log was written in layout 1, by an earlier build');
  });
});

/** `path-node verify` on `dir`: its exit code and the JSON lines it printed. */
function verify(dir: string): { code: number | null; lines: any[]; stderr: string } {
  const run = spawnSync(process.execPath, [CLI, 'verify', '--data-dir', dir], { encoding: 'utf8' });
  const lines = run.stdout.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
  return { code: run.status, lines, stderr: run.stderr };
}

async function damagedRecordsGauge(adminPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  type Family = { name: string; metrics: { value: string }[] };
  const family = (parsePrometheusTextFormat(text) as Family[]).find((f) => f.name === 'path_log_damaged_records');
  if (family === undefined) throw new Error('no path_log_damaged_records');
  return Number(family.metrics[0]!.value);
}

describe('issue 28: damage behind a snapshot', () => {
  it('the node serves; the scrub finds it: an error line by partition and seq, the metric, /readyz degraded; verify exits non-zero', async () => {
    const set = setup('behind-snapshot');
    let node = await startNode({ dataDir: set.dir });
    running.push(node);
    const reference = await usedUpConnection(node.baseUrl, set);
    const partition = partitionOf(reference);
    // The orderly stop snapshots every partition written to: the snapshot covers every record.
    expect(await node.stop()).toBe(0);
    const sound = verify(set.dir);
    expect(sound.code, sound.stderr).toBe(0);
    expect(sound.lines.at(-1).verified).toMatchObject({ sound: true, damaged: 0 });
    expect(sound.lines.at(-1).verified.records).toBeGreaterThanOrEqual(21);
    expect(sound.lines.at(-1).verified.snapshots).toBeGreaterThan(0);

    // A byte of record 2's value and a byte of record 4's checksum, both behind the snapshot.
    await damageRecord(set.dir, partition, 2);
    await damageRecord(set.dir, partition, 4, 0);
    node = await startNode({ dataDir: set.dir });
    running.push(node);
    const read = await new Client(node.baseUrl, set.local).get(`/connect/connections/${reference}`, { timestamp: stamp() });
    expect(read.status, read.text).toBe(200);
    expect(read.json.consumed_operations).toBe(20);

    await waitFor('the scrub to count both', async () => (await damagedRecordsGauge(node.adminPort)) === 2);
    const ready = await fetch(`http://127.0.0.1:${node.adminPort}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'degraded' });
    // The log is written asynchronously: the count can be scraped before the second line is out.
    const scrubLines = () => node.output().split('\n').filter((l) => l.includes('"msg":"the scrub found damage in the log"'));
    await waitFor('both error lines', () => scrubLines().length >= 2);
    const found = scrubLines().map((l) => JSON.parse(l));
    expect(found.map((l) => [l.item, l.partition, l.seq])).toEqual([['record', partition, 2], ['record', partition, 4]]);
    expect(found[0].detail).toContain(`log record 2 of partition ${partition} fails its checksum`);
    expect(JSON.stringify(found)).not.toContain(reference);

    const running_ = verify(set.dir);
    expect(running_.code).toBe(2);
    expect(running_.stderr).toContain('stop it first, or verify a backup');
    expect(await node.stop()).toBe(0);
    const damaged = verify(set.dir);
    expect(damaged.code).toBe(1);
    expect(damaged.lines.slice(0, -1).map((l) => [l.damaged.item, l.damaged.partition, l.damaged.seq])).toEqual(
      [['record', partition, 2], ['record', partition, 4]]);
    expect(damaged.lines.at(-1).verified).toMatchObject({ sound: false, damaged: 2 });
  });

  it('verify names a record taken out of a stopped directory, the usage row it leaves ahead, a damaged row', async () => {
    const set = setup('verify-removed');
    const node = await startNode({ dataDir: set.dir });
    running.push(node);
    const reference = await usedUpConnection(node.baseUrl, set);
    expect(await node.stop()).toBe(0);
    const partition = partitionOf(reference);
    const last = await removeRecord(set.dir, partition);
    const key = await damageFirstRow(set.dir, 'usage');
    const damaged = verify(set.dir);
    expect(damaged.code).toBe(1);
    const items = damaged.lines.slice(0, -1).map((l) => l.damaged);
    expect(items).toContainEqual(expect.objectContaining({ item: 'snapshot', partition, seq: last }));
    expect(items).toContainEqual(expect.objectContaining({ item: 'head', partition, seq: last }));
    expect(items).toContainEqual(expect.objectContaining({ item: 'row', table: 'usage', key, partition: null }));
    // The last consume's usage row was written with the record taken out: it is ahead of the log.
    expect(items).toContainEqual(expect.objectContaining({ item: 'row', table: 'usage', partition, seq: last }));
  });
});

