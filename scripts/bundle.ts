// Bundles what browsers load, with esbuild, into dist/: each entry from src/ with everything it
// imports, for browsers (ES2022 modules). Run after tsc: `node dist/scripts/bundle.js`.
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/** The repository's root, from this script's place in dist/scripts. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Entry points and where they go under dist/ (without the extension). */
const ENTRIES = [
  // The pages for people (P20): their script and style, served by the node (routes/assets.ts).
  { in: 'src/pages/page.ts', out: 'assets/page' },
  { in: 'src/pages/page.css', out: 'assets/page' },
];

await build({
  absWorkingDir: ROOT,
  entryPoints: ENTRIES,
  outdir: 'dist',
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
});
