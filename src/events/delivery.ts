// Webhook delivery (P11). Events sit in the durable outbox, written in the same commit as the
// change that caused them; this deliverer posts each to its targets (the session's webhook_url
// and the operator's endpoints) as a signed `path.event`, with Path-Event-Id and the Standard
// Webhooks headers (`v1` HMAC with each webhook secret still signing, `v1a` Ed25519 with the
// operator's key). A 2xx acknowledges; anything else, or no answer within the timeout, is
// retried with exponential backoff and jitter for the retry window (3 days). Delivery state is
// durable, so a restart resumes where it stopped. An event is finished when every target has
// acknowledged it or its window has passed; it is then kept for the events retention (the
// operator lists, shows and resends it with `path-node events`), and swept after.
// Its reads never hold the thread that serves HTTP (issue 29): `Log.load` and `loadRange`. A
// read or write the database did not answer is tried again later, never thrown into a timer.
import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import { Scheduler } from '../actors/scheduler.js';
import type { OutboxEvent } from '../domain/decider.js';
import type { Clock } from '../clock.js';
import {
  FRONT_RETRY_BASE_MS,
  FRONT_RETRY_MAX_MS,
  OUTBOX_READ_PAGE_ROWS,
  type Limits,
} from '../config.js';
import { exceptionFields } from '../logger.js';
import { backoffMs, unreachable } from '../log/unavailable.js';
import { partitionOf, type Reads, type TableWrite } from '../log/log.js';
import { forgetRange } from '../reads/housekeeping.js';
import { deliveryRows, eventExpiryRows, outboxRows, type TargetState } from '../reads/rows.js';
import { envelopeFields, signBytes, signObject, type SigningKey } from '../protocol/signing.js';
import { parseTime } from '../protocol/time.js';
import { signingSecrets, type WebhookSecret } from '../store.js';
import { resolvedAllowed } from './url-policy.js';

export interface DeliveryOptions {
  log: Reads;
  clock: Clock;
  signer: () => SigningKey;
  /** The webhook secrets kept (P11); those still signing at send time each give a `v1`. */
  secrets: () => readonly WebhookSecret[];
  operatorUrls: readonly string[];
  dev: boolean;
  limits: Limits;
  logger: Logger;
  /**
   * Cluster mode (P22): whether this instance delivers an event now (it holds the event's
   * partition); another instance delivers the rest. Absent: every event is this node's.
   */
  mine?: (id: string) => boolean;
  /** Told of each attempt's outcome (the operator's metrics, P21). */
  onOutcome?: (outcome: 'delivered' | 'failed' | 'abandoned') => void;
  /** Sends one delivery; the node uses fetch, tests may observe. */
  post?: (
    url: string,
    headers: Record<string, string>,
    body: string,
    timeoutMs: number,
  ) => Promise<number>;
  /** Its own waits (the outbox read again, a stop's drain); absent: real timers. */
  wait?: (ms: number) => Promise<void>;
  /** The jitter of its retries, in [0, 1); absent: Math.random. */
  random?: () => number;
}

export class WebhookDelivery {
  private readonly scheduler: Scheduler;
  private readonly running = new Set<string>();
  private readonly waiting: string[] = [];
  private inFlight = 0;
  private stopped = false;
  private queued: TableWrite[] = [];
  private queuedWrite: Promise<void> | null = null;
  /** Events not yet delivered to every target, with their creation time (P21's backlog). */
  private readonly undelivered = new Map<string, number>();

  constructor(private readonly options: DeliveryOptions) {
    this.scheduler = new Scheduler(options.clock, (id) => this.enqueue(id));
  }

  /** Schedules every event still in the outbox (after a restart). */
  start(): void {
    this.scheduleLater(() => true);
  }

  /**
   * Cluster mode: schedules the events still in the outbox whose partitions this instance has
   * just taken (their earlier owner may have stopped before it delivered them).
   */
  adopt(partitions: readonly number[]): void {
    const taken = new Set(partitions);
    this.scheduleLater((id) => taken.has(partitionOf(id)));
  }

