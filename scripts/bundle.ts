// Browser bundles (P18, P20): each entry point bundled with its dependencies by esbuild as one
// minified ES module under dist/assets/. A bundle is for browsers, so anything that pulls in a
// Node built-in (`node:fs`, or `fs` written without the prefix) fails the build, naming the
// importer. Other entry points (the pages' scripts) are added to BROWSER_ENTRIES.
// Usage: node dist/scripts/bundle.js   (run by `npm run build` after tsc)
import { builtinModules } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

export interface BrowserEntry {
  /** The source module, relative to the repository root. */
  in: string;
  /** The bundle's name under dist/assets/, without `.js` (or `.css` for a style sheet). */
  out: string;
}

export const BROWSER_ENTRIES: BrowserEntry[] = [
  { in: 'src/client/index.ts', out: 'path-client' },
  // The pages for people (P20): their script and style, served by the node (routes/assets.ts).
  { in: 'src/pages/page.ts', out: 'page' },
  { in: 'src/pages/page.css', out: 'page' },
];

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BUILTINS = new Set(builtinModules);

/** Refuses every Node built-in, with or without the `node:` prefix. */
export const noNodeBuiltins: Plugin = {
  name: 'no-node-builtins',
  setup(on) {
    on.onResolve({ filter: /^[^./]/ }, (args) => {
      const name = args.path.startsWith('node:') ? args.path.slice(5) : args.path;
      const builtin = args.path.startsWith('node:') || BUILTINS.has(name.split('/')[0]!);
      if (!builtin) return undefined;
      return {
        errors: [
          {
            text:
              `"${args.path}" is a Node built-in; a browser bundle cannot use it ` +
              `(imported by ${args.importer})`,
          },
        ],
      };
    });
  },
};

/** Bundles the entries into `outdir`; rejects (with esbuild's messages) on any error. */
export async function bundle(
  entries: readonly BrowserEntry[] = BROWSER_ENTRIES,
  options: { root?: string; outdir?: string } = {},
): Promise<void> {
  const root = options.root ?? ROOT;
  await build({
    absWorkingDir: root,
    entryPoints: entries.map((e) => ({ in: e.in, out: e.out })),
    outdir: options.outdir ?? join(root, 'dist', 'assets'),
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    legalComments: 'none',
    logLevel: 'silent',
    plugins: [noNodeBuiltins],
  });
}

async function main(): Promise<void> {
  try {
    await bundle();
  } catch (error) {
    process.stderr.write(`bundle: ${(error as Error).message}\n`);
    process.exit(1);
  }
  const extension = (e: BrowserEntry) => (e.in.endsWith('.css') ? 'css' : 'js');
  const names = BROWSER_ENTRIES.map((e) => `dist/assets/${e.out}.${extension(e)}`).join(', ');
  process.stdout.write(`bundle: wrote ${names}\n`);
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href)
  void main();
