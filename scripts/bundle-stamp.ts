// Whether a bundle is up to date, so that `npm start` on a built tree does not bundle again
// (issue 31). After each bundle a stamp is written under dist/bundle-stamps/: every input esbuild
// read (its metafile), each with the SHA-256 of its bytes, and every output. The bundle is fresh
// when every output is still there and every input, the bundle script and the installed
// packages' lock file (node_modules/.package-lock.json, which npm rewrites on each install) hash
// as they did. Contents, not modification times: npm gives every installed file the same old
// time, and tsc may write a module again unchanged. Hashing the inputs is a few milliseconds
// against the seconds a bundle takes.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Metafile } from 'esbuild';

interface Stamp {
  /** Input path (relative to the root) to the SHA-256 of its bytes, hex. */
  inputs: Record<string, string>;
  /** Output paths, relative to the root. */
  outputs: string[];
}

/** What every bundle depends on beyond the inputs esbuild lists. */
const ALWAYS = ['dist/scripts/bundle.js', 'node_modules/.package-lock.json'];

const stampPath = (root: string, name: string) =>
  join(root, 'dist', 'bundle-stamps', `${name}.json`);

/** The SHA-256 of a file's bytes, or null when it cannot be read (gone, or never a file). */
function hashOf(path: string): string | null {
  try {
    return createHash('sha256').update(readFileSync(path)).digest('hex');
  } catch {
    return null;
  }
}

/** True when the bundle named `name` was made from exactly the files that are there now. */
export function bundleIsFresh(root: string, name: string): boolean {
  let stamp: Stamp;
  try {
    stamp = JSON.parse(readFileSync(stampPath(root, name), 'utf8')) as Stamp;
  } catch {
    return false;
  }
  if (!stamp.outputs.every((output) => existsSync(join(root, output)))) return false;
  return Object.entries(stamp.inputs).every(([input, hash]) => hashOf(join(root, input)) === hash);
}

/** Records what the bundle `name` was just made from, and what it wrote. */
export function stampBundle(root: string, name: string, metafile: Metafile): void {
  const inputs: Record<string, string> = {};
  for (const input of [...Object.keys(metafile.inputs), ...ALWAYS]) {
    // esbuild names a plugin's virtual inputs with a namespace prefix; only files are hashed.
    if (input.includes(':')) continue;
    const hash = hashOf(join(root, input));
    if (hash !== null) inputs[input] = hash;
  }
  const stamp: Stamp = { inputs, outputs: Object.keys(metafile.outputs) };
  const path = stampPath(root, name);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(stamp)}\n`);
}
