// Child processes and temporary directories of the benchmark run: the node under test, the bare
// uWebSockets.js server, the load generator. Every child and every directory is registered here
// and removed when the section ends, and again (as a last resort) when the run exits.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where the compiled entry points live (this file is dist/bench/processes.js). */
export const NODE_CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const BARE_SERVER = fileURLToPath(new URL('./bare-server.js', import.meta.url));
const LOAD_GENERATOR = fileURLToPath(new URL('./load.js', import.meta.url));
const LAG_PROBE = fileURLToPath(new URL('./lag-probe.js', import.meta.url));
const PACED_LOAD = fileURLToPath(new URL('./paced-load.js', import.meta.url));
/** The line the load generator prints when its measured run starts. */
export const MEASURING_LINE = '{"phase":"measuring"}';

/** Output kept from a child for error messages; the rest is dropped so nothing grows unbounded. */
const OUTPUT_TAIL_CHARS = 64 * 1024;
export const BYTES_PER_MIB = 1024 * 1024;

const children = new Set<ChildProcess>();
const directories = new Set<string>();

export function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `path-bench-${label}-`));
  directories.add(dir);
  return dir;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  directories.delete(dir);
}

/** Kills what is still running and removes what is left; safe to call more than once. */
export function cleanupAll(): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  children.clear();
  for (const dir of [...directories]) removeDir(dir);
}

/** How a child is spawned: environment added to the benchmark's own, and the Node.js binary that runs it. */
interface SpawnOptions {
  env?: Record<string, string>;
  /** Default: the benchmark's own (`process.execPath`). */
  node?: string;
}

interface Tracked {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  watch: (pattern: string) => string[];
}

/**
 * `onLine` sees each stdout line until it returns true; from then on stdout is drained unread (a
 * node's access log runs to megabytes a second under load, and reading it here would take CPU
 * from the node on the same cores). Only the last chunk is kept for a report.
 */
function spawnTracked(args: string[], options: SpawnOptions & { onLine?: (line: string) => boolean | void } = {}): Tracked {
  const { onLine, env } = options;
  const child = spawn(options.node ?? process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env === undefined ? process.env : { ...process.env, ...env } });
  children.add(child);
  let tail = '';
  let partial = '';
  let lineWatch = onLine;
  const watches: { pattern: string; lines: string[] }[] = [];
  const keep = (text: string) => {
    tail = (tail + text).slice(-OUTPUT_TAIL_CHARS);
  };
  const reading = (chunk: string) => {
    keep(chunk);
    // Lines are split only while someone reads them (a loaded node's access log is long).
    if (lineWatch === undefined && watches.length === 0) return;
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      if (lineWatch?.(line) === true) lineWatch = undefined;
      for (const watch of watches) if (line.includes(watch.pattern)) watch.lines.push(line);
    }
  };
  /** From now on, every whole line of stdout that contains `pattern`, as it comes. */
  const watch = (pattern: string): string[] => {
    const lines: string[] = [];
    watches.push({ pattern, lines });
    return lines;
  };
  child.stdout!.setEncoding('utf8').on('data', reading);
  child.stderr!.setEncoding('utf8').on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    });
  });
  return { child, output: () => tail, exited, watch };
}

/** Resident memory of a process in MiB (Linux /proc), or null where it cannot be read. */
export function residentMiB(pid: number): number | null {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match === null ? null : Number(match[1]) / 1024;
  } catch {
    return null;
  }
}

/**
 * Anonymous resident memory of a process in MiB (Linux /proc `RssAnon`): heaps, typed arrays and
 * native allocations, without the pages of files it maps (LMDB's data file is mapped, so VmRSS
 * also counts whatever part of the data file was last read).
 */
export function anonymousMiB(pid: number): number | null {
  try {
    const match = /^RssAnon:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match === null ? null : Number(match[1]) / 1024;
  } catch {
    return null;
  }
}

/** A figure of the node's /metrics, by name. */
export const metricOf = (text: string, name: string): number => {
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  if (match === null) throw new Error(`the node's /metrics has no ${name}`);
  return Number(match[1]);
};

/** The text of a node's operator listener's /metrics. */
export async function metricsText(node: RunningServer): Promise<string> {
  const admin = node.announcement.admin_port as number;
  return (await fetch(`http://127.0.0.1:${admin}/metrics`)).text();
}

