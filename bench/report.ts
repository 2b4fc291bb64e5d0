// The printed report (its small statistics in stats.ts): each section adds rows as it measures them, and the
// run ends with one summary table of every figure, and the same in report.md and report.html.
import { loadCells, LOAD_COLUMNS, writeReportFiles, type Latencies, type LoadRow, type ReportSection, type SeriesChart, type SummaryRow } from './report-files.js';

export { median, ms, quantile, rate, ratio, slope } from './stats.js';

/** A section's figure number from its heading (`8e. Single lookups ...` is `8e`). */
const figureNumber = (heading: string) => heading.split('.')[0]!;

export class Report {
  private readonly rows: SummaryRow[] = [];
  private readonly loads: LoadRow[] = [];
  private readonly sections: ReportSection[] = [];

  heading(title: string): void {
    process.stdout.write(`\n## ${title}\n`);
    this.sections.push({ title, lines: [], charts: [] });
  }

  line(text: string): void {
    process.stdout.write(`${text}\n`);
    this.sections.at(-1)?.lines.push(text);
  }

  add(row: SummaryRow): void {
    this.rows.push(row);
    const floor = row.floor === undefined ? '' : `   (floor ${row.floor})`;
    const target = row.target === undefined ? '' : `   (target ${row.target.text}: ${row.target.met ? 'met' : 'NOT met'})`;
    this.line(`  ${row.figure}: ${row.value}${floor}${target}`);
  }

  /** Records a load's throughput and latency percentiles for the run's table of loads. */
  load(row: { figure: string; result: Latencies; unit?: string; section?: string }): void {
    this.loads.push({ section: row.section ?? figureNumber(this.sections.at(-1)?.title ?? ''), figure: row.figure, unit: row.unit ?? 'req', result: row.result });
  }

  /** Records a chart for the section under way (report.html draws it; report.md tabulates it). */
  chart(chart: SeriesChart): void {
    this.sections.at(-1)?.charts.push(chart);
  }

  printSummary(): void {
    const print = (text: string) => process.stdout.write(`${text}\n`);
    print('\n## Summary');
    const header = ['section', 'figure', 'value', 'floor', 'target'];
    const body = this.rows.map((r) =>
      [r.section, r.figure, r.value, r.floor ?? '', r.target === undefined ? '' : `${r.target.text} ${r.target.met ? 'met' : 'NOT met'}`]);
    const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
    const format = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
    print(format(header));
    print(format(widths.map((w) => '-'.repeat(w))));
    for (const row of body) print(format(row));
    if (this.loads.length === 0) return;
    print('\n## Throughput and latency');
    for (const row of this.loads) print(`| ${[row.section, row.figure, ...loadCells(row)].join(' | ')} |`);
    print(`(columns after section and load: ${LOAD_COLUMNS.join(', ')})`);
  }

  /** Writes the run's report.md and report.html into `dir` (report-files.ts). */
  writeFiles(dir: string, run: { title: string; meta: string[] }): { markdown: string; html: string } {
    return writeReportFiles(dir, { ...run, sections: this.sections, rows: this.rows, loads: this.loads });
  }
}
