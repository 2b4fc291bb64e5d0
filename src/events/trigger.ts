// Test events (`path-node events trigger TYPE`, issue 31): one event of a type sent now to the
// operator's endpoints, signed exactly as a real delivery is (the same body and headers, `v1`
// with each secret still signing and `v1a` with the operator's key), so a merchant can try a
// receiver before a real payment. It is marked `"test": true` inside the signed event (recorded
// in docs/decisions.md), so a receiver cannot mistake it for a real one nor have the mark
// stripped. A test event is sent once: it is not written to the outbox, retried or listed.
import type { Limits } from '../config.js';
import { newReference, type ReferencePrefix } from '../protocol/ids.js';
import type { SigningKey } from '../protocol/signing.js';
import type { WebhookSecret } from '../store.js';
import { RECEIPT_EVENT } from '../domain/receipt/receipt.js';
import { REQUEST_PAID_EVENT } from '../domain/request/request.js';
import { SESSION_COMPLETED_EVENT, SESSION_EXPIRED_EVENT } from '../domain/checkout/checkout.js';
import { deliveryHeaders, postDelivery, signedEvent } from './delivery.js';
import { resolvedAllowed } from './url-policy.js';

/** Each event type (SPEC "Events") and the object its test event carries: a made-up reference. */
const SAMPLES: Record<string, { type: string; prefix: ReferencePrefix }> = {
  [REQUEST_PAID_EVENT]: { type: 'path.request', prefix: 'req' },
  [RECEIPT_EVENT]: { type: 'path.receipt', prefix: 'rcp' },
  [SESSION_COMPLETED_EVENT]: { type: 'path.checkout', prefix: 'cs' },
  [SESSION_EXPIRED_EVENT]: { type: 'path.checkout', prefix: 'cs' },
};

export const EVENT_TYPES = Object.keys(SAMPLES);

export interface TriggerOptions {
  urls: readonly string[];
  signer: SigningKey;
  secrets: readonly WebhookSecret[];
  dev: boolean;
  limits: Pick<Limits, 'webhook_timeout_ms' | 'webhook_secret_overlap_ms'>;
  now: number;
}

/** What one endpoint answered: its status, 0 for no answer or a URL the policy refuses (P11). */
export interface TriggerOutcome {
  url: string;
  status: number;
}

/** Sends a test event of `type` to every endpoint; resolves with the event id and each answer. */
export async function triggerTestEvent(
  type: string,
  options: TriggerOptions,
): Promise<{ id: string; event: string; targets: TriggerOutcome[] }> {
  const sample = SAMPLES[type];
  if (sample === undefined) throw new RangeError(`unknown event type ${type}`);
  const id = newReference('evt');
  const data = { type: sample.type, reference: newReference(sample.prefix) };
  const created_at = new Date(options.now).toISOString();
  const body = signedEvent({ id, event: type, created_at, data, test: true }, options.signer);
  const headers = deliveryHeaders(id, body, {
    now: options.now,
    secrets: options.secrets,
    signer: options.signer,
    overlapMs: options.limits.webhook_secret_overlap_ms,
  });
  const targets = await Promise.all(
    options.urls.map(async (url) => {
      try {
        if (!(await resolvedAllowed(url, { dev: options.dev }))) return { url, status: 0 };
        return {
          url,
          status: await postDelivery(url, headers, body, options.limits.webhook_timeout_ms),
        };
      } catch {
        return { url, status: 0 };
      }
    }),
  );
  return { id, event: type, targets };
}
