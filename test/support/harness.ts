// Test support: a real node process on an ephemeral loopback port over a real LMDB data
// directory, credentials made with the real command line, and a client that signs requests
// (P5) with @noble/ed25519, independently of the node's own signing code.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { checkConformance } from './conformance.js';

ed.hashes.sha512 = sha512;

export const CLI = resolve(__dirname, '../../dist/src/cli/main.js');
export const PREFIX = '/api/path/v1';

export function tempDir(label = 'path-node'): string {
  return mkdtempSync(join(tmpdir(), `${label}-`));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

export interface Credential {
  keyId: string;
  member: string;
  seedHex: string;
  publicKeyHex: string;
}

export function runCli(args: string[]): string {
  return execFileSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
}

/** A credential made with the command line, in the data directory or cluster mode's database (`store`). */
export function createCredential(dataDir: string, member: string, options: { local: boolean; store?: string }): Credential {
  const where = options.store === undefined ? [] : ['--store', options.store];
  const out = JSON.parse(runCli(['credentials', 'create', '--data-dir', dataDir, ...where, '--member', member, ...(options.local ? ['--local'] : [])]));
  return { keyId: out.key_id, member, seedHex: out.private_key, publicKeyHex: out.public_key };
}

export interface NodeProcess {
  port: number;
  /** The external discovery listener's port (SPEC L). */
  externalPort: number;
  /** The operator's own listener (P21): metrics, health, readiness. */
  adminPort: number;
  baseUrl: string;
  dataDir: string;
  process: ChildProcess;
  output: () => string;
  /** The first log line with message `msg`, parsed, once written (within 30 s). */
  line(msg: string): Promise<any>;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL, no chance to flush anything. */
  kill9(): Promise<void>;
}

/**
 * Spawns node with `args` and waits for its "listening" line. A process that ends first is
 * reported with everything it wrote: the rejection waits for its output streams to close, not
 * for its exit, which may be seen before the last lines written (why a start refuses) are read.
 */
export async function spawnUntilListening(args: string[], env: Record<string, string> = {}) {
  const stdio: ['ignore', 'pipe', 'pipe'] = ['ignore', 'pipe', 'pipe'];
  const child = spawn(process.execPath, args, { stdio, env: { ...process.env, ...env } });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const port = await new Promise<number>((resolvePort, reject) => {
    const timer = setTimeout(() => reject(new Error(`node did not start:\n${out}`)), 30_000);
    const check = () => {
      const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out);
      if (m) { clearTimeout(timer); resolvePort(Number(m[1])); }
    };
    child.stdout!.on('data', check);
    child.on('close', () => {
      clearTimeout(timer);
      reject(new Error(`node exited before listening:\n${out}`));
    });
  });
  return { child, port, output: () => out, exited };
}

export async function startNode(options: { dataDir: string; member?: string; workers?: number; store?: string; args?: string[]; env?: Record<string, string> }): Promise<NodeProcess> {
  const args = [CLI, 'serve', '--data-dir', options.dataDir, '--port', '0', '--external-port', '0', '--host', '127.0.0.1',
    '--member', options.member ?? 'local', '--workers', String(options.workers ?? 2),
    ...(options.store === undefined ? [] : ['--store', options.store]), ...(options.args ?? [])];
  // The operator's listener on a free port too (P21): ports are exclusive (P16).
  const { child, port, output, exited } = await spawnUntilListening(args, { PATH_ADMIN_PORT: '0', ...options.env });
  const out = output();
  const externalPort = Number(/"external_port":(\d+)/.exec(out)?.[1]);
  const adminPort = Number(/"admin_port":(\d+)/.exec(out)?.[1]);
  return {
    port,
    externalPort,
    adminPort,
    baseUrl: `http://127.0.0.1:${port}`,
    dataDir: options.dataDir,
    process: child,
    output,
    line: (msg) => lineOf(child, output, msg),
    async stop() { child.kill('SIGTERM'); return exited; },
    async kill9() { child.kill('SIGKILL'); await exited; },
  };
}

