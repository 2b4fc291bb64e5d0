// The pages for people (P20), rendered on the node: what a payer's browser shows behind a link.
// A page states what the signed object says (issuer, amount, what is accepted, expiry, status,
// the hand-back links of a checkout) and carries no data for a script: the page's own script
// (page.ts) fetches the object again as JSON and verifies it with the client library, so the
// page only ever claims "verified" after the browser has checked the signature itself. Every
// value goes through `html`, which escapes it; the QR code is the link's alone.
import { renderSVG } from 'uqr';
import { html, trusted, type Html } from './html.js';
import { isJsonObject, type JsonObject } from '../client/json.js';

/** Where the node serves the page's script and style (http/routes/assets.ts). */
export const PAGE_ASSETS = {
  script: '/path-assets/page.js',
  style: '/path-assets/page.css',
} as const;

interface Amount {
  value: string;
  asset_code: string;
}

interface Capability {
  rail: string;
  asset_code: string;
  chain?: { slug?: string; caip2?: string };
  standard?: string;
}

/** What the link answers: the signed object, or the refusal the node gives for it. */
export type LinkAnswer =
  | { status: number; object: JsonObject }
  | { status: number; refusal: { code: string; message: string } };

export interface LinkPage {
  /** The link itself, absolute: what the QR code holds. */
  link: string;
  reference: string;
  answer: LinkAnswer;
  now: number;
}

const KINDS: Record<string, { type: string; title: string }> = {
  req: { type: 'path.request', title: 'Payment request' },
  chk: { type: 'path.checkout', title: 'Checkout' },
  ins: { type: 'path.instruction', title: 'Payment instruction' },
  rcp: { type: 'path.receipt', title: 'Settlement receipt' },
};

/** The words for each state an object behind a link may be in (SPEC, States and transitions). */
const STATES: Record<string, string> = {
  created: 'Open: awaiting payment',
  open: 'Open: awaiting payment',
  paid: 'Paid',
  completed: 'Completed',
  expired: 'Expired',
  revoked: 'Revoked',
  used: 'Used',
  pending: 'Pending',
  settled: 'Settled',
  failed: 'Failed',
  reversed: 'Reversed',
  not_found: 'Not found',
};

/** The whole page for a link. */
export function renderLinkPage(page: LinkPage): string {
  const kind = KINDS[page.reference.slice(0, page.reference.indexOf('_'))];
  const title = kind?.title ?? 'Link';
  if ('refusal' in page.answer) {
    const state = page.answer.refusal.code.slice(page.answer.refusal.code.lastIndexOf('.') + 1);
    return documentOf(`${title}: ${STATES[state] ?? state}`, gone(page, title, state), false);
  }
  const object = page.answer.object;
  const issuer = String(object.issuer ?? '');
  return documentOf(`${title} from ${issuer}`, signedMain(page, title, object), true);
}

