// Makes docs/images/request-page.png, docs/WALLETS.md's picture of a page for people (P20): a
// payment request at phone size (390x844 CSS pixels, drawn at twice the density), once the
// browser has verified it. It runs a node of its own from the build (dist/) on a temporary data
// directory, creates the request with the client library (P18) and opens the link in headless
// Chromium (Debian's /usr/bin/chromium, driven by playwright-core).
// Usage: npm run build && node dist/scripts/screenshot.js [out.png]
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { PathClient } from '@path-node/client';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const OUT = process.argv[2] ?? join(ROOT, 'docs/images/request-page.png');
const MEMBER = 'harbour-books';
const PHONE = { width: 390, height: 844 }; // tidy: format (the viewport of a common phone)
const NODE_START_TIMEOUT_MS = 30_000; // tidy: format (a developer tool's patience, no setting)
const DAY_MS = 86_400_000; // tidy: format (a day)

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const USDC = {
  rail: 'blockchain',
  asset_type: 'token',
  asset_code: 'USDC',
  chain: { slug: 'base', caip2: 'eip155:8453', evm: { chain_id: 8453 } },
  standard: 'erc20',
  contract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
};

/** A node on a free loopback port; resolves with its process and base URL once it listens. */
function startNode(dataDir: string): Promise<{ child: ChildProcess; baseUrl: string }> {
  const args = [CLI, 'serve', '--data-dir', dataDir, '--member', MEMBER, '--workers', '1'];
  const child = spawn(process.execPath, [...args, '--port', '0', '--external-port', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, PATH_ADMIN_PORT: '0' },
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(
      () => reject(new Error('the node did not start')),
      NODE_START_TIMEOUT_MS,
    );
    child.on('exit', () => reject(new Error(`the node exited:\n${out}`)));
    child.stdout!.on('data', (data: Buffer) => {
      out += data.toString();
      const port = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out)?.[1];
      if (port === undefined) return;
      clearTimeout(timer);
      resolve({ child, baseUrl: `http://127.0.0.1:${port}` });
    });
  });
}

/** The operator's credential, made before the node starts so that the node knows it at once. */
function createCredential(dataDir: string): { keyId: string; privateKeyHex: string } {
  const args = ['credentials', 'create', '--data-dir', dataDir, '--member', MEMBER, '--local'];
  const created = JSON.parse(execFileSync(process.execPath, [CLI, ...args]).toString()) as {
    key_id: string;
    private_key: string;
  };
  return { keyId: created.key_id, privateKeyHex: created.private_key };
}

async function requestLink(
  baseUrl: string,
  credential: { keyId: string; privateKeyHex: string },
): Promise<string> {
  const client = new PathClient({ baseUrl, credential });
  const answer = await client.call('requests.create', {
    body: {
      amount: { value: '24.90', asset_type: 'fiat', asset_code: 'EUR' },
      accepts: [EUR, USDC],
      order_reference: 'order-1042',
      expires_at: new Date(Date.now() + 7 * DAY_MS).toISOString().replace(/\.\d+Z$/, 'Z'),
    },
  });
  return (answer.body as { url: string }).url;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'path-screenshot-'));
  const credential = createCredential(dataDir);
  const { child, baseUrl } = await startNode(dataDir);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu'],
  });
  try {
    const url = await requestLink(baseUrl, credential);
    const page = await browser.newPage({ viewport: PHONE, deviceScaleFactor: 2 });
    await page.goto(url);
    await page.waitForSelector('[data-path-verified="true"]');
    await page.screenshot({ path: OUT, fullPage: true });
    console.log(`wrote ${OUT}`);
  } finally {
    await browser.close();
    child.removeAllListeners('exit');
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