/** Waits for the first line of `output` whose message is `msg`, and parses it. */
function lineOf(child: ChildProcess, output: () => string, msg: string): Promise<any> {
  const find = () => output().split('\n').find((l) => l.includes(`"msg":${JSON.stringify(msg)}`));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`no "${msg}" line in 30 s:\n${output()}`)), 30_000);
    const check = () => {
      const line = find();
      if (line !== undefined) done(null, JSON.parse(line));
    };
    const done = (error: Error | null, value?: unknown) => {
      clearTimeout(timer);
      child.stdout!.off('data', check);
      if (error === null) resolve(value);
      else reject(error);
    };
    child.stdout!.on('data', check);
    check();
  });
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export interface RequestOptions {
  body?: unknown;
  rawBody?: string | Buffer;
  idempotencyKey?: string;
  headers?: Record<string, string>;
  /** Override the signed timestamp (RFC 3339). */
  timestamp?: string;
  /** Sign with this credential instead of the client's. */
  as?: Credential | null;
  /** Use this path verbatim (no API prefix). */
  root?: boolean;
}

export function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

export function signRequest(credential: Credential, r: { method: string; target: string; timestamp: string; idempotencyKey?: string; body: Buffer }): Record<string, string> {
  const text = ['path-request-v1', r.method.toUpperCase(), r.target, r.timestamp, r.idempotencyKey ?? '', sha256Hex(r.body)].join('\n');
  const signature = Buffer.from(ed.sign(Buffer.from(text, 'utf8'), Buffer.from(credential.seedHex, 'hex'))).toString('hex');
  return { 'path-key-id': credential.keyId, 'path-timestamp': r.timestamp, 'path-signature': signature };
}

export class Client {
  constructor(readonly baseUrl: string, readonly credential: Credential | null = null) {}

  as(credential: Credential | null): Client {
    return new Client(this.baseUrl, credential);
  }

  async request(method: string, path: string, options: RequestOptions = {}): Promise<Answer> {
    const target = options.root ? path : PREFIX + path;
    const body = options.rawBody !== undefined ? Buffer.from(options.rawBody)
      : options.body !== undefined ? Buffer.from(JSON.stringify(options.body)) : Buffer.alloc(0);
    const headers: Record<string, string> = { ...options.headers };
    if (body.length > 0) headers['content-type'] ??= 'application/json';
    if (options.idempotencyKey !== undefined) headers['path-idempotency-key'] = options.idempotencyKey;
    const credential = options.as === undefined ? this.credential : options.as;
    if (credential !== null) {
      Object.assign(headers, signRequest(credential, {
        method, target, timestamp: options.timestamp ?? new Date().toISOString(), idempotencyKey: options.idempotencyKey, body,
      }), options.headers);
    }
    const res = await fetch(this.baseUrl + target, { method, headers, body: body.length > 0 ? body : undefined });
    const text = await res.text();
    let json: unknown;
    try { json = JSON.parse(text); } catch { json = undefined; }
    // P19: every answer a test reads must be one the node's OpenAPI document describes.
    await checkConformance(this.baseUrl, { method, target, status: res.status, contentType: res.headers.get('content-type'), text, headers: res.headers, requestBody: body.toString('utf8') });
    return { status: res.status, headers: res.headers, text, json };
  }

  get(path: string, options?: RequestOptions) { return this.request('GET', path, options); }
  post(path: string, body?: unknown, options?: RequestOptions) { return this.request('POST', path, { ...options, body }); }
}

/** The node's active public key, read from its published keys document (P4). */
export async function publishedKey(baseUrl: string, kid?: string): Promise<string> {
  const doc = await (await fetch(`${baseUrl}/.well-known/path-keys`)).json() as { keys: { kid: string; public_key: string; status: string }[] };
  const key = doc.keys.find((k) => (kid === undefined ? k.status === 'active' : k.kid === kid));
  if (key === undefined) throw new Error('key not published');
  return key.public_key;
}

/** A node with clients for its own member (local), two other members (beta, gamma) and no credential. */
export interface ThreeMembers {
  node: NodeProcess;
  dataDir: string;
  local: Client;
  beta: Client;
  gamma: Client;
  anon: Client;
  publicKey: string;
}

export async function startWithThreeMembers(label: string, options: { args?: string[]; env?: Record<string, string> } = {}): Promise<ThreeMembers> {
  const dataDir = tempDir(label);
  const own = createCredential(dataDir, 'local', { local: true });
  const b = createCredential(dataDir, 'beta', { local: false });
  const g = createCredential(dataDir, 'gamma', { local: false });
  const node = await startNode({ dataDir, ...options });
  return {
    node, dataDir, local: new Client(node.baseUrl, own), beta: new Client(node.baseUrl, b), gamma: new Client(node.baseUrl, g),
    anon: new Client(node.baseUrl), publicKey: await publishedKey(node.baseUrl),
  };
}
