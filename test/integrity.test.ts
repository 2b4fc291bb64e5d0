// Log integrity over the real node and real LMDB (issue 28): a record taken out of the log is
// found, whether from its end (the partition's head names a record the log no longer holds) or
// from its middle (the next record no longer links to the one before it), and the start is
// refused with the way back (P14), the process exiting non-zero.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { open } from 'lmdb';
import { describe, expect, it } from 'vitest';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { removeRecord } from './support/damage.js';
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
function serveUntilExit(dir: string): Promise<{ code: number | null; output: string }> {
  const args = [CLI, 'serve', '--data-dir', dir, '--port', '0', '--external-port', '0', '--workers', '2'];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH_ADMIN_PORT: '0' } });
  let output = '';
  child.stdout.on('data', (d: Buffer) => { output += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { output += d.toString(); });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) => child.on('close', (code) => {
    clearTimeout(timer);
    resolve({ code, output });
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
    expect(refused.code).not.toBeNull();
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
    expect(refused.code).not.toBeNull();
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
    expect(refused.code).not.toBeNull();
    expect(refused.output).toContain('the log was written in layout 1, by an earlier build');
  });
});
