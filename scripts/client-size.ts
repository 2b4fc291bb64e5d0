// The size a browser pays for @path-node/client (issue 31: at most 15 kB minified and gzipped):
// the package's entry as built (packages/client/dist/index.js) bundled by esbuild with its @noble
// dependencies, minified as a wallet's bundler would, then gzipped at the highest level. Every
// export is kept (the entry is the bundle's own entry, not an importer's), so the figure is the
// whole package; a wallet that imports less pays less. Used by test/client-package.test.ts and
// by `npm run bench` (bench/client-size.ts).
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { constants, gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { noNodeBuiltins } from './bundle.js';

/** The target of issue 31, in bytes (1 kB = 1,000 bytes). */
export const CLIENT_GZIP_BYTES_TARGET = 15_000;

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface ClientSize {
  /** The minified bundle, bytes. */
  minifiedBytes: number;
  /** The same, gzipped, bytes. */
  gzippedBytes: number;
}

/** Measures the package whose built entry is `entry` (the workspace's, unless told). */
export async function clientSize(
  entry: string = join(ROOT, 'packages', 'client', 'dist', 'index.js'),
): Promise<ClientSize> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    legalComments: 'none',
    logLevel: 'silent',
    write: false,
    plugins: [noNodeBuiltins],
  });
  const bytes = result.outputFiles[0]!.contents;
  const gzipped = gzipSync(bytes, { level: constants.Z_BEST_COMPRESSION });
  return { minifiedBytes: bytes.length, gzippedBytes: gzipped.length };
}
