// The pages for people (P20), rendered on the node: what a payer's browser shows behind a link.
// A page states what the signed object says (issuer, amount, what is accepted, expiry, status,
// the hand-back links of a checkout) and carries no data for a script: the page's own script
// (page.ts) fetches the object again as JSON and verifies it with the client library, so the
// page only ever claims "verified" after the browser has checked the signature itself. Every
// value goes through `html`, which escapes it; the QR code is the link's alone. What each
// aggregate adds (its title, its states in words, its terms, a checkout's hand-back links) is
// its page part, in its own folder (part.ts).
import { renderSVG } from 'uqr';
import { html, trusted, type Html } from './html.js';
import { fact, type PagePart } from './part.js';
import { isJsonObject, type JsonObject } from '../protocol/json.js';
import { checkoutPage } from '../domain/checkout/page.js';
import { instructionPage } from '../domain/instruction/page.js';
import { receiptPage } from '../domain/receipt/page.js';
import { requestPage } from '../domain/request/page.js';

/** Where the node serves the page's script and style (http/routes/assets.ts). */
export const PAGE_ASSETS = {
  script: '/path-assets/page.js',
  style: '/path-assets/page.css',
} as const;

interface Amount {
  value: string;
  asset_code: string;
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

/** The aggregates whose signed objects a link may name. */
const PARTS: readonly PagePart[] = [requestPage, checkoutPage, instructionPage, receiptPage];

/** Each part by its references' prefix (the page's title) and by its object's type (its body). */
const BY_PREFIX = new Map(PARTS.map((part) => [part.prefix, part]));
const BY_TYPE = new Map(PARTS.map((part) => [part.type, part]));

/** The words for each state an object behind a link may be in: every part's, and not found. */
const STATES: Record<string, string> = Object.assign({}, ...PARTS.map((part) => part.states), {
  not_found: 'Not found',
});

/** The whole page for a link. */
export function renderLinkPage(page: LinkPage): string {
  const kind = BY_PREFIX.get(page.reference.slice(0, page.reference.indexOf('_')));
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
  const type = String(object.type);
  const part = typeof object.type === 'string' ? BY_TYPE.get(object.type) : undefined;
  const terms = part?.terms?.(object) ?? object;
  const state = stateOf(object, page.now);
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
      ${part?.facts?.(terms) ?? ''}
      ${'expires_at' in object ? fact('Expires', timeOf(object.expires_at)) : ''}
      ${fact('Reference', html`<span class="mono">${page.reference}</span>`)}
    </dl>
    ${part?.after?.(object) ?? ''} ${qrCode(page.link)}
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

function timeOf(value: unknown): Html {
  if (typeof value !== 'string' || Number.isNaN(Date.parse(value))) return html`Never`;
  const shown = new Date(value).toISOString().slice(0, 16).replace('T', ' ');
  return html`<time datetime="${value}">${shown} UTC</time>`;
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
