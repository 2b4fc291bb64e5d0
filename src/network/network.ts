// This node's place in the network: the member registry, the change feed it publishes, and one
// follower per member whose feed it replicates into the index.
import type { Logger } from 'pino';
import type { Limits } from '../config.js';
import type { LocalDirectory } from '../directory/directory.js';
import type { Log } from '../log/log.js';
import type { SigningKey } from '../protocol/signing.js';
import type { Credential, NodeStore } from '../store.js';
import { FeedPublisher } from './feed.js';
import { Follower } from './follower.js';
import { MemberRegistry } from './members.js';

export class Network {
  readonly registry: MemberRegistry;
  readonly feed: FeedPublisher;
  private readonly followers = new Map<string, Follower>();

  constructor(
    private readonly options: {
      store: NodeStore;
      log: Log;
      directory: LocalDirectory;
      member: string;
      signer: () => SigningKey;
      limits: Limits;
      logger: Logger;
      /** Member keys changed: credentials must be reloaded. */
      onKeys: () => void;
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
    this.feed = new FeedPublisher(options.log, Date.now);
    options.directory.observer = (hash, type, visibility) =>
      this.feed.observe(hash, type, visibility);
  }

  /**
   * Loads the local directory with the feed merged beside it, then the replicas; starts following.
   */
  async start(): Promise<{ directoryRows: number; replicaRows: number }> {
    this.feed.beginLoad();
    const directoryRows = await this.options.directory.load({
      pause: () => this.feed.drainIfLarge(this.options.limits.feed_pending_max),
    });
    this.feed.endLoad();
    this.registry.load();
    this.registry.start();
    const replicaRows = this.syncFollowers();
    return { directoryRows, replicaRows };
  }

  /** The operator changed the member list: follow new members, stop following removed ones. */
  membersChanged(): void {
    this.registry.load();
    this.syncFollowers();
  }

  credentials(): Credential[] {
    return this.registry.credentials();
  }

  async stop(): Promise<void> {
    this.registry.stop();
    for (const f of this.followers.values()) f.stop();
    await this.feed.flush();
  }

  /** Each followed member's replication lag in feed entries (P21). */
  lags(): Map<string, number> {
    return new Map([...this.followers].map(([member, f]) => [member, f.lag]));
  }

  private syncFollowers(): number {
    let rows = 0;
    const listed = new Set(this.registry.list().map((m) => m.member));
    for (const [name, follower] of this.followers) {
      if (!listed.has(name)) {
        follower.stop();
        this.followers.delete(name);
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
      rows += follower.load();
      follower.start();
      this.followers.set(name, follower);
    }
    return rows;
  }
}
