// @path-node/client as a wallet gets it (issue 31, P18): `npm pack` of packages/client, the
// tarball installed with `npm install` into an empty folder (its @noble dependencies from the
// registry), and used from there, never from the source tree: what ships, that nothing in it
// imports a Node built-in, its size against the 15 kB target, and the same wallet steps in Node
// and in headless Chromium against a real node: a signed call that creates a subject, an address
// and a payment request with a credential printed by the command line, and the request verified
// offline with `verifySigned` against the node's keys document.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { build, transform } from 'esbuild';
import type { Browser } from 'playwright-core';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_GZIP_BYTES_TARGET, clientSize } from '../dist/scripts/client-size.js';
import { launchChromium } from './support/browser.js';
import { removeDir, runCli, startNode, tempDir, type NodeProcess } from './support/harness.js';

const PACKAGE = resolve(__dirname, '../packages/client');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const TSC = resolve(__dirname, '../node_modules/typescript/bin/tsc');

/**
 * The wallet's steps, as plain JavaScript (a string, so that it runs the same in Node and in the
 * page, untouched by the test runner): `lib` is the installed package.
 */
const WALLET = String.raw`async (lib, { baseUrl, credential }) => {
  const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
  const client = new lib.PathClient({ baseUrl, credential });
  const subject = await client.call('subjects.create', { body: { subject_type: 'natural_person' } });
  const address = await client.call('addresses.create', {
    body: { subject_id: subject.body.id, profile: 'directory', discoverability: 'network' },
  });
  await client.call('targets.create', {
    params: { id: address.body.id },
    body: { ...EUR, account_kind: 'own_ledger', account_ref: 'acct-1', is_default: true },
  });
  await client.call('addresses.standing_intent', { params: { id: address.body.id }, body: { accepts: [EUR] } });
  const request = await client.call('requests.create', {
    body: { accepts: [EUR], address_id: address.body.id, amount: { value: '9.75', asset_type: 'fiat', asset_code: 'EUR' } },
  });
  // The creation answers the reference; the signed request is read at it, and an instruction to
  // pay it is another signed statement.
  const read = await client.call('requests.get', { params: { reference: request.body.reference } });
  const instruction = await client.call('instructions.create', {
    body: { request: request.body.reference, via: EUR },
  });
  // Offline from here: the keys document read once, the statements checked against it alone.
  const keys = await (await fetch(baseUrl + '/.well-known/path-keys')).json();
  const body = read.body;
  let refused = null;
  try {
    await client.call('requests.create', { body: { accepts: [EUR], address_id: 'adr_none', amount: body.amount } });
  } catch (error) {
    refused = { pathError: error instanceof lib.PathError, status: error.status };
  }
  return {
    subject: { status: subject.status, id: typeof subject.body.id },
    request: { status: request.status, type: body.type, reference: body.reference, value: body.amount.value },
    created: request.body.reference,
    verified: lib.verifySigned(body, keys),
    instruction: { status: instruction.status, type: instruction.body.type, verified: lib.verifySigned(instruction.body, keys) },
    tampered: lib.verifySigned({ ...body, amount: { ...body.amount, value: '0.01' } }, keys),
    otherKeys: lib.verifySigned(body, { ...keys, keys: keys.keys.map((k) => ({ ...k, kid: k.kid + '-other' })) }),
    digest: lib.digestOf(body),
    refused,
    signed: JSON.stringify(body),
  };
}`;

let node: NodeProcess;
let dataDir: string;
/** The empty folder the tarball is installed into. */
let app: string;
/** Where `npm pack` writes the tarball: a folder of its own, so that runs side by side never share it. */
let tarballs: string;
let packed: { filename: string; files: { path: string }[] };
let browser: Browser | undefined;
/** Made by the command line: for the wallet in Node, in Chromium, and for the README's call. */
let credentials: { keyId: string; privateKeyHex: string }[];

