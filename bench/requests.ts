// Figure 7 (issue 4): payment request creation, signed `POST /requests`, in requests per second;
// and the public read `GET /requests/{reference}` against a bare uWebSockets.js server serving
// the same bytes (the comparison of figure 3).
import type { BenchConfig } from './config.js';
import { compareWithBare } from './http-get.js';
import { createLocalCredential, removeDir, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { ms, rate, type Report } from './report.js';
import { describeRun, EUR, runSignedLoad } from './signed-load.js';
import { API_PREFIX, expectSigned } from './signed-request.js';

const SECTION = '7 requests';
const REQUEST_BODY = { accepts: [EUR] };

export async function runRequests(config: BenchConfig, report: Report): Promise<void> {
  report.heading('7. Payment requests: signed POST /requests; public GET /requests/{reference} against bare uWebSockets.js');
  const dataDir = tempDir('requests');
  let node: RunningServer | null = null;
  try {
    const credential = createLocalCredential(dataDir);
    node = await startNodeProcess({ dataDir, timeoutMs: config.child_timeout_ms });

    const load = config.requests.create;
    report.line(`  request creation: ${load.count} signed POST /requests ${JSON.stringify(REQUEST_BODY)} (after ${load.warmup} warm-up), ${load.connections} connections, each with its own idempotency key`);
    const run = await runSignedLoad(config, node, {
      credentials: [credential], load, idempotency: true,
      plan: { kind: 'template', method: 'POST', target: `${API_PREFIX}/requests`, body: JSON.stringify(REQUEST_BODY) },
    });
    describeRun(report, run, 'creations');
    report.add({ section: SECTION, figure: `request creations/s, ${load.connections} connections (p50 ${ms(run.result.latencyP50Ms)} ms, p99 ${ms(run.result.latencyP99Ms)} ms)`, value: rate(run.result.perSecond) });

    // The read is measured on a node that now holds every request just created.
    const created = await expectSigned<{ reference: string }>(node.baseUrl, credential, 'POST', `${API_PREFIX}/requests`, REQUEST_BODY, 201);
    await compareWithBare(config, report, { section: SECTION, node, dir: dataDir, path: `${API_PREFIX}/requests/${created.reference}`, shapes: config.requests.shapes });
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}
