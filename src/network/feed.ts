// The change feed of this node's own directory entries (hashes only): an ordered, resumable,
// authenticated list that member nodes follow to answer lookups from their replicas. Each change
// of a key's local visibility appends one entry with the next sequence number; only `network` and
// `public` entries leave the node (a key that turns private or goes away appears as a removal).
// `feed_state` remembers what the feed last said of each key, so a start after a crash appends
// whatever the feed missed: the feed converges on the directory whatever happened in between.
//
// What the feed last said of a key is read without holding the thread that serves HTTP (issue
// 29): each change observed waits its turn in `steps`, with the feed's last sequence read again
// (a start, a resync) and the walk of its state beside a directory load, and they are taken in
// the order they came, a read between them where one is needed. `flush` and `settled` wait for
// them.
import { NotHeldError, type Reads, type TableWrite } from '../log/log.js';
import { FEED_STATE_READ_PAGE_ROWS, FRONT_RETRY_BASE_MS, FRONT_RETRY_MAX_MS } from '../config.js';
import { backoffMs, unreachable } from '../log/unavailable.js';
import { frame, unframeRow } from '../log/record.js';
import type { IndexVisibility } from '../directory/index.js';
import { envelopeFields, signObject, type SigningKey } from '../protocol/signing.js';
import { isoTime } from '../protocol/time.js';
import { planted } from '../actors/planted.js';

export interface FeedEntry {
  seq: number;
  identifier_type: string;
  identifier_hash: string;
  /** null: the key left the directory (withdrawn, revoked, made private). */
  visibility: 'network' | 'public' | null;
  at: string;
}

interface FeedState {
  v: 'network' | 'public' | null;
  seq: number;
  t: string;
}

/**
 * What the publisher does in turn: reads the feed's last sequence, begins or ends the walk of its
 * state beside a directory load, or compares a key's visibility with what the feed says of it
 * (an observation of an earlier resync is dropped: the load after the resync finds it again).
 */
type Step =
  | { kind: 'last' }
  | { kind: 'begin'; resyncs: number }
  | { kind: 'end'; resyncs: number }
  | {
      kind: 'observe';
      hash: string;
      identifierType: string;
      visibility: IndexVisibility;
      /** Told by the directory's load, in hash order; otherwise a command's change. */
      loaded: boolean;
      resyncs: number;
    };

/** The feed's state walked in hash order beside a directory load, a page at a time. */
interface StateWalk {
  rows: { key: string; bytes: Buffer }[];
  at: number;
  /** The last key read; null before the first page. */
  after: string | null;
  done: boolean;
  /**
   * Keys a command changed while the walk runs: each compared with what the feed states of it
   * when observed (out of the load's order), then not taken for removed when the walk passes it.
   */
  changed: Set<string>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const SEQ_DIGITS = 16;
const seqKey = (seq: number) => String(seq).padStart(SEQ_DIGITS, '0');

/**
 * Cluster mode (P22): one instance writes the feed at a time, the holder of FEED_PARTITION, its
 * writes refused once it no longer holds that partition; the others serve its pages from the table.
 */
export interface FeedWriting {
  /** The epoch at which this instance holds FEED_PARTITION, 0 where it holds none. */
  epoch: () => bigint;
  /** Writes rows made at `epoch`; refused (NotHeldError) where the partition is held at another. */
  write: (writes: TableWrite[], epoch: bigint) => Promise<void>;
}

/** The partition whose holder writes the feed in cluster mode. */
export const FEED_PARTITION = 0;

export class FeedPublisher {
  private lastSeq = 0;
  /**
   * Cluster mode: the epoch of the feed's partition at which this publisher was last brought
   * level with the feed as written (resync); it writes only at that epoch.
   */
  private resyncedUnder = 0n;
  /** Entries appended but not yet written, by key (the latest state of each key wins). */
  private pending: { hash: string; state: FeedState; writes: TableWrite[] }[] = [];
  private readonly pendingState = new Map<string, FeedState>();
  private flushing: Promise<void> = Promise.resolve();
  /** The last round scheduled, its failure kept for whoever flushes. */
  private lastRound: Promise<void> = Promise.resolve();
  private scheduled = false;
  /** The round that writes the entries appended since the last flush; null: none since. */
  private appendedIn: Promise<void> | null = null;
  /** Stopped: a round the database refused is no longer tried again. */
  private stopped = false;
  /**
   * While the directory loads: the feed's state, walked in hash order beside the directory's keys.
   */
  private loading: StateWalk | null = null;
  /** What waits its turn (see the module's header), and the run taking it, if one is under way. */
  private steps: Step[] = [];
  private stepping: Promise<void> | null = null;
  /** A step that failed otherwise than by an unreachable database, told to the next `settled`. */
  private stepFailure: unknown = null;
  private resyncs = 0;

