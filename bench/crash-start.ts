// Figure 8f (issue 34, target 6): the start after a kill -9 under write load, on the full
// directory of figure 8. The node is started again with its directory image taken every
// `image_interval_ms` while it runs (directory/checkpoint.ts); concurrent signed callers
// register new identifiers (`crash<n>@example.org`) until the node has written an image during
// their load and `after_image_ms` more have passed, and the node is killed (SIGKILL) while they
// go on. The restart is timed from spawn to `listening` and must take the image (`directory_image:
// used`), reading again only the keys changed after it (`directory_changed_keys`). Then, checked:
// every registration the node acknowledged before the kill is found by a lookup after it, and
// the index holds exactly the keys of the `directory` table (counted in this process from the
// data file once the node has stopped).
import { withEnvironment } from '../src/log/lmdb-log.js';
import type { BenchConfig } from './config.js';
import { startNodeProcess, type RunningServer } from './processes.js';
import { ms, quantile, rate, type Report } from './report.js';
import { createSubjects } from './signed-load.js';
import { API_PREFIX, signedPost, type ClientCredential } from './signed-request.js';

const SECTION = '8 lookup';
/** Issue 34, target 6: a start after a kill -9 under write load on the full directory. */
const CRASH_START_TARGET_MS = 5_000;
const WRITTEN = '"msg":"directory image written"';
const LOOKUP_BATCH = 500;

interface Writers {
  /** The identifiers the node acknowledged (201). */
  acknowledged: string[];
  /** Each acknowledged registration: when its answer came (ms since the epoch), and its latency. */
  answers: { at: number; ms: number }[];
  sent: number;
  /** Answers other than 201 before the kill. */
  refused: number;
  /** Ends the callers (each ends at its next answer or failure) and waits for them. */
  stop(): Promise<void>;
}

/** `count` callers, each registering the next identifier as soon as its last is answered. */
function startWriters(node: RunningServer, credential: ClientCredential, subjects: string[], count: number): Writers {
  let next = 0;
  let stopping = false;
  const writers: Writers = { acknowledged: [], answers: [], sent: 0, refused: 0, stop: async () => undefined };
  const caller = async (): Promise<void> => {
    while (!stopping) {
      const n = next++;
      const identifier = `crash${n}@example.org`;
      writers.sent++;
      try {
        const sentAt = performance.now();
        const res = await signedPost(node.baseUrl, credential, `${API_PREFIX}/identifiers`, { subject_id: subjects[n % subjects.length], identifier_type: 'email', identifier });
        if (res.status === 201) {
          writers.acknowledged.push(identifier);
          writers.answers.push({ at: Date.now(), ms: performance.now() - sentAt });
        }
        else if (!stopping) writers.refused++;
      } catch {
        // The node was killed under this call: whether it committed, nobody was told.
        return;
      }
    }
  };
  const running = Array.from({ length: count }, caller);
  writers.stop = async () => {
    stopping = true;
    await Promise.all(running);
  };
  return writers;
}

