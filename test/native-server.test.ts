// Issue 32: the node serves on uWebSockets.js's native server or not at all. The vendored package
// (vendor/uws) has no JavaScript stand-in: where its binary for the running Node.js is missing,
// or UWS_USE_FALLBACK asks for a stand-in, loading it throws; the node refuses to start, saying
// why, and never says it listens.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
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
    expect(fatal?.reason).toMatch(/UWS_USE_FALLBACK is set, but this build has no JavaScript/);
    expect(run.stdout).not.toContain('"msg":"listening"');
  });

  it('without a binary for the running Node.js, loading says which Node, which ABI, and how', () => {
    // The loader as shipped, beside a dist/ that holds no build.
    const copy = tempDir('path-node-uws-loader');
    dirs.push(copy);
    const vendored = resolve(__dirname, '../vendor/uws');
    copyFileSync(join(vendored, 'index.js'), join(copy, 'index.js'));
    mkdirSync(join(copy, 'dist'));
    const run = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(copy)})`], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`no native server built for Node.js ${process.version}`);
    expect(run.stderr).toContain(`ABI ${process.versions.modules}`);
    expect(run.stderr).toContain(`node ${join(copy, 'install.js')}`);
  });

  it('the commands that serve nothing run without loading it', () => {
    const dataDir = tempDir('path-node-native-cli');
    dirs.push(dataDir);
    const args = ['credentials', 'create', '--data-dir', dataDir, '--member', 'm', '--local'];
    const run = spawnSync(process.execPath, [CLI, ...args], {
      env: { ...process.env, UWS_USE_FALLBACK: '1' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toContain('key_id');
  });
});