  constructor(
    private readonly log: Reads,
    private readonly now: () => number,
    private readonly writing: FeedWriting | null = null,
    /** Waits before a retry; absent: a timer of the thread (sim/: its clock). */
    private readonly wait: (ms: number) => Promise<void> = sleep,
    /** The retries' jitter, in [0, 1); absent: Math.random (sim/: the run's seed). */
    private readonly random: () => number = Math.random,
  ) {
    this.enqueue({ kind: 'last' });
  }

  /** The feed's last sequence as written, read without holding the thread. */
  private async loadedLast(): Promise<number> {
    const [row] = await this.log.loadRange('feed', { reverse: true, limit: 1 });
    return row === undefined ? 0 : Number(row.key);
  }

  /**
   * Whether this node writes the feed now: always, but in cluster mode, where it must hold the
   * feed's partition and have resynced since it took it (before then its sequence is another
   * writer's, out of date).
   */
  private writes(): boolean {
    if (this.writing === null) return true;
    const epoch = this.writing.epoch();
    return epoch > 0n && (epoch === this.resyncedUnder || planted('append-before-resync'));
  }

  /** The epoch a round's rows were made at: the resync's (the planted bug: the current one). */
  private madeAt(): bigint {
    return planted('append-before-resync') ? this.writing!.epoch() : this.resyncedUnder;
  }

  /**
   * Cluster mode: this instance has just become the feed's writer. It starts from the feed as
   * written (what the earlier writer appended but did not write is found again by the load that
   * follows, which compares the directory with the feed's state).
   */
  resync(): void {
    this.resyncedUnder = this.writing?.epoch() ?? 0n;
    this.resyncs++;
    this.pending = [];
    this.pendingState.clear();
    this.enqueue({ kind: 'last' });
  }

  get sequence(): number {
    return this.lastSeq;
  }

  /**
   * The load of the directory begins: its keys will be observed in hash order, and the feed's
   * state is merged beside them in one sequential walk (no lookup per key).
   */
  beginLoad(): void {
    this.enqueue({ kind: 'begin', resyncs: this.resyncs });
  }

  /**
   * A key's local visibility, at load (`loaded`, in hash order) or after a change: appended when
   * the feed says otherwise.
   */
  observe(hash: string, identifierType: string, visibility: IndexVisibility, loaded = false): void {
    if (!this.writes()) return;
    const resyncs = this.resyncs;
    this.enqueue({ kind: 'observe', hash, identifierType, visibility, loaded, resyncs });
  }

  /**
   * The load is over: keys the feed still states but the directory no longer has become removals.
   */
  endLoad(): void {
    this.enqueue({ kind: 'end', resyncs: this.resyncs });
  }

  /** Resolves once every step taken so far is taken; rejects with one that failed meanwhile. */
  async settled(): Promise<void> {
    while (this.stepping !== null) await this.stepping;
    const failure = this.stepFailure;
    this.stepFailure = null;
    if (failure !== null) throw failure;
  }

  private enqueue(step: Step): void {
    this.steps.push(step);
    // Begun in a later microtask: a run that ends at once clears `stepping` after it is set.
    this.stepping ??= Promise.resolve().then(() => this.takeSteps());
  }

  /**
   * Takes the steps in order. A read the database did not answer is tried again, with backoff,
   * until it does (or the feed stops); a step that fails otherwise is dropped, its failure told.
   */
  private async takeSteps(): Promise<void> {
    let attempt = 0;
    while (this.steps.length > 0) {
      const steps = this.steps;
      this.steps = [];
      for (let n = 0; n < steps.length; n++) {
        try {
          const taking = this.take(steps[n]!);
          if (taking !== undefined) await taking;
          attempt = 0;
        } catch (error) {
          if (!unreachable(error) || this.stopped) {
            this.stepFailure = error;
            continue;
          }
          n--;
          const waitMs = backoffMs(attempt++, {
            baseMs: FRONT_RETRY_BASE_MS,
            maxMs: FRONT_RETRY_MAX_MS,
            random: this.random,
          });
          await this.wait(waitMs);
        }
      }
    }
    this.stepping = null;
  }

