// @path-node/client (P18), re-exported by the node's package as path-node/client: what a wallet,
// a merchant or another operator needs to talk to a Path node and to check what it signs.
// Browser-safe: no `node:` module anywhere in the package (Ed25519 from @noble/ed25519, SHA-256
// and HMAC from @noble/hashes, RFC 8785 its own); the node's `npm run build` also bundles it for
// browsers as dist/assets/path-client.js.
//
// Every signed statement is verified offline with the operator's published keys
// (`/.well-known/path-keys`, retired keys included); signed.ts says which objects of
// an answer `call` verifies and why those.
//
// PathError carries the node's error envelope (`status`, `code`, `message`, `detail`) unchanged,
// or one of the client's own codes:
//   path.client.signature_invalid   a signed object of an answer does not verify (detail: `at`,
//                                   where in the answer; `reason`, a VerifyFailure; `kid`), or
//                                   an answer that must be signed is not (`signature_missing`).
//                                   `status` is the answer's HTTP status.
//   path.address.commitment_mismatch  resolve(): the resolver answer's terms, its commitment and
//                                   the commitment object diverge (SPEC E; detail.reason). A
//                                   potentially compromised resolver: not to be retried.
//   path.client.operation_unknown   call(): discovery names no such operation (status 0).
//   path.client.param_missing       call(): a `{name}` of the URL has no param; thrown before any
//                                   request is sent (status 0).
//   path.client.response_malformed  an answer that is not JSON, or an error status without the
//                                   error envelope.
//   path.client.webhook_invalid     verifyWebhook(): detail.reason is a WebhookFailure (status 0).
export { PathClient } from './client.js';
export { verifySigned } from './verify.js';
export { verifyWebhook, type WebhookFailure } from './webhook.js';
export { canonicalJson, digestOf } from './canonical.js';
export { PathError } from './errors.js';
export type * from './types.js';
