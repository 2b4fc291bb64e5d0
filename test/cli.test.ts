// The `path-node` command line (P15): credentials add|create|revoke, keys rotate, usage errors,
// and `serve` refusing bad flags, run as a real child process.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as ed from '@noble/ed25519';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PathClient } from 'path-node/client';
import { CLI, Client, removeDir, startNode, tempDir, type Credential, type NodeProcess } from './support/harness.js';
import { verifiesWith } from './support/verify.js';
import { waitFor } from './support/wait.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const payee = { issued_by: 'payee', via: EUR, received: { value: '1.00', asset_type: 'fiat', asset_code: 'EUR' }, rail_references: [{ type: 'book_entry', value: 'B' }] };

interface Run { status: number | null; stdout: string; stderr: string }

let scratch: string;

/** Runs the command in a scratch working directory so that a default `./data` never lands in the repository. */
function cli(args: string[], env: Record<string, string> = {}): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: scratch, timeout: 30_000, env: { ...process.env, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function lastJsonLine(text: string): any {
  const lines = text.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!);
}

let dataDir: string;
let node: NodeProcess;
const dirs: string[] = [];
const nodes: NodeProcess[] = [];

beforeAll(async () => {
  scratch = tempDir('cli-cwd');
  dataDir = tempDir('cli');
  node = await startNode({ dataDir });
});

afterAll(async () => {
  await node?.stop();
  for (const n of nodes) if (n.process.exitCode === null && n.process.signalCode === null) await n.stop();
  removeDir(dataDir);
  for (const d of dirs) removeDir(d);
  removeDir(scratch);
});