  /** One step: done at once where nothing needs reading, or a promise of it. */
  private take(step: Step): Promise<void> | undefined {
    switch (step.kind) {
      case 'last':
        // A walk begun before a resync belongs to the feed as it was: it ends unheard (its
        // load's observations were dropped, so its end would take their keys for removed).
        this.loading = null;
        return this.loadedLast().then((last) => {
          this.lastSeq = last;
        });
      case 'begin':
        if (step.resyncs !== this.resyncs) return undefined;
        this.loading = { rows: [], at: 0, after: null, done: false, changed: new Set() };
        return undefined;
      case 'end':
        if (step.resyncs !== this.resyncs || this.loading === null) return undefined;
        return this.endWalk();
      case 'observe':
        return step.resyncs === this.resyncs ? this.observed(step) : undefined;
    }
  }

  /**
   * Compares an observed key with what the feed states of it: beside the walk for a key the load
   * told; otherwise as written or about to be (a change while the walk runs comes out of the
   * walk's order, and must not move it: defect 15 in docs/SIMULATION.md).
   */
  private observed(step: Step & { kind: 'observe' }): Promise<void> | undefined {
    const walk = this.loading;
    let stated: FeedState | undefined | Promise<FeedState | undefined>;
    // The directory tells no load's observation of a key changed meanwhile (LocalDirectory's
    // changedWhileLoading): a key the walk reaches by the load's hand is one no change came for.
    if (walk !== null && step.loaded) stated = this.walkTo(step.hash);
    else {
      walk?.changed.add(step.hash);
      stated = this.stated(step.hash);
    }
    if (!(stated instanceof Promise)) return this.compare(step, stated);
    return stated.then((found) => this.compare(step, found));
  }

  private async endWalk(): Promise<void> {
    await this.walkTo(null);
    this.loading = null;
  }

  /** Appends the key's visibility when the feed says otherwise of it. */
  private compare(
    step: { hash: string; identifierType: string; visibility: IndexVisibility },
    stated: FeedState | undefined,
  ): undefined {
    const v = step.visibility === 'none' ? null : step.visibility;
    if ((stated?.v ?? null) !== v) this.append(step.hash, step.identifierType, v);
    return undefined;
  }

  /** While appends wait to be written, lets them go before more pile up (a large first load). */
  async drainIfLarge(threshold: number): Promise<void> {
    if (this.pending.length >= threshold) await this.flush();
  }

  /**
   * Walks the feed's state up to `hash` (to the end with null); keys passed over are no longer
   * local. At once while the page read holds the way there; a promise where the next is needed.
   */
  private walkTo(hash: string | null): FeedState | undefined | Promise<FeedState | undefined> {
    const walk = this.loading!;
    while (walk.at < walk.rows.length && (hash === null || walk.rows[walk.at]!.key < hash)) {
      const { key, bytes } = walk.rows[walk.at++]!;
      if (walk.changed.has(key)) continue;
      const state = unframeRow<FeedState>('feed_state', key, bytes);
      if (state.v !== null) this.append(key, state.t, null);
    }
    if (walk.at === walk.rows.length && !walk.done)
      return this.nextStates(walk).then(() => this.walkTo(hash));
    const row = walk.rows[walk.at];
    if (hash === null || row === undefined || row.key !== hash) return undefined;
    walk.at++;
    return unframeRow<FeedState>('feed_state', hash, row.bytes);
  }

  /** The walk's next page of the feed's state, just after the last key it read. */
  private async nextStates(walk: StateWalk): Promise<void> {
    const limit = FEED_STATE_READ_PAGE_ROWS;
    const start = walk.after === null ? {} : { start: `${walk.after}\u0000` };
    const rows = await this.log.loadRange('feed_state', { limit, ...start });
    walk.rows = rows;
    walk.at = 0;
    walk.done = rows.length < limit;
    if (rows.length > 0) walk.after = rows[rows.length - 1]!.key;
  }