async function waitForLines(lines: string[], count: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (lines.length < count) {
    if (Date.now() > deadline) throw new Error(`the node wrote ${lines.length} directory images in ${timeoutMs} ms, not ${count}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** p50 / p99 / max of latencies, as text. */
function percentiles(latencies: number[]): string {
  if (latencies.length === 0) return 'none';
  const q = (p: number) => ms(quantile(latencies, p));
  return `p50 ${q(0.5)} / p99 ${q(0.99)} / max ${q(1)} ms (${latencies.length})`;
}

/** Looks up every identifier (batches of 500, unsigned answers); how many the node did not find. */
async function notFound(node: RunningServer, credential: ClientCredential, identifiers: string[]): Promise<number> {
  let missing = 0;
  for (let first = 0; first < identifiers.length; first += LOOKUP_BATCH) {
    const items = identifiers.slice(first, first + LOOKUP_BATCH).map((identifier) => ({ identifier_type: 'email', identifier }));
    const res = await signedPost(node.baseUrl, credential, `${API_PREFIX}/sonar/lookup/batch`, { items, signed: false });
    if (res.status !== 200) throw new Error(`a check batch answered ${res.status}: ${res.text.slice(0, 300)}`);
    for (const r of (JSON.parse(res.text) as { results: { found: boolean }[] }).results) if (!r.found) missing++;
  }
  return missing;
}

/** Distinct keys of the `directory` table (its rows are `${hash}/...`), read from the data file. */
function tableKeys(dataDir: string): Promise<number> {
  return withEnvironment(dataDir, (env) => {
    let keys = 0;
    let last = '';
    for (const key of env.tables.directory.getKeys()) {
      const hash = key.slice(0, key.indexOf('/'));
      if (hash !== last) keys++;
      last = hash;
    }
    return keys;
  }, { readOnly: true });
}

/**
 * Stops `node` (the figure's own start takes the image interval), runs the figure, and leaves
 * no node running.
 */
export async function runCrashStart(config: BenchConfig, report: Report, parts: { node: RunningServer; dataDir: string; env: Record<string, string>; args: readonly string[]; local: ClientCredential; keys: number }): Promise<void> {
  const crash = config.lookup.crash;
  const { dataDir, local } = parts;
  const timeoutMs = config.lookup.start_timeout_ms;
  await parts.node.stop();
  const imaging = { ...parts.env, PATH_LIMIT_DIRECTORY_IMAGE_INTERVAL_MS: String(crash.image_interval_ms) };
  let node = await startNodeProcess({ dataDir, timeoutMs, env: imaging, args: parts.args });
  let stopped = false;
  try {
    const subjects = await createSubjects(node, local, crash.subjects);
    report.line(`  8f. kill -9 under write load: ${crash.writers} callers registering identifiers on ${subjects.length} subjects, the directory image taken every ${ms(crash.image_interval_ms)} ms`);
    const written = node.watch(WRITTEN);
    const startedAt = performance.now();
    const writers = startWriters(node, local, subjects, crash.writers);
    await waitForLines(written, crash.images, crash.image_interval_ms * (crash.images + 2) + 60_000);
    await new Promise((resolve) => setTimeout(resolve, crash.after_image_ms));
    const images = written.map((l) => JSON.parse(l) as Record<string, number>);
    await node.kill();
    const loadMs = performance.now() - startedAt;
    await writers.stop();
    if (writers.refused > 0) throw new Error(`${writers.refused} registrations were refused before the kill`);
    const last = images[images.length - 1]!;
    report.line(`    ${rate(writers.acknowledged.length)} registrations acknowledged in ${ms(loadMs)} ms (${rate(writers.acknowledged.length / (loadMs / 1000))}/s), ${writers.sent - writers.acknowledged.length} unanswered at the kill`);
    report.line(`    images written under the load: ${images.length}; the last of ${rate(last.keys!)} keys in ${ms(last.ms!)} ms (the index walked in ${ms(last.walked_ms!)} ms, ${rate(last.patched!)} slots written again after it)`);
    // What an image costs the answers: registrations answered while one was taken, and the rest.
    const during = (at: number) => images.some((i) => at >= i.time! - i.ms! && at <= i.time!);
    report.line(`    registration latency while an image was taken: ${percentiles(writers.answers.filter((a) => during(a.at)).map((a) => a.ms))}; otherwise: ${percentiles(writers.answers.filter((a) => !during(a.at)).map((a) => a.ms))}`);

    node = await startNodeProcess({ dataDir, timeoutMs, env: parts.env, args: parts.args });
    const again = node.announcement;
    report.line(`    restart after the kill: listening after ${ms(node.startMs)} ms (recovery_ms ${String(again.recovery_ms)}, directory_image ${String(again.directory_image)}, directory_changed_keys ${String(again.directory_changed_keys)}, directory_keys ${String(again.directory_keys)})`);
    if (again.directory_image !== 'used') throw new Error(`the start after the kill did not take the directory image (${String(again.directory_image)})`);
    const changed = again.directory_changed_keys as number;
    if (changed === 0) throw new Error('no key changed after the last image: the kill came too early to show anything');
    const missing = await notFound(node, local, writers.acknowledged);
    if (missing > 0) throw new Error(`${missing} of ${writers.acknowledged.length} acknowledged registrations are not found after the kill`);
    await node.stop();
    stopped = true;
    const inTable = await tableKeys(dataDir);
    const held = again.directory_keys as number;
    report.line(`    check: all ${rate(writers.acknowledged.length)} acknowledged registrations found; the index held ${rate(held)} keys, the directory table has ${rate(inTable)}`);
    if (held !== inTable) throw new Error(`the index after the kill held ${held} keys, the table ${inTable}`);
    report.add({ section: SECTION, figure: `start after a kill -9 under write load on ${rate(parts.keys)} keys (image taken while running, ${rate(changed)} keys changed after it): ms spawn -> listening`, value: ms(node.startMs), target: { text: `< ${CRASH_START_TARGET_MS} ms`, met: node.startMs < CRASH_START_TARGET_MS } });
  } finally {
    if (!stopped) await node.stop();
  }
}
