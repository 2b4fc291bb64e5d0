// `path-node lookup` against a real node: 5,000 rows from a CSV file in batches with P5
// signatures, one output row per input row in input order (whatever order concurrent batches
// finish in), per-item errors at their rows (P17), no clear identifier in the output, plain
// progress lines when stderr is not a terminal; a spent lookup budget (429) stops cleanly with a
// resume point, and `--resume` completes the file once the budget allows.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { CLI, Client, createCredential, startNode, tempDir } from './support/harness.js';
import { cleanedUpAfterEach } from './support/lifecycle.js';

const cleanup = cleanedUpAfterEach();
const ROWS = 5_000;
const REGISTERED = 40;
const phone = (i: number) => `+44 20 7${String(i).padStart(3, '0').slice(0, 3)} ${String(i).padStart(4, '0').slice(-4)}`;

/** Runs the command without blocking this process; resolves with its exit code and output. */
function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : Number((error as { code?: number }).code), stdout, stderr });
    });
  });
}

/** A node, its operator's credential written to a key file, and REGISTERED phones it holds. */
async function setUp(label: string, budgetBase: number) {
  const dataDir = tempDir(label);
  cleanup.dirs.push(dataDir);
  const own = createCredential(dataDir, 'local', { local: true });
  const caller = createCredential(dataDir, 'beta', { local: false });
  const args = ['--lookup-budget-base', String(budgetBase), '--lookup-budget-factor', '0'];
  const node = await startNode({ dataDir, args });
  cleanup.running.push(node);
  const local = new Client(node.baseUrl, own);
  const subject = await local.post('/subjects', { subject_type: 'natural_person' });
  expect(subject.status, subject.text).toBe(201);
  for (let i = 0; i < REGISTERED; i++) {
    const res = await local.post('/identifiers', { subject_id: subject.json.id, identifier_type: 'phone', identifier: phone(i * 97), discoverability: 'network' });
    expect(res.status, res.text).toBe(201);
  }
  const keyFile = join(dataDir, 'beta.key');
  writeFileSync(keyFile, `${caller.seedHex}\n`);
  return { dataDir, node, keyFile, caller };
}

