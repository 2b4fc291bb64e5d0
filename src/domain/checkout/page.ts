// A checkout session's part of the page for people behind its link (P20, SPEC I): its states in
// words; the amount and terms of the request it carries (signed inside it); and the merchant's
// hand-back links.
import { html, type Html } from '../../pages/html.js';
import type { PagePart } from '../../pages/part.js';
import { isJsonObject, type JsonObject } from '../../protocol/json.js';
import { termsOf } from '../request/page.js';

export const checkoutPage: PagePart = {
  prefix: 'chk',
  type: 'path.checkout',
  title: 'Checkout',
  states: {
    open: 'Open: awaiting payment',
    completed: 'Completed',
    revoked: 'Revoked',
    expired: 'Expired',
  },
  // A checkout carries its request's signed object: the amount and terms are the request's.
  terms: (object) => (isJsonObject(object.request) ? object.request : object),
  facts: termsOf,
  after: handBack,
};

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
