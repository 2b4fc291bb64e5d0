// Small statistics and the printed report: each section adds rows as it measures them, and the
// run ends with one summary table of every figure, and the same in report.md and report.html.
import { writeReportFiles, type ReportSection, type SeriesChart, type SummaryRow } from './report-files.js';

export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of nothing');
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** The q-quantile (0..1) by nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) throw new RangeError('quantile of nothing');
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export function rate(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

export function ms(value: number): string {
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

export function ratio(value: number): string {
  return value.toFixed(2);
}

export class Report {
  private readonly rows: SummaryRow[] = [];
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
    const target = row.target === undefined ? '' : `   (target ${row.target.text}: ${row.target.met ? 'met' : 'NOT met'})`;
    this.line(`  ${row.figure}: ${row.value}${target}`);
  }

  /** Records a chart for the section under way (report.html draws it; report.md tabulates it). */
  chart(chart: SeriesChart): void {
    this.sections.at(-1)?.charts.push(chart);
  }

  printSummary(): void {
    const print = (text: string) => process.stdout.write(`${text}\n`);
    print('\n## Summary');
    const header: [string, string, string, string] = ['section', 'figure', 'value', 'target'];
    const body = this.rows.map((r): [string, string, string, string] =>
      [r.section, r.figure, r.value, r.target === undefined ? '' : `${r.target.text} ${r.target.met ? 'met' : 'NOT met'}`]);
    const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
    const format = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
    print(format(header));
    print(format(widths.map((w) => '-'.repeat(w))));
    for (const row of body) print(format(row));
  }

  /** Writes the run's report.md and report.html into `dir` (report-files.ts). */
  writeFiles(dir: string, run: { title: string; meta: string[] }): { markdown: string; html: string } {
    return writeReportFiles(dir, { ...run, sections: this.sections, rows: this.rows });
  }
}
