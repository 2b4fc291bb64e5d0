// Webhook delivery in a run (P11, events/delivery.ts): each instance runs the node's own
// WebhookDelivery over its connection and its clock, told of every commit's outbox events as the
// node tells it (embedded: once the commit is answered; cluster mode: the commit's note, heard by
// every instance, each delivering the events of the partitions it holds, and those of a partition
// it takes up). Its POSTs go to a simulated receiver behind the operator's two endpoints, which
// answers as the seed says: 2xx, 4xx, 5xx, a refused connection, no answer within the timeout,
// after a delay in simulated time, and now and then sees the same request twice. A killed
// instance's deliveries stop with it: its timers never fire and it hears no answer.
import { createHmac } from 'node:crypto';
import { pino } from 'pino';
import { WebhookDelivery } from '../src/events/delivery.js';
import { holdsEvent } from '../src/cluster/instance.js';
import type { Clock } from '../src/clock.js';
import { partitionOf, type TableWrite } from '../src/log/log.js';
import { deliveryRows, outboxRows, type TargetState } from '../src/reads/rows.js';
import { signingKeyFromSeed, verifyBytes, verifyObject } from '../src/protocol/signing.js';
import { parseTime } from '../src/protocol/time.js';
import type { WebhookSecret } from '../src/store.js';
import { SKEW_MAX_MS, type Violation } from './model.js';
import type { Random } from './random.js';
import type { SimPart } from './part.js';
import { SIM_LIMITS, type SimInstance, type World } from './world.js';

/** The operator's endpoints (public literal addresses: no name is resolved). */
const ENDPOINTS = ['https://203.0.113.10/events', 'https://198.51.100.20/hooks/path'];
const SIGNER = signingKeyFromSeed(
  '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
);
const SECRET: WebhookSecret = {
  secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
  created_at: '2026-11-21T12:00:00Z',
  retired_at: null,
};
/** Standard Webhooks' tolerance of a delivery's timestamp, either way. */
const TIMESTAMP_TOLERANCE_MS = 5 * 60_000;
/** Rounds of the end's catching up (each moves time to the next retry due). */
const HEAL_ROUNDS = 400;
const DRAIN_TURNS = 12;
const silent = pino({ level: 'silent' });

const drain = async () => {
  for (let i = 0; i < DRAIN_TURNS; i++) await new Promise<void>((r) => setImmediate(r));
};

/** What the receiver made of one event at one endpoint. */
interface Seen {
  /** POSTs that reached it (a duplicate counts twice). */
  posts: number;
  /** Answered 2xx within the node's timeout, to the request the node sent. */
  acknowledged: number;
}

/** A refused connection, or no answer within the timeout: the node sees status 0. */
class NoAnswer extends Error {}

export class SimDelivery implements SimPart {
  readonly name = 'delivery';
  private readonly deliveries = new Map<SimInstance, WebhookDelivery>();
  /** Per event id, per endpoint, what the receiver saw. */
  readonly seen = new Map<string, Map<string, Seen>>();
  /** Endpoints answering nothing but 503s and refusals for now. */
  private readonly down = new Set<string>();
  private readonly unsigned: Violation[] = [];
  /** Events sent at least once (to any target), whatever the answer. */
  private readonly posted = new Set<string>();
  /** Embedded mode: events told to the running process, by the watch they were told before. */
  private told: { ids: string[]; incarnation: number; watch: number }[] = [];
  private watches = 0;
  /** The faults are healed: every POST is answered 200 at once. */
  private healed = false;

  constructor(
    private readonly world: World,
    private readonly random: Random,
  ) {
    world.disk.commits.push((writes, answered) => this.heardCommit(writes, answered));
  }

