// Webhook verification (P11): the Standard Webhooks headers `webhook-id`, `webhook-timestamp`
// and `webhook-signature`, a space-separated list of `v1,<base64>` (HMAC-SHA256 with the
// webhook secret) and `v1a,<base64>` (Ed25519 with a key of the operator's keys document), each
// over `"<id>.<timestamp>.<body>"`. One signature that verifies with what the caller holds is
// enough; a timestamp outside the tolerance is refused whatever the signatures say.
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { concat, constantTimeEqual, fromBase64, fromLowerHex, utf8 } from './bytes.js';
import { CLIENT_CODES, PathError } from './errors.js';
import type { KeysDocument, PathEvent, WebhookHeaders, WebhookVerifier } from './types.js';
import { verifyRaw, verifySigned } from './verify.js';

/** How far `webhook-timestamp` may be from the receiver's clock, either way. */
export const WEBHOOK_TOLERANCE_SECONDS = 300; // tidy: format (Standard Webhooks: 5 minutes)

const SECRET_PREFIX = 'whsec_';

export type WebhookFailure =
  | 'headers_missing'
  | 'timestamp_malformed'
  | 'timestamp_stale'
  | 'secret_malformed'
  | 'signature_invalid'
  | 'body_malformed'
  | 'event_signature_invalid';

function refuse(reason: WebhookFailure, message: string, detail: Record<string, unknown> = {}) {
  return new PathError({
    status: 0,
    code: CLIENT_CODES.webhookInvalid,
    message,
    detail: { reason, ...detail },
  });
}

/** A header by name, whatever the case, from a Headers object or a plain record. */
function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') {
    return (headers as Headers).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | readonly string[] | undefined>;
  for (const [key, value] of Object.entries(record)) {
    if (key.toLowerCase() !== name || value === undefined) continue;
    return typeof value === 'string' ? value : value.join(' ');
  }
  return undefined;
}

function secretKey(secret: string): Uint8Array {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  const key = fromBase64(encoded);
  if (key === null || key.length === 0)
    throw refuse('secret_malformed', 'the webhook secret is not whsec_ and base64');
  return key;
}

/** Whether one of the listed signatures verifies with a secret or a key the caller holds. */
function anySignatureVerifies(
  message: Uint8Array,
  signatures: readonly string[],
  verifier: WebhookVerifier,
): boolean {
  const secrets = verifier.secret === undefined ? [] : [verifier.secret].flat();
  const macs = secrets.map((s) => hmac(sha256, secretKey(s), message));
  const publicKeys = (verifier.keys?.keys ?? [])
    .map((k) => (typeof k?.public_key === 'string' ? fromLowerHex(k.public_key, 32) : null))
    .filter((k): k is Uint8Array => k !== null);
  return signatures.some((entry) => {
    const comma = entry.indexOf(',');
    const version = entry.slice(0, comma);
    const signature = comma < 0 ? null : fromBase64(entry.slice(comma + 1));
    if (signature === null) return false;
    if (version === 'v1') return macs.some((mac) => constantTimeEqual(mac, signature));
    if (version === 'v1a')
      return publicKeys.some((key) => verifyRaw(message, signature, key).valid);
    return false;
  });
}

/**
 * Verifies a webhook delivery and returns its event (P11). `rawBody` is the body exactly as
 * received (the signatures cover its bytes). With `{ keys }` the `v1a` signatures are checked and
 * the event's own envelope too (and its `data` when that is signed); with `{ secret }` the `v1`
 * ones. Throws PathError `path.client.webhook_invalid`, `detail.reason` saying which check failed.
 */
export function verifyWebhook(
  rawBody: string | Uint8Array,
  headers: WebhookHeaders,
  verifier: WebhookVerifier,
): PathEvent {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (id === undefined || timestamp === undefined || signatures === undefined)
    throw refuse('headers_missing', 'webhook-id, webhook-timestamp and webhook-signature needed');
  if (!/^\d{1,15}$/.test(timestamp))
    throw refuse('timestamp_malformed', 'webhook-timestamp must be whole seconds');
  const skew = Math.abs(Date.now() / 1000 - Number(timestamp));
  if (skew > WEBHOOK_TOLERANCE_SECONDS)
    throw refuse('timestamp_stale', 'webhook-timestamp is outside the tolerance', {
      tolerance_seconds: WEBHOOK_TOLERANCE_SECONDS,
    });
  const body = typeof rawBody === 'string' ? utf8(rawBody) : rawBody;
  const message = concat(utf8(`${id}.${timestamp}.`), body);
  // Space-separated (Standard Webhooks); a repeated header joined by a fetch Headers adds ", ".
  const listed = signatures.split(' ').map((entry) => entry.replace(/,$/, ''));
  if (!anySignatureVerifies(message, listed.filter(Boolean), verifier))
    throw refuse('signature_invalid', 'no webhook signature verifies');
  const event = parseEvent(body);
  if (verifier.keys !== undefined) checkEnvelope(event, verifier.keys);
  return event;
}

function parseEvent(body: Uint8Array): PathEvent {
  try {
    const event: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
    if (event !== null && typeof event === 'object' && !Array.isArray(event))
      return event as PathEvent;
  } catch {
    // refused below
  }
  throw refuse('body_malformed', 'the webhook body is not a JSON object');
}

/** The event is a signed `path.event` (P11); its object, when signed, verifies on its own. */
function checkEnvelope(event: PathEvent, keys: KeysDocument): void {
  const verdicts = [verifySigned(event, keys)];
  const data: unknown = event.data;
  if (data !== null && typeof data === 'object' && 'signature' in data)
    verdicts.push(verifySigned(data, keys));
  for (const verdict of verdicts) {
    if (!verdict.valid)
      throw refuse('event_signature_invalid', 'the event does not verify with the keys', {
        signature_reason: verdict.reason,
      });
  }
}