/** Where a node's memory is, from its /metrics text: heaps in use and held, outside them, MiB. */
export function memoryFigures(text: string) {
  const mib = (name: string) => metricOf(text, name) / BYTES_PER_MIB;
  return {
    aggregates: metricOf(text, 'path_aggregates_in_memory'),
    workersHeapMiB: mib('path_workers_heap_used_bytes'),
    workersHeapHeldMiB: mib('path_workers_heap_total_bytes'),
    workersExternalMiB: mib('path_workers_external_bytes'),
    frontHeapMiB: mib('nodejs_heap_size_used_bytes'),
    frontHeapHeldMiB: mib('nodejs_heap_size_total_bytes'),
    frontExternalMiB: mib('nodejs_external_memory_bytes'),
    replayEntries: metricOf(text, 'path_replay_entries'),
  };
}

/** Runs the node's command line to completion (credentials, keys). */
export function runCli(args: string[], cli = NODE_CLI): string {
  return execFileSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
}

export interface LocalCredential {
  keyId: string;
  seedHex: string;
}

export function createLocalCredential(dataDir: string, cli = NODE_CLI): LocalCredential {
  return createCredential(dataDir, 'local', true, cli);
}

/** A credential of `member` at the node of `dataDir` (`credentials create`); local: the operator's own. */
export function createCredential(dataDir: string, member: string, local: boolean, cli = NODE_CLI): LocalCredential {
  const args = ['credentials', 'create', '--data-dir', dataDir, '--member', member, ...(local ? ['--local'] : [])];
  const out = JSON.parse(runCli(args, cli)) as { key_id: string; private_key: string };
  return { keyId: out.key_id, seedHex: out.private_key };
}

/** Lists another node as a member of the network at the node of `dataDir` (`members add`; the node may be running). */
export function addMember(dataDir: string, member: string, baseUrl: string): void {
  runCli(['members', 'add', '--data-dir', dataDir, '--member', member, '--base-url', baseUrl]);
}

export interface RunningServer {
  pid: number;
  port: number;
  baseUrl: string;
  /** Milliseconds from spawn to the line announcing the port. */
  startMs: number;
  /** The parsed announcement (for the node: its "listening" log line with recovery stats). */
  announcement: Record<string, unknown>;
  /**
   * The node's "recovered" line (every partition folded; it answers from "listening" on) and the
   * milliseconds from spawn to it. Never settles for a server that writes none.
   */
  recovered: Promise<{ ms: number; line: Record<string, unknown> }>;
  /** SIGTERM, then wait for the exit; resolves with the exit code and how long the stop took. */
  stop(): Promise<{ code: number | null; stopMs: number }>;
  /** SIGKILL (a crash: no drain, no shutdown snapshots), then wait for the exit. */
  kill(): Promise<void>;
  /** From now on, every line of its output that contains `pattern`, as it comes. */
  watch(pattern: string): string[];
}

/** Spawns a server and waits for a JSON stdout line with `msg: "listening"` and a port. */
function startServer(args: string[], timeoutMs: number, what: string, spawnOptions: SpawnOptions = {}): Promise<RunningServer> {
  const spawnedAt = performance.now();
  let announce: (line: Record<string, unknown>) => void = () => undefined;
  const announced = new Promise<Record<string, unknown>>((resolve) => { announce = resolve; });
  let warm: (recovered: { ms: number; line: Record<string, unknown> }) => void = () => undefined;
  const recovered = new Promise<{ ms: number; line: Record<string, unknown> }>((resolve) => { warm = resolve; });
  const tracked = spawnTracked(args, { ...spawnOptions, onLine: (line) => {
    if (line.includes('"msg":"recovered"')) {
      warm({ ms: performance.now() - spawnedAt, line: JSON.parse(line) as Record<string, unknown> });
      return true;
    }
    if (!line.includes('"listening"')) return;
    const parsed = JSON.parse(line) as Record<string, unknown>;
    if (parsed.msg === 'listening' && typeof parsed.port === 'number') announce(parsed);
    return false;
  } });
  const stop = async () => {
    const stoppingAt = performance.now();
    tracked.child.kill('SIGTERM');
    const { code } = await tracked.exited;
    return { code, stopMs: performance.now() - stoppingAt };
  };
  const kill = async () => {
    tracked.child.kill('SIGKILL');
    await tracked.exited;
  };
  return new Promise<RunningServer>((resolve, reject) => {
    const timer = setTimeout(() => {
      tracked.child.kill('SIGKILL');
      reject(new Error(`${what} did not announce its port within ${timeoutMs} ms:\n${tracked.output()}`));
    }, timeoutMs);
    void tracked.exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (code ${code}, signal ${signal}) before listening:\n${tracked.output()}`));
    });
    void announced.then((announcement) => {
      clearTimeout(timer);
      const port = announcement.port as number;
      resolve({ pid: tracked.child.pid!, port, baseUrl: `http://127.0.0.1:${port}`, startMs: performance.now() - spawnedAt, announcement, recovered, stop, kill, watch: tracked.watch });
    });
  });
}