  /** A started instance's delivery, which schedules the outbox's events (node.ts, instance.ts). */
  started(instance: SimInstance): void {
    const incarnation = instance.incarnation;
    const alive = () => instance.alive && instance.incarnation === incarnation;
    // The instance's clock: its timers die with its incarnation.
    const clock: Clock = {
      now: () => instance.now(),
      setTimer: (callback, delayMs) =>
        this.world.clock.setTimer(() => {
          if (alive()) callback();
        }, delayMs),
    };
    const delivery = new WebhookDelivery({
      log: instance.log,
      clock,
      signer: () => SIGNER,
      secrets: () => [SECRET],
      operatorUrls: ENDPOINTS,
      dev: false,
      limits: SIM_LIMITS,
      logger: silent,
      ...(this.world.cluster ? { mine: holdsEvent(instance.holding!) } : {}),
      post: (url, headers, body, timeoutMs) =>
        this.post(instance, alive, { url, headers, body, timeoutMs }),
      wait: (ms) => instance.sleep(ms),
      random: () => this.random.int(0, 999_999) / 1_000_000,
    });
    this.deliveries.set(instance, delivery);
    delivery.start();
  }

  /** A partition taken up: its undelivered events are this instance's now (instance.ts). */
  async tookUp(instance: SimInstance, p: number): Promise<void> {
    if (instance.alive) this.deliveries.get(instance)?.adopt([p]);
  }

  /**
   * A commit's events, told as the node tells them: embedded, once the commit is answered
   * (afterCommit); cluster mode, at the commit, to every instance (its note).
   */
  private heardCommit(writes: readonly TableWrite[], answered: Promise<void>): void {
    const ids = writes.filter((w) => w.table === 'outbox' && w.bytes !== null).map((w) => w.key);
    if (ids.length === 0) return;
    const tell = () => {
      for (const [instance, delivery] of this.deliveries) if (instance.alive) delivery.notify(ids);
    };
    if (this.world.cluster) {
      void Promise.resolve().then(tell);
      return;
    }
    const instance = this.world.instances[0]!;
    answered.then(
      () => {
        if (!instance.alive) return;
        tell();
        this.told.push({ ids, incarnation: instance.incarnation, watch: this.watches });
      },
      () => undefined,
    );
  }

  steps() {
    return [[2, () => this.toggle()]] as const;
  }

  /** An endpoint goes away (answers 503s, refuses connections) or comes back. */
  private toggle(): string {
    const url = this.random.pick(ENDPOINTS);
    if (this.down.has(url)) this.down.delete(url);
    else this.down.add(url);
    return `receiver ${ENDPOINTS.indexOf(url)} ${this.down.has(url) ? 'down' : 'up'}`;
  }

  /**
   * One POST: the receiver takes it (its signatures checked), answers after a delay as the seed
   * says; the node hears the answer if it came within its timeout and its process still runs.
   */
  private post(
    instance: SimInstance,
    alive: () => boolean,
    request: { url: string; headers: Record<string, string>; body: string; timeoutMs: number },
  ): Promise<number> {
    const { url, timeoutMs } = request;
    this.posted.add(request.headers['path-event-id'] ?? '');
    if (this.healed) {
      this.receive(request, 200, true);
      return Promise.resolve(200);
    }
    const r = this.random;
    const down = this.down.has(url);
    const outcome = r.weighted<'2xx' | '4xx' | '5xx' | 'refused' | 'late'>(
      down
        ? [
            [3, '5xx'],
            [1, 'refused'],
          ]
        : [
            [70, '2xx'],
            [4, '4xx'],
            [10, '5xx'],
            [8, 'refused'],
            [8, 'late'],
          ],
    );
    if (outcome === 'refused')
      return instance.sleep(r.int(0, 50)).then(() => Promise.reject(new NoAnswer('refused')));
    const status =
      outcome === '2xx'
        ? r.pick([200, 202, 204])
        : outcome === '4xx'
          ? r.pick([400, 410, 429])
          : outcome === '5xx'
            ? r.pick([500, 502, 503])
            : 200;
    const delayMs =
      outcome === 'late'
        ? timeoutMs + r.int(1, 5_000)
        : r.weighted([
            [70, r.int(0, 300)],
            [25, r.int(300, 3_000)],
            [5, r.int(3_000, timeoutMs - 1)],
          ]);
    const inTime = delayMs < timeoutMs;
    // The network now and then hands the receiver the same request twice.
    if (r.chance(0.03)) {
      const again = r.int(0, 2_000);
      this.world.clock.setTimer(() => this.receive(request, status, false), again);
    }
    return new Promise<number>((resolve, reject) => {
      this.world.clock.setTimer(() => {
        this.receive(request, status, inTime);
        if (inTime && alive()) resolve(status);
      }, delayMs);
      void instance.sleep(timeoutMs).then(() => reject(new NoAnswer('no answer in time')));
    });
  }

