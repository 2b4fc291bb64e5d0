// This node's place in the network: the member registry, the change feed it publishes, and one
// follower per member whose feed it replicates into the index.
import type { Logger } from 'pino';
import type { Limits } from '../config.js';
import type { LocalDirectory } from '../directory/directory.js';
import { samePosition, type ImagePosition, type ImageRead } from '../directory/image.js';
import type { Reads } from '../log/log.js';
import type { SigningKey } from '../protocol/signing.js';
import type { Credential, NodeStore } from '../store.js';
import { FeedPublisher, type FeedWriting } from './feed.js';
import { unreachable } from '../log/unavailable.js';
import { Follower, loadedCursor } from './follower.js';
import { MemberRegistry } from './members.js';

export class Network {
  readonly registry: MemberRegistry;
  readonly feed: FeedPublisher;
  private readonly followers = new Map<string, Follower>();
  /**
   * A follower was stopped while the node ran: its entries stay in the index until the next
   * start, so no image may be written of this index (the next start would keep them).
   */
  private unfollowed = false;

  constructor(
    private readonly options: {
      store: NodeStore;
      log: Reads;
      directory: LocalDirectory;
      member: string;
      signer: () => SigningKey;
      limits: Limits;
      logger: Logger;
      /** Member keys changed: credentials must be reloaded. */
      onKeys: () => void;
      /** Cluster mode: who writes the feed, and how. */
      feedWriting?: FeedWriting;
    },
  ) {
    this.registry = new MemberRegistry({
      store: options.store,
      self: options.member,
      logger: options.logger,
      refreshMs: options.limits.member_keys_refresh_interval_ms,
      timeoutMs: options.limits.peer_request_timeout_ms,
      onKeys: options.onKeys,
    });
    this.feed = new FeedPublisher(options.log, Date.now, options.feedWriting ?? null);
    options.directory.observer = (hash, type, visibility) =>
      this.feed.observe(hash, type, visibility);
  }

  /**
   * Takes the index whole from the directory image when its position is the committed one
   * (`tails`: each partition's last record, read before any worker could commit); otherwise
   * loads the local directory with the feed merged beside it, then the replicas. Starts
   * following.
   */
  async start(options: { image: ImageRead; tails: number[] }): Promise<{
    directoryRows: number;
    replicaRows: number;
    image: 'used' | ImageRead['kind'] | 'stale';
  }> {
    const { directory, logger } = this.options;
    this.registry.load();
    // The feed's last sequence read, which the image's position names.
    await this.feed.settled();
    const image = options.image;
    const committed = await this.committedPosition(options.tails);
    const usable = image.kind === 'read' && samePosition(image.position, committed);
    let directoryRows = 0;
    if (usable) {
      directory.adopt(image.image);
    } else {
      if (image.kind !== 'absent') {
        const reason = image.kind === 'damaged' ? image.reason : 'older than the committed state';
        logger.info({ reason }, 'directory image not used; the index is rebuilt from the tables');
      }
      this.feed.beginLoad();
      directoryRows = await directory.load({
        pause: () => this.feed.drainIfLarge(this.options.limits.feed_pending_max),
      });
      this.feed.endLoad();
    }
    directory.ready();
    this.registry.start();
    const replicaRows = await this.syncFollowers({ replica: !usable });
    const outcome = usable ? 'used' : image.kind === 'read' ? 'stale' : image.kind;
    return { directoryRows, replicaRows, image: outcome };
  }

  /**
   * Cluster mode: this instance has become the feed's writer. The feed is brought level with the
   * directory as at a start: every key's visibility compared with what the feed last said of it.
   */
  async republish(): Promise<void> {
    this.feed.resync();
    this.feed.beginLoad();
    await this.options.directory.load({
      pause: () => this.feed.drainIfLarge(this.options.limits.feed_pending_max),
    });
    this.feed.endLoad();
    await this.feed.flush();
  }

  /**
   * The position of the index as it is now, for its image; null when no image may describe it.
   * Asked once the node has drained (no commit or feed page can change the index meanwhile).
   */
  imagePosition(tails: number[]): ImagePosition | null {
    if (this.unfollowed) return null;
    const followed = [...this.followers].map(([m, f]): [string, number] => [m, f.position]);
    return this.position(tails, followed);
  }

  /** What an image must say to describe the index the tables give now. */
  private async committedPosition(tails: number[]): Promise<ImagePosition> {
    const listed = this.registry.list().map((m) => m.member);
    const cursors = await Promise.all(listed.map((m) => loadedCursor(this.options.log, m)));
    const followed = listed.map((m, n): [string, number] => [m, cursors[n]!]);
    return this.position(tails, followed);
  }

  private position(tails: number[], followed: [string, number][]): ImagePosition {
    followed.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return { member: this.options.member, partitions: tails, feed: this.feed.sequence, followed };
  }

  /**
   * The operator changed the member list: follow new members (their replicas read without
   * holding the thread, issue 29), stop following removed ones.
   */
  async membersChanged(): Promise<void> {
    this.registry.load();
    await this.syncFollowers({ replica: true });
  }

  /** Each member's active keys as the registry holds them: none until start() has loaded it. */
  credentials(): Credential[] {
    return this.registry.credentials();
  }

  async stop(): Promise<void> {
    this.registry.stop();
    for (const f of this.followers.values()) f.stop();
    // A round the database does not take is not waited for past the stop: the feed converges on
    // the directory at the next start (or the next writer's resync), so it is found again then.
    this.feed.stop();
    await this.feed.flush().catch((error: unknown) => {
      if (!unreachable(error)) throw error;
    });
  }

  /** Each followed member's replication lag in feed entries (P21). */
  lags(): Map<string, number> {
    return new Map([...this.followers].map(([member, f]) => [member, f.lag]));
  }

  /**
   * A member is followed once its replica is loaded; one whose load failed is not, and the next
   * change of the members tries it again.
   */
  private async syncFollowers(options: { replica: boolean }): Promise<number> {
    let rows = 0;
    const listed = new Set(this.registry.list().map((m) => m.member));
    for (const [name, follower] of this.followers) {
      if (!listed.has(name)) {
        follower.stop();
        this.followers.delete(name);
        this.unfollowed = true;
      }
    }
    for (const name of listed) {
      if (this.followers.has(name)) continue;
      const { log, directory, signer, limits, logger } = this.options;
      const follower = new Follower({
        member: name,
        registry: this.registry,
        log,
        index: directory.index,
        signer,
        limits,
        logger,
      });
      rows += await follower.load(options);
      follower.start();
      this.followers.set(name, follower);
    }
    return rows;
  }
}