/** 5,000 rows: registered phones, absent phones, bad phones, hashes, and one empty row. */
function inputFile(dir: string): string {
  const lines = ['identifier_type,identifier,identifier_hash'];
  for (let row = 1; row <= ROWS; row++) {
    if (row % 125 === 0) lines.push(`phone,${phone(((row / 125) % REGISTERED) * 97)},`);
    else if (row === 777) lines.push('phone,+44 20 79 not-a-number,');
    else if (row === 4321) lines.push('phone,,');
    else if (row % 1000 === 1) lines.push(`phone,,${'ab'.repeat(32)}`);
    else lines.push(`phone,"${phone(5000 + row)}",`);
  }
  const file = join(dir, 'in.csv');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

const outputRows = (file: string) => parse(readFileSync(file), { columns: true }) as Record<string, string>[];

describe('path-node lookup --in --out', () => {
  it('5,000 rows: one output row per input row, in order, found where registered, item errors at their rows', async () => {
    const { dataDir, node, keyFile, caller } = await setUp('path-lookup-file', 1_000_000);
    const input = inputFile(dataDir);
    const out = join(dataDir, 'out.csv');
    const result = await run(['lookup', '--base-url', node.baseUrl, '--key-id', caller.keyId, '--private-key-file', keyFile,
      '--in', input, '--out', out, '--concurrency', '3']);
    expect(result.code, result.stderr).toBe(0);
    const rows = outputRows(out);
    expect(rows).toHaveLength(ROWS);
    expect(rows.map((r) => Number(r.row))).toEqual(Array.from({ length: ROWS }, (_, i) => i + 1));
    for (const r of rows) {
      const n = Number(r.row);
      if (n === 777) {
        expect(r.error_code).toBe('path.core.invalid_request');
        expect(r.identifier_hash).toBe('');
      } else if (n === 4321) {
        expect(r.error_code).toBe('path.core.invalid_request');
      } else if (n % 125 === 0) {
        expect([r.found, r.member, r.endpoint]).toEqual(['true', 'local', node.baseUrl]);
      } else {
        expect([r.found, r.member, r.error_code]).toEqual(['false', '', '']);
        expect(r.identifier_hash).toMatch(/^[0-9a-f]{64}$/);
      }
    }
    expect(rows[0]!.identifier_hash).toBe('ab'.repeat(32));
    const text = readFileSync(out, 'utf8');
    expect(text).not.toContain('+44');
    expect(text).not.toMatch(/20 7\d{3}/);
    expect(result.stderr).toMatch(/lookup: 5000\/5000 rows, \d+ keys\/s/);
  });

  it('a spent budget stops cleanly with a resume point; --resume completes the file in order', async () => {
    const { dataDir, node, keyFile, caller } = await setUp('path-lookup-budget', 1_200);
    const input = inputFile(dataDir);
    const out = join(dataDir, 'out.csv');
    const args = ['lookup', '--base-url', node.baseUrl, '--key-id', caller.keyId, '--private-key-file', keyFile, '--in', input, '--out', out];
    const stopped = await run([...args, '--concurrency', '1']);
    expect(stopped.code, stopped.stderr).toBe(3);
    const first = outputRows(out);
    expect(first.length).toBeGreaterThan(0);
    expect(first.length).toBeLessThan(ROWS);
    expect(first.length % 500).toBe(0);
    expect(stopped.stderr).toContain(`continue from row ${first.length + 1}`);
    // The reset as a date and time (the month's end, P12), and the settings that raise the allowance.
    const until = /the lookup budget is spent until (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ);/.exec(stopped.stderr);
    expect(until, stopped.stderr).not.toBeNull();
    const resetAt = Date.parse(until![1]!);
    expect(resetAt).toBeGreaterThan(Date.now());
    expect(resetAt).toBeLessThanOrEqual(Date.now() + 32 * 86_400_000);
    expect(stopped.stderr).toMatch(/raises the allowance with --lookup-budget-base .* or --lookup-budget-factor/);
    // Without --resume an existing output is never overwritten.
    expect((await run(args)).code).toBe(2);

    await node.stop();
    const larger = await startNode({ dataDir, args: ['--lookup-budget-base', '1000000'] });
    cleanup.running.push(larger);
    const resumed = await run([...args.map((a) => (a === node.baseUrl ? larger.baseUrl : a)), '--resume']);
    expect(resumed.code, resumed.stderr).toBe(0);
    const rows = outputRows(out);
    expect(rows.map((r) => Number(r.row))).toEqual(Array.from({ length: ROWS }, (_, i) => i + 1));
    expect(rows.slice(0, first.length)).toEqual(first);
    expect(readFileSync(out, 'utf8').match(/^row,/gm)).toHaveLength(1);
  });

  it('usage errors exit 2: missing flags, a missing key file, an input without the needed header', async () => {
    const dir = tempDir('path-lookup-usage');
    cleanup.dirs.push(dir);
    writeFileSync(join(dir, 'bad.csv'), 'name,number\nx,1\n');
    writeFileSync(join(dir, 'k'), 'ab'.repeat(32));
    expect((await run(['lookup', '--in', 'x.csv'])).code).toBe(2);
    const { node } = await setUp('path-lookup-usage-node', 1000);
    const base = ['lookup', '--base-url', node.baseUrl, '--key-id', 'cred_x', '--out', join(dir, 'o.csv')];
    expect((await run([...base, '--private-key-file', join(dir, 'none'), '--in', join(dir, 'bad.csv')])).code).toBe(2);
    const header = await run([...base, '--private-key-file', join(dir, 'k'), '--in', join(dir, 'bad.csv')]);
    expect(header.code).toBe(2);
    expect(header.stderr).toMatch(/header row with identifier_type/);
  });
});
