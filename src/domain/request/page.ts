// A payment request's part of the page for people behind its link (P20, SPEC H): its states in
// words, and its terms: the ways it accepts and the merchant's order reference.
import { html, type Html } from '../../pages/html.js';
import { fact, type PagePart } from '../../pages/part.js';
import { isJsonObject, type JsonObject } from '../../protocol/json.js';

interface Capability {
  rail: string;
  asset_code: string;
  chain?: { slug?: string; caip2?: string };
  standard?: string;
}

export const requestPage: PagePart = {
  prefix: 'req',
  type: 'path.request',
  title: 'Payment request',
  states: {
    created: 'Open: awaiting payment',
    paid: 'Paid',
    revoked: 'Revoked',
    expired: 'Expired',
  },
  facts: termsOf,
};

/** What a request accepts, and the order it pays for (a checkout shows its request's). */
export function termsOf(terms: JsonObject): Html {
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
