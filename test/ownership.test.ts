// P16: one owner per data directory and port, and files and secrets readable by the node's user
// alone. Real `path-node serve` processes: a second node on a held directory or port must exit
// at once with a one-line reason, never start and share the data or the traffic.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLI, Client, createCredential, removeDir, startNode, tempDir, type NodeProcess,
} from './support/harness.js';
import { waitFor } from './support/wait.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const payee = {
  issued_by: 'payee', via: EUR, received: { value: '1.00', asset_type: 'fiat', asset_code: 'EUR' },
  rail_references: [{ type: 'book_entry', value: 'B' }],
};
/** A refused start ends in well under this; a start that was not refused is killed after it. */
const REFUSAL_WAIT_MS = 15_000;
const SECRETS_WARNING = 'secrets stored in the data directory';
const DIR_NARROWED = 'the data directory was open to other users';
/** The unprivileged user a root test runs a node as. */
const NOBODY = 65534;

interface Refusal { code: number | null; output: string; elapsedMs: number }

/**
 * Runs `serve` expecting it to exit; one that is still running after `waitMs` is killed. `as`
 * runs it as another user (the test runs as root).
 */
function serveExpectingExit(args: string[], waitMs = REFUSAL_WAIT_MS,
  as: { uid?: number; gid?: number } = {}): Promise<Refusal> {
  const started = Date.now();
  const child = spawn(process.execPath, [CLI, 'serve', '--host', '127.0.0.1', '--workers', '1',
    ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH_ADMIN_PORT: '0' },
    ...as });
  let output = '';
  child.stdout.on('data', (d: Buffer) => { output += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { output += d.toString(); });
  const timer = setTimeout(() => child.kill('SIGKILL'), waitMs);
  return new Promise((resolve) => child.on('exit', (code) => {
    clearTimeout(timer);
    resolve({ code, output, elapsedMs: Date.now() - started });
  }));
}

/**
 * A port that was free a moment ago. The holder must listen on a port it was given: Linux does
 * not let a port picked by bind(0) be shared, so port 0 would hide what P16 forbids.
 */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function serves(node: NodeProcess): Promise<boolean> {
  const res = await fetch(`${node.baseUrl}/.well-known/path-keys`);
  return res.status === 200;
}

function modeOf(path: string): number {
  return statSync(path).mode & 0o777;
}

/** Every entry under `dir` (not `dir` itself), with its permission bits. */
function entriesWithModes(dir: string): { path: string; dir: boolean; mode: number }[] {
  const out: { path: string; dir: boolean; mode: number }[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const isDir = statSync(path).isDirectory();
    out.push({ path, dir: isDir, mode: modeOf(path) });
    if (isDir) out.push(...entriesWithModes(path));
  }
  return out;
}

function warningLines(output: string, text: string): any[] {
  return output.split('\n').filter((l) => l.includes(text)).map((l) => JSON.parse(l));
}

const dirs: string[] = [];
const nodes: NodeProcess[] = [];

afterAll(async () => {
  for (const n of nodes) {
    if (n.process.exitCode === null && n.process.signalCode === null) await n.stop();
  }
  for (const d of dirs) removeDir(d);
});