  /** The receiver takes a request and answers it `status` (`inTime`: the node may hear it). */
  private receive(
    request: { url: string; headers: Record<string, string>; body: string },
    status: number,
    inTime: boolean,
  ): void {
    const id = request.headers['path-event-id'] ?? '';
    this.verify(id, request);
    const byUrl = this.seen.get(id) ?? new Map<string, Seen>();
    this.seen.set(id, byUrl);
    const seen = byUrl.get(request.url) ?? { posts: 0, acknowledged: 0 };
    byUrl.set(request.url, seen);
    seen.posts++;
    if (inTime && status >= 200 && status < 300) seen.acknowledged++;
  }

  /**
   * events-signed: the body is the signed `path.event` of the id its headers name, and
   * `webhook-signature` holds a `v1` (the secret's HMAC) and a `v1a` (the operator's Ed25519)
   * over `<id>.<timestamp>.<body>`, the timestamp within the tolerance of the receiver's time.
   */
  private verify(id: string, request: { headers: Record<string, string>; body: string }): void {
    const { headers, body } = request;
    const fail = (why: string): void => {
      this.unsigned.push({ invariant: 'events-signed', detail: `${id}: ${why}` });
    };
    let event: { id?: unknown };
    try {
      event = JSON.parse(body) as { id?: unknown };
    } catch {
      return fail('the body is not JSON');
    }
    if (event.id !== id || headers['webhook-id'] !== id) return fail('the ids disagree');
    if (!verifyObject(event, SIGNER.publicKeyHex).valid) return fail('the event is not signed');
    const timestamp = headers['webhook-timestamp'] ?? '';
    const at = Number(timestamp) * 1000;
    if (!(Math.abs(at - this.world.clock.now()) <= TIMESTAMP_TOLERANCE_MS + SKEW_MAX_MS))
      return fail(`timestamp ${timestamp} is not the time of sending`);
    const content = Buffer.from(`${id}.${timestamp}.${body}`, 'utf8');
    const signatures = (headers['webhook-signature'] ?? '').split(' ');
    const key = Buffer.from(SECRET.secret.slice('whsec_'.length), 'base64');
    const hmac = createHmac('sha256', key).update(content).digest('base64');
    if (!signatures.includes(`v1,${hmac}`)) return fail('no v1 signature of the secret');
    const ed = signatures.find((s) => s.startsWith('v1a,'))?.slice('v1a,'.length) ?? '';
    const edHex = Buffer.from(ed, 'base64').toString('hex');
    if (!verifyBytes(content, edHex, SIGNER.publicKeyHex).valid) return fail('v1a does not verify');
  }

  watch(): Violation[] {
    this.watches++;
    return [...this.unsigned.splice(0), ...this.prompt()];
  }

  /**
   * events-prompt (embedded mode): an event whose commit was answered to the running process is
   * sent (to its targets; at least one POST made, whatever its answer) before the step after
   * next ends, while that process runs: the node hears of it after the commit (afterCommit), not
   * at its next start.
   */
  private prompt(): Violation[] {
    const out: Violation[] = [];
    const instance = this.world.instances[0]!;
    const due = this.told.filter((t) => t.watch + 2 <= this.watches);
    this.told = this.told.filter((t) => t.watch + 2 > this.watches);
    for (const { ids, incarnation } of due) {
      if (!instance.alive || instance.incarnation !== incarnation) continue;
      for (const id of ids)
        if (!this.posted.has(id))
          out.push({ invariant: 'events-prompt', detail: `${id} committed, not sent since` });
    }
    return out;
  }

