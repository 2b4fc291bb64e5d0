// The browser build of path-node/client (P18): dist/assets/path-client.js, as `npm run build`
// writes it, loaded in headless Chromium on a page at the node's own origin, running a wallet's
// steps against a real node: discover, read and verify a request (and refuse a tampered copy),
// resolve an address with the commitment check, create an instruction, verify a receipt. And the
// bundle step refuses anything that pulls in a Node built-in.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PathClient } from 'path-node/client';
import { bundle } from '../dist/scripts/bundle.js';
import { launchChromium } from './support/browser.js';
import { createCredential, removeDir, startNode, tempDir, type Credential, type NodeProcess } from './support/harness.js';

const BUNDLE = resolve(__dirname, '../dist/assets/path-client.js');
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '8.00', asset_type: 'fiat', asset_code: 'EUR' };

/**
 * The wallet, as plain JavaScript run in the page (a string, so that nothing the test runner
 * adds when it compiles this file reaches the browser). It imports the bundle from a Blob URL.
 */
const WALLET = String.raw`async ({ source, baseUrl, reference, address, receiptReference }) => {
  const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
  const lib = await import(url);
  const client = new lib.PathClient({ baseUrl });
  const configuration = await client.discover();
  const keys = await client.keys();

  const { body: request } = await client.call('requests.get', { params: { reference } });
  const verified = lib.verifySigned(request, keys);
  const tampered = lib.verifySigned({ ...request, amount: { ...request.amount, value: '0.01' } }, keys);

  const { answer, commitment } = await client.resolve(address);
  const recomputed = lib.digestOf({
    grammar: answer.grammar, address: answer.address, accepts: answer.accepts, limits: answer.limits,
  });
  const altering = async (input, init) => {
    const response = await fetch(input, init);
    if (!input.includes('/resolver/')) return response;
    const body = await response.json();
    body.accepts = [{ rail: 'book', asset_type: 'fiat', asset_code: 'XXX' }];
    return new Response(JSON.stringify(body), { status: 200 });
  };
  let mismatch = null;
  try {
    await new lib.PathClient({ baseUrl, fetch: altering }).resolve(address);
  } catch (error) {
    mismatch = { pathError: error instanceof lib.PathError, code: error.code, status: error.status };
  }

  const instruction = await client.call('instructions.create', {
    body: { request: reference, via: request.accepts[0] },
  });
  const { body: receipt } = await client.call('receipts.get', { params: { reference: receiptReference } });

  return {
    member: configuration.member,
    nodeProcess: typeof globalThis.process !== 'undefined',
    request: { type: request.type, reference: request.reference, status: request.status },
    verified,
    tampered,
    resolved: { address: answer.address, commitment: answer.commitment, recomputed, pledged: commitment.commitment },
    mismatch,
    instruction: { status: instruction.status, type: instruction.body.type, request: instruction.body.request, verified: lib.verifySigned(instruction.body, keys) },
    receipt: { reference: receipt.reference, status: receipt.status, verified: lib.verifySigned(receipt, keys) },
    receiptAltered: lib.verifySigned({ ...receipt, status: 'reversed' }, keys),
    canonical: lib.canonicalJson({ b: [1e21, 0.000001], a: '\u20ac' }),
  };
}`;

let node: NodeProcess;
let dataDir: string;
let browser: Browser;
let own: Credential;

beforeAll(async () => {
  dataDir = tempDir('path-client-browser');
  own = createCredential(dataDir, 'local', { local: true });
  [node, browser] = await Promise.all([startNode({ dataDir }), launchChromium()]);
});

afterAll(async () => {
  await browser?.close();
  await node?.stop();
  if (dataDir) removeDir(dataDir);
});