  /** schedule, tried again with backoff while the database does not answer (issue 29). */
  private scheduleLater(which: (id: string) => boolean, attempt = 0): void {
    this.schedule(which).catch((error: unknown) => {
      if (this.stopped) return;
      // Only the first failure is logged: the retries of an outage of hours are many.
      if (attempt === 0)
        this.options.logger.warn(
          { exception: exceptionFields(error) },
          'the outbox could not be read',
        );
      if (!unreachable(error)) return;
      const waitMs = backoffMs(attempt, {
        baseMs: FRONT_RETRY_BASE_MS,
        maxMs: FRONT_RETRY_MAX_MS,
        random: this.options.random,
      });
      const again = () => this.scheduleLater(which, attempt + 1);
      if (this.options.wait === undefined) setTimeout(again, waitMs).unref();
      else void this.options.wait(waitMs).then(again);
    });
  }

  /** The outbox's events of `which`, OUTBOX_READ_PAGE_ROWS a read, each scheduled when due. */
  private async schedule(which: (id: string) => boolean): Promise<void> {
    let start: string | undefined;
    for (;;) {
      const range = { limit: OUTBOX_READ_PAGE_ROWS, ...(start === undefined ? {} : { start }) };
      const rows = await this.options.log.loadRange('outbox', range);
      for (const { key, bytes } of rows) {
        if (!which(key) || !this.mine(key)) continue;
        const state = await this.stateOf(key);
        if (state !== undefined && finished(state)) continue;
        const created = parseTime(outboxRows.read(key, bytes).created_at);
        this.undelivered.set(key, created ?? this.options.clock.now());
        this.scheduler.schedule(key, this.dueOf(state));
      }
      if (rows.length < OUTBOX_READ_PAGE_ROWS) return;
      // The next page starts just after this one's last key.
      start = `${rows[rows.length - 1]!.key}\u0000`;
    }
  }

  /**
   * Takes up the resends the command line asked for (`path-node events resend`): each kept event
   * goes to every target again, with a fresh retry window.
   */
  async takeResends(): Promise<string[]> {
    const now = this.options.clock.now();
    const writes: TableWrite[] = [];
    const taken: string[] = [];
    const resends = await this.options.log.loadRange('resends', { limit: OUTBOX_READ_PAGE_ROWS });
    for (const { key } of resends) {
      // The instance holding the event's partition takes its resend (cluster mode).
      if (!this.mine(key)) continue;
      writes.push({ table: 'resends', key, bytes: null });
      const bytes = await this.options.log.load('outbox', key);
      if (bytes === undefined || this.running.has(key)) continue;
      const event = outboxRows.read(key, bytes);
      const fresh = this.targetsOf(event, now).map((t) => ({ ...t, since: now }));
      writes.push(deliveryRows.write(key, fresh));
      this.undelivered.set(key, now);
      taken.push(key);
    }
    if (writes.length > 0) await this.write(writes);
    for (const id of taken) this.enqueue(id);
    return taken;
  }

  /**
   * Forgets finished events past their retention: the expiry index's rows that are due, every
   * one of them each round, a page at a time (forgetRange).
   */
  async sweep(): Promise<void> {
    const now = this.options.clock.now();
    const log = {
      loadRange: this.options.log.loadRange.bind(this.options.log),
      write: (writes: readonly TableWrite[]) => this.write(writes),
    };
    await forgetRange(log, 'event_expiry', eventExpiryRows.due(now), async (key) => {
      const id = eventExpiryRows.idOf(key);
      const state = await this.stateOf(id);
      // A resent event finishes again later, with an expiry row of its own.
      const last = Math.max(0, ...(state ?? []).map((t) => t.finished_at ?? 0));
      const kept =
        (state !== undefined && !finished(state)) ||
        last + this.options.limits.events_retention_ms > now;
      return kept ? [] : forgotten(id);
    });
  }

  /** How many events wait for a target, and when the oldest of them was created. */
  backlog(): { events: number; oldestCreatedAt: number | null } {
    let oldest: number | null = null;
    for (const created of this.undelivered.values())
      if (oldest === null || created < oldest) oldest = created;
    return { events: this.undelivered.size, oldestCreatedAt: oldest };
  }

