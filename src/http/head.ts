// The head of every answer, written in as few calls into uWebSockets.js as the bytes allow. Each
// `writeHeader` crosses into the binding and, for a JS string, copies it out as UTF-8; the
// headers that do not change from one answer to the next are therefore kept as ready bytes, a
// run of consecutive lines in one value: uWebSockets.js writes `name: value\r\n` as given, so
// `writeHeader('a', '1\r\nb: 2')` puts on the wire exactly what two calls would. Only the request
// id (and what a reply names itself) is written per answer, last, so that every line before it
// is one run. The lines are those of P7 (content type), P10 (version, pinned, protocol version,
// request id) and P20 (CORS).
import type uws from 'uWebSockets.js';
import { API_VERSION } from '../config.js';
import { PROTOCOL_VERSION } from '../protocol/signing.js';

/** Answer headers a wallet in a browser must read (P10, P7); CORS hides the others from it. */
const EXPOSED_HEADERS = [
  'path-version',
  'path-version-pinned',
  'path-request-id',
  'path-protocol-version',
  'path-idempotent-replayed',
  'retry-after',
  'allow',
].join(', ');

const REQUEST_ID = Buffer.from('path-request-id');

/** One run of header lines as one `writeHeader`: the first line's name, and the rest. */
interface Run {
  name: Buffer;
  value: Buffer;
}

function run(lines: readonly (readonly [string, string])[]): Run {
  const [first, ...rest] = lines;
  const value = [first![1], ...rest.map(([name, text]) => `${name}: ${text}`)].join('\r\n');
  return { name: Buffer.from(first![0]), value: Buffer.from(value) };
}

const PINNED = 1;
const SIGNED = 2;
const CORS = 4;

/**
 * The lines of an answer before the request id: content type (none on a 204), version, pinned
 * (P7, P10), then the protocol version on signed answers and CORS on public paths (P20).
 */
function ready(type: string | null, flags: number): Run {
  const lines: [string, string][] = type === null ? [] : [['content-type', type]];
  const pinned = (flags & PINNED) !== 0 ? 'true' : 'false';
  lines.push(['path-version', API_VERSION], ['path-version-pinned', pinned]);
  if ((flags & SIGNED) !== 0) lines.push(['path-protocol-version', PROTOCOL_VERSION]);
  if ((flags & CORS) !== 0) {
    lines.push(['access-control-allow-origin', '*']);
    lines.push(['access-control-expose-headers', EXPOSED_HEADERS]);
  }
  return run(lines);
}

/** Ready runs by content type (a closed set: the types the handlers name), by flags. */
const runs = new Map<string | null, Run[]>();

/**
 * Writes the P7/P10/P20 headers of an answer: `type` null on a 204 (no content type), the
 * protocol version when `signed`, CORS when `cors`, and last the request id: two calls into
 * uWebSockets.js whatever the answer.
 */
export function writeStandardHead(
  res: uws.HttpResponse,
  type: string | null,
  head: { pinned: boolean; requestId: string; signed: boolean; cors: boolean },
): void {
  let byFlags = runs.get(type);
  if (byFlags === undefined) {
    byFlags = Array.from({ length: PINNED + SIGNED + CORS + 1 }, (_, flags) => ready(type, flags));
    runs.set(type, byFlags);
  }
  const flags = (head.pinned ? PINNED : 0) + (head.signed ? SIGNED : 0) + (head.cors ? CORS : 0);
  const lines = byFlags[flags]!;
  res.writeHeader(lines.name, lines.value);
  res.writeHeader(REQUEST_ID, head.requestId);
}
