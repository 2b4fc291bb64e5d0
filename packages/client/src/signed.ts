// Which signed objects of an answer the client verifies, and against whose keys.
//
// The rule: every signed object this node states is verified against this node's keys document
// (P4), found by its `kid` among all keys, retired ones included. Within one node every statement
// is the node's own: the node signs each answer, and it also signed, when it stored them, the
// envelopes that answers embed. So these are verified:
//   - the answer itself when it carries `signature`; for the operations in SIGNED_ANSWERS (whose
//     success is a signed statement) an answer without one is refused, so that stripping the
//     signature in transit does not turn a statement into unchecked data;
//   - each element of a batch lookup's `results` that carries `signature` (with `signed: true`,
//     every element that is not a P17 error item must);
//   - each `transitions[i].envelope` of a receipt's transition list (each verifies on its own,
//     and each must be signed);
//   - inside any of the above, the embedded envelopes P2 names, `consent` (connection), `binds`
//     (delegation) and `envelope`, and the embedded statements `request` (a checkout's
//     underlying request) and `data` (an event's object), whenever they carry `signature`.
// Not verified: anything else a body carries, notably a receipt's `attestations`, whose elements
// the calling member supplied and this node did not sign. They are covered by the receipt's own
// signature as part of what the issuer stated, not as statements of their own.
import { isJsonObject, type JsonObject } from './json.js';

/** Operations whose successful answer is one signed statement of this node. */
export const SIGNED_ANSWERS: ReadonlySet<string> = new Set([
  'links.get',
  'requests.get',
  'instructions.create',
  'instructions.get',
  'receipts.create',
  'receipts.transition',
  'receipts.get',
  'resolver.get',
  'commitments.get',
  'payee_check',
  'attestations.get',
  'ownership_bindings.get',
  'connections.get',
  'delegations.get',
  'sonar.lookup',
  'sonar.confirm',
  'directory.feed',
]);

/** Members under which a signed object embeds a statement of the same node. */
const EMBEDDED = ['consent', 'binds', 'envelope', 'request', 'data'] as const;

export interface SignedSite {
  /** Where in the answer, for error messages: `body`, `body.transitions[0].envelope`. */
  at: string;
  object: Record<string, unknown>;
}

const carriesSignature = (value: unknown): value is JsonObject =>
  isJsonObject(value) && value.signature !== undefined;

/** A P17 error item of a batch: `{ identifier_type, error }`, never signed. */
const isErrorItem = (value: unknown): boolean => isJsonObject(value) && isJsonObject(value.error);

/** A signed object and the statements it embeds, depth first. */
function withEmbedded(at: string, object: JsonObject, out: SignedSite[]): void {
  out.push({ at, object });
  for (const name of EMBEDDED) {
    const inner = object[name];
    if (carriesSignature(inner)) withEmbedded(`${at}.${name}`, inner, out);
  }
}

/**
 * The signed objects to verify in a successful answer to `operation`, and the places where one
 * was required but none is (a missing `signature` is reported there as such).
 */
export function signedSites(
  operation: string,
  body: unknown,
): {
  sites: SignedSite[];
  unsigned: string[];
} {
  const sites: SignedSite[] = [];
  const unsigned: string[] = [];
  if (carriesSignature(body)) withEmbedded('body', body, sites);
  else if (SIGNED_ANSWERS.has(operation)) unsigned.push('body');
  if (!isJsonObject(body)) return { sites, unsigned };
  if (Array.isArray(body.results)) {
    body.results.forEach((result, i) => {
      const at = `body.results[${i}]`;
      if (carriesSignature(result)) withEmbedded(at, result, sites);
      else if (operation === 'sonar.lookup_batch' && body.signed === true && !isErrorItem(result))
        unsigned.push(at);
    });
  }
  if (Array.isArray(body.transitions)) {
    body.transitions.forEach((step, i) => {
      const at = `body.transitions[${i}].envelope`;
      const envelope = isJsonObject(step) ? step.envelope : undefined;
      if (carriesSignature(envelope)) withEmbedded(at, envelope, sites);
      else if (operation === 'receipts.transitions') unsigned.push(at);
    });
  }
  return { sites, unsigned };
}
