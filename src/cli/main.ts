// Entry of the `path-node` command: the command line (command.ts) and the modules it imports, as
// one file bundled at build (scripts/bundle.ts). Loaded in a fraction of the time the modules
// take one by one, which every command, and a node's start above all, waits for.
//
// On Node.js 22 and later, V8's compiled code of the bundle is kept on disk and used again
// (`module.enableCompileCache`: NODE_COMPILE_CACHE's directory, else one under the system's
// temporary directory), checked against the file's bytes each time: a command starts with less
// to compile. The node's worker threads take the same directory from the environment. Node.js 20
// has no such cache and compiles as before.
import * as module from 'node:module';

type CompileCache = (() => { directory?: string }) | undefined;
const cached = (module as { enableCompileCache?: CompileCache }).enableCompileCache?.();
if (cached?.directory !== undefined) process.env.NODE_COMPILE_CACHE ??= cached.directory;
await import(new URL('../bundled/command.js', import.meta.url).href);