describe('P16 one owner per data directory and port', () => {
  let dataDir: string;
  let first: NodeProcess;

  beforeAll(async () => {
    dataDir = tempDir('owner');
    dirs.push(dataDir);
    const httpPort = await freePort();
    let externalPort = await freePort();
    while (externalPort === httpPort) externalPort = await freePort();
    first = await startNode({ dataDir, workers: 1,
      args: ['--port', String(httpPort), '--external-port', String(externalPort)] });
    nodes.push(first);
  });

  it('P16: a second serve on the same data directory exits non-zero at once, naming the '
    + 'directory and the pid of the holder; the first node keeps serving', async () => {
    const second = await serveExpectingExit(['--data-dir', dataDir, '--port', '0',
      '--external-port', '0']);
    expect(second.code, second.output).not.toBe(0);
    expect(second.code, `still running after ${REFUSAL_WAIT_MS} ms:\n${second.output}`)
      .not.toBeNull();
    // Refused before anything is opened: no workers, no recovery, no listener.
    expect(second.elapsedMs).toBeLessThan(5_000);
    expect(second.output).toContain(dataDir);
    expect(second.output).toContain(`pid ${first.process.pid}`);
    expect(second.output).not.toContain('listening');
    expect(second.output).not.toMatch(/^\s+at /m);
    expect(await serves(first)).toBe(true);
  });

  it('P16: a node on another directory with a port in use (HTTP or external) exits non-zero '
    + 'with a message naming host:port; the holder keeps serving', async () => {
    const other = tempDir('owner-other');
    dirs.push(other);
    const cases = [
      ['--port', String(first.port), '--external-port', '0'],
      ['--port', '0', '--external-port', String(first.externalPort)],
    ];
    for (const ports of cases) {
      const run = await serveExpectingExit(['--data-dir', other, ...ports]);
      expect(run.code, `still running after ${REFUSAL_WAIT_MS} ms:\n${run.output}`).not.toBeNull();
      expect(run.code, run.output).not.toBe(0);
      const taken = ports[1] === '0' ? ports[3] : ports[1];
      expect(run.output).toContain(`127.0.0.1:${taken}`);
      expect(run.output).toMatch(/port in use/);
      expect(run.output).not.toMatch(/^\s+at /m);
      expect(await serves(first)).toBe(true);
    }
  });

  it('P16, P15: credentials added beside the running node (no serve lock) sign requests to it',
    async () => {
      const credential = createCredential(dataDir, 'local', { local: true });
      const client = new Client(first.baseUrl, credential);
      const res = await waitFor('the added credential to be accepted', async () => {
        const r = await client.post('/receipts', payee);
        return r.status === 201 ? r : undefined;
      }, 5_000, 100);
      expect(res.status).toBe(201);
    });

  it('P16: kill -9 releases the directory: a new serve on it starts at once', async () => {
    await first.kill9();
    const again = await startNode({ dataDir, workers: 1 });
    nodes.push(again);
    expect(await serves(again)).toBe(true);
    expect(readFileSync(join(dataDir, 'serve.lock'), 'utf8').trim())
      .toBe(String(again.process.pid));
  });
});

