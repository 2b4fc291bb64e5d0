// Follows one member's change feed into this node's index. Each page is verified against the
// member's published keys, written to the replica (rows and cursor in one durable write) and
// then applied to the index; a restart loads the replica and resumes from the cursor.
import type { Logger } from 'pino';
import { REPLICA_READ_PAGE_ROWS, type Limits } from '../config.js';
import type { DirectoryIndex } from '../directory/index.js';
import type { Reads, TableWrite } from '../log/log.js';
import { replicaChangeRows } from '../reads/rows.js';
import { listedKeys } from '../directory/changes.js';
import { frame, unframeRow } from '../log/record.js';
import { verifyObject, type SigningKey } from '../protocol/signing.js';
import type { FeedEntry } from './feed.js';
import type { MemberRegistry } from './members.js';
import { peerRequest } from './peer.js';

interface FeedPage {
  type: string;
  member: string;
  endpoint: string;
  after: number;
  next: number;
  last: number;
  entries: FeedEntry[];
  kid: string;
}

interface ReplicaRow {
  t: string;
  v: 'network' | 'public';
  e: string;
}

export const FEED_OPERATION = 'directory.feed';

export class Follower {
  private cursor = 0;
  /** Entries of the member's feed past this node's cursor, as its last page said (P21). */
  lag = 0;
  private stopped = false;
  private feedUrl: string | null = null;
  private baseUrl: string | null = null;

  constructor(
    private readonly options: {
      member: string;
      registry: MemberRegistry;
      log: Reads;
      index: DirectoryIndex;
      signer: () => SigningKey;
      limits: Limits;
      logger: Logger;
      /**
       * Embedded mode: each page's keys are listed in a `directory_changes` row (issue 34), for
       * a start that takes the directory image to read them again.
       */
      listChanges?: boolean;
    },
  ) {}

  /** The cursor this follower's index entries reflect (the directory image records it). */
  get position(): number {
    return this.cursor;
  }

  /**
   * Loads the replica into the index (unless the index was taken whole from the directory image)
   * and the cursor, without holding the thread that serves HTTP (issue 29); returns how many rows
   * it loaded.
   */
  async load(options: { replica: boolean }): Promise<number> {
    const { log, index, member } = this.options;
    this.cursor = await loadedCursor(log, member);
    if (!options.replica) return 0;
    let rows = 0;
    let start = `${member}/`;
    for (;;) {
      const range = { start, end: `${member}0`, limit: REPLICA_READ_PAGE_ROWS };
      const page = await log.loadRange('replica', range);
      for (const { key, bytes } of page) {
        const row = unframeRow<ReplicaRow>('replica', key, bytes);
        const holder = index.holderId({ member, endpoint: row.e });
        index.set(key.slice(member.length + 1), row.t, holder, row.v);
      }
      rows += page.length;
      if (page.length < REPLICA_READ_PAGE_ROWS) return rows;
      // The next page starts just after this one's last key.
      start = `${page[page.length - 1]!.key}\u0000`;
    }
  }

  start(): void {
    void this.run();
  }

  stop(): void {
    this.stopped = true;
  }

