// The change feed of this node's own directory entries (hashes only): an ordered, resumable,
// authenticated list that member nodes follow to answer lookups from their replicas. Each change
// of a key's local visibility appends one entry with the next sequence number; only `network` and
// `public` entries leave the node (a key that turns private or goes away appears as a removal).
// `feed_state` remembers what the feed last said of each key, so a start after a crash appends
// whatever the feed missed: the feed converges on the directory whatever happened in between.
import { NotHeldError, type Log, type TableWrite } from '../log/log.js';
import { FRONT_RETRY_BASE_MS, FRONT_RETRY_MAX_MS } from '../config.js';
import { backoffMs, unreachable } from '../log/unavailable.js';
import { frame, unframeRow } from '../log/record.js';
import type { IndexVisibility } from '../directory/index.js';
import { envelopeFields, signObject, type SigningKey } from '../protocol/signing.js';
import { isoTime } from '../protocol/time.js';

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

const SEQ_DIGITS = 16;
const seqKey = (seq: number) => String(seq).padStart(SEQ_DIGITS, '0');

/**
 * Cluster mode (P22): one instance writes the feed at a time, the holder of FEED_PARTITION, its
 * writes refused once it no longer holds that partition; the others serve its pages from the table.
 */
export interface FeedWriting {
  /** The epoch at which this instance holds FEED_PARTITION, 0 where it holds none. */
  epoch: () => bigint;
  write: (writes: TableWrite[]) => Promise<void>;
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
  /** Stopped: a round the database refused is no longer tried again. */
  private stopped = false;
  /**
   * While the directory loads: the feed's state, walked in hash order beside the directory's keys.
   */
  private loading: {
    rows: Iterator<{ key: string; bytes: Buffer }>;
    next: IteratorResult<{ key: string; bytes: Buffer }>;
  } | null = null;

  constructor(
    private readonly log: Log,
    private readonly now: () => number,
    private readonly writing: FeedWriting | null = null,
  ) {
    this.lastSeq = this.storedLast();
  }

  /** storedLast, asked without holding the thread. */
  private async loadedLast(): Promise<number> {
    const [row] = await this.log.loadRange('feed', { reverse: true, limit: 1 });
    return row === undefined ? 0 : Number(row.key);
  }

  private storedLast(): number {
    for (const { key } of this.log.scan('feed', { reverse: true, limit: 1 })) return Number(key);
    return 0;
  }

  /**
   * Whether this node writes the feed now: always, but in cluster mode, where it must hold the
   * feed's partition and have resynced since it took it (before then its sequence is another
   * writer's, out of date).
   */
  private writes(): boolean {
    if (this.writing === null) return true;
    const epoch = this.writing.epoch();
    return epoch > 0n && epoch === this.resyncedUnder;
  }

  /**
   * Cluster mode: this instance has just become the feed's writer. It starts from the feed as
   * written (what the earlier writer appended but did not write is found again by the load that
   * follows, which compares the directory with the feed's state).
   */
  resync(): void {
    this.resyncedUnder = this.writing?.epoch() ?? 0n;
    this.lastSeq = this.storedLast();
    this.pending = [];
    this.pendingState.clear();
  }

  get sequence(): number {
    return this.lastSeq;
  }

  /**
   * The load of the directory begins: its keys will be observed in hash order, and the feed's
   * state is merged beside them in one sequential walk (no lookup per key).
   */
  beginLoad(): void {
    const rows = this.log.scan('feed_state')[Symbol.iterator]();
    this.loading = { rows, next: rows.next() };
  }

  /** A key's local visibility, at load or after a change: appended when the feed says otherwise. */
  observe(hash: string, identifierType: string, visibility: IndexVisibility): void {
    if (!this.writes()) return;
    const stated = this.loading === null ? this.stated(hash) : this.statedDuringLoad(hash);
    const v = visibility === 'none' ? null : visibility;
    if ((stated?.v ?? null) === v) return;
    this.append(hash, identifierType, v);
  }

  /**
   * The load is over: keys the feed still states but the directory no longer has become removals.
   */
  endLoad(): void {
    if (this.loading === null) return;
    this.statedDuringLoad(null);
    this.loading = null;
  }

  /** While appends wait to be written, lets them go before more pile up (a large first load). */
  async drainIfLarge(threshold: number): Promise<void> {
    if (this.pending.length >= threshold) await this.flush();
  }

  /**
   * Walks the feed's state up to `hash` (to the end
   * with null); keys passed over are no longer local.
   */
  private statedDuringLoad(hash: string | null): FeedState | undefined {
    const walk = this.loading!;
    while (!walk.next.done && (hash === null || walk.next.value.key < hash)) {
      const state = unframeRow<FeedState>('feed_state', walk.next.value.key, walk.next.value.bytes);
      if (state.v !== null) this.append(walk.next.value.key, state.t, null);
      walk.next = walk.rows.next();
    }
    if (hash === null || walk.next.done || walk.next.value.key !== hash) return undefined;
    const state = unframeRow<FeedState>('feed_state', hash, walk.next.value.bytes);
    walk.next = walk.rows.next();
    return state;
  }

  /** Resolves once every entry appended so far is durable. */
  flush(): Promise<void> {
    this.schedule();
    return this.lastRound;
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
        await (this.writing === null ? this.log.write(writes) : this.writing.write(writes));
        break;
      } catch (error) {
        if (this.writing !== null && error instanceof NotHeldError) break;
        if (!unreachable(error) || this.stopped) throw error;
        const waitMs = backoffMs(attempt, {
          baseMs: FRONT_RETRY_BASE_MS,
          maxMs: FRONT_RETRY_MAX_MS,
        });
        await new Promise((resolve) => setTimeout(resolve, waitMs));
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

  private stated(hash: string): FeedState | undefined {
    const pending = this.pendingState.get(hash);
    if (pending !== undefined) return pending;
    const bytes = this.log.get('feed_state', hash);
    return bytes === undefined ? undefined : unframeRow<FeedState>('feed_state', hash, bytes);
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
  }
}
