// The files a benchmark run leaves (issue 34, target 7): report.md and report.html, read back as
// text and opened in real Chromium. The page shows every figure beside its target (met or not),
// draws each series a section recorded as a line with one point a step, shows what the run
// printed as text (a `<script>` in it stays text), and fetches nothing.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resultsDir } from '../bench/report-files.js';
import { Report } from '../bench/report.js';
import { launchChromium } from './support/browser.js';

const HOSTILE = '  minute 1: <script>window.ran = true</script> & "quoted"';

function soakReport(): Report {
  const report = new Report();
  report.heading('20. Soak');
  report.line(HOSTILE);
  report.add({
    section: '20 soak',
    figure: 'errors',
    value: '0',
    target: { text: '0', met: true },
  });
  report.add({
    section: '20 soak',
    figure: 'RssAnon over the first minute',
    value: '5.3 %',
    target: { text: '< 5 %', met: false },
  });
  report.add({ section: '20 soak', figure: 'RssAnon trend | range', value: '0.26 MiB a minute' });
  report.chart({
    title: 'p99 latency per minute',
    unit: 'ms',
    x: 'minute',
    labels: ['1', '2', '3'],
    series: [
      { name: 'receipts', values: [40, 45, 42] },
      { name: 'reads', values: [30, 90, 35] },
    ],
  });
  return report;
}

describe('the report files of a benchmark run (issue 34, target 7)', () => {
  let browser: Browser;
  let dir: string;
  let files: { markdown: string; html: string };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'path-bench-report-'));
    files = soakReport().writeFiles(join(dir, 'run'), { title: 'a run', meta: ['node v0'] });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('report.md: the summary table with each target met or not, the text, the series', () => {
    const text = readFileSync(files.markdown, 'utf8');
    expect(text).toContain('| 20 soak | errors | 0 | 0: met |');
    expect(text).toContain('| 20 soak | RssAnon over the first minute | 5.3 % | < 5 %: NOT met |');
    // A cell's own bar is escaped, so the row keeps its four cells.
    expect(text).toContain('| 20 soak | RssAnon trend \\| range | 0.26 MiB a minute |  |');
    expect(text).toContain(HOSTILE);
    expect(text).toContain('| minute | receipts | reads |');
    expect(text).toContain('| 2 | 45 | 90 |');
  });

  it('report.html in Chromium: the figures beside their targets, a line a series, text as text', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    await page.goto(pathToFileURL(files.html).href);
    const rows = page.locator('#summary tbody tr');
    expect(await rows.count()).toBe(3);
    expect(await page.locator('#summary td.met').allInnerTexts()).toEqual(['0: met']);
    expect(await page.locator('#summary td.not-met').allInnerTexts()).toEqual(['< 5 %: NOT met']);
    const lines = page.locator('svg polyline');
    expect(await lines.count()).toBe(2);
    const reads = await page.locator('polyline[data-series="reads"]').getAttribute('points');
    const points = reads!.split(' ').map((pair) => pair.split(',').map(Number));
    expect(points).toHaveLength(3);
    // The largest value sits at the top of the plot, the others lower (larger y) in proportion.
    const ys = points.map(([, y]) => y!);
    expect(ys[1]).toBeLessThan(ys[0]!);
    expect(ys[1]).toBeLessThan(ys[2]!);
    expect(await page.locator('pre').first().innerText()).toContain(HOSTILE.trim());
    expect(await page.evaluate(() => (window as unknown as { ran?: boolean }).ran)).toBeUndefined();
    expect(requested).toEqual([pathToFileURL(files.html).href]);
    await context.close();
  });

  it('goes to bench/results/<date>-<commit> in a checkout, <date>-nogit outside one', () => {
    const results = fileURLToPath(new URL('../bench/results', import.meta.url));
    const day = new Date('2026-11-28T12:00:00Z');
    const inCheckout = resultsDir(results, day);
    expect(inCheckout.dir).toBe(join(results, `2026-11-28-${inCheckout.commit}`));
    expect(inCheckout.commit).toMatch(/^[0-9a-f]{7,}(-dirty)?$/);
    expect(resultsDir(join(dir, 'results'), day).dir).toBe(
      join(dir, 'results', '2026-11-28-nogit'),
    );
  });
});