describe('P15 credentials', () => {
  it('P15: credentials add with a given public key prints {"key_id"} and that credential signs requests (added while the node runs)', async () => {
    const seed = ed.utils.randomSecretKey();
    const publicKeyHex = Buffer.from(ed.getPublicKey(seed)).toString('hex');
    const run = cli(['credentials', 'add', '--data-dir', dataDir, '--member', 'local', '--public-key', publicKeyHex, '--local']);
    expect(run.status, run.stderr).toBe(0);
    const out = lastJsonLine(run.stdout);
    expect(Object.keys(out)).toEqual(['key_id']);
    expect(typeof out.key_id).toBe('string');
    expect(out.key_id.length).toBeGreaterThan(0);
    expect(run.stdout).not.toContain(Buffer.from(seed).toString('hex'));
    const cred: Credential = { keyId: out.key_id, member: 'local', seedHex: Buffer.from(seed).toString('hex'), publicKeyHex };
    const client = new Client(node.baseUrl, cred);
    const created = await firstAcceptedReceipt(client);
    // --local: this credential is the operator's own member, so it may move the node's receipt.
    const moved = await client.post(`/receipts/${created.json.reference}/transitions`, { to: 'failed', reason_code: 'expired' });
    expect(moved.status).toBe(201);
  });

  it('P15: credentials add without --local makes a non-local member credential', async () => {
    const seed = ed.utils.randomSecretKey();
    const publicKeyHex = Buffer.from(ed.getPublicKey(seed)).toString('hex');
    const run = cli(['credentials', 'add', '--data-dir', dataDir, '--member', 'beta', '--public-key', publicKeyHex]);
    expect(run.status, run.stderr).toBe(0);
    const cred: Credential = { keyId: lastJsonLine(run.stdout).key_id, member: 'beta', seedHex: Buffer.from(seed).toString('hex'), publicKeyHex };
    const client = new Client(node.baseUrl, cred);
    const created = await firstAcceptedReceipt(client);
    const moved = await client.post(`/receipts/${created.json.reference}/transitions`, { to: 'failed', reason_code: 'expired' });
    expect(moved.status).toBe(403);
    expect(moved.json.error.code).toBe('path.auth.forbidden');
  });

  it('P15: credentials add refuses a public key that is not 32 bytes of hex, exiting non-zero with a message', () => {
    for (const bad of ['xyz', 'ab'.repeat(31), 'ab'.repeat(33), 'zz'.repeat(32)]) {
      const run = cli(['credentials', 'add', '--data-dir', dataDir, '--member', 'local', '--public-key', bad]);
      expect(run.status).not.toBe(0);
      expect(run.stderr).toMatch(/public.key/i);
      expect(run.stdout.trim()).toBe('');
    }
  });

  it('P15: credentials create prints key_id, public_key and private_key; the pair matches and the credential works', async () => {
    const run = cli(['credentials', 'create', '--data-dir', dataDir, '--member', 'local', '--local']);
    expect(run.status, run.stderr).toBe(0);
    const out = lastJsonLine(run.stdout);
    expect(typeof out.key_id).toBe('string');
    expect(out.public_key).toMatch(/^[0-9a-f]{64}$/);
    expect(out.private_key).toMatch(/^[0-9a-f]{64}$/);
    expect(Buffer.from(ed.getPublicKey(Buffer.from(out.private_key, 'hex'))).toString('hex')).toBe(out.public_key);
    const client = new Client(node.baseUrl, { keyId: out.key_id, member: 'local', seedHex: out.private_key, publicKeyHex: out.public_key });
    const res = await waitFor('the created credential to be accepted', async () => {
      const r = await client.post('/receipts', payee);
      return r.status === 201 ? r : undefined;
    }, 3000, 100);
    expect(res.status).toBe(201);
    // Two creates give two distinct credentials.
    const again = lastJsonLine(cli(['credentials', 'create', '--data-dir', dataDir, '--member', 'local']).stdout);
    expect(again.key_id).not.toBe(out.key_id);
    expect(again.private_key).not.toBe(out.private_key);
  });

  it('P18: credentials create also prints `credential`, the shape PathClient takes, and it signs a call as printed', async () => {
    const run = cli(['credentials', 'create', '--data-dir', dataDir, '--member', 'local', '--local']);
    expect(run.status, run.stderr).toBe(0);
    const out = lastJsonLine(run.stdout);
    expect(out.credential).toEqual({ keyId: out.key_id, privateKeyHex: out.private_key });
    const client = new PathClient({ baseUrl: node.baseUrl, credential: out.credential });
    const subject = await waitFor('the created credential to be accepted', async () => {
      try {
        return await client.call('subjects.create', { body: { subject_type: 'natural_person' } });
      } catch {
        return undefined;
      }
    }, 3000, 100);
    expect(subject.status).toBe(201);
    expect(typeof (subject.body as { id?: unknown }).id).toBe('string');
  });

  it('P15: credentials revoke of a known id succeeds; of an unknown id exits non-zero with a message', async () => {
    const created = lastJsonLine(cli(['credentials', 'create', '--data-dir', dataDir, '--member', 'gamma']).stdout);
    const ok = cli(['credentials', 'revoke', '--data-dir', dataDir, '--key-id', created.key_id]);
    expect(ok.status, ok.stderr).toBe(0);
    const unknown = cli(['credentials', 'revoke', '--data-dir', dataDir, '--key-id', 'cred_' + '0'.repeat(32)]);
    expect(unknown.status).not.toBe(0);
    expect(unknown.status).not.toBeNull();
    expect(unknown.stderr.trim().length).toBeGreaterThan(0);
    expect(unknown.stderr).toMatch(/key.id|credential/i);
    expect(unknown.stderr).not.toMatch(/\n\s+at\s/);
  });

  it('P15: the credential commands work with no node running on the data directory', async () => {
    const dir = tempDir('cli-offline');
    dirs.push(dir);
    const made = cli(['credentials', 'create', '--data-dir', dir, '--member', 'local', '--local']);
    expect(made.status, made.stderr).toBe(0);
    const out = lastJsonLine(made.stdout);
    const revokedOne = lastJsonLine(cli(['credentials', 'create', '--data-dir', dir, '--member', 'local', '--local']).stdout);
    expect(cli(['credentials', 'revoke', '--data-dir', dir, '--key-id', revokedOne.key_id]).status).toBe(0);
    const n = await startNode({ dataDir: dir });
    nodes.push(n);
    const good = new Client(n.baseUrl, { keyId: out.key_id, member: 'local', seedHex: out.private_key, publicKeyHex: out.public_key });
    expect((await good.post('/receipts', payee)).status).toBe(201);
    const revoked = new Client(n.baseUrl, { keyId: revokedOne.key_id, member: 'local', seedHex: revokedOne.private_key, publicKeyHex: revokedOne.public_key });
    const refused = await revoked.post('/receipts', payee);
    expect(refused.status).toBe(401);
    expect(refused.json.error.code).toBe('path.auth.unauthenticated');
    expect(await n.stop()).toBe(0);
  });
});

