// docs/WALLETS.md "The client" (P18): its ```ts blocks, taken as they are, type-checked against
// the published declarations of `path-node/client` and run against a real node, so the guide
// cannot drift from the library. The blocks continue one another; the inputs they name
// (`baseUrl`, `reference`, `receiptReference`, `rawBody`, `headers`) come from a real node and
// a real webhook delivery.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PathClient, digestOf } from 'path-node/client';
import { createCredential, removeDir, startNode, tempDir, type NodeProcess } from './support/harness.js';
import { Receiver } from './support/receiver.js';
import { waitFor } from './support/wait.js';

const ROOT = resolve(__dirname, '..');
const SECTION = '## The client';
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '21.00', asset_type: 'fiat', asset_code: 'EUR' };
/** What the blocks leave for the test to check: the names they declare. */
const RESULTS = ['request', 'keys', 'payeeName', 'answer', 'commitment', 'pledged', 'instruction', 'receipt', 'verdict', 'history', 'event', 'issued'];

/** The ```ts blocks of the section, in order. */
function readmeBlocks(): string[] {
  const readme = readFileSync(join(ROOT, 'docs', 'WALLETS.md'), 'utf8');
  const start = readme.indexOf(`\n${SECTION}\n`);
  expect(start, `docs/WALLETS.md has a "${SECTION}" section`).toBeGreaterThanOrEqual(0);
  const rest = readme.slice(start + SECTION.length + 2);
  const end = rest.search(/^## /m);
  const section = end < 0 ? rest : rest.slice(0, end);
  return [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

/** One module: the blocks' imports first, the rest as the body of `run(inputs)`. */
function moduleOf(blocks: string[]): string {
  const imports: string[] = [];
  const body: string[] = [];
  for (const block of blocks) {
    for (const line of block.split('\n')) {
      if (line.startsWith('import ')) imports.push(line);
      else body.push(`  ${line}`);
    }
  }
  return [
    ...imports,
    "import type { WebhookHeaders } from 'path-node/client';",
    '',
    'export interface Inputs { baseUrl: string; reference: string; receiptReference: string; rawBody: string; headers: WebhookHeaders }',
    '',
    'export async function run({ baseUrl, reference, receiptReference, rawBody, headers }: Inputs) {',
    ...body,
    `  return { ${RESULTS.join(', ')} };`,
    '}',
    '',
  ].join('\n');
}

let node: NodeProcess;
let dataDir: string;
const receiver = new Receiver();
let credential: { keyId: string; privateKeyHex: string };
const deliveries = receiver.deliveries;
const scratch = join(ROOT, '.vitest-tmp', `wallet-readme-${process.pid}`);

beforeAll(async () => {
  await receiver.open();
  dataDir = tempDir('path-wallet-readme');
  const own = createCredential(dataDir, 'local', { local: true });
  node = await startNode({ dataDir, args: ['--dev', '--webhook-urls', `http://127.0.0.1:${receiver.port}/ops`] });
  credential = { keyId: own.keyId, privateKeyHex: own.seedHex };
  mkdirSync(scratch, { recursive: true });
});

afterAll(async () => {
  await node?.stop();
  await receiver.close();
  if (dataDir) removeDir(dataDir);
  rmSync(scratch, { recursive: true, force: true });
});

describe('docs/WALLETS.md: The client', () => {
  it('has a ts block for each step, importing only path-node/client', () => {
    const blocks = readmeBlocks();
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    const code = blocks.join('\n');
    for (const step of ['requests.get', 'verifySigned', 'resolve(', 'instructions.create', 'receipts.get', 'verifyWebhook']) expect(code).toContain(step);
    const sources = [...code.matchAll(/^import .* from '([^']+)';$/gm)].map((m) => m[1]);
    expect(new Set(sources)).toEqual(new Set(['path-node/client']));
  });

  it('its blocks type-check against the published declarations and run against a real node', async () => {
    // The merchant's side, made with the same library: a payee with a standing intent, a
    // request bound to its address, and the receipt whose issue the node delivers as a webhook.
    const member = new PathClient({ baseUrl: node.baseUrl, credential });
    const subject = await member.call('subjects.create', { body: { subject_type: 'legal_entity' } });
    const address = await member.call('addresses.create', { body: { subject_id: subject.body.id, profile: 'directory', discoverability: 'network' } });
    await member.call('targets.create', { params: { id: address.body.id }, body: { ...EUR, account_kind: 'own_ledger', account_ref: 'acct-r', is_default: true } });
    await member.call('addresses.standing_intent', { params: { id: address.body.id }, body: { accepts: [EUR] } });
    const request = await member.call('requests.create', { body: { accepts: [EUR], address_id: address.body.id, amount: AMOUNT } });
    const reference = request.body.reference as string;
    const issuedReceipt = await member.call('receipts.create', {
      body: { issued_by: 'payee', request: reference, via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-R1' }] },
    });
    const receiptReference = issuedReceipt.body.reference as string;
    const delivery = await waitFor('receipt.issued delivered', () => deliveries.find((d) => d.body?.data?.reference === receiptReference));

    const file = join(scratch, 'readme.ts');
    writeFileSync(file, moduleOf(readmeBlocks()));
    try {
      execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext',
        '--moduleResolution', 'nodenext', '--skipLibCheck', '--lib', 'es2022,dom', '--types', 'node', file], { cwd: ROOT, encoding: 'utf8' });
    } catch (error) {
      throw new Error(`the guide's blocks do not type-check:\n${(error as { stdout?: string }).stdout ?? error}\n${readFileSync(file, 'utf8')}`);
    }

    const { run } = await import(pathToFileURL(file).href);
    const out = await run({ baseUrl: node.baseUrl, reference, receiptReference, rawBody: delivery.raw, headers: delivery.headers });

    expect(out.request).toMatchObject({ type: 'path.request', reference, status: 'created', payee: { member: 'local', address: address.body.address } });
    expect(out.payeeName).toBe('local');
    expect(out.keys.member).toBe('local');
    expect(out.answer).toMatchObject({ kind: 'resolver_answer', address: address.body.address, accepts: [EUR] });
    expect(out.answer.commitment).toBe(digestOf({ grammar: 2, address: address.body.address, accepts: [EUR], limits: {} }));
    expect(out.commitment).toMatchObject({ type: 'path.address.commitment', commitment: out.answer.commitment });
    expect(out.pledged).toEqual([EUR]);
    expect(out.instruction).toMatchObject({ type: 'path.instruction', request: reference, via: EUR, status: 'open' });
    expect(out.receipt).toEqual(issuedReceipt.body);
    expect(out.verdict).toEqual({ valid: true });
    expect(out.history.transitions.map((t: any) => t.envelope)).toEqual([issuedReceipt.body]);
    expect(out.event).toMatchObject({ type: 'path.event', event: 'receipt.issued' });
    expect(out.issued).toEqual(issuedReceipt.body);

    // The blocks refuse what they should: a delivery whose body was changed does not verify.
    await expect(run({ baseUrl: node.baseUrl, reference, receiptReference, rawBody: delivery.raw.replace('BE-R1', 'BE-R2'), headers: delivery.headers }))
      .rejects.toMatchObject({ name: 'PathError', code: 'path.client.webhook_invalid' });
  });
});