describe('P16 files and secrets', () => {
  let previousUmask: number;

  beforeAll(() => {
    // The usual umask: files made by a node that does not set its own would be 0644.
    previousUmask = process.umask(0o022);
  });

  afterAll(() => {
    process.umask(previousUmask);
  });

  it('P16, issue 28: a data directory made 0755 before the first start is narrowed to 0700, '
    + 'and the start says so once, with the directory and both modes; every file is 0600 and '
    + 'every directory 0700', async () => {
    const parent = tempDir('owner-files');
    dirs.push(parent);
    const dataDir = join(parent, 'data');
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    const node = await startNode({ dataDir, workers: 1 });
    nodes.push(node);
    expect(modeOf(dataDir).toString(8)).toBe('700');
    const lines = warningLines(node.output(), DIR_NARROWED);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40, data_dir: dataDir, mode_before: '0755', mode_after: '0700',
    });
    const entries = entriesWithModes(dataDir);
    expect(entries.map((e) => e.path)).toContain(join(dataDir, 'node.mdb'));
    for (const e of entries) {
      expect([e.path, e.mode.toString(8)]).toEqual([e.path, e.dir ? '700' : '600']);
    }
    await node.stop();
    // Private now: the next start has nothing to narrow and says nothing.
    const again = await startNode({ dataDir, workers: 1 });
    nodes.push(again);
    expect(warningLines(again.output(), DIR_NARROWED)).toHaveLength(0);
    await again.stop();
    // An administrative command making a new data directory (nested) makes it private too.
    const made = join(parent, 'made', 'by', 'cli');
    createCredential(made, 'local', { local: true });
    for (const path of [join(parent, 'made'), join(parent, 'made', 'by'), made]) {
      expect([path, modeOf(path).toString(8)]).toEqual([path, '700']);
    }
    for (const e of entriesWithModes(made)) {
      expect([e.path, e.mode.toString(8)]).toEqual([e.path, e.dir ? '700' : '600']);
    }
  });

  it('P16, issue 28: an administrative command (it may write keys) narrows an open data '
    + 'directory too, and says so on stderr, its stdout kept for its answer', () => {
    const dataDir = tempDir('owner-cli');
    dirs.push(dataDir);
    chmodSync(dataDir, 0o750);
    const run = spawnSync(process.execPath, [CLI, 'keys', 'rotate', '--data-dir', dataDir],
      { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toHaveProperty('kid');
    expect(run.stderr).toContain(`data directory ${dataDir} was open to other users (0750); `
      + 'narrowed to 0700');
    expect(modeOf(dataDir).toString(8)).toBe('700');
  });

  it('P16, issue 28: a data directory open to others that the node cannot narrow (not its '
    + 'owner) refuses the start with a clear message, and nothing is created in it', async () => {
    // As root chmod succeeds on any directory; the node is run as another user instead, on a
    // directory root owns. Run as another user already, it is given one it does not own.
    const root = process.getuid?.() === 0;
    const dataDir = root ? tempDir('owner-foreign') : '/usr';
    if (root) {
      dirs.push(dataDir);
      chmodSync(dataDir, 0o755);
    }
    const before = statSync(dataDir);
    expect(before.uid).not.toBe(root ? NOBODY : process.getuid?.());
    expect(before.mode & 0o077).not.toBe(0);
    const listing = readdirSync(dataDir);
    const as = root ? { uid: NOBODY, gid: NOBODY } : {};
    const run = await serveExpectingExit(['--data-dir', dataDir, '--port', '0',
      '--external-port', '0'], REFUSAL_WAIT_MS, as);
    expect(run.code, `still running after ${REFUSAL_WAIT_MS} ms:\n${run.output}`).not.toBeNull();
    expect(run.code, run.output).toBe(1);
    const mode = `0${(before.mode & 0o777).toString(8)}`;
    expect(run.output).toContain(`path-node: data directory ${dataDir} is open to other users `
      + `(mode ${mode}) and this process cannot narrow it to 0700 (EPERM`);
    expect(run.output).toContain('choose another --data-dir');
    expect(run.output).not.toContain('listening');
    expect(run.output).not.toMatch(/^\s+at /m);
    expect(statSync(dataDir).mode).toBe(before.mode);
    expect(readdirSync(dataDir)).toEqual(listing);
  });

  it('P16: with the secrets in the data directory the start warns once, naming the variables '
    + 'that move them out and saying the signing key has none', async () => {
    const dataDir = tempDir('owner-warn');
    dirs.push(dataDir);
    // The embedded default: this run's environment names none of them.
    for (const name of ['PATH_PEPPER', 'PATH_PEPPER_VERSION', 'PATH_SEALING_KEY']) {
      expect(process.env[name], name).toBeUndefined();
    }
    const node = await startNode({ dataDir, workers: 1 });
    nodes.push(node);
    const lines = warningLines(node.output(), SECRETS_WARNING);
    expect(lines).toHaveLength(1);
    expect(lines[0].level).toBe(40);
    for (const name of ['signing key', 'PATH_PEPPER', 'PATH_PEPPER_VERSION', 'PATH_SEALING_KEY']) {
      expect(lines[0].msg).toContain(name);
    }
    await node.stop();
  });

  it('P16: with PATH_PEPPER, PATH_PEPPER_VERSION and PATH_SEALING_KEY given, the warning names '
    + 'only the signing key; files a pre-P16 node left open are narrowed to 0600', async () => {
    const dataDir = tempDir('owner-env');
    dirs.push(dataDir);
    createCredential(dataDir, 'local', { local: true });
    // As a node before P16 left them under a 022 umask.
    for (const name of ['node.mdb', 'node.mdb-lock']) chmodSync(join(dataDir, name), 0o644);
    const env = {
      PATH_PEPPER: 'ab'.repeat(32), PATH_PEPPER_VERSION: 'pv-test',
      PATH_SEALING_KEY: 'cd'.repeat(32),
    };
    const node = await startNode({ dataDir, workers: 1, env });
    nodes.push(node);
    const lines = warningLines(node.output(), SECRETS_WARNING);
    expect(lines).toHaveLength(1);
    expect(lines[0].msg).toContain('signing key');
    expect(lines[0].msg).not.toMatch(/pepper|sealing|PATH_/i);
    for (const name of ['node.mdb', 'node.mdb-lock']) {
      expect(modeOf(join(dataDir, name)).toString(8)).toBe('600');
    }
    expect(warningLines(node.output(), 'narrowed to 0600')).toHaveLength(1);
    await node.stop();
  });
});
