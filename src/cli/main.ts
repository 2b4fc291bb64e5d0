// Entry of the `path-node` command: the command line (command.ts) and the modules it imports, as
// one file bundled at build (scripts/bundle.ts). Loaded in a fraction of the time the modules
// take one by one, which every command, and a node's start above all, waits for.
await import(new URL('../bundled/command.js', import.meta.url).href);
