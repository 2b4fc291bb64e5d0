// Figure 9 (issue 6): consumption on connections, signed `POST /connect/connections/{ref}/consume`
// by the grantee (a credential of member beta, not the operator's), every call with its own
// idempotency key and operation_ref. First every call goes to one connection (one aggregate, one
// single writer: the calls are decided and committed one after the other); then the same load is
// spread across many connections of the same grantor, subject and grantee.
import type { BenchConfig, SignedLoad } from './config.js';
import { createCredential, createLocalCredential, removeDir, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { ms, rate, ratio, type Report } from './report.js';
import type { RequestPlan } from './request-plans.js';
import { createSubjects, describeRun, runSignedLoad, type SignedRun } from './signed-load.js';
import { API_PREFIX, expectSigned, type ClientCredential } from './signed-request.js';

const SECTION = '9 consume';
/** Ceilings no run comes near: every consume is accepted. */
const CONNECTION_TERMS = {
  grantee: 'beta', capabilities: { payment_request: true }, mode: 'persistent_consent', max_single: '10', max_total: '1000000000000', currency: 'EUR',
};

function consumePlan(references: readonly string[], first: number): RequestPlan {
  return {
    kind: 'template', method: 'POST', target: `${API_PREFIX}/connect/connections/{ref}/consume`, first, lists: { ref: references },
    body: JSON.stringify({ capability: 'payment_request', amount: '1.25', currency: 'EUR', operation_ref: 'bench-op-{n}' }),
  };
}

async function createConnections(node: RunningServer, credential: ClientCredential, subjectId: string, count: number): Promise<string[]> {
  const expiresAt = new Date(Date.now() + 6 * 3_600_000).toISOString();
  const references: string[] = [];
  for (let first = 0; first < count; first += 8) {
    const batch = Array.from({ length: Math.min(8, count - first) }, () =>
      expectSigned<{ reference: string }>(node.baseUrl, credential, 'POST', `${API_PREFIX}/connect/connections`, { ...CONNECTION_TERMS, subject_id: subjectId, expires_at: expiresAt }, 201));
    for (const created of await Promise.all(batch)) references.push(created.reference);
  }
  return references;
}

export async function runConsume(config: BenchConfig, report: Report): Promise<void> {
  report.heading('9. Consume on one hot connection and across many');
  const dataDir = tempDir('consume');
  let node: RunningServer | null = null;
  try {
    const local = createLocalCredential(dataDir);
    const grantee = createCredential(dataDir, 'beta', false);
    node = await startNodeProcess({ dataDir, timeoutMs: config.child_timeout_ms });
    const [subjectId] = await createSubjects(node, local, 1);
    const references = await createConnections(node, local, subjectId!, config.consume.spread_connections);

    const measure = async (load: SignedLoad, refs: readonly string[], first: number, what: string): Promise<SignedRun> => {
      report.line(`  ${what}: ${load.count} consumes (after ${load.warmup} warm-up), ${load.connections} HTTP connections, ${refs.length} connection aggregate${refs.length === 1 ? '' : 's'}`);
      const run = await runSignedLoad(config, node!, { credentials: [grantee], plan: consumePlan(refs, first), load, idempotency: true });
      describeRun(report, run, what);
      return run;
    };
    const hot = await measure(config.consume.hot, references.slice(0, 1), 0, 'one hot connection');
    const spread = await measure(config.consume.spread, references, 1_000_000, 'spread');
    const latency = (run: SignedRun) => `p50 ${ms(run.result.latencyP50Ms)} ms, p99 ${ms(run.result.latencyP99Ms)} ms`;
    report.add({ section: SECTION, figure: `consumes/s, one hot connection, ${config.consume.hot.connections} HTTP connections (${latency(hot)})`, value: rate(hot.result.perSecond) });
    report.add({ section: SECTION, figure: `consumes/s, across ${references.length} connections, ${config.consume.spread.connections} HTTP connections (${latency(spread)})`, value: rate(spread.result.perSecond) });
    report.add({ section: SECTION, figure: 'hot / spread', value: ratio(hot.result.perSecond / spread.result.perSecond) });
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}