function documentOf(title: string, main: Html, script: boolean): string {
  const scriptTag = script ? html`<script type="module" src="${PAGE_ASSETS.script}"></script>` : '';
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        <title>${title}</title>
        <link rel="stylesheet" href="${PAGE_ASSETS.style}" />
        <link rel="icon" href="data:," />
        ${scriptTag}
      </head>
      <body>
        ${main}
      </body>
    </html> `.text;
}

/** A link whose object the node no longer serves (410) or never had (404): it says so. */
function gone(page: LinkPage, title: string, state: string): Html {
  return html`<main class="sheet" data-path-kind="${title}">
    <header class="head">
      <p class="kind">${title}</p>
    </header>
    <p class="status" data-path-status="${state}">${STATES[state] ?? state}</p>
    <p class="note">${sentenceOf(title, state)}</p>
    <dl class="facts">${fact('Reference', html`<span class="mono">${page.reference}</span>`)}</dl>
  </main>`;
}

function sentenceOf(title: string, state: string): string {
  const what = title.toLowerCase();
  if (state === 'not_found') return `This node has no ${what} behind this link.`;
  return `This ${what} is ${STATES[state]?.toLowerCase() ?? state}: it can no longer be paid.`;
}

/** The page of a signed object: its facts, and the badge its script settles (P20). */
function signedMain(page: LinkPage, title: string, object: JsonObject): Html {
  const checkout = object.type === 'path.checkout';
  // A checkout carries its request's signed object: the amount and terms are the request's.
  const terms = checkout && isJsonObject(object.request) ? object.request : object;
  const state = stateOf(object, page.now);
  const type = String(object.type);
  return html`<main
    class="sheet"
    data-path-verified="pending"
    data-path-kind="${type}"
    data-path-reference="${page.reference}"
  >
    <header class="head">
      <p class="kind">${title}</p>
      <p class="issuer">
        <span class="label">From</span> <strong data-path-issuer>${String(object.issuer)}</strong>
        <span class="seal">verified</span>
      </p>
      <p class="badge" role="status" data-path-badge>Checking the signature…</p>
    </header>
    <p class="status" data-path-status="${state}">${STATES[state] ?? state}</p>
    ${amountOf(terms)}
    <dl class="facts">
      ${type === 'path.request' || checkout ? termsOf(terms) : ''}
      ${'expires_at' in object ? fact('Expires', timeOf(object.expires_at)) : ''}
      ${fact('Reference', html`<span class="mono">${page.reference}</span>`)}
    </dl>
    ${checkout ? handBack(object) : ''} ${qrCode(page.link)}
  </main>`;
}

/** The state to show: a checkout past its expiry is expired before its sweep records it. */
function stateOf(object: JsonObject, now: number): string {
  const status = String(object.status ?? 'settled');
  const expiry = typeof object.expires_at === 'string' ? Date.parse(object.expires_at) : NaN;
  const live = status === 'open' || status === 'created';
  return live && expiry <= now ? 'expired' : status;
}

function amountOf(terms: JsonObject): Html {
  const amount = (terms.amount ?? terms.received ?? terms.sent) as Amount | undefined | null;
  if (!isJsonObject(amount)) {
    return html`<p class="amount open-amount">The payer chooses the amount</p>`;
  }
  return html`<p class="amount">
    <span class="value">${amount.value}</span> <span class="code">${amount.asset_code}</span>
  </p>`;
}

function termsOf(terms: JsonObject): Html {
  const accepts = Array.isArray(terms.accepts) ? (terms.accepts as Capability[]) : [];
  const items = accepts.filter(isJsonObject).map((c) => html`<li>${capabilityText(c)}</li>`);
  const order = typeof terms.order_reference === 'string' ? terms.order_reference : null;
  return html`${fact(
    'Accepts',
    html`<ul class="accepts">
      ${items}
    </ul>`,
  )}
  ${order === null ? '' : fact('Order', html`<span class="order">${order}</span>`)}`;
}

/** "USDC on base (erc20), by blockchain": the asset, where it lives, and the rail. */
function capabilityText(c: Capability): string {
  const chain = c.chain?.slug ?? c.chain?.caip2;
  const where = chain === undefined ? '' : ` on ${chain}`;
  const standard = c.standard === undefined ? '' : ` (${c.standard})`;
  return `${c.asset_code}${where}${standard}, by ${String(c.rail).replace(/_/g, ' ')}`;
}

function timeOf(value: unknown): Html {
  if (typeof value !== 'string' || Number.isNaN(Date.parse(value))) return html`Never`;
  const shown = new Date(value).toISOString().slice(0, 16).replace('T', ' ');
  return html`<time datetime="${value}">${shown} UTC</time>`;
}

function fact(term: string, value: Html | string): Html {
  return html`<div class="fact">
    <dt>${term}</dt>
    <dd>${value}</dd>
  </div>`;
}

/**
 * The merchant's hand-back addresses (SPEC I). Opening a session admits only http(s) URLs; a
 * signed object is checked again where it is shown, so anything else would be text, never a link.
 */
function handBack(checkout: JsonObject): Html {
  const link = (url: unknown, words: string, role: string) => {
    const text = String(url ?? '');
    const web = /^https?:$/.test(URL.canParse(text) ? new URL(text).protocol : '');
    if (!web) return html`<p class="handback-text">${words}: <span class="mono">${text}</span></p>`;
    return html`<a
      class="button ${role}"
      data-path-handback="${role}"
      href="${text}"
      rel="noreferrer"
      >${words}</a
    >`;
  };
  return html`<nav class="handback" aria-label="Back to the merchant">
    ${link(checkout.success_url, 'Return to the merchant', 'success')}
    ${link(checkout.cancel_url, 'Cancel and go back', 'cancel')}
  </nav>`;
}

/** The link as a QR code, so a phone can open it; SVG drawn here from the link alone. */
function qrCode(link: string): Html {
  const svg = renderSVG(link, { border: 2 }).replace(
    '<svg ',
    '<svg role="img" aria-label="QR code of this link" ',
  );
  return html`<figure class="qr">
    ${trusted(svg)}
    <figcaption><a href="${link}" class="mono">${link}</a></figcaption>
  </figure>`;
}
