// The start's check of the LMDB data file (checkDataFile, P14): a file cut short is refused in
// words rather than read into a bus error, but LMDB lets a file end before its last page when
// the pages past the end are free (a page dirtied and freed in one commit is never written), and
// such a file is whole. LMDB itself, in a child process, is the judge of what a file still holds.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { DATA_FILE_AHEAD_BYTES, DATA_FILE_AHEAD_CHECK_MS } from '../config.js';
import { checkDataFile, LmdbLog, openEnvironment, ENV_FILE } from './lmdb-log.js';
import type { TableWrite } from './log.js';
import { lastPageEnd } from '../../test/support/data-file.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const ROWS = 3_000;
const keyOf = (i: number) => `k${String(i).padStart(6, '0')}`;
/** Every seventh row is kept; each row's bytes say which it is; every 500th is large. */
const kept = (i: number) => i % 7 === 0;
const valueOf = (i: number) => Buffer.alloc(i % 500 === 0 ? 20_000 : 1_500, i % 251);

/** A temporary directory, removed after the test. */
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'path-node-datafile-'));
  dirs.push(dir);
  return dir;
}

/** A data file whose later commits freed most of what the first one wrote. */
async function freedFile(): Promise<{ dir: string; file: string }> {
  const dir = tempDir();
  const root = open({ path: dir });
  const rows = root.openDB({ name: 'rows' });
  await root.transaction(() => {
    for (let i = 0; i < ROWS; i++) void rows.put(keyOf(i), valueOf(i));
  });
  await root.transaction(() => {
    for (let i = 0; i < ROWS; i++) if (!kept(i)) void rows.remove(keyOf(i));
  });
  for (let j = 0; j < 5; j++) await root.transaction(() => void rows.put(`z${j}`, valueOf(j)));
  await root.close();
  return { dir, file: join(dir, 'data.mdb') };
}

/** LMDB, in a child process, reads every row and checks its bytes, then commits one more. */
function readByLmdb(dir: string): { status: number | null; out: string } {
  const script = `
    import { open } from 'lmdb';
    const root = open({ path: ${JSON.stringify(dir)} });
    const rows = root.openDB({ name: 'rows' });
    let good = 0;
    for (const { key, value } of rows.getRange()) {
      const i = Number(String(key).slice(1));
      const length = i % 500 === 0 ? 20000 : 1500;
      if (value.length === length && value.every((byte) => byte === i % 251)) good++;
    }
    await root.transaction(() => rows.put('after', Buffer.alloc(3000, 7)));
    await root.close();
    console.log(good);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  return { status: run.status, out: `${run.stdout}${run.stderr}` };
}

describe('the data file check at start (P14)', () => {
  it('takes a file whose last pages are free (LMDB reads it whole), not one less', async () => {
    const { dir, file } = await freedFile();
    const size = statSync(file).size;
    const pageSize = 4_096;
    // Cut page by page from the end while the check takes the file.
    let cut = 0;
    for (; (cut + 1) * pageSize < size; cut++) {
      truncateSync(file, size - (cut + 1) * pageSize);
      try {
        checkDataFile(file);
      } catch (error) {
        expect((error as Error).message).toContain('is truncated');
        break;
      }
    }
    // The first commit's pages at the end were freed: the check took the file without some.
    expect(cut).toBeGreaterThan(0);
    // One page more, the one the check refused for, is one LMDB cannot do without.
    const short = readByLmdb(dir);
    expect(short.status, short.out).not.toBe(0);
    truncateSync(file, size - cut * pageSize);
    expect(() => checkDataFile(file)).not.toThrow();
    const read = readByLmdb(dir);
    expect(read.status, read.out).toBe(0);
    expect(Number(read.out.trim())).toBe(Math.ceil(ROWS / 7) + 5);
  });

  it('refuses a file cut in half, naming the truncation', async () => {
    const { file } = await freedFile();
    truncateSync(file, Math.floor(statSync(file).size / 2 / 4_096) * 4_096);
    expect(() => checkDataFile(file)).toThrow(/is truncated/);
  });
});

describe("a node's data file runs past its last page (growDataFile)", () => {
  it('so that the file a crash leaves is taken without reading every page in use', async () => {
    // The fixture's commits, made through the node's log; its file is read as a kill -9 would
    // leave it, the environment still open.
    const dir = tempDir();
    const env = openEnvironment(dir);
    const log = new LmdbLog(env);
    const row = (i: number, bytes: Buffer | null): TableWrite => ({
      table: 'views',
      key: keyOf(i),
      bytes,
    });
    await log.append(
      [],
      Array.from({ length: ROWS }, (_, i) => row(i, valueOf(i))),
    );
    await log.append(
      [],
      Array.from({ length: ROWS }, (_, i) => i)
        .filter((i) => !kept(i))
        .map((i) => row(i, null)),
    );
    for (let j = 0; j < 5; j++) await log.append([], [row(ROWS + j, valueOf(j))]);
    const file = join(dir, ENV_FILE);
    expect(statSync(file).size - lastPageEnd(file)).toBeGreaterThanOrEqual(
      DATA_FILE_AHEAD_BYTES / 2,
    );
    // The start's check reads the header alone.
    expect(checkDataFile(file)).toBe(false);
    // Grown again once commits have used more than half of it (the next check, a second on).
    const grownTo = statSync(file).size;
    const big = Buffer.alloc(1024 * 1024, 3);
    for (let j = 0; j < 48; j++)
      await log.append([], [{ table: 'views', key: `b${j}`, bytes: big }]);
    await new Promise((resolve) => setTimeout(resolve, DATA_FILE_AHEAD_CHECK_MS + 100));
    await log.append([], [row(ROWS + 5, valueOf(5))]);
    expect(statSync(file).size).toBeGreaterThan(grownTo);
    expect(statSync(file).size - lastPageEnd(file)).toBeGreaterThanOrEqual(
      DATA_FILE_AHEAD_BYTES / 2,
    );
    expect(checkDataFile(file)).toBe(false);
    // The grown file is whole to LMDB: every row kept reads back, and it takes new commits.
    const keptRows = Array.from({ length: ROWS }, (_, i) => i).filter(kept);
    for (const i of keptRows) expect(env.tables.views.get(keyOf(i))).toEqual(valueOf(i));
    await log.close();
    const reopenedEnv = openEnvironment(dir);
    const reopened = new LmdbLog(reopenedEnv);
    for (const i of keptRows) expect(reopenedEnv.tables.views.get(keyOf(i))).toEqual(valueOf(i));
    await reopened.append([], [row(ROWS + 9, valueOf(9))]);
    await reopened.close();
  });
});

describe('a data file that cannot be grown', () => {
  it('fails no append: the commit is durable already, the file left as LMDB keeps it', async () => {
    const dir = tempDir();
    const env = openEnvironment(dir);
    // Growing looks at the file by its path: one that cannot be read makes it throw.
    const log = new LmdbLog({ ...env, file: join(dir, 'gone', ENV_FILE) });
    await log.append([], [{ table: 'views', key: 'k', bytes: valueOf(1) }]);
    expect(env.tables.views.get('k')).toEqual(valueOf(1));
    await log.close();
  });
});