function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 300_000, env: { ...process.env, ...env } });
  expect(r.status, `${command} ${args.join(' ')}\n${r.stdout}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

/** A credential made by the command line, in the shape it prints for the client. */
function credential(): { keyId: string; privateKeyHex: string } {
  const printed = JSON.parse(runCli(['credentials', 'create', '--data-dir', dataDir, '--member', 'local', '--local']));
  return printed.credential;
}

beforeAll(async () => {
  app = tempDir('path-client-app');
  dataDir = tempDir('path-client-package');
  tarballs = tempDir('path-client-tarball');
  const out = run(NPM, ['pack', '--json', '--pack-destination', tarballs], PACKAGE);
  packed = JSON.parse(out)[0];
  run(NPM, ['install', '--no-audit', '--no-fund', join(tarballs, packed.filename)], app);
  // All made before the node starts, so that it knows them from its first request.
  credentials = [credential(), credential(), credential()];
  node = await startNode({ dataDir });
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await node?.stop();
  for (const dir of [app, dataDir, tarballs]) if (dir) removeDir(dir);
});

const installed = () => join(app, 'node_modules', '@path-node', 'client');

describe('the tarball of packages/client', () => {
  it('ships the built modules with their types, the README, the CHANGELOG and the LICENSE, nothing else', () => {
    const paths = packed.files.map((f) => f.path).sort();
    for (const path of paths) expect(path).toMatch(/^(package\.json|README\.md|CHANGELOG\.md|LICENSE|dist\/[a-z0-9-]+\.(js|d\.ts))$/);
    for (const path of ['README.md', 'CHANGELOG.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts']) expect(paths).toContain(path);
    const manifest = JSON.parse(readFileSync(join(installed(), 'package.json'), 'utf8'));
    expect(manifest).toMatchObject({ name: '@path-node/client', license: 'Apache-2.0', type: 'module', sideEffects: false });
    expect(manifest.exports['.']).toEqual({ types: './dist/index.d.ts', import: './dist/index.js' });
    expect(Object.keys(manifest.dependencies).sort()).toEqual(['@noble/ed25519', '@noble/hashes']);
    expect(readFileSync(join(installed(), 'LICENSE'), 'utf8')).toContain('Apache License');
    // What npm installed into the empty folder: the package and its two @noble dependencies.
    expect(readdirSync(join(app, 'node_modules')).filter((n) => !n.startsWith('.')).sort()).toEqual(['@noble', '@path-node']);
    expect(readdirSync(join(app, 'node_modules', '@noble')).sort()).toEqual(['ed25519', 'hashes']);
  });

  it('imports nothing but its own modules and @noble: no `node:` module, no Node built-in, no require', () => {
    const dist = join(installed(), 'dist');
    const files = readdirSync(dist).filter((f) => f.endsWith('.js') || f.endsWith('.d.ts'));
    expect(files.length).toBeGreaterThan(10);
    const seen = new Set<string>();
    for (const file of files) {
      const { specifiers, literals, requires } = modulesOf(join(dist, file));
      for (const specifier of specifiers) seen.add(specifier);
      for (const specifier of specifiers) expect(specifier, file).toMatch(/^(\.\/[a-z0-9-]+\.js|@noble\/(ed25519|hashes\/[a-z0-9]+\.js))$/);
      expect(literals.filter((text) => text.startsWith('node:')), file).toEqual([]);
      expect(requires, file).toBe(0);
    }
    // The scan sees what there is: the package's own modules and both @noble packages.
    for (const specifier of ['./canonical.js', '@noble/ed25519', '@noble/hashes/sha2.js']) expect(seen).toContain(specifier);
  });

  it(`is at most ${CLIENT_GZIP_BYTES_TARGET} bytes minified and gzipped, with its @noble dependencies`, async () => {
    const size = await clientSize(join(installed(), 'dist', 'index.js'));
    expect(size.gzippedBytes).toBeGreaterThan(0);
    expect(size.gzippedBytes).toBeLessThanOrEqual(CLIENT_GZIP_BYTES_TARGET);
  });
});

/**
 * What a built file imports (static, `export ... from`, dynamic `import()`, and `import('x')`
 * types), every string in its code (comments aside), and how many times it calls `require`.
 */
function modulesOf(path: string): { specifiers: string[]; literals: string[]; requires: number } {
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.ES2022, true);
  const found = { specifiers: [] as string[], literals: [] as string[], requires: 0 };
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier))
      found.specifiers.push(node.moduleSpecifier.text);
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && ts.isStringLiteral(node.arguments[0]!))
      found.specifiers.push((node.arguments[0] as ts.StringLiteral).text);
    if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal))
      found.specifiers.push(node.argument.literal.text);
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'require') found.requires++;
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) found.literals.push(node.text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** What the wallet's outcome must be, in Node and in the page alike. */
function expectWallet(outcome: any) {
  expect(outcome.subject).toEqual({ status: 201, id: 'string' });
  expect(outcome.request).toMatchObject({ status: 201, type: 'path.request', value: '9.75', reference: outcome.created });
  expect(outcome.instruction).toEqual({ status: 201, type: 'path.instruction', verified: { valid: true } });
  expect(outcome.verified).toEqual({ valid: true });
  expect(outcome.tampered).toEqual({ valid: false, reason: 'signature_invalid' });
  expect(outcome.otherKeys).toEqual({ valid: false, reason: 'kid_unknown' });
  expect(outcome.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  expect(outcome.refused).toMatchObject({ pathError: true });
  expect(outcome.refused.status).toBeGreaterThanOrEqual(400);
}

/** The request as the node serves it publicly: the same signed object the wallet verified. */
async function expectServed(outcome: any) {
  const reference = outcome.request.reference as string;
  const served = await fetch(`${node.baseUrl}/api/path/v1/requests/${encodeURIComponent(reference)}`, { headers: { accept: 'application/json' } });
  expect(served.status).toBe(200);
  const body = (await served.json()) as Record<string, unknown>;
  expect(body.signature).toEqual(JSON.parse(outcome.signed).signature);
}

describe('installed in an empty folder, against a real node', () => {
  it("the package README's signed call type-checks against the installed types and runs as written", async () => {
    const readme = readFileSync(join(installed(), 'README.md'), 'utf8');
    const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
    expect(blocks).toHaveLength(1);
    const block = blocks[0]!;
    expect(block).toContain("'http://127.0.0.1:8080'");
    // The README reads its credential from the environment, as a program would; Node's types
    // are not installed in the folder, so `process` is declared for the check.
    writeFileSync(join(app, 'readme.mts'), `declare const process: { env: Record<string, string | undefined> };\n${block}`);
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, lib: ['ES2022', 'DOM'], types: [] },
      files: ['readme.mts'],
    }));
    run(process.execPath, [TSC, '-p', join(app, 'tsconfig.json')], app);
    const { code } = await transform(block.replace("'http://127.0.0.1:8080'", JSON.stringify(node.baseUrl)), { loader: 'ts', format: 'esm' });
    writeFileSync(join(app, 'readme.mjs'), code);
    const [credential] = credentials.slice(2);
    const printed = run(process.execPath, [join(app, 'readme.mjs')], app, { PATH_KEY_ID: credential!.keyId, PATH_PRIVATE_KEY: credential!.privateKeyHex });
    const lines = printed.trim().split('\n');
    expect(lines.slice(0, 2)).toEqual(['{ valid: true }', "{ valid: false, reason: 'signature_invalid' }"]);
    expect(lines, printed).toHaveLength(3);
    expect(lines[2]).toMatch(/^400 path\.core\./);
  });

  it('in Node: a signed call creates a payment request, verified offline against the keys document', async () => {
    const script = join(app, 'wallet.mjs');
    writeFileSync(script, [
      "import * as lib from '@path-node/client';",
      `const wallet = ${WALLET};`,
      'const outcome = await wallet(lib, JSON.parse(process.env.WALLET_INPUT));',
      "outcome.resolved = import.meta.resolve('@path-node/client');",
      'process.stdout.write(JSON.stringify(outcome));',
    ].join('\n'));
    const input = JSON.stringify({ baseUrl: node.baseUrl, credential: credentials[0] });
    const outcome = JSON.parse(run(process.execPath, [script], app, { WALLET_INPUT: input }));
    expect(outcome.resolved).toBe(`file://${join(installed(), 'dist', 'index.js')}`);
    expectWallet(outcome);
    await expectServed(outcome);
  });

  it('in Chromium: the installed package bundled by esbuild in that folder does the same', async () => {
    writeFileSync(join(app, 'entry.mjs'), "export * from '@path-node/client';\n");
    const bundled = await build({
      absWorkingDir: app,
      entryPoints: ['entry.mjs'],
      outfile: join(app, 'wallet.js'),
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      minify: true,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(bundled.metafile.inputs).filter((p) => p !== 'entry.mjs');
    expect(inputs.some((p) => p.startsWith('node_modules/@path-node/client/dist/'))).toBe(true);
    for (const input of inputs) expect(input).toMatch(/^node_modules\/(@path-node\/client|@noble\/(ed25519|hashes))\//);

    // The bundle comes from a server of its own, as a wallet's page would load it; the page is
    // at the node's origin, where the signed calls go.
    const source = readFileSync(join(app, 'wallet.js'));
    const assets: Server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/javascript', 'access-control-allow-origin': '*' });
      res.end(source);
    });
    await new Promise<void>((done) => assets.listen(0, '127.0.0.1', done));
    browser ??= await launchChromium();
    const context = await browser.newContext({ bypassCSP: true });
    try {
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${node.baseUrl}/.well-known/path-keys`);
      const url = `http://127.0.0.1:${(assets.address() as AddressInfo).port}/wallet.js`;
      const input = { baseUrl: node.baseUrl, credential: credentials[1] };
      const outcome = (await page.evaluate(
        `(async () => { const lib = await import(${JSON.stringify(url)}); const o = await (${WALLET})(lib, ${JSON.stringify(input)}); o.nodeProcess = typeof globalThis.process !== 'undefined'; return o; })()`,
      )) as any;
      expect(errors).toEqual([]);
      expect(outcome.nodeProcess).toBe(false);
      expectWallet(outcome);
      await expectServed(outcome);
    } finally {
      await context.close();
      await new Promise((done) => assets.close(done));
    }
  });
});
