// P20 pages for people, in headless Chromium against a real node: a request page and a checkout
// page that verify their signed object in the browser ([data-path-verified] "true"), a tampered
// object caught ("false"), paid, expired and revoked requests shown as such, the hand-back
// links of a checkout, a hostile order_reference shown as text, the CSP and the other headers,
// the signed JSON for every client that is not a browser, and a phone-sized viewport.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './support/browser.js';
import { removeDir, startWithThreeMembers, type ThreeMembers } from './support/harness.js';
import { verifiesWith } from './support/verify.js';
import { waitFor } from './support/wait.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const USDC = {
  rail: 'blockchain', asset_type: 'token', asset_code: 'USDC',
  chain: { slug: 'base', caip2: 'eip155:8453', evm: { chain_id: 8453 } }, standard: 'erc20', contract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
};
const AMOUNT = { value: '12.50', asset_type: 'fiat', asset_code: 'EUR' };
const HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>';
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const PHONE = { width: 390, height: 844 };

let m: ThreeMembers;
let browser: Browser;

beforeAll(async () => {
  [m, browser] = await Promise.all([startWithThreeMembers('path-pages'), launchChromium()]);
});

afterAll(async () => {
  await browser?.close();
  await m?.node.stop();
  if (m) removeDir(m.dataDir);
});

async function newRequest(extra: Record<string, unknown> = {}): Promise<{ reference: string; url: string }> {
  const res = await m.local.post('/requests', { accepts: [EUR, USDC], amount: AMOUNT, ...extra });
  expect(res.status, res.text).toBe(201);
  return res.json;
}

/** A page in a context of its own, with what the browser reported while it ran. */
interface Opened {
  page: Page;
  status: number;
  /** Console errors (a CSP refusal is one) and uncaught exceptions. */
  errors: string[];
  dialogs: string[];
  close(): Promise<void>;
}

async function open(url: string, options: { viewport?: typeof PHONE; before?: (page: Page) => Promise<void> } = {}): Promise<Opened> {
  const context = await browser.newContext({ viewport: options.viewport ?? { width: 1024, height: 768 } });
  const page = await context.newPage();
  const errors: string[] = [];
  const dialogs: string[] = [];
  page.on('console', (message) => { if (message.type() === 'error') errors.push(message.text()); });
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('dialog', (dialog) => { dialogs.push(dialog.message()); void dialog.dismiss(); });
  await options.before?.(page);
  const response = await page.goto(url);
  return { page, status: response?.status() ?? 0, errors, dialogs, close: () => context.close() };
}

/** The outcome the page's script marks once it has verified (or failed to). */
async function verdict(page: Page): Promise<string | null> {
  await page.waitForSelector('[data-path-verified="true"], [data-path-verified="false"]', { timeout: 15_000 });
  return page.getAttribute('[data-path-verified]', 'data-path-verified');
}

const text = (page: Page, selector: string) => page.locator(selector).innerText();

