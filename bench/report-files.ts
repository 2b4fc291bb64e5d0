// The files a run leaves (issue 34, target 7): `report.md` and `report.html` in
// `bench/results/<date>-<commit>/`. Both hold what the run printed, section by section, and the
// summary table (each figure beside its target, met or not); the page also draws each series a
// section recorded (the soak's p99 and memory, minute by minute) as a chart. The page is one file
// with nothing to fetch: its charts are inline SVG, its text escaped, no script in it.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ms, rate } from './stats.js';

export interface SummaryRow {
  section: string;
  figure: string;
  value: string;
  /** What the figure is set against (issue 34): the floor no implementation can beat. */
  floor?: string;
  /** For a ratio with a target: whether it was met. */
  target?: { text: string; met: boolean };
}

/** The latencies of a load, in milliseconds, and its rate (those a generator reported). */
export interface Latencies {
  perSecond: number;
  latencyP50Ms: number;
  latencyP90Ms?: number;
  latencyP99Ms: number;
  latencyP999Ms?: number;
  latencyMaxMs?: number;
}

/** One load a section ran: its throughput and latency percentiles, as columns. */
export interface LoadRow {
  section: string;
  figure: string;
  /** What the rate counts (`req`, `keys`). */
  unit: string;
  result: Latencies;
}

/** A load's columns after its section and figure: rate, then p50, p90, p99, p99.9, max in ms. */
export const LOAD_COLUMNS = ['per s', 'p50 ms', 'p90 ms', 'p99 ms', 'p99.9 ms', 'max ms'] as const;

export function loadCells(row: LoadRow): string[] {
  const r = row.result;
  const cell = (v: number | undefined) => (v === undefined ? '' : ms(v));
  return [`${rate(r.perSecond)} ${row.unit}`, cell(r.latencyP50Ms), cell(r.latencyP90Ms), cell(r.latencyP99Ms), cell(r.latencyP999Ms), cell(r.latencyMaxMs)];
}

/** Values a section measured step by step (the soak's minutes), drawn as lines in report.html. */
export interface SeriesChart {
  title: string;
  unit: string;
  /** What a step is (`minute`), and each step's label. */
  x: string;
  labels: string[];
  series: { name: string; values: number[] }[];
}

/** What one section printed and the series it recorded. */
export interface ReportSection {
  title: string;
  lines: string[];
  charts: SeriesChart[];
}

export interface ReportContent {
  title: string;
  /** The run's circumstances: Node.js, cores, date, commit. */
  meta: string[];
  sections: readonly ReportSection[];
  rows: readonly SummaryRow[];
  loads: readonly LoadRow[];
}

/** Where a run's files go: `<root>/<YYYY-MM-DD>-<commit>`, the checkout's short commit hash. */
export function resultsDir(root: string, now: Date): { dir: string; commit: string } {
  const commit = commitOf(dirname(root));
  return { dir: join(root, `${now.toISOString().slice(0, 10)}-${commit}`), commit };
}

/** The checkout's short commit hash, with `-dirty` when its tree has changes; `nogit` outside one. */
function commitOf(dir: string): string {
  try {
    const git = (args: string[]) => execFileSync('git', args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const hash = git(['rev-parse', '--short', 'HEAD']);
    return git(['status', '--porcelain', '--untracked-files=no']) === '' ? hash : `${hash}-dirty`;
  } catch {
    return 'nogit';
  }
}

/** Writes `report.md` and `report.html` into `dir` (made if missing); answers their paths. */
export function writeReportFiles(dir: string, content: ReportContent): { markdown: string; html: string } {
  mkdirSync(dir, { recursive: true });
  const markdown = join(dir, 'report.md');
  const html = join(dir, 'report.html');
  writeFileSync(markdown, markdownOf(content));
  writeFileSync(html, htmlOf(content));
  return { markdown, html };
}

const targetText = (row: SummaryRow) => (row.target === undefined ? '' : `${row.target.text}: ${row.target.met ? 'met' : 'NOT met'}`);

function markdownOf(content: ReportContent): string {
  const cell = (text: string) => text.replaceAll('|', '\\|');
  const out = [`# ${content.title}`, '', ...content.meta.map((m) => `- ${m}`), '', '## Summary', ''];
  out.push('| section | figure | value | floor | target |', '|---|---|---|---|---|');
  for (const row of content.rows) out.push(`| ${cell(row.section)} | ${cell(row.figure)} | ${cell(row.value)} | ${cell(row.floor ?? '')} | ${cell(targetText(row))} |`);
  if (content.loads.length > 0) {
    out.push('', '## Throughput and latency', '', `| section | load | ${LOAD_COLUMNS.join(' | ')} |`, `|${'---|'.repeat(LOAD_COLUMNS.length + 2)}`);
    for (const row of content.loads) out.push(`| ${[row.section, row.figure, ...loadCells(row)].map(cell).join(' | ')} |`);
  }
  for (const section of content.sections) {
    out.push('', `## ${section.title}`, '', '```', ...section.lines, '```');
    for (const chart of section.charts) {
      out.push('', `${chart.title} (${chart.unit}, by ${chart.x}):`, '', `| ${chart.x} | ${chart.series.map((s) => cell(s.name)).join(' | ')} |`, `|${'---|'.repeat(chart.series.length + 1)}`);
      for (let i = 0; i < chart.labels.length; i++) out.push(`| ${chart.labels[i]} | ${chart.series.map((s) => String(s.values[i] ?? '')).join(' | ')} |`);
    }
  }
  return `${out.join('\n')}\n`;
}

function escapeHtml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;').replaceAll("'", '&#39;');
}

