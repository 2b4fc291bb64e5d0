// uWebSockets.js's native server, or no server at all (issue 32). The package loads a binary
// built for one Node.js ABI and glibc; where that binary does not load (another Node.js, an
// older glibc) or UWS_USE_FALLBACK is set, it quietly hands out a JavaScript stand-in instead,
// which fails on the first request. The node refuses to start rather than run on it, and says
// why: the loader's own words for the binary it needed.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import uws from 'uWebSockets.js';

/** Why the native server did not load, or null when it did. */
export function nativeServerProblem(): string | null {
  // Only the native binding has getParts (the stand-in lacks it).
  if (typeof (uws as unknown as { getParts?: unknown }).getParts === 'function') return null;
  const fallback = process.env.UWS_USE_FALLBACK;
  if (fallback !== undefined && /^(1|true)$/i.test(fallback))
    return 'UWS_USE_FALLBACK is set: path-node serves only on the native server; unset it';
  const { platform, arch } = process;
  const abi = process.versions.modules;
  const wanted = `uws_${platform}_${arch}_${abi}.node`;
  const require = createRequire(import.meta.url);
  try {
    require(join(dirname(require.resolve('uWebSockets.js')), '..', 'binaries', wanted));
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    return (
      `uWebSockets.js has no native server for Node.js ${process.version} ` +
      `(${platform} ${arch}, ABI ${abi}): ${reason}`
    );
  }
  return 'uWebSockets.js handed out its JavaScript stand-in, not its native server';
}