  /**
   * Resolves once every step taken so far is taken and every entry appended is durable; rejects
   * when the round that took the entries appended since the last flush failed.
   */
  async flush(): Promise<void> {
    await this.settled();
    const round = this.appendedIn ?? (this.schedule(), this.lastRound);
    this.appendedIn = null;
    return round;
  }

  /** No more retries of a round the database refused (the node stops). */
  stop(): void {
    this.stopped = true;
  }

  /** One write at a time; whatever was appended meanwhile goes in the next (group commit). */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // A failed round never breaks the chain: the rounds after it are still written.
    const round = this.flushing.then(() => {
      this.scheduled = false;
      return this.writeRound();
    });
    this.lastRound = round;
    this.flushing = round.catch(() => undefined);
  }

  /**
   * Writes what was appended. Cluster mode: a round refused as not held (the feed's partition
   * moved) is forgotten as one written would be; the new writer finds its changes again. A round
   * the database did not take because it did not answer is tried again, with backoff, until it
   * does (issue 29): the feed then says what the directory said, in order, with nothing lost.
   */
  private async writeRound(): Promise<void> {
    const round = this.pending;
    this.pending = [];
    if (round.length === 0) return;
    const writes = round.flatMap((p) => p.writes);
    for (let attempt = 0; ; attempt++) {
      try {
        // Cluster mode: written only at the epoch this writer resynced under (found by the
        // simulator, issue 30: a round made before its instance paused went out after the
        // instance had taken the feed's partition back at a new epoch, before its resync, and
        // wrote over the entries the writer in between had appended).
        await (this.writing === null
          ? this.log.write(writes)
          : this.writing.write(writes, this.madeAt()));
        break;
      } catch (error) {
        if (this.writing !== null && error instanceof NotHeldError) break;
        if (!unreachable(error) || this.stopped) throw error;
        const waitMs = backoffMs(attempt, {
          baseMs: FRONT_RETRY_BASE_MS,
          maxMs: FRONT_RETRY_MAX_MS,
          random: this.random,
        });
        await this.wait(waitMs);
      }
    }
    for (const { hash, state } of round)
      if (this.pendingState.get(hash) === state) this.pendingState.delete(hash);
  }

  /**
   * A signed page of entries after `after` (P2): followers verify it with this node's keys. Read
   * without holding the thread that serves HTTP (issue 29).
   */
  async page(
    after: number,
    limit: number,
    member: string,
    endpoint: string,
    signer: SigningKey,
  ): Promise<string> {
    const entries: FeedEntry[] = [];
    const rows = await this.log.loadRange('feed', { start: seqKey(after + 1), limit });
    const last = this.writes() ? this.lastSeq : await this.loadedLast();
    for (const { key, bytes } of rows) {
      type Stored = { t: string; h: string; v: FeedEntry['visibility']; at: string };
      const e = unframeRow<Stored>('feed', key, bytes);
      entries.push({
        seq: Number(key),
        identifier_type: e.t,
        identifier_hash: e.h,
        visibility: e.v,
        at: e.at,
      });
    }
    const next = entries.length === 0 ? after : entries[entries.length - 1]!.seq;
    const signedAt = isoTime(this.now());
    return JSON.stringify(
      signObject(
        {
          type: 'path.directory.feed',
          member,
          endpoint,
          after,
          next,
          last,
          entries,
          ...envelopeFields(signer, signedAt),
        },
        signer,
      ),
    );
  }

  private stated(hash: string): FeedState | Promise<FeedState | undefined> {
    const pending = this.pendingState.get(hash);
    if (pending !== undefined) return pending;
    return this.log
      .load('feed_state', hash)
      .then((bytes) =>
        bytes === undefined ? undefined : unframeRow<FeedState>('feed_state', hash, bytes),
      );
  }

  private append(hash: string, identifierType: string, v: FeedState['v']): void {
    const seq = ++this.lastSeq;
    const state: FeedState = { v, seq, t: identifierType };
    this.pendingState.set(hash, state);
    this.pending.push({
      hash,
      state,
      writes: [
        {
          table: 'feed',
          key: seqKey(seq),
          bytes: frame({ t: identifierType, h: hash, v, at: isoTime(this.now()) }),
        },
        { table: 'feed_state', key: hash, bytes: frame(state) },
      ],
    });
    this.schedule();
    this.appendedIn = this.lastRound;
  }
}
