// P21: the request metrics stay exact under many answers. The node counts answers in plain
// numbers and hands them to prom-client only when `/metrics` is scraped; these check that the
// counts after many public GETs, HEADs and refusals are exactly what was sent, that scraping
// twice does not add anything, that every answer also has its access log line, and that the
// text served is, line for line, what prom-client's own counter and histogram give for the
// same answers.
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { Counter, Histogram, Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LATENCY_BUCKETS, Metrics } from '../src/metrics.js';
import {
  Client,
  createCredential,
  startNode,
  tempDir,
  type NodeProcess,
} from './support/harness.js';
import { waitFor } from './support/wait.js';

type Sample = { value?: string; labels?: Record<string, string> };
type Family = { name: string; metrics: Sample[] };

const PREFIX = '/api/path/v1';
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };

async function scrape(node: NodeProcess): Promise<{ text: string; families: Map<string, Family> }> {
  const text = await (await fetch(`http://127.0.0.1:${node.adminPort}/metrics`)).text();
  return {
    text,
    families: new Map((parsePrometheusTextFormat(text) as Family[]).map((f) => [f.name, f])),
  };
}

/** One line of the latency histogram of `requests.get` (the parser drops a histogram's labels). */
function latencyLine(text: string, suffix: string, le?: string): number {
  const labels = le === undefined ? '' : `le="${le}",`;
  const line = `path_http_request_duration_seconds_${suffix}{${labels}operation="requests.get"} `;
  const found = text.split('\n').find((l) => l.startsWith(line));
  if (found === undefined) throw new Error(`no line ${line}`);
  return Number(found.slice(line.length));
}

function sampleOf(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string>,
): Sample {
  const found = families
    .get(name)
    ?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  if (found === undefined) throw new Error(`no sample of ${name} with ${JSON.stringify(labels)}`);
  return found;
}

/** `count` requests, `inFlight` at a time; every answer must have `status`. */
async function many(
  count: number,
  inFlight: number,
  send: () => Promise<Response>,
  status: number,
): Promise<void> {
  let left = count;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (left > 0) {
        left--;
        const res = await send();
        await res.arrayBuffer();
        expect(res.status).toBe(status);
      }
    }),
  );
}

describe('P21 request metrics after many answers', () => {
  let node: NodeProcess;
  let url: string;
  const GETS = 3_000;
  const HEADS = 500;
  const MISSING = 700;

  beforeAll(async () => {
    const dataDir = tempDir('path-metrics');
    const own = createCredential(dataDir, 'local', { local: true });
    node = await startNode({ dataDir });
    const created = await new Client(node.baseUrl, own).post('/requests', { accepts: [EUR] });
    expect(created.status).toBe(201);
    url = `${node.baseUrl}${PREFIX}/requests/${created.json.reference as string}`;
    await many(GETS, 32, () => fetch(url), 200);
    await many(HEADS, 16, () => fetch(url, { method: 'HEAD' }), 200);
    await many(
      MISSING,
      16,
      () => fetch(`${node.baseUrl}${PREFIX}/requests/req_${'0'.repeat(32)}`),
      404,
    );
  });

  afterAll(async () => {
    await node.stop();
  });

  it('counts every GET, HEAD and refusal exactly; a second scrape adds nothing', async () => {
    for (const { text, families } of [await scrape(node), await scrape(node)]) {
      const total = (status: string) =>
        Number(
          sampleOf(families, 'path_http_requests_total', { operation: 'requests.get', status })
            .value,
        );
      expect(total('200')).toBe(GETS + HEADS);
      expect(total('404')).toBe(MISSING);
      expect(latencyLine(text, 'count')).toBe(GETS + HEADS + MISSING);
      expect(latencyLine(text, 'bucket', '+Inf')).toBe(GETS + HEADS + MISSING);
      const cumulative = LATENCY_BUCKETS.map((le) => latencyLine(text, 'bucket', String(le)));
      cumulative.forEach((n, i) =>
        expect(n).toBeGreaterThanOrEqual(i === 0 ? 0 : cumulative[i - 1]!),
      );
      expect(latencyLine(text, 'sum')).toBeGreaterThan(0);
      expect(
        Number(
          sampleOf(families, 'path_http_requests_total', {
            operation: 'requests.create',
            status: '201',
          }).value,
        ),
      ).toBe(1);
    }
  });

  it('writes one access log line for each of those answers', async () => {
    const reads = await waitFor('every access log line', () => {
      const lines = node
        .output()
        .split('\n')
        .filter((l) => l.includes('"operation":"requests.get"'))
        .map((l) => JSON.parse(l) as { method: string; status: number });
      return lines.length >= GETS + HEADS + MISSING ? lines : undefined;
    });
    const count = (method: string, status: number) =>
      reads.filter((l) => l.method === method && l.status === status).length;
    expect([count('GET', 200), count('HEAD', 200), count('GET', 404)]).toEqual([
      GETS,
      HEADS,
      MISSING,
    ]);
  });
});

describe('P21 the request metrics as text', () => {
  it("match, line for line, prom-client's own metrics for the same answers", async () => {
    const answers: [string, number, number][] = [];
    const operations = ['receipts.get', 'requests.get', 'sonar.lookup', 'unrouted'];
    const statuses = [200, 404, 201, 429, 405];
    // Durations on, between and beyond the bounds, in an order that mixes operations and statuses.
    const durations = [
      ...LATENCY_BUCKETS,
      ...LATENCY_BUCKETS.map((b) => b * 0.7),
      0,
      12.5,
      0.0000123,
      3.3,
    ];
    for (let i = 0; i < 2_000; i++) {
      answers.push([
        operations[(i * 7) % 4]!,
        statuses[(i * 3) % 5]!,
        durations[(i * 11) % durations.length]!,
      ]);
    }
    const metrics = new Metrics();
    const reference = new Registry();
    const counter = new Counter({
      name: 'path_http_requests_total',
      help: 'Answers by operation and HTTP status (503: overloaded or draining; 429: budget).',
      labelNames: ['operation', 'status'],
      registers: [reference],
    });
    const histogram = new Histogram({
      name: 'path_http_request_duration_seconds',
      help: 'From the request line to the answer, by operation.',
      labelNames: ['operation'],
      buckets: LATENCY_BUCKETS,
      registers: [reference],
    });
    for (const [operation, status, seconds] of answers) {
      metrics.answered(operation, status, seconds);
      counter.inc({ operation, status: String(status) });
      histogram.observe({ operation }, seconds);
    }
    const families = (text: string) =>
      text
        .split('\n\n')
        .map((f) => f.trim())
        .filter((f) => f.includes('path_http_request'));
    const expected = families(await reference.metrics());
    expect(expected).toHaveLength(2);
    const served = families(await metrics.registry.metrics());
    expect(served).toEqual(expected);
    expect(families(await metrics.registry.metrics())).toEqual(expected);
  });
});
