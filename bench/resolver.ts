// Figure 6 (issue 3): the public resolver read, `GET /resolver/{address}`, against a bare
// uWebSockets.js server serving the same bytes (the comparison of figure 3); and identifier
// registration, signed `POST /identifiers` of distinct emails, in requests per second: spread
// over many subjects, and (the contrast) all on one subject, in two consecutive loads, to show
// how the rate of one subject depends on how many identifiers it already holds.
import type { BenchConfig } from './config.js';
import { compareWithBare } from './http-get.js';
import { createLocalCredential, removeDir, startNodeProcess, tempDir, type RunningServer } from './processes.js';
import { ms, rate, type Report } from './report.js';
import { createSubjects, describeRun, EUR, registrationPlan, runSignedLoad } from './signed-load.js';
import { API_PREFIX, expectSigned, type ClientCredential } from './signed-request.js';

const SECTION = '6 resolver';

/** A directory address with one target and a standing intent; returns its resolver path. */
async function resolvableAddress(node: RunningServer, credential: ClientCredential, subjectId: string): Promise<string> {
  const address = await expectSigned<{ id: string; address: string }>(node.baseUrl, credential, 'POST', `${API_PREFIX}/addresses`, { subject_id: subjectId, profile: 'directory' }, 201);
  await expectSigned(node.baseUrl, credential, 'POST', `${API_PREFIX}/addresses/${address.id}/targets`, { ...EUR, account_kind: 'own_ledger', account_ref: 'X' }, 201);
  await expectSigned(node.baseUrl, credential, 'PUT', `${API_PREFIX}/addresses/${address.id}/standing-intent`, { accepts: [EUR] }, 200);
  return `${API_PREFIX}/resolver/${address.address}`;
}

export async function runResolver(config: BenchConfig, report: Report): Promise<void> {
  report.heading('6. Public GET /resolver/{address} against bare uWebSockets.js; identifier registration');
  const dataDir = tempDir('resolver');
  let node: RunningServer | null = null;
  try {
    const credential = createLocalCredential(dataDir);
    node = await startNodeProcess({ dataDir, timeoutMs: config.child_timeout_ms });
    const subjects = await createSubjects(node, credential, config.resolver.subjects);
    const path = await resolvableAddress(node, credential, subjects[0]!);
    await compareWithBare(config, report, { section: SECTION, node, dir: dataDir, path, shapes: config.resolver.shapes });

    const load = config.resolver.register;
    report.line(`  identifier registration: ${load.count} signed POST /identifiers (after ${load.warmup} warm-up), ${load.connections} connections, distinct emails spread over ${subjects.length} subjects, each with its own idempotency key`);
    const run = await runSignedLoad(config, node, { credentials: [credential], plan: registrationPlan(subjects), load, idempotency: true });
    describeRun(report, run, 'registrations');
    report.add({ section: SECTION, figure: `identifier registrations/s, ${subjects.length} subjects, ${load.connections} connections (p50 ${ms(run.result.latencyP50Ms)} ms, p99 ${ms(run.result.latencyP99Ms)} ms)`, value: rate(run.result.perSecond) });

    const one = config.resolver.one_subject;
    const [lone] = await createSubjects(node, credential, 1);
    const rates: number[] = [];
    for (const first of [0, one.count]) {
      report.line(`  contrast: ${one.count} registrations on one subject that holds ${first} identifiers, ${one.connections} connections`);
      const contrast = await runSignedLoad(config, node, { credentials: [credential], plan: registrationPlan([lone!], first, 'one-subject.example.com'), load: one, idempotency: true });
      describeRun(report, contrast, 'registrations on one subject');
      rates.push(contrast.result.perSecond);
    }
    report.add({ section: SECTION, figure: `same, all on one subject: identifiers 1-${one.count} / ${one.count + 1}-${2 * one.count}`, value: `${rate(rates[0]!)} / ${rate(rates[1]!)}` });
  } finally {
    await node?.stop();
    removeDir(dataDir);
  }
}
