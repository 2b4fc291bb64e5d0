// Browser bundles (P18, P20): each entry point bundled with its dependencies by esbuild as one
// minified ES module under dist/assets/. A bundle is for browsers, so anything that pulls in a
// Node built-in (`node:fs`, or `fs` written without the prefix) fails the build, naming the
// importer. Other entry points (the pages' scripts) are added to BROWSER_ENTRIES.
// Server bundles: the node's command line and its thread entries, each bundled from the compiled
// modules into one file under dist/src/bundled/, which is what runs. Node loads one file in a
// fraction of the time it takes to resolve and load several hundred modules one by one, and a
// start waits for that load three times over (the main thread, then the worker and the recovery
// helpers it spawns).
// A bundle whose inputs are unchanged since it was made is not made again (bundle-stamp.ts).
// Usage: node dist/scripts/bundle.js   (run by `npm run build` after tsc)
import { readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Metafile, type Plugin } from 'esbuild';
import { bundleIsFresh, stampBundle } from './bundle-stamp.js';

export interface BrowserEntry {
  /** The source module, relative to the repository root. */
  in: string;
  /** The bundle's name under dist/assets/, without `.js` (or `.css` for a style sheet). */
  out: string;
}

export const BROWSER_ENTRIES: BrowserEntry[] = [
  { in: 'packages/client/dist/index.js', out: 'path-client' },
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

/**
 * Bundles the entries into `outdir`; rejects (with esbuild's messages) on any error. Resolves with
 * esbuild's metafile: what was read and written.
 */
export async function bundle(
  entries: readonly BrowserEntry[] = BROWSER_ENTRIES,
  options: { root?: string; outdir?: string } = {},
): Promise<Metafile> {
  const root = options.root ?? ROOT;
  const result = await build({
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
    metafile: true,
    plugins: [noNodeBuiltins],
  });
  return result.metafile;
}

/** The server's entry points (compiled modules), and their bundles' names under dist/src/bundled/. */
export const SERVER_ENTRIES: Record<string, string> = {
  command: 'dist/src/cli/command.js',
  worker: 'dist/src/actors/worker.js',
  'recovery-helper': 'dist/src/actors/recovery-helper.js',
};

/**
 * Packages left out of the server bundles and loaded as they are: native addons (lmdb and the
 * msgpackr it shares, uWebSockets.js, fs-native-extensions) and pino, whose transports load
 * files of their own by path; pg, which names its optional native binding; synckit, which starts
 * its thread from a file of its own.
 */
const SERVER_EXTERNAL = [
  'lmdb',
  'msgpackr',
  'uWebSockets.js',
  'fs-native-extensions',
  'pino',
  'pg',
  'synckit',
];

/**
 * A module's `import.meta.url` names the file it was compiled to, not the bundle it lands in:
 * the files it finds beside it (page assets, the shipped connectors, the thread entries) are
 * where they were.
 */
function ownUrl(outdir: string): Plugin {
  return {
    name: 'own-url',
    setup(on) {
      on.onLoad({ filter: /[\\/]dist[\\/]src[\\/].*\.js$/ }, async (args) => {
        const text = await readFile(args.path, 'utf8');
        if (!text.includes('import.meta.url')) return undefined;
        const own = JSON.stringify(relative(outdir, args.path).split('\\').join('/'));
        return {
          contents: text.replaceAll('import.meta.url', `new URL(${own}, import.meta.url).href`),
          loader: 'js',
          resolveDir: dirname(args.path),
        };
      });
    },
  };
}

/** Bundles the server's entries (after tsc) into dist/src/bundled/. */
export async function bundleServer(root: string = ROOT): Promise<Metafile> {
  const outdir = join(root, 'dist', 'src', 'bundled');
  const result = await build({
    absWorkingDir: root,
    entryPoints: SERVER_ENTRIES,
    outdir,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // A package's ES module build where it has one: a CommonJS build may require its own files
    // by computed paths, which a bundle cannot follow.
    mainFields: ['module', 'main'],
    external: SERVER_EXTERNAL,
    // CommonJS packages bundled into an ES module still call `require` for Node's built-ins.
    banner: {
      js:
        "import { createRequire as bundleRequire } from 'node:module';\n" +
        'const require = bundleRequire(import.meta.url);',
    },
    sourcemap: true,
    logLevel: 'silent',
    metafile: true,
    plugins: [ownUrl(outdir)],
  });
  return result.metafile;
}

/** Makes the bundle `name` unless it is fresh; says which it did. */
async function made(name: string, make: () => Promise<Metafile>, outputs: string[]) {
  if (bundleIsFresh(ROOT, name)) {
    process.stdout.write(`bundle: ${name} is up to date\n`);
    return;
  }
  stampBundle(ROOT, name, await make());
  process.stdout.write(`bundle: wrote ${outputs.join(', ')}\n`);
}

async function main(): Promise<void> {
  const extension = (e: BrowserEntry) => (e.in.endsWith('.css') ? 'css' : 'js');
  const browser = BROWSER_ENTRIES.map((e) => `dist/assets/${e.out}.${extension(e)}`);
  const server = Object.keys(SERVER_ENTRIES).map((name) => `dist/src/bundled/${name}.js`);
  try {
    await made('browser', () => bundle(), browser);
    await made('server', () => bundleServer(), server);
  } catch (error) {
    process.stderr.write(`bundle: ${(error as Error).message}\n`);
    process.exit(1);
  }
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href)
  void main();
