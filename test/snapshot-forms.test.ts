// Snapshots are stored in pieces behind a marker byte (src/actors/snapshot.ts); a data directory
// whose snapshots an earlier build wrote as one msgpack map still starts, from those snapshots,
// and serves every subject byte for byte as before.
import { join } from 'node:path';
import { open } from 'lmdb';
import { describe, expect, it } from 'vitest';
import { unframeSnapshot, type SnapshotBody } from '../src/actors/snapshot.js';
import { frame, framedPayload } from '../src/log/record.js';
import { Client, createCredential, startNode, tempDir } from './support/harness.js';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';

const { running, dirs } = cleanedUpAfterEach();
const SUBJECTS = 60;
/** msgpack's never-used type byte, which opens a snapshot stored in pieces. */
const PIECES_MARKER = 0xc1;
/** Every subject past the bound of a `states` row: kept in memory, and so in snapshots. */
const PINNED = { PATH_LIMIT_STATE_ROW_BYTES_MAX: '64' };

/**
 * Rewrites every snapshot of a stopped node's directory in the one-map form of earlier builds
 * (`frame(body)`, with the position it names); answers the count, after checking that each was stored in pieces.
 */
async function rewriteSnapshotsAsOneMap(dir: string): Promise<number> {
  const env = open({ path: join(dir, 'node.mdb'), maxDbs: 32, compression: false });
  const snapshots = env.openDB<Buffer, number>({ name: 'snapshots', encoding: 'binary' });
  let count = 0;
  for (const { key, value } of [...snapshots.getRange()]) {
    expect(framedPayload(value)[0]).toBe(PIECES_MARKER);
    const aggregates: SnapshotBody['aggregates'] = [];
    const { seq, check } = unframeSnapshot(value, (slice) => aggregates.push(...slice.aggregates));
    // The one map names its log position too (issue 28), as the pieces' first piece does.
    await snapshots.put(key, frame({ seq, check, aggregates }));
    count++;
  }
  await env.flushed;
  await env.close();
  return count;
}

describe('stored snapshot forms', () => {
  it('one-map snapshots: the node starts from them, every subject the same', async () => {
    const dataDir = tempDir('path-snapshot-forms');
    dirs.push(dataDir);
    const credential = createCredential(dataDir, 'local', { local: true });
    const first = await startNode({ dataDir, workers: 1, env: PINNED });
    running.push(first);
    const client = new Client(first.baseUrl, credential);
    // Subjects past state_row_bytes_max: they stay in memory, so snapshots hold them (those
    // within it, and receipts, leave theirs for their `states` rows, issue 33).
    const issued = new Map<string, string>();
    for (let i = 0; i < SUBJECTS; i++) {
      const res = await client.post(
        '/subjects',
        { subject_type: 'natural_person', external_ref: `subject-${i}` },
        { timestamp: stamp() },
      );
      expect(res.status, res.text).toBe(201);
      const address = await client.post(
        '/addresses',
        { subject_id: res.json.id, profile: 'directory', discoverability: 'network' },
        { timestamp: stamp() },
      );
      expect(address.status, address.text).toBe(201);
      const read = await client.get(`/addresses?subject_id=${res.json.id}`);
      expect(read.status, read.text).toBe(200);
      issued.set(res.json.id, read.text);
    }
    // The shutdown snapshots every partition written to.
    expect(await first.stop()).toBe(0);
    const rewritten = await rewriteSnapshotsAsOneMap(dataDir);
    expect(rewritten).toBeGreaterThan(0);
    const node = await startNode({ dataDir, workers: 1, env: PINNED });
    running.push(node);
    const { recovery } = await node.line('recovered');
    expect(recovery.snapshots).toBe(rewritten);
    expect(recovery.records).toBe(0);
    expect(recovery.aggregates).toBeGreaterThanOrEqual(SUBJECTS);
    const reader = new Client(node.baseUrl, credential);
    for (const [id, text] of issued)
      expect((await reader.get(`/addresses?subject_id=${id}`)).text).toBe(text);
  });
});
