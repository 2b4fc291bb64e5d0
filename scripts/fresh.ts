// Whether the built tree is the build of the sources that are there now, so that `npm start` on a
// built tree goes straight to the node (issue 31: listening in under 3 s) instead of asking npm,
// tsc and the bundler in turn, which find nothing to do in about 1.5 s. `stamp` runs last in
// `npm run build` and records the SHA-256 of every input (the sources of every project and
// package, the tsconfig files, the manifests and the installed packages' lock file) and every
// file the build wrote; `check` exits 0 when each input hashes as recorded, no input was added
// and every output is still there, else 1, and `npm start` then builds (`prestart`). Contents,
// not modification times: a checkout or an install gives files times that say nothing.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

interface BuildStamp {
  /** Input path (relative to the root) to the SHA-256 of its bytes, hex. */
  inputs: Record<string, string>;
  /** Every file under dist/ the build left, relative to the root. */
  outputs: string[];
}

/** Folders whose files are the build's inputs, and the files at the root that are too. */
const INPUT_FOLDERS = ['src', 'scripts', 'bench', 'packages'];
const INPUT_FILES = /^(package\.json|package-lock\.json|tsconfig[^/]*\.json)$/;
/** Never inputs: what is installed or built, wherever it sits (packages have their own). */
const SKIPPED = new Set(['node_modules', 'dist', '.git']);
const LOCK = join('node_modules', '.package-lock.json');
const STAMP = join('dist', 'build-stamp.json');

function filesUnder(root: string, folder: string): string[] {
  const at = join(root, folder);
  if (!existsSync(at)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(at, { withFileTypes: true })) {
    if (SKIPPED.has(entry.name)) continue;
    const path = join(folder, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(root, path));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

/** The build's inputs now, each with the SHA-256 of its bytes. */
function inputsOf(root: string): Record<string, string> {
  const paths = [
    ...readdirSync(root).filter((name) => INPUT_FILES.test(name)),
    ...INPUT_FOLDERS.flatMap((folder) => filesUnder(root, folder)),
    ...(existsSync(join(root, LOCK)) ? [LOCK] : []),
  ].sort();
  const inputs: Record<string, string> = {};
  for (const path of paths)
    inputs[path] = createHash('sha256')
      .update(readFileSync(join(root, path)))
      .digest('hex');
  return inputs;
}

/** Records the inputs and outputs of the build that just ended. */
export function stampBuild(root: string): void {
  const stamp: BuildStamp = { inputs: inputsOf(root), outputs: listDist(root) };
  const text = `${JSON.stringify(stamp)}\n`;
  // Written only when it differs: a build that found nothing to do writes no file at all.
  const path = join(root, STAMP);
  if (!existsSync(path) || readFileSync(path, 'utf8') !== text) writeFileSync(path, text);
}

/** Every file the build wrote (dist/, and each package's dist/) but the stamp itself. */
function listDist(root: string): string[] {
  const out: string[] = [];
  const walk = (folder: string) => {
    for (const entry of readdirSync(join(root, folder), { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (path !== STAMP) out.push(path);
    }
  };
  const packages = existsSync(join(root, 'packages')) ? readdirSync(join(root, 'packages')) : [];
  const built = ['dist', ...packages.map((name) => join('packages', name, 'dist'))];
  for (const folder of built) if (existsSync(join(root, folder))) walk(folder);
  return out.sort();
}

/** True when the tree at `root` is built from exactly the inputs that are there now. */
export function buildIsFresh(root: string): boolean {
  let stamp: BuildStamp;
  try {
    stamp = JSON.parse(readFileSync(join(root, STAMP), 'utf8')) as BuildStamp;
  } catch {
    return false;
  }
  if (!stamp.outputs.every((path) => existsSync(join(root, path)))) return false;
  const now = inputsOf(root);
  const recorded = Object.keys(stamp.inputs);
  if (recorded.length !== Object.keys(now).length) return false;
  return recorded.every((path) => now[path] === stamp.inputs[path]);
}

const [, , command] = process.argv;
if (command === 'stamp') stampBuild(process.cwd());
else if (command === 'check') process.exit(buildIsFresh(process.cwd()) ? 0 : 1);
