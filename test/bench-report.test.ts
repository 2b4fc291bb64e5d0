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
  report.heading('4. Signed POST /receipts');
  report.add({
    section: '4 POST',
    figure: 'floor CPU / node CPU per write',
    value: '0.31',
    floor: '241 us (node:crypto verify + sign, one core)',
    target: { text: '>= 0.5', met: false },
  });
  report.load({
    figure: 'signed POST /receipts, 256 connections',
    result: {
      perSecond: 1423.4,
      latencyP50Ms: 160,
      latencyP90Ms: 210,
      latencyP99Ms: 250,
      latencyP999Ms: 300,
      latencyMaxMs: 333,
    },
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
    expect(text).toContain('| 20 soak | errors | 0 |  | 0: met |');
    expect(text).toContain(
      '| 20 soak | RssAnon over the first minute | 5.3 % |  | < 5 %: NOT met |',
    );
    // A cell's own bar is escaped, so the row keeps its five cells.
    expect(text).toContain('| 20 soak | RssAnon trend \\| range | 0.26 MiB a minute |  |  |');
    // The floor beside its figure; the load's rate and percentiles in columns of their own.
    expect(text).toContain(
      '| 4 POST | floor CPU / node CPU per write | 0.31 | 241 us (node:crypto verify + sign, one ' +
        'core) | >= 0.5: NOT met |',
    );
    expect(text).toContain(
      '| section | load | per s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |',
    );
    expect(text).toContain(
      '| 4 | signed POST /receipts, 256 connections | 1,423 req | 160 | 210 | ' +
        '250 | 300 | 333 |',
    );
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
    expect(await rows.count()).toBe(4);
    expect(await page.locator('#summary td.met').allInnerTexts()).toEqual(['0: met']);
    expect(await page.locator('#summary td.not-met').allInnerTexts()).toEqual([
      '< 5 %: NOT met',
      '>= 0.5: NOT met',
    ]);
    // The floor in its own column, beside the figure set against it.
    const header = await page.locator('#summary thead th').allInnerTexts();
    const postRow = await rows.nth(3).locator('td').allInnerTexts();
    expect(postRow[header.indexOf('floor')]).toBe('241 us (node:crypto verify + sign, one core)');
    expect(postRow[header.indexOf('value')]).toBe('0.31');
    // Each load's rate and percentiles, a column each.
    const loadHeader = await page.locator('#loads thead th').allInnerTexts();
    const load = await page.locator('#loads tbody tr').first().locator('td').allInnerTexts();
    expect(loadHeader).toEqual([
      'section',
      'load',
      'per s',
      'p50 ms',
      'p90 ms',
      'p99 ms',
      'p99.9 ms',
      'max ms',
    ]);
    expect(Number(load[loadHeader.indexOf('p99 ms')])).toBe(250);
    expect(Number(load[loadHeader.indexOf('max ms')])).toBe(333);
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