export interface NodeOptions {
  dataDir: string;
  timeoutMs: number;
  /** The member name the node serves as (default `local`). */
  member?: string;
  /** More `serve` flags (for example the lookup budget). */
  args?: readonly string[];
  /** Environment added to the benchmark's own (PATH_PEPPER, PATH_LIMIT_*). */
  env?: Record<string, string>;
  /** Options of the node runtime itself, before the script (for example a heap snapshot signal). */
  runtimeArgs?: readonly string[];
  /** Another build's command line (the `versus` section's baseline); this build's by default. */
  cli?: string;
  /**
   * The Node.js binary that runs the node (the `nodes` section's other major, which needs the
   * HTTP server built for its ABI first: scripts/nodes.ts `buildServerFor`); the benchmark's own
   * by default.
   */
  node?: string;
}

/**
 * Starts `serve` with one shard worker on a kernel-chosen port of 127.0.0.1; the external
 * discovery listener also takes a kernel-chosen port, so that nodes started side by side never
 * contend for its default 8081.
 */
export function startNodeProcess(options: NodeOptions): Promise<RunningServer> {
  const member = options.member ?? 'local';
  return startServer([...(options.runtimeArgs ?? []), options.cli ?? NODE_CLI, 'serve', '--port', '0', '--external-port', '0', '--host', '127.0.0.1', '--data-dir', options.dataDir, '--member', member, '--workers', '1', ...(options.args ?? [])],
    // The operator's listener by environment, which builds from before it ignore (P21).
    options.timeoutMs, `the node (${member})`, { env: { PATH_ADMIN_PORT: '0', ...options.env }, node: options.node });
}

/** The bare uWebSockets.js server of bare-server.ts, serving the routes in `routesFile`. */
export function startBareServer(options: { routesFile: string; timeoutMs: number }): Promise<RunningServer> {
  return startServer([BARE_SERVER, options.routesFile], options.timeoutMs, 'the bare server');
}

/**
 * Runs the load generator (load.ts) in its own process and returns its JSON answer. `onMeasuring`
 * is called when the generator starts its measured run (after signing and warm-up).
 */
export function runLoad<T>(job: unknown, timeoutMs: number, onMeasuring?: () => void): Promise<T> {
  return runChild<T>(LOAD_GENERATOR, 'the load generator', job, timeoutMs, onMeasuring);
}

/** Runs the replication lag probe (lag-probe.ts) in its own process and returns its JSON answer. */
export function runLagProbe<T>(job: unknown, timeoutMs: number): Promise<T> {
  return runChild<T>(LAG_PROBE, 'the lag probe', job, timeoutMs);
}

/** Runs the open-loop load generator (paced-load.ts) in its own process; `onMeasuring` as above. */
export function runPacedLoad<T>(job: unknown, timeoutMs: number, onMeasuring?: () => void): Promise<T> {
  return runChild<T>(PACED_LOAD, 'the paced load generator', job, timeoutMs, onMeasuring);
}

async function runChild<T>(script: string, what: string, job: unknown, timeoutMs: number, onMeasuring?: () => void): Promise<T> {
  const tracked = spawnTracked([script, JSON.stringify(job)], { onLine: (line) => {
    if (line === MEASURING_LINE) onMeasuring?.();
  } });
  const timer = setTimeout(() => tracked.child.kill('SIGKILL'), timeoutMs);
  const { code, signal } = await tracked.exited;
  clearTimeout(timer);
  const lines = tracked.output().trim().split('\n');
  if (code !== 0) throw new Error(`${what} failed (code ${code}, signal ${signal}):\n${tracked.output()}`);
  return JSON.parse(lines[lines.length - 1]!) as T;
}
