// The access log (P21): one line per answered request, in the same JSON shape as the node's pino
// lines (level, time, service, msg), naming the request id, method, operation, status,
// duration and member; never a body, an identifier or a signature.
//
// Why not pino.info per line: measured on this machine, pino formats and hands over a line in
// about 4.5 µs, which took a fifth of the node's public GET throughput; this line is a template
// of fields that are already safe (a request id the server made, a method, an operation name, a
// member name, the last three JSON-quoted). Of a line only the request id and the duration
// change from one to the next: the start (up to the request id) is made once a millisecond and
// the middle once per operation and status, so a line is five strings joined, about 0.3 µs
// where formatting each field took 0.55 µs on this machine. Lines are gathered and handed to
// pino's own destination (sonic-boom, which owns the descriptor: partial writes, EAGAIN, the
// synchronous flush at exit) once ACCESS_LOG_BUFFER_BYTES are there or ACCESS_LOG_FLUSH_MS has
// passed. Lines not yet written when the process is killed are lost, which an access log may
// afford. They are handed over as bytes, encoded once: given a string, sonic-boom measures it
// twice and encodes it again after the write (to cut off what was written), which took about
// as long as making the lines. The lines are nearly always ASCII, and then they are encoded as
// Latin-1, byte for byte, which spares UTF-8's measuring and converting pass (a tenth of the
// node's own CPU per public GET); a chunk with a name or method beyond ASCII goes as UTF-8.
import { openSync } from 'node:fs';
import pino from 'pino';
import {
  ACCESS_LOG_BUFFER_BYTES,
  ACCESS_LOG_FLUSH_MS,
  ConfigError,
  type AccessLogTarget,
} from '../config.js';
import type { Answered } from './server.js';

const INFO = 30; // tidy: format (pino's level number for info)

/** A method as JSON; a client may send any token, so only GET, by far the commonest, is kept. */
const methodJson = (method: string): string =>
  method === 'GET' ? '"GET"' : JSON.stringify(method);

/** Thousandths as three digits: a duration's fraction is looked up, not formatted. */
const THOUSANDTHS = Array.from(
  { length: 1000 }, // tidy: format (the thousandths of one)
  (_, i) => String(i).padStart(3, '0'), // tidy: format (three decimal digits)
);

const LINE_END = ',"msg":"request"}\n';
const BEYOND_ASCII = /[^\x00-\x7f]/;
const MEMBERLESS_END = `,"member":null${LINE_END}`;

/** sonic-boom in its 'buffer' mode, which takes Buffers (its typings say strings only). */
interface ByteDestination {
  write(bytes: Buffer): boolean;
  flushSync(): void;
}

const OWNER_ONLY = 0o600; // tidy: format (file mode: read and write by the node's user alone)

/**
 * The access log `--access-log` names, or null when it is off. A file is opened once, at start,
 * for appending (created owner-only if missing: the lines name members and operations), so a
 * path that cannot be written stops the start with one line instead of losing lines later.
 * Rotation: the descriptor stays open, so a rotated file is truncated in place (logrotate's
 * `copytruncate`); appends then continue at the new end.
 */
export function openAccessLog(target: AccessLogTarget, sample: number): AccessLog | null {
  if (target === 'off') return null;
  if (target === 'stdout') return new AccessLog({ sample });
  let dest: number;
  try {
    dest = openSync(target.file, 'a', OWNER_ONLY);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError(`--access-log cannot open ${target.file} for appending (${code})`);
  }
  return new AccessLog({ sample, dest });
}

export class AccessLog {
  private readonly destination: ByteDestination;
  /** Lines not yet handed over (a rope of appended strings until written). */
  private pending = '';
  private readonly names = new Map<string, string>();
  /**
   * The middle of a line (method to the duration's name) by operation and status: both come
   * from closed sets, and the method is GET for nearly every line (any other is not kept).
   */
  private readonly middles = new Map<string | null, Map<number, string>>();
  /** The start of a line up to the request id, made once per millisecond. */
  private start = { time: -1, text: '' };
  private readonly timer: NodeJS.Timeout;
  /** Kept names and middles with a character beyond ASCII (few or none: names are closed sets). */
  private readonly wide = new Set<string>();
  /** A pending line holds a character beyond ASCII: the chunk is written as UTF-8. */
  private pendingWide = false;