/** A payee with a standing intent, a request to it and a receipt, made by the member in Node. */
async function setUp(credential: { keyId: string; privateKeyHex: string }) {
  const member = new PathClient({ baseUrl: node.baseUrl, credential });
  const subject = await member.call('subjects.create', { body: { subject_type: 'natural_person' } });
  const address = await member.call('addresses.create', { body: { subject_id: subject.body.id, profile: 'directory', discoverability: 'network' } });
  await member.call('targets.create', { params: { id: address.body.id }, body: { ...EUR, account_kind: 'own_ledger', account_ref: 'acct-1', is_default: true } });
  await member.call('addresses.standing_intent', { params: { id: address.body.id }, body: { accepts: [EUR] } });
  const request = await member.call('requests.create', { body: { accepts: [EUR], address_id: address.body.id, amount: AMOUNT } });
  const receipt = await member.call('receipts.create', {
    body: { issued_by: 'payee', request: request.body.reference, via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-B1' }] },
  });
  return { reference: request.body.reference as string, address: address.body.address as string, receiptReference: receipt.body.reference as string };
}

describe('dist/assets/path-client.js in headless Chromium', () => {
  it('runs a wallet\'s steps against the node at its own origin', async () => {
    const inputs = await setUp({ keyId: own.keyId, privateKeyHex: own.seedHex });
    const source = readFileSync(BUNDLE, 'utf8');
    expect(source).not.toMatch(/\bnode:|\brequire\(/);

    // bypassCSP: the page is a JSON answer of the node, whatever headers it carries.
    const context = await browser.newContext({ bypassCSP: true });
    try {
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${node.baseUrl}/.well-known/path-keys`);
      const outcome = (await page.evaluate(`(${WALLET})(${JSON.stringify({ source, baseUrl: node.baseUrl, ...inputs })})`)) as any;
      expect(errors).toEqual([]);

      expect(outcome.member).toBe('local');
      expect(outcome.nodeProcess).toBe(false);
      expect(outcome.request).toEqual({ type: 'path.request', reference: inputs.reference, status: 'created' });
      expect(outcome.verified).toEqual({ valid: true });
      expect(outcome.tampered).toEqual({ valid: false, reason: 'signature_invalid' });
      expect(outcome.resolved.address).toBe(inputs.address);
      expect(outcome.resolved.commitment).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(outcome.resolved.recomputed).toBe(outcome.resolved.commitment);
      expect(outcome.resolved.pledged).toBe(outcome.resolved.commitment);
      expect(outcome.mismatch).toEqual({ pathError: true, code: 'path.address.commitment_mismatch', status: 200 });
      expect(outcome.instruction).toEqual({ status: 201, type: 'path.instruction', request: inputs.reference, verified: { valid: true } });
      expect(outcome.receipt).toEqual({ reference: inputs.receiptReference, status: 'settled', verified: { valid: true } });
      expect(outcome.receiptAltered).toEqual({ valid: false, reason: 'signature_invalid' });
      expect(outcome.canonical).toBe('{"a":"\u20ac","b":[1e+21,0.000001]}');
    } finally {
      await context.close();
    }
  });
});

describe('the bundle step (scripts/bundle.ts)', () => {
  it('fails when anything pulls in a Node built-in, directly or through another module', async () => {
    const dir = tempDir('path-bundle');
    try {
      mkdirSync(join(dir, 'src'));
      writeFileSync(join(dir, 'src', 'hash.ts'), "import { createHash } from 'node:crypto';\nexport const h = createHash;\n");
      writeFileSync(join(dir, 'src', 'direct.ts'), "import { readFileSync } from 'fs';\nexport const r = readFileSync;\n");
      writeFileSync(join(dir, 'src', 'indirect.ts'), "export { h } from './hash.js';\n");
      writeFileSync(join(dir, 'src', 'clean.ts'), 'export const ok = 1;\n');
      const outdir = join(dir, 'out');
      for (const name of ['direct', 'indirect']) {
        await expect(bundle([{ in: `src/${name}.ts`, out: name }], { root: dir, outdir })).rejects.toThrow(/Node built-in/);
      }
      await bundle([{ in: 'src/clean.ts', out: 'clean' }], { root: dir, outdir });
      expect(readFileSync(join(outdir, 'clean.js'), 'utf8')).toContain('export');
    } finally {
      removeDir(dir);
    }
  });
});
