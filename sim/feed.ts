// The network feed in a run (P2, network/feed.ts): each instance runs the node's own
// FeedPublisher over its connection, told of every change of the directory's keys as its index
// would tell it; in cluster mode the holder of the feed's partition writes it, brought level with
// the directory (republished) whenever it takes that partition, and its writes are refused once
// it holds it no more. The directory here is the simulator's: hashes and their visibility.
import { FeedPublisher, FEED_PARTITION } from '../src/network/feed.js';
import type { IndexVisibility } from '../src/directory/index.js';
import { unframeRow } from '../src/log/record.js';
import type { Violation } from './model.js';
import { Random } from './random.js';
import type { SimInstance, World } from './world.js';
import type { SimPart } from './part.js';

const HASHES = 8;
const TYPES = ['phone', 'email'] as const;
const hashOf = (n: number) => (0xfeed00 + n).toString(16).padStart(64, '0');

interface Entry {
  type: string;
  visibility: IndexVisibility;
}

/** What a feed row says: its type, hash and visibility (null: gone). */
interface FeedRow {
  t: string;
  h: string;
  v: 'network' | 'public' | null;
}

/** Mixed into the run's seed for the feed's own stream of chance. */
const JITTER_SEED = 0x5eed_feed;

export class SimFeed implements SimPart {
  readonly name = 'feed';
  /** The directory's keys as the index holds them (visibility `none`: not held). */
  readonly directory = new Map<string, Entry>();
  private readonly publishers = new Map<SimInstance, FeedPublisher>();
  /**
   * The publishers' retry jitter: seeded, so that a seed replays its run (with Math.random, a
   * retry's wait, and what the steps after it found, differed from one run to the next), and a
   * stream of its own, so that the runs of other seeds are what they were.
   */
  private readonly jitter: Random;

  constructor(
    private readonly world: World,
    private readonly random: Random,
  ) {
    this.jitter = new Random((random.seed ^ JITTER_SEED) >>> 0);
  }

  /** A started instance's publisher, and the load that follows its start (network.ts). */
  started(instance: SimInstance): void {
    const cluster = this.world.cluster;
    const publisher = new FeedPublisher(
      instance.log,
      () => instance.now(),
      cluster
        ? {
            epoch: () => instance.holding!.epochs[FEED_PARTITION]!,
            write: (writes, epoch) => instance.log.writeHolding(FEED_PARTITION, writes, epoch),
          }
        : null,
      (ms) => instance.sleep(ms),
      () => this.jitter.fraction(),
    );
    this.publishers.set(instance, publisher);
    this.load(publisher);
    if (cluster && instance.holding!.epochs[FEED_PARTITION]! > 0n) void this.republish(instance);
  }

  /** Every key of the directory observed in hash order, beside the feed's state (a load). */
  private load(publisher: FeedPublisher): void {
    publisher.beginLoad();
    for (const [hash, entry] of [...this.directory].sort(([a], [b]) => (a < b ? -1 : 1)))
      publisher.observe(hash, entry.type, entry.visibility, true);
    publisher.endLoad();
  }

  /** The feed's partition taken up: the feed brought level (network.republish). */
  async tookUp(instance: SimInstance, p: number): Promise<void> {
    if (p === FEED_PARTITION) await this.republish(instance);
  }

  /** The instance has taken the feed's partition: the feed brought level (network.republish). */
  async republish(instance: SimInstance): Promise<void> {
    const publisher = this.publishers.get(instance);
    if (publisher === undefined || !instance.alive) return;
    publisher.resync();
    this.load(publisher);
    await publisher.flush().catch(() => undefined);
  }

  steps() {
    return [[4, () => `directory ${this.change()}`]] as const;
  }

  /** P2: a sequence says one thing for good. */
  watch(): Violation[] {
    const rewritten = this.world.disk.rewrites[0];
    if (rewritten === undefined) return [];
    return [
      { invariant: 'feed-append-only', detail: `feed entry ${Number(rewritten)} was written over` },
    ];
  }

  /** The feed's writer brought level with the directory, as a start or a takeover brings it. */
  async heal(): Promise<void> {
    const writer = this.world.cluster
      ? this.world.ownerOf(FEED_PARTITION)
      : this.world.instances[0]!;
    if (writer !== null && writer !== undefined) await this.republish(writer);
    await this.settled();
  }

  check(): Violation[] {
    return this.converged();
  }

  /** A key of the directory changes (a subject's identifier added, made public, withdrawn). */
  change(): string {
    const hash = hashOf(this.random.int(0, HASHES - 1));
    const visibility = this.random.pick(['none', 'network', 'public'] as const);
    const type = this.directory.get(hash)?.type ?? this.random.pick(TYPES);
    if (visibility === 'none') this.directory.delete(hash);
    else this.directory.set(hash, { type, visibility });
    for (const [instance, publisher] of this.publishers)
      if (instance.alive) publisher.observe(hash, type, visibility);
    return `${hash.slice(-3)} ${visibility}`;
  }

  /** Every publisher's writes taken (a heal's last step). */
  async settled(): Promise<void> {
    for (const [instance, publisher] of this.publishers)
      if (instance.alive) await publisher.flush().catch(() => undefined);
  }

  /**
   * the feed converges on the directory: what it last says of each key, and the state it keeps
   * of it, are the directory's visibility (none: gone, or never said).
   */
  converged(): Violation[] {
    const out: Violation[] = [];
    const last = new Map<string, FeedRow['v']>();
    for (const { key, bytes } of this.world.disk.store.scan('feed')) {
      const row = unframeRow<FeedRow>('feed', key, bytes);
      last.set(row.h, row.v);
    }
    const hashes = new Set([...last.keys(), ...this.directory.keys()]);
    for (const hash of hashes) {
      const expected = this.directory.get(hash)?.visibility ?? null;
      const said = last.get(hash) ?? null;
      const bytes = this.world.disk.store.get('feed_state', hash);
      const state =
        bytes === undefined ? null : unframeRow<{ v: FeedRow['v'] }>('feed_state', hash, bytes).v;
      if (said !== expected || state !== expected)
        out.push({
          invariant: 'feed-converges',
          detail: `${hash.slice(-3)} is ${expected ?? 'gone'}, the feed says ${said ?? 'nothing'} (state ${state ?? 'none'})`,
        });
    }
    return out;
  }
}
