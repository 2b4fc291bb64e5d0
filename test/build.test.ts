// `npm run build` makes only what changed (issue 31: `npm start` runs it before every start). On a
// copy of the tree with no dist/, as a fresh clone has: the first build makes everything; a second
// on the unchanged tree writes no file at all (tsc -b finds its projects up to date, the bundle
// stamps find every input as it was); after one source file changes, its module (and at most
// its importers') and the server bundles that contain it are made again, and nothing else: not
// the other modules, not the browser bundles, whose inputs did not change.
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { removeDir, tempDir } from './support/harness.js';

const ROOT = resolve(__dirname, '..');
const TREE = ['src', 'scripts', 'bench', 'packages', 'package.json', 'tsconfig.json'];
/** What the build writes: the node's dist/ and the client package's. */
const OUTPUTS = ['dist', 'packages/client/dist'];

/** Every file the build wrote (under OUTPUTS), with its modification time. */
function written(dir: string): Map<string, number> {
  const files = new Map<string, number>();
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.set(relative(dir, path), statSync(path).mtimeMs);
    }
  };
  for (const output of OUTPUTS) walk(join(dir, output));
  return files;
}

function build(dir: string): string {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['run', 'build'], { cwd: dir, encoding: 'utf8', timeout: 600_000 });
  expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

/** The exit code of the freshness check `npm start` runs before it builds (scripts/fresh.ts). */
function fresh(dir: string): number | null {
  const r = spawnSync(process.execPath, ['dist/scripts/fresh.js', 'check'], { cwd: dir, timeout: 60_000 });
  return r.status;
}

const changed = (before: Map<string, number>, after: Map<string, number>) =>
  [...after].filter(([path, time]) => before.get(path) !== time).map(([path]) => path).sort();

describe('npm run build on a built tree', () => {
  const dir = tempDir('path-build');
  afterAll(() => removeDir(dir));

  it('builds everything once, then nothing on an unchanged tree, then only what a change touches', () => {
    const unbuilt = (path: string) => !path.split(/[\\/]/).includes('dist');
    for (const part of TREE) cpSync(join(ROOT, part), join(dir, part), { recursive: true, filter: unbuilt });
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));

    const first = build(dir);
    expect(first).toContain('bundle: wrote dist/assets/path-client.js');
    expect(first).toContain('bundle: wrote dist/src/bundled/command.js');
    const built = written(dir);
    for (const output of ['dist/src/cli/main.js', 'packages/client/dist/index.d.ts', 'dist/assets/page.css', 'dist/src/bundled/worker.js'])
      expect(built.has(output), output).toBe(true);

    // What npm start asks first (prestart): the tree is its build, so nothing is built again.
    expect(fresh(dir)).toBe(0);

    const second = build(dir);
    expect(second).toContain('bundle: browser is up to date');
    expect(second).toContain('bundle: server is up to date');
    expect(changed(built, written(dir))).toEqual([]);

    appendFileSync(join(dir, 'src/cli/lookup.ts'), '\n// changed by test/build.test.ts\n');
    expect(fresh(dir)).toBe(1);
    const third = build(dir);
    expect(fresh(dir)).toBe(0);
    expect(third).toContain('bundle: browser is up to date');
    expect(third).toContain('bundle: wrote dist/src/bundled/command.js');
    const remade = changed(built, written(dir));
    expect(remade).toContain('dist/src/cli/lookup.js');
    expect(remade).toContain('dist/src/bundled/command.js');
    // Nothing of the browser bundles; of the compiled modules, the changed one and at most those
    // that import it (tsc checks their use of it again), none of the hundreds of others.
    expect(remade.filter((p) => p.startsWith('dist/assets/'))).toEqual([]);
    const modules = remade.filter((p) => /^dist\/(src|bench|scripts)\/.*\.js$/.test(p) && !p.startsWith('dist/src/bundled/'));
    for (const module of modules.filter((p) => p !== 'dist/src/cli/lookup.js'))
      expect(readFileSync(join(dir, module), 'utf8'), module).toMatch(/from '\.\/lookup\.js'/);

    // An output gone, or a new source file, is a tree to build again.
    rmSync(join(dir, 'dist/src/cli/main.js'));
    expect(fresh(dir)).toBe(1);
    build(dir);
    expect(fresh(dir)).toBe(0);
    writeFileSync(join(dir, 'src/cli/added.ts'), 'export const added = 1;\n');
    expect(fresh(dir)).toBe(1);
  }, 900_000);
});