  /** Every event of the outbox with its delivery state (none yet: undefined). */
  private outbox() {
    const store = this.world.disk.store;
    return [...store.scan('outbox')].map(({ key, bytes }) => {
      const state = store.get('deliveries', key);
      return {
        id: key,
        event: outboxRows.read(key, bytes),
        state: state === undefined ? undefined : deliveryRows.read(key, state),
      };
    });
  }

  /** Targets still to be delivered to, by the node's own state. */
  private pending(): { state: TargetState[] | undefined }[] {
    return this.outbox().filter(
      ({ state }) => state === undefined || state.some((t) => t.outcome === null),
    );
  }

  busy(): boolean {
    return this.pending().length > 0;
  }

  /**
   * The end: the endpoints answer again, and time moves on to each retry as it falls due (a
   * retry may be hours away, up to webhook_retry_max_delay_ms), until the node has every event
   * delivered or a round finds nothing more to wait for; then the run's work settles.
   */
  async heal(): Promise<void> {
    this.healed = true;
    this.down.clear();
    for (let round = 0; round < HEAL_ROUNDS; round++) {
      this.world.disk.flush();
      const pending = this.pending();
      if (pending.length === 0) break;
      const now = this.world.clock.now();
      // An instance's next_at is on its own clock: skewed by at most half the margin either way.
      const due = Math.min(
        ...pending.flatMap(({ state }) =>
          state === undefined
            ? [now]
            : state.filter((t) => t.outcome === null).map((t) => t.next_at + SKEW_MAX_MS / 2),
        ),
      );
      await this.world.advance(Math.max(1_000, due - now));
      await drain();
    }
    for (let round = 0; round < HEAL_ROUNDS; round++) {
      const followUps = [...this.world.disk.store.scan('followups')].length;
      if (followUps === 0 && this.world.disk.unflushed === 0 && !this.world.settling()) break;
      this.world.disk.flush();
      await this.world.advance(1_000);
      await drain();
    }
  }

  /**
   * events-delivered: every event of the durable outbox (the node keeps each for the events
   * retention, longer than a run) was acknowledged, at each of its targets (the object's own and
   * the operator's), by a 2xx the receiver answered in time, unless the node abandoned it there
   * once its retry window had passed. A run is shorter than the window (see check), so a target
   * abandoned earlier is a violation. events-committed: every event the receiver was sent is in
   * the outbox (a webhook for a change the store does not hold is a change that never was).
   */
  check(): Violation[] {
    const out: Violation[] = [];
    const now = this.world.clock.now();
    const { webhook_retry_window_ms: window, webhook_retry_max_delay_ms: maxDelay } = SIM_LIMITS;
    const ids = new Set<string>();
    for (const { id, event, state } of this.outbox()) {
      ids.add(id);
      const created = parseTime(event.created_at) ?? now;
      const targets = [...new Set([...(event.targets ?? []), ...ENDPOINTS])];
      for (const url of targets) {
        if ((this.seen.get(id)?.get(url)?.acknowledged ?? 0) > 0) continue;
        const target = state?.find((t) => t.url === url);
        // The last retry may be set up to 1.2 times the longest delay ahead (its jitter).
        const windowPassed = now + maxDelay * 1.2 + SKEW_MAX_MS > created + window;
        if (target?.outcome === 'abandoned' && windowPassed) continue;
        const posts = this.seen.get(id)?.get(url)?.posts ?? 0;
        out.push({
          invariant: 'events-delivered',
          detail:
            `${id} (${event.event}, p${partitionOf(id)}) never acknowledged at ` +
            `${ENDPOINTS.indexOf(url)}: ${posts} posts seen, node says ` +
            (target === undefined
              ? 'no state'
              : `${target.outcome ?? 'pending'} after ${target.attempts} attempts, ` +
                `next ${Math.round(target.next_at - now)} ms from now`),
        });
      }
    }
    for (const id of this.seen.keys())
      if (!ids.has(id))
        out.push({ invariant: 'events-committed', detail: `${id} was sent, not in the outbox` });
    return out;
  }
}