  /** `dest`: the descriptor written to; standard output unless told. */
  constructor(private readonly options: { sample: number; dest?: number }) {
    const dest = options.dest ?? 1;
    const mode = { dest, sync: false, contentMode: 'buffer' } as const;
    this.destination = pino.destination(mode) as unknown as ByteDestination;
    this.timer = setInterval(() => this.hand(), ACCESS_LOG_FLUSH_MS);
    this.timer.unref();
  }

  /**
   * Writes the answer's line; successes only as often as the sample says. The request id goes in
   * unquoted: the server makes it of hex digits, a hyphen and decimal digits.
   */
  record(a: Answered): void {
    const { sample } = this.options;
    if (a.status < 400 && (sample === 0 || (sample < 1 && Math.random() >= sample))) return;
    const time = Date.now();
    if (time !== this.start.time) {
      const text = `{"level":${INFO},"time":${time},"service":"path-node","request_id":"`;
      this.start = { time, text };
    }
    const micros = Math.round(a.seconds * 1e6); // tidy: format (seconds to microseconds)
    const member = a.member === null ? null : this.nameJson(a.member);
    const middle = this.middle(a);
    if (this.wide.size > 0 && (this.wide.has(middle) || (member !== null && this.wide.has(member))))
      this.pendingWide = true;
    const end = member === null ? MEMBERLESS_END : `,"member":${member}${LINE_END}`;
    this.pending +=
      this.start.text +
      a.requestId +
      middle +
      Math.floor(micros / 1000) + // tidy: format (microseconds to milliseconds)
      '.' +
      THOUSANDTHS[micros % 1000] + // tidy: format (the thousandths of a millisecond)
      end;
    if (this.pending.length >= ACCESS_LOG_BUFFER_BYTES) this.hand();
  }

  private middle(a: Answered): string {
    if (a.method !== 'GET') {
      // Any token a client sent: not kept, so looked at each time.
      const text = this.middleText(a);
      if (BEYOND_ASCII.test(text)) this.pendingWide = true;
      return text;
    }
    let byStatus = this.middles.get(a.operation);
    if (byStatus === undefined) {
      byStatus = new Map();
      this.middles.set(a.operation, byStatus);
    }
    let text = byStatus.get(a.status);
    if (text === undefined) {
      text = this.kept(this.middleText(a));
      byStatus.set(a.status, text);
    }
    return text;
  }

  private middleText(a: Answered): string {
    return (
      `","method":${methodJson(a.method)},"operation":${this.nameJson(a.operation)},` +
      `"status":${a.status},"duration_ms":`
    );
  }

  /**
   * An operation or member name as JSON, kept once made: both come from closed sets (the route
   * table, the network's members), so the map stays as small as they are.
   */
  private nameJson(name: string | null): string {
    if (name === null) return 'null';
    let text = this.names.get(name);
    if (text === undefined) {
      text = this.kept(JSON.stringify(name));
      this.names.set(name, text);
    }
    return text;
  }

  /** A text about to be kept for later lines, noted when it reaches beyond ASCII. */
  private kept(text: string): string {
    if (BEYOND_ASCII.test(text)) this.wide.add(text);
    return text;
  }

  /** Everything gathered, written before the process exits. */
  flushSync(): void {
    this.hand();
    this.destination.flushSync();
  }

  private hand(): void {
    if (this.pending === '') return;
    this.destination.write(Buffer.from(this.pending, this.pendingWide ? 'utf8' : 'latin1'));
    this.pending = '';
    this.pendingWide = false;
  }
}
