// `path-node events`: the operator's view of webhook events (P11), read from the data directory
// whether the node runs or not. `list` and `show` read the outbox and the delivery state (kept
// for the events retention once finished); `resend` asks the node to deliver an event to every
// target again, which a running node takes up within its poll interval, and a stopped one at
// its next start. A target URL is shown without credentials or query, which may hold secrets.
import { withEnvironment, type LmdbEnvironment } from '../log/lmdb-log.js';
import { deliveryRows, outboxRows, resendRows, type TargetState } from '../log/rows.js';
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

function summary(env: LmdbEnvironment, id: string, bytes: Uint8Array) {
  const event = outboxRows.read(id, bytes);
  const stateBytes = env.tables.deliveries.get(id);
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
export function listEvents(dataDir: string, options: { undelivered: boolean }): Promise<object[]> {
  return withEnvironment(dataDir, (env) => {
    const lines = [];
    for (const { key, value } of env.tables.outbox.getRange({ snapshot: false }))
      lines.push(summary(env, key, value).line);
    lines.sort((a, b) => a.created_at.localeCompare(b.created_at));
    return options.undelivered ? lines.filter((l) => l.status !== 'delivered') : lines;
  });
}

/** One event: where its delivery stands, and the object it carries. */
export function showEvent(dataDir: string, id: string): Promise<object> {
  return withEnvironment(dataDir, (env) => {
    const bytes = env.tables.outbox.get(id);
    if (bytes === undefined) throw noSuchEvent(id);
    const { event, line } = summary(env, id, bytes);
    const data = event.data_json === undefined ? event.data : JSON.parse(event.data_json);
    return { ...line, data };
  });
}

/** Asks the node to deliver the event to every target again. */
export function resendEvent(dataDir: string, id: string, now: number): Promise<object> {
  return withEnvironment(dataDir, async (env) => {
    if (env.tables.outbox.get(id) === undefined) throw noSuchEvent(id);
    const row = resendRows.write(id, { at: now });
    await new NodeStore(env).notify(() => env.tables.resends.put(row.key, row.bytes!));
    return { id, resend: 'requested' };
  });
}

function noSuchEvent(id: string): EventsUsageError {
  return new EventsUsageError(`no event ${id} is kept (unknown, or past the events retention)`);
}