describe('P15 keys rotate', () => {
  it('P15: keys rotate prints the new kid; on the next start it is the active key and the previous one is retired', async () => {
    const dir = tempDir('cli-rotate');
    dirs.push(dir);
    const first = cli(['keys', 'rotate', '--data-dir', dir]);
    expect(first.status, first.stderr).toBe(0);
    const kid1 = lastJsonLine(first.stdout).kid;
    expect(typeof kid1).toBe('string');
    const second = cli(['keys', 'rotate', '--data-dir', dir]);
    expect(second.status, second.stderr).toBe(0);
    const kid2 = lastJsonLine(second.stdout).kid;
    expect(kid2).not.toBe(kid1);
    expect(second.stdout).not.toMatch(/seed|private/i);

    const cred = lastJsonLine(cli(['credentials', 'create', '--data-dir', dir, '--member', 'local', '--local']).stdout);
    const n = await startNode({ dataDir: dir });
    nodes.push(n);
    const doc = await (await fetch(`${n.baseUrl}/.well-known/path-keys`)).json() as any;
    expect(doc.keys).toHaveLength(2);
    const byKid = new Map(doc.keys.map((k: any) => [k.kid, k]));
    expect((byKid.get(kid2) as any)?.status).toBe('active');
    expect((byKid.get(kid1) as any)?.status).toBe('retired');
    const issued = await new Client(n.baseUrl, { keyId: cred.key_id, member: 'local', seedHex: cred.private_key, publicKeyHex: cred.public_key }).post('/receipts', payee);
    expect(issued.status).toBe(201);
    expect(issued.json.kid).toBe(kid2);
    expect(verifiesWith(issued.json, (byKid.get(kid2) as any).public_key)).toBe(true);
    expect(await n.stop()).toBe(0);
  });

  it('P15: keys rotate on the running node prints a kid that the node then publishes as active', async () => {
    const run = cli(['keys', 'rotate', '--data-dir', dataDir]);
    expect(run.status, run.stderr).toBe(0);
    const kid = lastJsonLine(run.stdout).kid;
    const active = await waitFor('the rotated key to be published', async () => {
      const doc = await (await fetch(`${node.baseUrl}/.well-known/path-keys`)).json() as any;
      const k = doc.keys.find((x: any) => x.status === 'active');
      return k?.kid === kid ? k : undefined;
    }, 3000, 100);
    expect(active.kid).toBe(kid);
  });
});

