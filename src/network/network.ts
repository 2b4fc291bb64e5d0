// This node's place in the network: the member registry, the change feed it publishes, and one
// follower per member whose feed it replicates into the index.
import type { Logger } from 'pino';
import type { Limits } from '../config.js';
import type { LocalDirectory } from '../directory/directory.js';
import type { ImagePosition, ImageRead } from '../directory/image.js';
import { loadImageNames } from '../directory/changes.js';
import type { Reads } from '../log/log.js';
import type { SigningKey } from '../protocol/signing.js';
import type { Credential, NodeStore } from '../store.js';
import { FeedPublisher, type FeedWriting } from './feed.js';
import { unreachable } from '../log/unavailable.js';
import { Follower, loadedCursor, replicaCatchUp } from './follower.js';
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
      /**
       * Embedded mode: the keys of each followed page are listed in `directory_changes`, for a
       * start that takes the directory image (issue 34).
       */
      listChanges?: boolean;
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
    options.directory.observer = (hash, type, visibility, loaded) =>
      this.feed.observe(hash, type, visibility, loaded);
  }

  /**
   * Takes the index whole from the directory image when it fits the committed state (`unfit`),
   * then reads again the keys changed after its position, local and replicated; otherwise loads
   * the local directory with the feed merged beside it, then the replicas. Starts following.
   */
  async start(options: {
    image: ImageRead;
    /** Whether the log holds the records an image's position names (image.ts, recordsHold). */
    holds: (partitions: readonly number[]) => boolean;
  }): Promise<{
    directoryRows: number;
    replicaRows: number;
    image: 'used' | ImageRead['kind'] | 'stale';
    /** Keys read again after the image was taken (changed after its position). */
    changedKeys: number;
  }> {
    const { directory, logger } = this.options;
    this.registry.load();
    // The feed's last sequence read, which the image's position names.
    await this.feed.settled();
    const image = options.image;
    const unfit = image.kind === 'read' ? await this.unfit(image.position, options.holds) : null;
    const usable = image.kind === 'read' && unfit === null;
    let directoryRows = 0;
    let changedKeys = 0;
    if (usable) {
      directory.adopt(image.image);
      changedKeys = await directory.catchUp(image.position.partitions);
      changedKeys += await this.replicasCatchUp(image.position.followed);
    } else {
      if (image.kind !== 'absent') {
        const reason = image.kind === 'damaged' ? image.reason : unfit;
        logger.info({ reason }, 'directory image not used; the index is rebuilt from the tables');
      }
      directoryRows = await directory.load(this.feedBeside());
    }
    directory.ready();
    this.registry.start();
    const replicaRows = await this.syncFollowers({ replica: !usable });
    const outcome = usable ? 'used' : image.kind === 'read' ? 'stale' : image.kind;
    return { directoryRows, replicaRows, image: outcome, changedKeys };
  }

  /**
   * Cluster mode: this instance has become the feed's writer. The feed is brought level with the
   * directory as at a start: every key's visibility compared with what the feed last said of it.
   */
  async republish(): Promise<void> {
    this.feed.resync();
    await this.options.directory.load(this.feedBeside());
    await this.feed.flush();
  }

  /**
   * A whole load with the feed's walk beside it: begun and ended with the load itself, so that a
   * load under way when it was asked for (an index read again) is not taken for it.
   */
  private feedBeside() {
    return {
      begin: () => this.feed.beginLoad(),
      end: () => this.feed.endLoad(),
      pause: () => this.feed.drainIfLarge(this.options.limits.feed_pending_max),
    };
  }

  /**
   * Why an image does not describe the committed state, or null when it does: it was taken of
   * this member's index, in this history (`holds`), the table names it, the feed has not gone
   * back past it, and of the members followed now, none behind its cursor in the image.
   */
  private async unfit(
    position: ImagePosition,
    holds: (partitions: readonly number[]) => boolean,
  ): Promise<string | null> {
    if (position.member !== this.options.member) return 'taken for another member';
    if (!holds(position.partitions)) return "its records are not the log's";
    const names = await loadImageNames(this.options.log);
    if (position.name !== names?.current && position.name !== names?.pending)
      return 'not the image the tables name';
    if (position.feed > this.feed.sequence) return 'the change feed is behind it';
    const committed = await this.committedFollowed();
    const taken = new Map(position.followed);
    const moved = committed.some(([m, cursor]) => !taken.has(m) || taken.get(m)! > cursor);
    if (moved || committed.length !== taken.size) return 'not taken of the members followed now';
    return null;
  }

  /** The replica keys each followed member's pages changed after the image's cursor. */
  private async replicasCatchUp(followed: [string, number][]): Promise<number> {
    let keys = 0;
    for (const [member, cursor] of followed)
      keys += await replicaCatchUp(this.options.log, this.options.directory.index, member, cursor);
    return keys;
  }

  /**
   * What an image taken now says besides the partitions: the feed's last sequence and each
   * followed member's cursor (what the index holds); null when no image may describe the index.
   */
  imagePosition(): Omit<ImagePosition, 'partitions' | 'name'> | null {
    if (this.unfollowed) return null;
    const followed = [...this.followers].map(([m, f]): [string, number] => [m, f.position]);
    return { member: this.options.member, feed: this.feed.sequence, followed: sorted(followed) };
  }

  /** Each followed member's committed cursor, sorted by member. */
  private async committedFollowed(): Promise<[string, number][]> {
    const listed = this.registry.list().map((m) => m.member);
    const cursors = await Promise.all(listed.map((m) => loadedCursor(this.options.log, m)));
    return sorted(listed.map((m, n): [string, number] => [m, cursors[n]!]));
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
        listChanges: this.options.listChanges ?? false,
      });
      rows += await follower.load(options);
      follower.start();
      this.followers.set(name, follower);
    }
    return rows;
  }
}

const sorted = (followed: [string, number][]) =>
  followed.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