  /** New events from a command: deliver now. */
  notify(ids: readonly string[]): void {
    const now = this.options.clock.now();
    for (const id of ids) {
      if (!this.undelivered.has(id)) this.undelivered.set(id, now);
      this.enqueue(id);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.scheduler.stop();
    while (this.inFlight > 0)
      await (this.options.wait?.(10) ?? new Promise((r) => setTimeout(r, 10)));
  }

  private dueOf(state: TargetState[] | undefined): number {
    const pending = state?.filter((t) => t.outcome === null).map((t) => t.next_at) ?? [];
    return pending.length === 0 ? this.options.clock.now() : Math.min(...pending);
  }

  private async stateOf(id: string): Promise<TargetState[] | undefined> {
    const bytes = await this.options.log.load('deliveries', id);
    return bytes === undefined ? undefined : deliveryRows.read(id, bytes);
  }

  /** Every target of an event, none tried yet: the object's own and the operator's (P11). */
  private targetsOf(event: OutboxEvent, now: number): TargetState[] {
    const urls = [...new Set([...(event.targets ?? []), ...this.options.operatorUrls])];
    return urls.map((url) => ({
      url,
      attempts: 0,
      next_at: now,
      outcome: null,
      last_status: null,
    }));
  }

  private mine(id: string): boolean {
    return this.options.mine?.(id) ?? true;
  }

  private enqueue(id: string): void {
    if (this.stopped || this.running.has(id)) return;
    // Its partition moved to another instance, which delivers it from here on.
    if (!this.mine(id)) {
      this.undelivered.delete(id);
      return;
    }
    this.running.add(id);
    this.waiting.push(id);
    this.pump();
  }

  private pump(): void {
    while (this.inFlight < this.options.limits.webhook_in_flight_max && this.waiting.length > 0) {
      const id = this.waiting.shift()!;
      this.inFlight++;
      this.deliver(id)
        .catch((error: unknown) => this.failed(id, error))
        .finally(() => {
          this.inFlight--;
          this.running.delete(id);
          this.pump();
        });
    }
  }

  /**
   * A delivery that could not read or write its state: while the database does not answer, the
   * event is tried again a little later (issue 29, FRONT_RETRY_*: a jittered wait, so events
   * do not all come back at once), the failure logged by kind and code, never by a message.
   */
  private failed(id: string, error: unknown): void {
    const exception = exceptionFields(error);
    if (!unreachable(error)) {
      this.options.logger.error({ event_id: id, exception }, 'webhook delivery failed');
      return;
    }
    this.options.logger.warn(
      { event_id: id, exception },
      'webhook delivery waits for the database',
    );
    const jitter = backoffMs(1, {
      baseMs: FRONT_RETRY_MAX_MS,
      maxMs: FRONT_RETRY_MAX_MS,
      random: this.options.random,
    });
    const waitMs = FRONT_RETRY_BASE_MS + jitter;
    this.scheduler.schedule(id, this.options.clock.now() + waitMs);
  }

  private async deliver(id: string): Promise<void> {
    const bytes = await this.options.log.load('outbox', id);
    if (bytes === undefined) {
      this.undelivered.delete(id);
      return;
    }
    const event = outboxRows.read(id, bytes);
    const now = this.options.clock.now();
    const state = (await this.stateOf(id)) ?? this.targetsOf(event, now);
    const due = state.filter((t) => t.outcome === null && t.next_at <= now);
    if (due.length > 0) {
      const data = event.data_json === undefined ? event.data : JSON.parse(event.data_json);
      const body = signedEvent({ ...event, data }, this.options.signer());
      await Promise.all(due.map((t) => this.attempt(event, t, body)));
    }

    const createdAt = parseTime(event.created_at) ?? now;
    for (const t of state) {
      if (
        t.outcome === null &&
        t.next_at > (t.since ?? createdAt) + this.options.limits.webhook_retry_window_ms
      ) {
        t.outcome = 'abandoned';
        t.finished_at = now;
        this.options.onOutcome?.('abandoned');
        this.options.logger.warn(
          { event_id: id, attempts: t.attempts },
          'webhook abandoned after its retry window',
        );
      }
    }
    if (state.length === 0) {
      // No target at all (no operator endpoint, no session URL): nothing to show or resend.
      this.undelivered.delete(id);
      await this.write(forgotten(id));
      return;
    }
    if (finished(state)) {
      // Kept for the retention from its last outcome, for `path-node events`; the sweep forgets
      // it then (the same time the sweep checks, or it would keep the event for ever).
      this.undelivered.delete(id);
      const last = Math.max(...state.map((t) => t.finished_at ?? now));
      const expires = last + this.options.limits.events_retention_ms;
      await this.write([
        deliveryRows.write(id, state),
        eventExpiryRows.write(eventExpiryRows.key(expires, id), {}),
      ]);
      return;
    }
    await this.write([deliveryRows.write(id, state)]);
    this.scheduler.schedule(
      id,
      Math.min(...state.filter((t) => t.outcome === null).map((t) => t.next_at)),
    );
  }

  /**
   * Delivery state changes of one turn go to the log in
   * one write (many events finish at once under load).
   */
  private write(writes: readonly TableWrite[]): Promise<void> {
    this.queued.push(...writes);
    this.queuedWrite ??= new Promise<void>((resolve, reject) => {
      setImmediate(() => {
        const batch = this.queued;
        this.queued = [];
        this.queuedWrite = null;
        this.options.log.write(batch).then(resolve, reject);
      });
    });
    return this.queuedWrite;
  }

  private async attempt(event: OutboxEvent, target: TargetState, body: string): Promise<void> {
    target.attempts++;
    let status = 0;
    try {
      if (await resolvedAllowed(target.url, { dev: this.options.dev })) {
        const headers = deliveryHeaders(event.id, body, {
          now: this.options.clock.now(),
          secrets: this.options.secrets(),
          signer: this.options.signer(),
          overlapMs: this.options.limits.webhook_secret_overlap_ms,
        });
        status = await (this.options.post ?? postDelivery)(
          target.url,
          headers,
          body,
          this.options.limits.webhook_timeout_ms,
        );
      }
    } catch {
      status = 0;
    }
    target.last_status = status;
    if (status >= 200 && status < 300) {
      target.outcome = 'delivered';
      target.finished_at = this.options.clock.now();
      this.options.onOutcome?.('delivered');
      return;
    }
    this.options.onOutcome?.('failed');
    const { webhook_first_retry_ms: first, webhook_retry_max_delay_ms: max } = this.options.limits;
    const random = (this.options.random ?? Math.random)();
    const delay = Math.min(first * 2 ** (target.attempts - 1), max) * (0.8 + random * 0.4);
    target.next_at = this.options.clock.now() + delay;
  }
}

/**
 * An event's body as every delivery sends it: the signed `path.event` (P11). `test`: a test event
 * from `path-node events trigger`, which says so inside what is signed.
 */
export function signedEvent(
  event: { id: string; event: string; created_at: string; data: unknown; test?: true },
  signer: SigningKey,
): string {
  const { id, event: name, created_at, data, test } = event;
  const fields = { type: 'path.event', id, event: name, created_at, data };
  const envelope = envelopeFields(signer, created_at);
  return JSON.stringify(
    signObject(test ? { ...fields, test, ...envelope } : { ...fields, ...envelope }, signer),
  );
}

/**
 * A delivery's headers: Path-Event-Id and the Standard Webhooks ones, the `webhook-signature`
 * value a `v1` per secret still signing, then `v1a`; both sign `<id>.<timestamp>.<body>`.
 */
export function deliveryHeaders(
  id: string,
  body: string,
  options: {
    now: number;
    secrets: readonly WebhookSecret[];
    signer: SigningKey;
    overlapMs: number;
  },
): Record<string, string> {
  const timestamp = String(Math.floor(options.now / 1000)); // tidy: format (ms to Unix seconds)
  const content = `${id}.${timestamp}.${body}`;
  const signing = signingSecrets(options.secrets, options.now, options.overlapMs);
  const v1 = signing.map((s) => {
    const key = Buffer.from(s.secret.slice('whsec_'.length), 'base64');
    return `v1,${createHmac('sha256', key).update(content, 'utf8').digest('base64')}`;
  });
  const ed = signBytes(Buffer.from(content, 'utf8'), options.signer);
  return {
    'content-type': 'application/json',
    'path-event-id': id,
    'webhook-id': id,
    'webhook-timestamp': timestamp,
    'webhook-signature': [...v1, `v1a,${Buffer.from(ed, 'hex').toString('base64')}`].join(' '),
  };
}

/** The writes that forget an event: its outbox row and its delivery state. */
/** Every target has its outcome: delivered or abandoned. */
const finished = (state: readonly TargetState[]): boolean => state.every((t) => t.outcome !== null);

const forgotten = (id: string): TableWrite[] => [
  { table: 'outbox', key: id, bytes: null },
  { table: 'deliveries', key: id, bytes: null },
];

export async function postDelivery(
  url: string,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<number> {
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body,
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
  });
  await res.arrayBuffer().catch(() => undefined);
  return res.status;
}