const STYLE = `body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#1b1f24}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}
td.met{color:#116329}td.not-met{color:#a40e26;font-weight:600}pre{background:#f6f8fa;padding:.75rem;overflow-x:auto;font-size:12px}
figure{margin:1rem 0}figcaption{font-weight:600}svg text{font:11px system-ui,sans-serif}`;

function htmlOf(content: ReportContent): string {
  const e = escapeHtml;
  const rows = content.rows.map((row) => {
    const verdict = row.target === undefined ? '' : row.target.met ? 'met' : 'not-met';
    return `<tr><td>${e(row.section)}</td><td>${e(row.figure)}</td><td>${e(row.value)}</td><td>${e(row.floor ?? '')}</td><td class="${verdict}">${e(targetText(row))}</td></tr>`;
  });
  const loads = content.loads.map((row) => `<tr>${[row.section, row.figure, ...loadCells(row)].map((c) => `<td>${e(c)}</td>`).join('')}</tr>`);
  const loadTable = loads.length === 0 ? '' : `<h2>Throughput and latency</h2><table id="loads"><thead><tr><th>section</th><th>load</th>${LOAD_COLUMNS.map((c) => `<th>${c}</th>`).join('')}</tr></thead><tbody>${loads.join('')}</tbody></table>`;
  const sections = content.sections.map((section) =>
    `<section><h2>${e(section.title)}</h2>${section.charts.map(chartSvg).join('')}<pre>${e(section.lines.join('\n'))}</pre></section>`);
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${e(content.title)}</title><style>${STYLE}</style></head><body>
<h1>${e(content.title)}</h1><ul>${content.meta.map((m) => `<li>${e(m)}</li>`).join('')}</ul>
<h2>Summary</h2><table id="summary"><thead><tr><th>section</th><th>figure</th><th>value</th><th>floor</th><th>target</th></tr></thead><tbody>${rows.join('')}</tbody></table>
${loadTable}
${sections.join('\n')}
</body></html>
`;
}

const WIDTH = 640;
const HEIGHT = 240;
const PAD = { left: 56, right: 160, top: 12, bottom: 28 };
const COLOURS = ['#0969da', '#bf3989', '#1a7f37', '#9a6700', '#8250df', '#cf222e'];

/** One chart: each series a line over the same x labels, the y axis from 0 to the largest value. */
function chartSvg(chart: SeriesChart): string {
  const e = escapeHtml;
  const top = Math.max(...chart.series.flatMap((s) => s.values.filter(Number.isFinite)), 0) || 1;
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const x = (i: number) => PAD.left + (chart.labels.length < 2 ? plotW / 2 : (i * plotW) / (chart.labels.length - 1));
  const y = (v: number) => PAD.top + plotH - (v / top) * plotH;
  const lines = chart.series.map((s, n) => {
    const points = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    const colour = COLOURS[n % COLOURS.length]!;
    const legendY = PAD.top + 14 * n + 8;
    return `<polyline data-series="${e(s.name)}" fill="none" stroke="${colour}" stroke-width="2" points="${points}"/>` +
      `<text x="${WIDTH - PAD.right + 12}" y="${legendY}" fill="${colour}">${e(s.name)}</text>`;
  });
  const axes = `<line x1="${PAD.left}" y1="${PAD.top + plotH}" x2="${PAD.left + plotW}" y2="${PAD.top + plotH}" stroke="#57606a"/>` +
    `<line x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${PAD.top + plotH}" stroke="#57606a"/>` +
    `<text x="${PAD.left - 6}" y="${PAD.top + 4}" text-anchor="end">${e(ms(top))}</text>` +
    `<text x="${PAD.left - 6}" y="${PAD.top + plotH}" text-anchor="end">0</text>` +
    chart.labels.map((label, i) => `<text x="${x(i).toFixed(1)}" y="${HEIGHT - 8}" text-anchor="middle">${e(label)}</text>`).join('');
  return `<figure><figcaption>${e(chart.title)} (${e(chart.unit)}, by ${e(chart.x)})</figcaption>` +
    `<svg role="img" aria-label="${e(chart.title)}" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}">${axes}${lines.join('')}</svg></figure>`;
}
