// The sweeps' first rounds run as a node starts (node.ts startFollowers), beside its first
// requests: what passed its retention while the node was down is forgotten at once, not at the
// first interval (an hour for stored answers), and the start waits for none of it.
import { join } from 'node:path';
import { open } from 'lmdb';
import { describe, expect, it } from 'vitest';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';
import { Client, createCredential, startNode, tempDir } from './support/harness.js';
import { waitFor } from './support/wait.js';

const { running, dirs } = cleanedUpAfterEach();

/** The rows of a table, read beside the node (LMDB's readers do not stop its writer). */
async function rowsOf(dir: string, table: string): Promise<number> {
  const env = open({ path: join(dir, 'node.mdb'), maxDbs: 32, compression: false, readOnly: true });
  const rows = [...env.openDB({ name: table, encoding: 'binary' }).getKeys({})].length;
  await env.close();
  return rows;
}

describe('the sweeps at start', () => {
  it('forget the stored answers and replay marks past their retention as the node starts', async () => {
    const dir = tempDir('path-sweeps-start');
    dirs.push(dir);
    const local = createCredential(dir, 'local', { local: true });
    // Requests 3 s apart from the node's clock at most: each mark is kept 6 s.
    const skew = { PATH_LIMIT_TIMESTAMP_SKEW_MS: '3000' };
    const first = await startNode({ dataDir: dir, env: skew });
    running.push(first);
    const body = { subject_type: 'natural_person' };
    const made = await new Client(first.baseUrl, local).post('/subjects', body, { timestamp: stamp(), idempotencyKey: 'k-1' });
    expect(made.status, made.text).toBe(201);
    expect(await first.stop()).toBe(0);
    expect(await rowsOf(dir, 'idempotency')).toBe(1);
    expect(await rowsOf(dir, 'replay')).toBeGreaterThan(0);

    // Down for longer than both: the answer is kept 1 s by the next run.
    await new Promise((resolve) => setTimeout(resolve, 6_500));
    const again = await startNode({ dataDir: dir, env: { ...skew, PATH_LIMIT_IDEMPOTENCY_RETENTION_MS: '1000' } });
    running.push(again);
    await waitFor('the first rounds to forget both', async () =>
      (await rowsOf(dir, 'idempotency')) === 0 && (await rowsOf(dir, 'replay')) === 0);
    // Forgotten, the key makes a new subject.
    const anew = await new Client(again.baseUrl, local).post('/subjects', body, { timestamp: stamp(), idempotencyKey: 'k-1' });
    expect(anew.status, anew.text).toBe(201);
    expect(anew.json.id).not.toBe(made.json.id);
  });
});
