// The access log (P21): one line per answered request, in the same JSON shape as the node's pino
// lines (level, time, service, msg), naming the request id, method, operation, status,
// duration and member; never a body, an identifier or a signature.
//
// Why not pino.info per line: measured on this machine, pino formats and hands over a line in
// about 4.5 µs, which took a fifth of the node's public GET throughput; this line is a template
// of fields that are already safe (a request id, a method, an operation name, a member name, all
// JSON-quoted) and costs about 0.2 µs. Lines are gathered and handed to pino's own destination
// (sonic-boom, which owns the descriptor: partial writes, EAGAIN, the synchronous flush at exit)
// once ACCESS_LOG_BUFFER_BYTES are there or ACCESS_LOG_FLUSH_MS has passed. Lines not yet
// written when the process is killed are lost, which an access log may afford.
import pino from 'pino';
import { ACCESS_LOG_BUFFER_BYTES, ACCESS_LOG_FLUSH_MS } from '../config.js';
import type { Answered } from './server.js';

const INFO = 30; // tidy: format (pino's level number for info)

/** A method as JSON; a client may send any token, so only GET, by far the commonest, is kept. */
const methodJson = (method: string): string =>
  method === 'GET' ? '"GET"' : JSON.stringify(method);

export class AccessLog {
  private readonly destination = pino.destination({ dest: 1, sync: false });
  /** Lines not yet handed over (a rope of appended strings until written). */
  private pending = '';
  private readonly names = new Map<string, string>();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly options: { sample: number }) {
    this.timer = setInterval(() => this.hand(), ACCESS_LOG_FLUSH_MS);
    this.timer.unref();
  }

  /** Writes the answer's line; successes only as often as the sample says. */
  record(a: Answered): void {
    const { sample } = this.options;
    if (a.status < 400 && (sample === 0 || (sample < 1 && Math.random() >= sample))) return;
    const line =
      `{"level":${INFO},"time":${Date.now()},"service":"path-node",` +
      `"request_id":${JSON.stringify(a.requestId)},"method":${methodJson(a.method)},` +
      `"operation":${this.nameJson(a.operation)},"status":${a.status},` +
      `"duration_ms":${Math.round(a.seconds * 1e6) / 1e3},"member":${this.nameJson(a.member)},` +
      `"msg":"request"}\n`;
    this.pending += line;
    if (this.pending.length >= ACCESS_LOG_BUFFER_BYTES) this.hand();
  }

  /**
   * An operation or member name as JSON, kept once made: both come from closed sets (the route
   * table, the network's members), so the map stays as small as they are.
   */
  private nameJson(name: string | null): string {
    if (name === null) return 'null';
    let text = this.names.get(name);
    if (text === undefined) {
      text = JSON.stringify(name);
      this.names.set(name, text);
    }
    return text;
  }

  /** Everything gathered, written before the process exits. */
  flushSync(): void {
    this.hand();
    this.destination.flushSync();
  }

  private hand(): void {
    if (this.pending === '') return;
    this.destination.write(this.pending);
    this.pending = '';
  }
}
