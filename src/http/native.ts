// uWebSockets.js's native server, or no server at all (issue 32). The package (vendor/uws) loads
// the addon its install step built for the running Node.js ABI and throws where there is none
// (another Node.js than the one `npm ci` ran under, a failed build, UWS_USE_FALLBACK set): it has
// no JavaScript stand-in. It is loaded here, once and on demand, so that the commands that serve
// nothing run without it and `serve` refuses to start with the loader's own words.
import { createRequire } from 'node:module';
import type uws from 'uWebSockets.js';

type Uws = typeof uws;

let loaded: { server: Uws } | { problem: string } | undefined;

function load(): { server: Uws } | { problem: string } {
  if (loaded !== undefined) return loaded;
  try {
    const server = createRequire(import.meta.url)('uWebSockets.js') as Uws;
    loaded = { server };
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0]! : String(error);
    loaded = { problem: reason };
  }
  return loaded;
}

/** Why the native server did not load, or null when it did. */
export function nativeServerProblem(): string | null {
  const result = load();
  return 'problem' in result ? result.problem : null;
}

/** The native server's binding; throws what nativeServerProblem says when it did not load. */
export function nativeServer(): Uws {
  const result = load();
  if ('problem' in result) throw new Error(result.problem);
  return result.server;
}
