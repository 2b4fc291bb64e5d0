// Backups while the node runs: `path-node backup` makes LMDB's own consistent copy, and a node
// started on the copy answers every write acknowledged before the backup began, byte for byte,
// under the same signing key. The copy is private to its user; a backup never overwrites.
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { statSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, Client, createCredential, publishedKey, startNode, tempDir } from './support/harness.js';
import { cleanedUpAfterEach } from './support/lifecycle.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '12.50', asset_type: 'fiat', asset_code: 'EUR' };

const cleanup = cleanedUpAfterEach();

function receipt(client: Client, n: number) {
  return client.post('/receipts', {
    issued_by: 'payee', via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: `BK-${n}` }],
  }, { idempotencyKey: `backup-${n}` });
}

/** Runs the command line and returns its exit code and standard error. */
function cliExit(args: string[]): { code: number; stderr: string } {
  try {
    execFileSync(process.execPath, [CLI, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return { code: 0, stderr: '' };
  } catch (error) {
    const e = error as { status: number; stderr: string };
    return { code: e.status, stderr: e.stderr };
  }
}

describe('path-node backup', () => {
  it('a copy taken under write load starts a node with every write acknowledged before it, the same bytes and key', async () => {
    const dataDir = tempDir('path-backup');
    const out = join(tempDir('path-backup-out'), 'copy');
    cleanup.dirs.push(dataDir, join(out, '..'));
    const own = createCredential(dataDir, 'local', { local: true });
    const node = await startNode({ dataDir });
    cleanup.running.push(node);
    const local = new Client(node.baseUrl, own);
    const before: { reference: string; text: string }[] = [];
    for (let n = 0; n < 40; n++) {
      const res = await receipt(local, n);
      expect(res.status, res.text).toBe(201);
      before.push({ reference: res.json.reference, text: res.text });
    }
    const key = await publishedKey(node.baseUrl);
    // Writes keep arriving while the copy is taken; the node must not stop answering.
    let n = 1000;
    let writing = true;
    const load = (async () => {
      while (writing) expect((await receipt(local, n++)).status).toBe(201);
    })();
    // Asynchronously, so the writes go on in this process while the command runs.
    const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'backup', '--data-dir', dataDir, '--out', out]);
    const printed = JSON.parse(stdout);
    writing = false;
    await load;
    expect(n).toBeGreaterThan(1000);
    expect(printed.bytes).toBeGreaterThan(0);
    expect(statSync(join(out, 'node.mdb')).mode & 0o777).toBe(0o600);
    expect(statSync(out).mode & 0o777).toBe(0o700);
    await node.kill9();

    const restored = await startNode({ dataDir: out });
    cleanup.running.push(restored);
    const anon = new Client(restored.baseUrl);
    for (const { reference, text } of before) {
      const res = await anon.get(`/receipts/${reference}`);
      expect(res.status).toBe(200);
      expect(JSON.parse(res.text)).toEqual(JSON.parse(text));
    }
    expect(await publishedKey(restored.baseUrl)).toBe(key);
    // The credentials came along: the operator's own client still writes.
    expect((await receipt(new Client(restored.baseUrl, own), 5000)).status).toBe(201);
  });

  it('refuses a non-empty target, the data directory itself, and a directory with no node data (exit 2)', () => {
    const dataDir = tempDir('path-backup-refuse');
    const busy = tempDir('path-backup-busy');
    const empty = tempDir('path-backup-none');
    cleanup.dirs.push(dataDir, busy, empty);
    createCredential(dataDir, 'local', { local: true });
    writeFileSync(join(busy, 'keep.txt'), 'operator file');
    const nonEmpty = cliExit(['backup', '--data-dir', dataDir, '--out', busy]);
    expect(nonEmpty.code).toBe(2);
    expect(nonEmpty.stderr).toMatch(/not empty/);
    expect(cliExit(['backup', '--data-dir', dataDir, '--out', dataDir]).code).toBe(2);
    mkdirSync(join(empty, 'data'));
    const none = cliExit(['backup', '--data-dir', join(empty, 'data'), '--out', join(empty, 'out')]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no node data/);
  });
});
