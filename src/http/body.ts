// Request bodies on uWebSockets.js v20.30: which media type the node reads (P7), and the refusal
// of a chunked body that passes the size limit (P12). How a request frames its body is read
// with the other headers (headers.ts).
//
// What uWebSockets.js decides (measured; the node cannot change it): a request line or header
// it cannot parse (`GARBAGE`, `HTTP/9.9`, also `HTTP/1.0`) gets no answer: the bytes wait for
// more, and the connection is closed once 4 KiB of them pile up or after about 10 s of silence.
// Content-Length beside Transfer-Encoding closes the connection at once without an answer. A
// Content-Length that is not digits (`-5`, `+5`, `0x5`, `1e1`) or is above 999,999,999, and a
// Transfer-Encoding other than chunked, close it too, but only once the handler has run: the
// handler sees such a request. `Expect: 100-continue` is answered `100 Continue` before the
// handler runs.
import type uws from 'uWebSockets.js';
import { BODY_FIRST_BUFFER_BYTES, type Limits } from '../config.js';

/** `application/json`, any case, with or without parameters (`; charset=utf-8`) (P7). */
const JSON_MEDIA_TYPE = /^application\/json[ \t]*(?:;.*)?$/i;

export function isJsonMediaType(contentType: string): boolean {
  return JSON_MEDIA_TYPE.test(contentType);
}

/**
 * A chunked body past the limit: the 413 has gone out at once as the first chunk of a chunked
 * answer that says `Connection: close` (the caller wrote it), and the node closes in stages
 * (RFC 9112 9.6). What the client still sends is read and dropped, never kept. When the client
 * has sent its last chunk the answer ends (the client closes, or uWebSockets.js about 10 s
 * later); when it has sent `body_drain_bytes_max` in all, or falls silent for `body_linger_ms`,
 * the connection is closed. Closing at once instead makes a client that is still sending meet
 * a reset and lose the answer; and uWebSockets.js cannot end an answer now and close the
 * connection later, so the answer stays open until one of those things happens.
 */
export class LingeringRefusal {
  private readonly timer: NodeJS.Timeout;
  private read: number;
  private open = true;
  private aborted = false;

  constructor(
    private readonly res: uws.HttpResponse,
    private readonly limits: Limits,
    read: number,
  ) {
    this.read = read;
    this.timer = setTimeout(() => this.finish(false), limits.body_linger_ms);
  }

  /** The rest of the body, as uWebSockets.js hands it over. */
  onData(chunk: ArrayBuffer, isLast: boolean): void {
    if (!this.open) return;
    this.read += chunk.byteLength;
    if (isLast) this.finish(true);
    else if (this.read >= this.limits.body_drain_bytes_max) this.closeAfterData();
    else this.timer.refresh();
  }

  /** The client went away: nothing more may touch the response. */
  onAborted(): void {
    this.open = false;
    this.aborted = true;
    clearTimeout(this.timer);
  }

  /**
   * Closes once the data callback has returned: closing the socket inside it lets the server go
   * on parsing the rest of the bytes it read for a socket it has freed, which ended the process
   * with SIGSEGV (a client streaming past body_drain_bytes_max under load).
   */
  private closeAfterData(): void {
    this.open = false;
    clearTimeout(this.timer);
    setImmediate(() => {
      if (!this.aborted) this.res.close();
    });
  }

  /** Ends the answer when the body is complete; otherwise only closing can stop the client. */
  private finish(complete: boolean): void {
    if (!this.open) return;
    this.open = false;
    clearTimeout(this.timer);
    if (complete) this.res.cork(() => this.res.end());
    else this.res.close();
  }
}

/**
 * A request body as uWebSockets.js hands it over, each chunk copied once (the chunk's memory is
 * reused once its callback returns). The bytes go into a buffer that doubles as it fills, up to
 * the declared length (then the buffer is the body) or, for a chunked body, the limit (the caller
 * has checked the size against it). The first buffer is at most BODY_FIRST_BUFFER_BYTES: a client
 * that declares a megabyte and sends nothing holds no more than that.
 */
export class BodyBytes {
  private bytes: Buffer;
  private size = 0;
  /** The most the body may grow to. */
  private readonly cap: number;

  constructor(declared: number | null, limit: number) {
    this.cap = declared ?? limit;
    this.bytes = Buffer.allocUnsafeSlow(Math.min(declared ?? 0, BODY_FIRST_BUFFER_BYTES));
  }

  add(chunk: ArrayBuffer): void {
    const end = this.size + chunk.byteLength;
    if (end > this.bytes.length) {
      const grown = Buffer.allocUnsafeSlow(
        Math.max(end, Math.min(this.bytes.length * 2, this.cap)),
      );
      grown.set(this.bytes.subarray(0, this.size));
      this.bytes = grown;
    }
    this.bytes.set(new Uint8Array(chunk), this.size);
    this.size = end;
  }

  /** The bytes received so far. */
  body(): Buffer {
    return this.size === this.bytes.length ? this.bytes : this.bytes.subarray(0, this.size);
  }
}