describe('P20 request page', () => {
  it('a genuine request verifies in the browser: badge true, the issuer, amount, accepts, expiry, status and a QR code', async () => {
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const request = await newRequest({ order_reference: 'order-7731', expires_at: expiresAt });
    const { page, status, errors, close } = await open(request.url);
    expect(status).toBe(200);
    expect(await verdict(page)).toBe('true');
    expect(await text(page, '[data-path-badge]')).toContain('verified');
    // Against whose keys (issue 31): the key the object names, published by the issuer at this host.
    const signed = await (await fetch(request.url, { headers: { accept: 'application/json' } })).json();
    const host = new URL(request.url).host;
    expect(await text(page, '[data-path-badge]')).toBe(
      `Signature of local verified in this browser against key ${signed.kid}, published by local at ${host}/.well-known/path-keys`,
    );
    expect(await text(page, '[data-path-issuer]')).toBe('local');
    expect(await page.locator('.seal').isVisible()).toBe(true);
    expect(await text(page, '.amount')).toMatch(/12\.50\s+EUR/);
    const accepts = await page.locator('.accepts li').allInnerTexts();
    expect(accepts).toHaveLength(2);
    expect(accepts[0]).toContain('EUR');
    expect(accepts[1]).toMatch(/USDC on base/);
    expect(await page.getAttribute('time', 'datetime')).toBe(expiresAt);
    expect(await page.getAttribute('[data-path-status]', 'data-path-status')).toBe('created');
    expect(await text(page, '[data-path-status]')).toMatch(/open/i);
    expect(await page.locator('figure.qr svg path').count()).toBe(1);
    expect(await text(page, 'figure.qr figcaption')).toBe(request.url);
    expect(errors).toEqual([]);
    await close();
  });

  it('a tampered object (one field changed on its way to the script) shows false', async () => {
    const request = await newRequest();
    const { page, close } = await open(request.url, {
      before: (p) => p.route(request.url, async (route) => {
        if (route.request().resourceType() === 'document') return route.continue();
        const response = await route.fetch();
        const object = await response.json();
        object.amount.value = '1.25';
        await route.fulfill({ response, json: object });
      }),
    });
    expect(await verdict(page)).toBe('false');
    expect(await text(page, '[data-path-badge]')).toMatch(/Not verified: its signature does not verify/);
    expect(await page.locator('.seal').isVisible()).toBe(false);
    await close();
  });

  it('a paid request says Paid, and still verifies', async () => {
    const request = await newRequest();
    expect((await m.beta.post(`/requests/${request.reference}/paid`)).status).toBe(200);
    const { page, close } = await open(request.url);
    expect(await verdict(page)).toBe('true');
    expect(await page.getAttribute('[data-path-status]', 'data-path-status')).toBe('paid');
    expect(await text(page, '[data-path-status]')).toBe('Paid');
    await close();
  });

  it('an expired request (410) renders a page that says Expired', async () => {
    const request = await newRequest({ expires_at: new Date(Date.now() + 1_500).toISOString() });
    await waitFor('the request to expire', async () => (await m.anon.get(`/requests/${request.reference}`)).status === 410);
    const { page, status, close } = await open(request.url);
    expect(status).toBe(410);
    expect(await page.getAttribute('[data-path-status]', 'data-path-status')).toBe('expired');
    expect(await text(page, '[data-path-status]')).toBe('Expired');
    expect(await text(page, '.note')).toMatch(/can no longer be paid/);
    expect(await page.locator('[data-path-verified]').count()).toBe(0);
    await close();
  });

  it('a revoked request (410) renders a page that says Revoked', async () => {
    const request = await newRequest();
    expect((await m.local.post(`/requests/${request.reference}/revoke`)).status).toBe(200);
    const { page, status, close } = await open(request.url);
    expect(status).toBe(410);
    expect(await page.getAttribute('[data-path-status]', 'data-path-status')).toBe('revoked');
    expect(await text(page, '[data-path-status]')).toBe('Revoked');
    await close();
  });

  it('a hostile order_reference shows as text: no dialog, no element injected', async () => {
    const request = await newRequest({ order_reference: HOSTILE });
    const { page, dialogs, errors, close } = await open(request.url);
    expect(await verdict(page)).toBe('true');
    expect(await page.locator('.order').textContent()).toBe(HOSTILE);
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('script').count()).toBe(1);
    expect(await page.getAttribute('script', 'src')).toBe('/path-assets/page.js');
    expect(dialogs).toEqual([]);
    expect(errors).toEqual([]);
    await close();
  });
});

