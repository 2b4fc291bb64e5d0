// The script of the pages for people (P20): a browser module, bundled by scripts/bundle.ts and
// served by the node as /path-assets/page.js. It believes nothing the page says. It fetches the
// link's signed object again as JSON and the node's keys document, verifies the object with the
// client library (P18), checks that it is this link's object, issued by the member the keys
// document names, and that the page shows what the object says, then marks the outcome on
// `[data-path-verified]` ("true" or "false") with a badge a payer can read.
import { verifySigned } from '@path-node/client';
import { isJsonObject, type JsonObject } from '../protocol/json.js';

type KeysDocument = Parameters<typeof verifySigned>[1];

const KEYS_PATH = '/.well-known/path-keys';

async function readJson(url: string): Promise<unknown> {
  const response = await fetch(url, { headers: { accept: 'application/json' }, cache: 'no-store' });
  return response.json();
}

/** Why a signed object and the request it may carry cannot be trusted, or null. */
function signatureProblem(object: JsonObject, keys: JsonObject): string | null {
  if (object.issuer !== keys.member) return 'it names an issuer other than this node';
  const verdict = verifySigned(object, keys as unknown as KeysDocument);
  if (!verdict.valid) return `its signature does not verify (${verdict.reason})`;
  // A checkout carries its request's own signed object, which must verify on its own.
  if (object.type !== 'path.checkout') return null;
  const inner = isJsonObject(object.request) ? object.request : null;
  if (inner === null || inner.type !== 'path.request') return 'it carries no signed request';
  const problem = signatureProblem(inner, keys);
  return problem === null ? null : `its request does not verify: ${problem}`;
}

/** What the page shows that a reader relies on, compared with the verified object. */
function displayProblem(root: HTMLElement, object: JsonObject, keys: JsonObject): string | null {
  const shownIssuer = root.querySelector('[data-path-issuer]')?.textContent ?? '';
  if (shownIssuer !== keys.member) return 'the page names another issuer than the signature';
  // The amount the page shows (render.ts): a checkout's request's, else the object's own.
  const terms = object.type === 'path.checkout' ? object.request : object;
  const amount = isJsonObject(terms) ? (terms.amount ?? terms.received ?? terms.sent) : undefined;
  const value = root.querySelector('.amount .value')?.textContent ?? null;
  const code = root.querySelector('.amount .code')?.textContent ?? null;
  const expected = isJsonObject(amount) ? [amount.value, amount.asset_code] : [null, null];
  if (value !== expected[0] || code !== expected[1]) return 'the page shows another amount';
  return null;
}

/**
 * Why this page's object cannot be trusted (null when it verified), and the key it was checked
 * against: the key id the object names, from the keys document this host publishes.
 */
async function problemOf(root: HTMLElement): Promise<{ problem: string | null; kid: string }> {
  const [object, keys] = await Promise.all([readJson(location.pathname), readJson(KEYS_PATH)]);
  const refused = (problem: string) => ({ problem, kid: '' });
  if (!isJsonObject(object)) return refused('the link answered no object');
  if (!isJsonObject(keys) || typeof keys.member !== 'string')
    return refused('the node published no keys');
  const { pathKind, pathReference } = root.dataset;
  if (object.type !== pathKind || object.reference !== pathReference) {
    return refused('the node answered another object than this link names');
  }
  const problem = signatureProblem(object, keys) ?? displayProblem(root, object, keys);
  return { problem, kid: String(object.kid) };
}

/**
 * The badge says against whose keys the signature was checked: the issuer's key, as published
 * at this host's `/.well-known/path-keys` (issue 31), so a payer knows what "verified" rests on.
 */
function mark(root: HTMLElement, outcome: { problem: string | null; kid: string }): void {
  const badge = root.querySelector('[data-path-badge]');
  const issuer = root.querySelector('[data-path-issuer]')?.textContent ?? '';
  const { problem, kid } = outcome;
  if (badge !== null) {
    badge.textContent =
      problem === null
        ? `Signature of ${issuer} verified in this browser against key ${kid}, ` +
          `published by ${issuer} at ${location.host}${KEYS_PATH}`
        : `Not verified: ${problem}. Do not pay from this page.`;
  }
  root.setAttribute('data-path-verified', problem === null ? 'true' : 'false');
}

async function main(): Promise<void> {
  const root = document.querySelector<HTMLElement>('[data-path-verified]');
  if (root === null) return;
  let outcome: { problem: string | null; kid: string };
  try {
    outcome = await problemOf(root);
  } catch {
    outcome = { problem: 'the object or the keys could not be read', kid: '' };
  }
  mark(root, outcome);
}

void main();
