// What an aggregate adds to the page for people behind its links (P20). Each aggregate's part
// lives in its own folder (`src/domain/<aggregate>/page.ts`); the shell (render.ts) lays out
// what every page shows around it: issuer, badge, status, amount, expiry, reference, QR code.
import { html, type Html } from './html.js';
import type { JsonObject } from '../protocol/json.js';

export interface PagePart {
  /** The prefix of the references its links carry (P9). */
  prefix: string;
  /** The `type` of its signed object. */
  type: string;
  /** What the page calls it. */
  title: string;
  /** The words for each state its object may be in (SPEC, States and transitions). */
  states: Readonly<Record<string, string>>;
  /** The signed object whose amount and terms the page shows; absent: the object itself. */
  terms?(object: JsonObject): JsonObject;
  /** Facts shown first, from those terms. */
  facts?(terms: JsonObject): Html;
  /** What follows the facts, before the QR code. */
  after?(object: JsonObject): Html;
}

/** One fact of the page's list: a term and its value. */
export function fact(term: string, value: Html | string): Html {
  return html`<div class="fact">
    <dt>${term}</dt>
    <dd>${value}</dd>
  </div>`;
}
