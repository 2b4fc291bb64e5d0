// `path-node events`: the operator's view of webhook events (P11), read from the data directory
// whether the node runs or not. `list` and `show` read the outbox and the delivery state (kept
// for the events retention once finished); `resend` asks the node to deliver an event to every
// target again, which a running node takes up within its poll interval, and a stopped one at
// its next start. `trigger` sends a test event of a type to the operator's endpoints now, signed
// as real ones are (src/events/trigger.ts). A target URL is shown without credentials or query,
// which may hold secrets.
import { loadLimits } from '../config.js';
import { EVENT_TYPES, triggerTestEvent } from '../events/trigger.js';
import type { Log } from '../log/log.js';
import { withStore, type Place } from '../log/open.js';
import { deliveryRows, outboxRows, resendRows, type TargetState } from '../reads/rows.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import { NodeStore } from '../store.js';

export class EventsUsageError extends Error {}

type Status = 'pending' | 'delivered' | 'abandoned';

function statusOf(targets: readonly TargetState[] | undefined): Status {
  if (targets === undefined || targets.some((t) => t.outcome === null)) return 'pending';
  return targets.every((t) => t.outcome === 'delivered') ? 'delivered' : 'abandoned';
}

function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '(not a URL)';
  }
}

function summary(log: Log, id: string, bytes: Uint8Array) {
  const event = outboxRows.read(id, bytes);
  const stateBytes = log.get('deliveries', id);
  const targets = stateBytes === undefined ? undefined : deliveryRows.read(id, stateBytes);
  return {
    event,
    line: {
      id,
      event: event.event,
      created_at: event.created_at,
      status: statusOf(targets),
      targets: (targets ?? []).map((t) => ({
        url: shownUrl(t.url),
        attempts: t.attempts,
        outcome: t.outcome,
        last_status: t.last_status,
      })),
    },
  };
}

/** Every kept event, oldest first; with `undelivered`, those some target has not acknowledged. */
export function listEvents(place: Place, options: { undelivered: boolean }): Promise<object[]> {
  return withStore(place, ({ log }) => {
    const lines = [];
    for (const { key, bytes } of log.scan('outbox')) lines.push(summary(log, key, bytes).line);
    lines.sort((a, b) => a.created_at.localeCompare(b.created_at));
    return options.undelivered ? lines.filter((l) => l.status !== 'delivered') : lines;
  });
}

/** One event: where its delivery stands, and the object it carries. */
export function showEvent(place: Place, id: string): Promise<object> {
  return withStore(place, ({ log }) => {
    const bytes = log.get('outbox', id);
    if (bytes === undefined) throw noSuchEvent(id);
    const { event, line } = summary(log, id, bytes);
    const data = event.data_json === undefined ? event.data : JSON.parse(event.data_json);
    return { ...line, data };
  });
}

/** Asks the node to deliver the event to every target again. */
export function resendEvent(place: Place, id: string, now: number): Promise<object> {
  return withStore(place, async ({ log, tables }) => {
    if (log.get('outbox', id) === undefined) throw noSuchEvent(id);
    await new NodeStore(tables).notify([resendRows.write(id, { at: now })]);
    return { id, resend: 'requested' };
  });
}

/**
 * Sends a test event of `type` to `urls` (the operator's `--webhook-urls`), signed with the
 * node's active key and its webhook secrets; each target's answer, and whether all were 2xx.
 */
export function triggerEvent(
  place: Place,
  type: string,
  options: { urls: readonly string[]; dev: boolean; now: number },
): Promise<{ line: object; acknowledged: boolean }> {
  if (!EVENT_TYPES.includes(type))
    throw new EventsUsageError(`unknown event type '${type}' (one of ${EVENT_TYPES.join(', ')})`);
  if (options.urls.length === 0)
    throw new EventsUsageError('no endpoints: give --webhook-urls (or PATH_WEBHOOK_URLS) as serve');
  return withStore(place, async ({ tables }) => {
    const store = new NodeStore(tables);
    const key = store.activeSigningKey();
    if (key === undefined)
      throw new EventsUsageError('the node has no signing key yet: start it once first');
    const sent = await triggerTestEvent(type, {
      ...options,
      signer: signingKeyFromSeed(key.seed_hex),
      secrets: store.webhookSecrets(),
      limits: loadLimits(process.env),
    });
    const targets = sent.targets.map((t) => ({ url: shownUrl(t.url), status: t.status }));
    const acknowledged = targets.every((t) => t.status >= 200 && t.status < 300);
    return { line: { ...sent, test: true, targets }, acknowledged };
  });
}

function noSuchEvent(id: string): EventsUsageError {
  return new EventsUsageError(`no event ${id} is kept (unknown, or past the events retention)`);
}
