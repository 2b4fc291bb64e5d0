// CI's check of the other Node.js majors (issue 32): for each major named, `npm start` under the
// registry's Node of that major (dist/scripts/nodes.js fetches it and builds the HTTP server for
// its ABI), then, over HTTP on loopback, a public read, a signed write and a signed lookup with
// the client, each answer checked, and an orderly stop. Exits 1 naming the first step that fails.
// Usage (after `npm ci`, which builds): node .ci/smoke.mjs 22 26
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { PathClient } = await import(join(root, 'packages/client/dist/index.js'));
const { nodeOf, buildServerFor } = await import(join(root, 'dist/scripts/nodes.js'));
const port = 19_000 + (process.pid % 500) * 4;

function fail(major, step, detail) {
  process.stderr.write(`smoke: Node ${major}: ${step}: ${detail}\n`);
  process.exit(1);
}

/** The serve process started by `npm start`, found in its process group, and its executable. */
function serving(group) {
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (Number(fields[2]) === group && cmdline.includes('serve')) {
        return readlinkSync(`/proc/${pid}/exe`);
      }
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

async function answered(url, major, server, log) {
  for (let i = 0; i < 600; i++) {
    if (server.exitCode !== null) fail(major, 'start', `exited ${server.exitCode}: ${log()}`);
    try {
      const response = await fetch(url);
      if (response.ok) return response;
    } catch {
      // not listening yet
    }
    await new Promise((wake) => setTimeout(wake, 100));
  }
  return fail(major, 'start', `no answer within 60 s: ${log()}`);
}

async function smoke(major) {
  const node = nodeOf(major);
  buildServerFor(node);
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  const data = mkdtempSync(join(tmpdir(), `path-smoke-${major}-`));
  const base = `http://127.0.0.1:${port}`;
  const env = { ...process.env, PATH: `${dirname(node)}:${process.env.PATH}` };
  const flags = ['--data-dir', data, '--port', String(port), '--external-port', String(port + 1)];
  const server = spawn('npm', ['start', '--', ...flags, '--admin-port', String(port + 2)], {
    cwd: root,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  server.stdout.on('data', (chunk) => (output += chunk));
  server.stderr.on('data', (chunk) => (output += chunk));
  const log = () => output.slice(-2000);
  try {
    const keys = await answered(`${base}/.well-known/path-keys`, major, server, log);
    const published = await keys.json();
    if (!Array.isArray(published.keys) || published.keys.length === 0) {
      fail(
        major,
        'public read',
        `GET /.well-known/path-keys gave no keys: ${JSON.stringify(published)}`,
      );
    }
    const exe = serving(server.pid);
    if (exe !== node) fail(major, 'start', `the node serving runs ${exe}, not ${node}`);
    const cli = [join(root, 'bin/path-node.js'), 'credentials', 'create', '--data-dir', data];
    const made = execFileSync(node, [...cli, '--member', 'local', '--local'], { encoding: 'utf8' });
    const client = new PathClient({ baseUrl: base, credential: JSON.parse(made).credential });
    // The running node takes up a credential made beside it within half a second.
    await new Promise((wake) => setTimeout(wake, 1000));
    const write = await client.call('subjects.create', {
      body: { subject_type: 'legal_entity' },
      idempotencyKey: `smoke-${major}`,
    });
    if (write.status !== 201)
      fail(major, 'signed write', `${write.status} ${JSON.stringify(write.body)}`);
    const lookup = await client.call('sonar.lookup', {
      body: { identifier_type: 'email', identifier: 'nobody@example.com', nonce: `smoke-${major}` },
    });
    if (lookup.status !== 200 || lookup.body.found !== false) {
      fail(major, 'signed lookup', `${lookup.status} ${JSON.stringify(lookup.body)}`);
    }
    process.stdout.write(
      `smoke: Node ${version} (${node}): npm start listened; public read 200, ` +
        `signed write 201 (${write.body.id}), signed lookup 200 (found: false)\n`,
    );
  } finally {
    process.kill(-server.pid, 'SIGTERM');
    await new Promise((done) => (server.exitCode !== null ? done() : server.once('exit', done)));
    rmSync(data, { recursive: true, force: true });
  }
  if (server.exitCode !== 0 && server.signalCode === null) {
    fail(major, 'orderly stop', `npm start ended with ${server.exitCode}: ${log()}`);
  }
}

const majors = process.argv.slice(2).map(Number);
if (majors.length === 0) fail('?', 'usage', 'node .ci/smoke.mjs <major>...');
for (const major of majors) await smoke(major);