  private async run(): Promise<void> {
    let backoff = this.options.limits.replication_poll_interval_ms;
    while (!this.stopped) {
      try {
        const full = await this.pull();
        backoff = this.options.limits.replication_poll_interval_ms;
        if (!full) await sleep(this.options.limits.replication_poll_interval_ms);
      } catch (error) {
        this.options.logger.warn(
          { member: this.options.member, err: { message: (error as Error).message } },
          'cannot follow member feed',
        );
        this.feedUrl = null;
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 30_000);
      }
    }
  }

  /** One page; true when the page was full (more may follow at once). */
  private async pull(): Promise<boolean> {
    const { member, registry, limits } = this.options;
    const known = registry.list().find((m) => m.member === member);
    if (known === undefined) throw new Error('member no longer listed');
    if (this.feedUrl === null || this.baseUrl !== known.base_url) {
      this.baseUrl = known.base_url;
      this.feedUrl = await this.discover(known.base_url);
    }
    const res = await peerRequest(
      `${this.feedUrl}?after=${this.cursor}&limit=${limits.replication_page_size}`,
      {
        method: 'GET',
        signer: this.options.signer(),
        timeoutMs: limits.peer_request_timeout_ms,
      },
    );
    if (res.status !== 200)
      throw new Error(`feed answered ${res.status}: ${res.text.slice(0, 200)}`);
    const page = JSON.parse(res.text) as FeedPage;
    const key = registry.keyFor(page.kid);
    if (
      page.type !== 'path.directory.feed' ||
      page.member !== member ||
      key === undefined ||
      key.member !== member ||
      !verifyObject(page, key.public_key).valid
    ) {
      if (key === undefined) void registry.refresh(member);
      throw new Error("feed page does not verify against the member's keys");
    }
    if (page.after !== this.cursor) throw new Error('feed page does not continue from the cursor');
    await this.apply(page);
    return page.entries.length >= limits.replication_page_size;
  }

  private async apply(page: FeedPage): Promise<void> {
    const { log, index, member } = this.options;
    const writes: TableWrite[] = page.entries.map((e) => ({
      table: 'replica',
      key: `${member}/${e.identifier_hash}`,
      bytes:
        e.visibility === null
          ? null
          : frame({ t: e.identifier_type, v: e.visibility, e: page.endpoint } satisfies ReplicaRow),
    }));
    writes.push({ table: 'cursors', key: member, bytes: frame({ after: page.next }) });
    if (this.options.listChanges === true && page.entries.length > 0) {
      const hashes = page.entries.map((e) => e.identifier_hash);
      writes.push(replicaChangeRows.row(member, page.next, hashes));
    }
    await log.write(writes);
    const holder = index.holderId({ member, endpoint: page.endpoint });
    for (const e of page.entries)
      index.set(e.identifier_hash, e.identifier_type, holder, e.visibility ?? 'none');
    this.cursor = page.next;
    this.lag = Math.max(0, page.last - page.next);
  }

  /** The member's feed URL from its discovery document (paths are each operator's own). */
  private async discover(baseUrl: string): Promise<string> {
    const res = await peerRequest(`${baseUrl}/.well-known/path-configuration`, {
      method: 'GET',
      timeoutMs: this.options.limits.peer_request_timeout_ms,
    });
    if (res.status !== 200) throw new Error(`discovery answered ${res.status}`);
    const url = (JSON.parse(res.text) as { endpoints?: Record<string, { url?: string }> })
      .endpoints?.[FEED_OPERATION]?.url;
    if (typeof url !== 'string') throw new Error('the member publishes no directory feed');
    return url;
  }
}

/**
 * After the index was taken from the directory image: reads again, from the replica, every key
 * the member's pages after the image's cursor changed (as their `directory_changes` rows list
 * them); how many keys.
 */
export async function replicaCatchUp(
  log: Reads,
  index: DirectoryIndex,
  member: string,
  after: number,
): Promise<number> {
  const hashes = new Set<string>();
  await listedKeys(log, replicaChangeRows.after(member, after), hashes);
  for (const hash of hashes) {
    const bytes = await log.load('replica', `${member}/${hash}`);
    if (bytes !== undefined) {
      const row = unframeRow<ReplicaRow>('replica', `${member}/${hash}`, bytes);
      index.set(hash, row.t, index.holderId({ member, endpoint: row.e }), row.v);
      continue;
    }
    // Gone from the replica: out of the index, if the member held it there.
    const type = index.typeOf(hash);
    const holder = index.holderOf(hash);
    if (type !== null && holder?.member === member)
      index.set(hash, type, index.holderId(holder), 'none');
  }
  return hashes.size;
}

/** How far the replica of `member` has durably followed its feed. */
export async function loadedCursor(log: Reads, member: string): Promise<number> {
  const cursor = await log.load('cursors', member);
  return cursor === undefined ? 0 : unframeRow<{ after: number }>('cursors', member, cursor).after;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());