describe('P20 checkout page', () => {
  it('shows the request it sells, verifies, and offers the hand-back links', async () => {
    const request = await newRequest({ order_reference: 'cart-18' });
    const session = await m.local.post('/checkout/sessions', {
      request_reference: request.reference, success_url: 'https://shop.example/thanks?order=cart-18', cancel_url: 'https://shop.example/cancel?order=cart-18',
    });
    expect(session.status, session.text).toBe(201);
    const { page, close } = await open(session.json.url);
    expect(await verdict(page)).toBe('true');
    expect(await text(page, '.kind')).toMatch(/checkout/i);
    expect(await text(page, '.amount')).toMatch(/12\.50\s+EUR/);
    expect(await page.getAttribute('[data-path-status]', 'data-path-status')).toBe('open');
    expect(await page.getAttribute('[data-path-handback="success"]', 'href')).toBe('https://shop.example/thanks?order=cart-18');
    expect(await page.getAttribute('[data-path-handback="cancel"]', 'href')).toBe('https://shop.example/cancel?order=cart-18');
    expect(await text(page, '.handback')).toMatch(/Return to the merchant[\s\S]*Cancel/);
    await close();
  });

  it('a completed checkout says Completed', async () => {
    const request = await newRequest();
    const session = await m.local.post('/checkout/sessions', {
      request_reference: request.reference, success_url: 'https://shop.example/ok', cancel_url: 'https://shop.example/cancel',
    });
    expect((await m.beta.post(`/checkout/sessions/${session.json.reference}/complete`)).status).toBe(200);
    const { page, close } = await open(session.json.url);
    expect(await verdict(page)).toBe('true');
    expect(await page.getAttribute('[data-path-status]', 'data-path-status')).toBe('completed');
    expect(await text(page, '[data-path-status]')).toBe('Completed');
    expect(await page.getAttribute('[data-path-handback="success"]', 'href')).toBe('https://shop.example/ok');
    await close();
  });
});

describe('P20 negotiation and headers', () => {
  it('a browser gets the page with a strict CSP, nosniff, no-referrer and Vary: Accept; the script and style are served', async () => {
    const request = await newRequest();
    const res = await fetch(request.url, { headers: { accept: BROWSER_ACCEPT } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toBe(CSP);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('vary')).toBe('Accept');
    const html = await res.text();
    expect(html).not.toMatch(/<script>|<script(?![^>]*\bsrc=)|\son[a-z]+=|style=/i);
    for (const [path, type] of [['/path-assets/page.js', 'text/javascript'], ['/path-assets/page.css', 'text/css']]) {
      const asset = await fetch(m.node.baseUrl + path);
      expect(asset.status).toBe(200);
      expect(asset.headers.get('content-type')).toContain(type);
      expect(asset.headers.get('x-content-type-options')).toBe('nosniff');
      expect((await asset.text()).length).toBeGreaterThan(0);
    }
  });

  it('any other client gets the signed JSON (no Accept, */*, application/json), with Vary: Accept', async () => {
    const request = await newRequest();
    const html = await fetch(request.url, { headers: { accept: BROWSER_ACCEPT } });
    expect(html.headers.get('content-type')).toContain('text/html');
    for (const accept of [undefined, '*/*', 'application/json', 'application/json, text/html;q=0.5']) {
      const res = await fetch(request.url, { headers: accept === undefined ? {} : { accept } });
      expect(res.status, accept).toBe(200);
      expect(res.headers.get('content-type'), accept).toBe('application/json');
      expect(res.headers.get('vary')).toBe('Accept');
      expect(res.headers.get('path-protocol-version')).toBe('0.2.0');
      const object = await res.json();
      expect(object).toMatchObject({ type: 'path.request', reference: request.reference, issuer: 'local' });
      expect(verifiesWith(object, m.publicKey)).toBe(true);
    }
    const gone = await fetch(`${m.node.baseUrl}/path/req_${'0'.repeat(32)}`);
    expect(gone.status).toBe(404);
    expect(gone.headers.get('vary')).toBe('Accept');
    expect((await gone.json()).error.code).toBe('path.core.not_found');
  });

  it('on a phone-sized viewport (390x844) neither page scrolls sideways', async () => {
    const request = await newRequest({ order_reference: `${'x'.repeat(120)} ${HOSTILE}` });
    const session = await m.local.post('/checkout/sessions', {
      request_reference: request.reference, success_url: `https://shop.example/${'long-path/'.repeat(12)}`, cancel_url: 'https://shop.example/c',
    });
    for (const url of [request.url, session.json.url]) {
      const { page, close } = await open(url, { viewport: PHONE });
      expect(await verdict(page)).toBe('true');
      const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, view: document.documentElement.clientWidth }));
      expect(widths.view).toBe(PHONE.width);
      expect(widths.scroll, url).toBeLessThanOrEqual(widths.view);
      await close();
    }
  });
});