describe('P15 usage errors', () => {
  it('P15: an unknown command exits 2 with a usage message', () => {
    for (const args of [['frobnicate'], ['credentials'], ['credentials', 'frob'], ['keys'], ['keys', 'spin'], ['credential', 'create']]) {
      const run = cli(args);
      expect({ args, status: run.status }).toEqual({ args, status: 2 });
      expect(run.stderr).toMatch(/usage/i);
      expect(run.stderr).toContain('path-node');
      expect(run.stdout.trim()).toBe('');
    }
  });

  it('P15: a missing required flag exits 2 with a usage message naming the flag', () => {
    const dir = join(scratch, 'never-created');
    const cases: [string[], string][] = [
      [['credentials', 'add', '--data-dir', dir, '--member', 'm'], 'public-key'],
      [['credentials', 'add', '--data-dir', dir, '--public-key', 'ab'.repeat(32)], 'member'],
      [['credentials', 'create', '--data-dir', dir], 'member'],
      [['credentials', 'create', '--data-dir', dir, '--member'], 'member'],
      [['credentials', 'revoke', '--data-dir', dir], 'key-id'],
    ];
    for (const [args, flag] of cases) {
      const run = cli(args);
      expect({ args, status: run.status }).toEqual({ args, status: 2 });
      expect(run.stderr).toContain(`--${flag}`);
      expect(run.stderr).toMatch(/usage/i);
    }
    // Refused before anything was written.
    expect(existsSync(dir)).toBe(false);
  });

  it('P15: serve with an unknown flag or a bad value exits non-zero with a clear message, without serving', () => {
    const dir = join(scratch, 'serve-never');
    const cases: [string[], RegExp][] = [
      [['serve', '--data-dir', dir, '--port', '0', '--bogus'], /--bogus/],
      [['serve', '--data-dir', dir, '--port', '0', '--no-such-flag', 'x'], /--no-such-flag/],
      [['serve', '--data-dir', dir, '--port', 'eighty'], /--port/],
      [['serve', '--data-dir', dir, '--port', '70000'], /--port/],
      [['serve', '--data-dir', dir, '--port', '0', '--workers', '0'], /--workers/],
      [['serve', '--data-dir', dir, '--port', '0', '--member', 'bad name!'], /--member/],
      [['serve', '--data-dir', dir, '--port'], /--port/],
    ];
    for (const [args, message] of cases) {
      const run = cli(args);
      expect({ args, status: run.status }).not.toEqual({ args, status: 0 });
      expect(run.status).not.toBeNull(); // exited by itself, not killed by the timeout
      expect(run.stderr).toMatch(message);
      expect(run.stdout).not.toContain('"msg":"listening"');
      expect(run.stderr).not.toMatch(/\n\s+at\s/);
    }
  });

  it('P15: serve reads PATH_* environment variables, and SIGTERM stops it with exit code 0', async () => {
    const dir = tempDir('cli-env');
    dirs.push(dir);
    const child = spawn(process.execPath, [CLI, 'serve'], {
      cwd: scratch, stdio: ['ignore', 'pipe', 'pipe'],
      // Port 0 for both listeners: ports are exclusive (P16), and other nodes may run beside.
      env: {
        ...process.env, PATH_DATA_DIR: dir, PATH_PORT: '0', PATH_EXTERNAL_PORT: '0', PATH_ADMIN_PORT: '0', PATH_HOST: '127.0.0.1',
        PATH_MEMBER: 'envmember', PATH_WORKERS: '1',
      },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { out += d.toString(); });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      const port = await waitFor('the node to listen', async () => {
        const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out);
        if (child.exitCode !== null) throw new Error(`node exited:\n${out}`);
        return m ? Number(m[1]) : undefined;
      }, 30_000, 100);
      const config = await (await fetch(`http://127.0.0.1:${port}/.well-known/path-configuration`)).json() as any;
      expect(config.member).toBe('envmember');
      expect(existsSync(join(dir, 'node.mdb'))).toBe(true);
      expect(existsSync(join(scratch, 'data'))).toBe(false);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });

  it('a SIGTERM while serve starts ends it at once with exit code 0, and the data directory starts again', async () => {
    const dir = tempDir('cli-early-stop');
    dirs.push(dir);
    // The first line (the data directory's announcement) comes before recovery, the worker
    // threads and the listeners: the signal is sent while the node is still starting.
    const { code, signal, out } = await serveSignalledWhen(dir, () => true);
    // Without handlers in place during the start, the process dies of the signal itself.
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(out).toContain('"msg":"stopped before it was ready"');
    expect(out).toContain('"signal":"SIGTERM"');
    expect(out).not.toContain('"msg":"listening"');

    // The lock went with the process; the directory serves on the next start.
    const again = await startNode({ dataDir: dir });
    nodes.push(again);
    expect((await fetch(`${again.baseUrl}/.well-known/path-configuration`)).status).toBe(200);
  });

  it('a SIGTERM sent as soon as serve says it is listening drains and stops it with exit code 0', async () => {
    const dir = tempDir('cli-prompt-stop');
    dirs.push(dir);
    const { code, signal, out } = await serveSignalledWhen(dir, (out) => out.includes('"msg":"listening"'));
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(out).toContain('"msg":"stopped"');
    expect(out).not.toContain('stopped before it was ready');
  });
});

/**
 * `serve` on `dir`, sent one SIGTERM as soon as its standard output so far satisfies `when`;
 * resolves with how it exited and all it wrote.
 */
function serveSignalledWhen(dir: string, when: (out: string) => boolean) {
  const serveArgs = [CLI, 'serve', '--data-dir', dir, '--port', '0', '--external-port', '0', '--admin-port', '0', '--host', '127.0.0.1', '--member', 'early', '--workers', '1'];
  const child = spawn(process.execPath, serveArgs, { cwd: scratch, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let signalled = false;
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (!signalled && when(out)) {
      signalled = true;
      child.kill('SIGTERM');
    }
  });
  child.stderr.on('data', (d: Buffer) => { out += d.toString(); });
  return new Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }>((resolve, reject) => {
    child.on('exit', (code, signal) => (signalled ? resolve({ code, signal, out }) : reject(new Error(`serve exited unsignalled:\n${out}`))));
  });
}

/** A credential added while the node runs is accepted within the poll interval: issue a receipt with it. */
function firstAcceptedReceipt(client: Client) {
  return waitFor('the added credential to be accepted', async () => {
    const res = await client.post('/receipts', { issued_by: 'payer', via: EUR });
    return res.status === 201 ? res : undefined;
  }, 3000, 100);
}
