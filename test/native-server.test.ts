// Issue 32: the node serves on uWebSockets.js's native server or not at all. Where the package
// cannot load its binary (another Node.js ABI, an older glibc) or is told to (UWS_USE_FALLBACK),
// it hands out a JavaScript stand-in that fails on the first request; the node refuses to start
// instead, saying why, and never says it listens.
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, removeDir, tempDir } from './support/harness.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach(removeDir));

describe('serve on the native server only (issue 32)', () => {
  it('with the stand-in asked for, serve refuses to start, says why and never listens', () => {
    const dataDir = tempDir('path-node-native');
    dirs.push(dataDir);
    const args = ['serve', '--data-dir', dataDir, '--port', '0', '--external-port', '0'];
    const run = spawnSync(process.execPath, [CLI, ...args], {
      env: { ...process.env, UWS_USE_FALLBACK: '1', PATH_ADMIN_PORT: '0' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(1);
    const lines = run.stdout.split('\n').filter((l) => l.startsWith('{'));
    const fatal = lines.map((l) => JSON.parse(l)).find((l) => l.level === 60);
    expect(fatal?.msg).toBe('cannot serve HTTP; not starting');
    expect(fatal?.reason).toMatch(/UWS_USE_FALLBACK is set: path-node serves only on the native/);
    expect(run.stdout).not.toContain('"msg":"listening"');
  });
});
