// Progress of a long command line run on stderr: a bar with keys/s and ETA when stderr is a
// terminal (cli-progress), plain lines at an interval when it is a file or a pipe (logs, CI).
import { SingleBar } from 'cli-progress';
import { LOOKUP_FILE_PROGRESS_INTERVAL_MS } from '../config.js';

export class Progress {
  /** Rows written in this run (a resumed run starts at the rows already there). */
  written = 0;
  private readonly started = Date.now();
  private readonly bar: SingleBar | null;
  private lastLine = 0;

  constructor(private readonly options: { total: number; done: number }) {
    this.bar = process.stderr.isTTY
      ? new SingleBar({
          stream: process.stderr,
          format: 'lookup [{bar}] {value}/{total} rows | {rate} keys/s | ETA {eta_formatted}',
        })
      : null;
    this.bar?.start(options.total, options.done, { rate: 0 });
  }

  advance(rows: number): void {
    this.written += rows;
    const value = this.options.done + this.written;
    this.bar?.update(value, { rate: this.rate() });
    if (this.bar === null && Date.now() - this.lastLine >= LOOKUP_FILE_PROGRESS_INTERVAL_MS)
      this.line();
  }

  finish(): void {
    this.bar?.stop();
    if (this.bar === null) this.line();
  }

  private rate(): number {
    return Math.round(this.written / Math.max((Date.now() - this.started) / 1000, 0.001));
  }

  private line(): void {
    this.lastLine = Date.now();
    const value = this.options.done + this.written;
    const rate = this.rate();
    const eta = rate === 0 ? '?' : `${Math.ceil((this.options.total - value) / rate)}s`;
    process.stderr.write(
      `lookup: ${value}/${this.options.total} rows, ${rate} keys/s, eta ${eta}\n`,
    );
  }
}
