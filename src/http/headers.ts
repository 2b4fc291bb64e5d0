// The request headers the node reads, checked in one walk before any of them is used (P5, P7,
// P10, P12). uWebSockets.js hands a header value it cannot take as a string (bytes outside
// ASCII, DEL) to the handler as an empty string, exactly as it hands an absent header: read one
// at a time, `Path-Version: \xff` would be taken as no pin at all. Walking the list tells a
// header that is there from one that is not, so such a value is refused naming its header.
// Content-Length is framing: a value that is not 1*DIGIT (RFC 9110 8.6: `-5`, `+5`, `0x5`,
// `1e1`, `1.5`, `5, 5`) or a second such header leaves the end of the body unknown, and
// uWebSockets.js runs the handler all the same before it drops the connection; the refusal
// closes the connection.
import type uws from 'uWebSockets.js';
import { invalid, type Refusal } from '../protocol/errors.js';

/** How each header the node reads is spelled in a refusal's message. */
const READ: ReadonlyMap<string, string> = new Map([
  ['content-length', 'Content-Length'],
  ['content-type', 'Content-Type'],
  ['path-version', 'Path-Version'],
  ['path-key-id', 'Path-Key-Id'],
  ['path-timestamp', 'Path-Timestamp'],
  ['path-signature', 'Path-Signature'],
  ['path-idempotency-key', 'Path-Idempotency-Key'],
]);

/** Visible ASCII, with spaces and tabs inside (`application/json; charset=utf-8`); not empty. */
const VISIBLE = /^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?$/;
const DIGITS = /^[0-9]+$/;

export interface RequestHead {
  /** The first header the node cannot read; `close` when it leaves the framing unknown. */
  problem: { refusal: Refusal; close: boolean } | null;
  /** The declared length, or null without Content-Length (chunked, or no body). */
  declared: number | null;
}

const PLAIN: RequestHead = Object.freeze({ problem: null, declared: null });

export function readHead(req: uws.HttpRequest): RequestHead {
  let problem: RequestHead['problem'] = null;
  let declared: number | null = null;
  let lengths = 0;
  req.forEach((name, value) => {
    if (problem !== null) return;
    const spelled = READ.get(name);
    if (spelled === undefined) return;
    if (name === 'content-length') {
      lengths++;
      problem = framing(lengths, value);
      declared = problem === null ? Number(value) : null;
    } else if (!VISIBLE.test(value)) {
      const message = `${spelled} must be visible ASCII characters, and not empty`;
      problem = { refusal: invalid(name, message), close: false };
    }
  });
  return problem === null && declared === null ? PLAIN : { problem, declared };
}

function framing(lengths: number, value: string): RequestHead['problem'] {
  if (lengths > 1) {
    const message = 'a request carries at most one Content-Length header';
    return { refusal: invalid('content-length', message), close: true };
  }
  if (DIGITS.test(value)) return null;
  const message = 'Content-Length must be a decimal number of bytes (digits only)';
  return { refusal: invalid('content-length', message), close: true };
}
