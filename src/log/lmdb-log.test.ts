// The LMDB log adapter: an append resolves only after lmdb-js reports the commit flushed, not
// merely committed (P14); records and table writes land together; checksums are checked on read.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LmdbLog, openEnvironment, type LmdbEnvironment } from './lmdb-log.js';
import { ChecksumError, frame, unframe } from './record.js';

const dirs: string[] = [];
const envs: LmdbEnvironment[] = [];
function fresh(): LmdbEnvironment {
  const dir = mkdtempSync(join(tmpdir(), 'path-node-log-'));
  dirs.push(dir);
  const env = openEnvironment(dir);
  envs.push(env);
  return env;
}

afterEach(async () => {
  for (const env of envs.splice(0)) await env.root.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('LmdbLog', () => {
  it('P14: append waits for flushed, not only committed', async () => {
    const env = fresh();
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    // Stand in for the disk: the commit happens, the flush is held back.
    Object.defineProperty(env.root, 'flushed', { get: () => gate, configurable: true });
    const log = new LmdbLog(env);
    let resolved = false;
    const appending = log
      .append([{ partition: 3, seq: 1, bytes: frame({ n: 1 }) }], [])
      .then(() => {
        resolved = true;
      });
    await env.root.committed;
    await new Promise((r) => setTimeout(r, 50));
    expect(env.log.get([3, 1])).toBeDefined();
    expect(resolved).toBe(false);
    open();
    await appending;
    expect(resolved).toBe(true);
  });

  it('writes records and table writes in one commit and reads them back in order', async () => {
    const env = fresh();
    const log = new LmdbLog(env);
    await log.append(
      [
        { partition: 7, seq: 1, bytes: frame({ n: 1 }) },
        { partition: 7, seq: 2, bytes: frame({ n: 2 }) },
        { partition: 8, seq: 1, bytes: frame({ n: 3 }) },
      ],
      [
        { table: 'views', key: 'rcp_x', bytes: Buffer.from('view') },
        { table: 'outbox', key: 'evt_1', bytes: frame({ e: 1 }) },
      ],
    );
    expect([...log.read(7, 0)].map((r) => unframe<{ n: number }>(r.bytes).n)).toEqual([1, 2]);
    expect([...log.read(7, 1)].map((r) => r.seq)).toEqual([2]);
    expect([...log.read(8, 0)]).toHaveLength(1);
    expect(log.get('views', 'rcp_x')?.toString()).toBe('view');
    expect(unframe(log.get('outbox', 'evt_1')!)).toEqual({ e: 1 });
    await log.append([], [{ table: 'views', key: 'rcp_x', bytes: null }]);
    expect(log.get('views', 'rcp_x')).toBeUndefined();
  });

  it('finds damage at rest through the record checksum', () => {
    const bytes = frame({ hello: 'world' });
    const damaged = Buffer.from(bytes);
    damaged[damaged.length - 2] = damaged[damaged.length - 2]! ^ 0x01;
    expect(() => unframe(damaged)).toThrow(ChecksumError);
    expect(unframe(bytes)).toEqual({ hello: 'world' });
  });
});
