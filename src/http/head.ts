// The head of every answer, written in as few calls into uWebSockets.js as the bytes allow. Each
// `writeHeader` crosses into the binding and, for a JS string, copies it out as UTF-8; the
// headers that do not change from one answer to the next are therefore kept as ready bytes, a
// run of consecutive lines in one value: uWebSockets.js writes `name: value\r\n` as given, so
// `writeHeader('a', '1\r\nb: 2')` puts on the wire exactly what two calls would. Only the request
// id (and what a reply names itself) is written per answer. The lines and their order are those
// of P7 (content type), P10 (version, pinned, request id, protocol version) and P20 (CORS).
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

/** The lines before the request id: content type (none on a 204), version, pinned. */
function lead(type: string | null, pinned: boolean): Run {
  const lines: [string, string][] = type === null ? [] : [['content-type', type]];
  lines.push(['path-version', API_VERSION], ['path-version-pinned', pinned ? 'true' : 'false']);
  return run(lines);
}

/** The lines after it: the protocol version on signed answers, CORS on public paths. */
function tail(signed: boolean, cors: boolean): Run | null {
  const lines: [string, string][] = signed ? [['path-protocol-version', PROTOCOL_VERSION]] : [];
  if (cors) {
    lines.push(['access-control-allow-origin', '*']);
    lines.push(['access-control-expose-headers', EXPOSED_HEADERS]);
  }
  return lines.length === 0 ? null : run(lines);
}

/** Ready runs by content type (a closed set: the types the handlers name). */
const leads = new Map<string | null, [unpinned: Run, pinned: Run]>();
/** By `signed * 2 + cors`. */
const tails = [tail(false, false), tail(false, true), tail(true, false), tail(true, true)];

/**
 * Writes the P7/P10/P20 headers of an answer: `type` null on a 204 (no content type), the request
 * id, then the protocol version when `signed` and CORS when `cors`.
 */
export function writeStandardHead(
  res: uws.HttpResponse,
  type: string | null,
  head: { pinned: boolean; requestId: string; signed: boolean; cors: boolean },
): void {
  let runs = leads.get(type);
  if (runs === undefined) {
    runs = [lead(type, false), lead(type, true)];
    leads.set(type, runs);
  }
  const first = runs[head.pinned ? 1 : 0];
  res.writeHeader(first.name, first.value);
  res.writeHeader(REQUEST_ID, head.requestId);
  const last = tails[(head.signed ? 2 : 0) + (head.cors ? 1 : 0)];
  if (last !== null && last !== undefined) res.writeHeader(last.name, last.value);
}
