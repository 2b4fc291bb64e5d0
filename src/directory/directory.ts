// The front end's directory: the in-memory index, loaded from the committed `directory` rows at
// start and kept current from the rows each command reports. Several registrations of one key
// (two subjects with one phone number) are separate rows; the key is as visible as its most
// visible row, and leaves the index only when its last row goes. Once the node runs, the keys
// other instances changed (cluster mode) and a load after a lost notes connection are read with
// `Reads.loadRange`, never holding the thread that serves HTTP (issue 29).
import type { DirectoryRow } from '../actors/types.js';
import { DIRECTORY_READ_PAGE_ROWS, FRONT_RETRY_BASE_MS, FRONT_RETRY_MAX_MS } from '../config.js';
import { PARTITION_COUNT, ReadsInPlace, type Reads } from '../log/log.js';
import { backoffMs, unreachable } from '../log/unavailable.js';
import { directoryRows } from '../domain/subject/directory-rows.js';
import { directoryChangeRows } from '../reads/rows.js';
import { listedKeys } from './changes.js';
import { DirectoryIndex, type IndexImage, type IndexVisibility } from './index.js';

const RANK: Record<IndexVisibility, number> = { none: 0, network: 1, public: 2 };

/** The wait before the `attempt`th read again of a key the database did not answer for. */
const backoff = (attempt: number): Promise<void> => {
  const waitMs = backoffMs(attempt, { baseMs: FRONT_RETRY_BASE_MS, maxMs: FRONT_RETRY_MAX_MS });
  return new Promise((resolve) => setTimeout(resolve, waitMs));
};

/** How a whole load runs: `pause` every `pauseEvery` rows; `begin` and `end` told as it does. */
interface LoadOptions {
  pause?: () => Promise<void>;
  pauseEvery?: number;
  /** Told when this load begins (after any asked for before it), before its first key. */
  begin?: () => void;
  /** Told when this load has found every key, before any load asked for after it begins. */
  end?: () => void;
}

export class LocalDirectory {
  readonly index: DirectoryIndex;
  readonly localHolder: number;
  /**
   * Told the local visibility of every key at load (`loaded`) and of every key a command changes
   * (the change feed).
   */
  observer:
    | ((hash: string, identifierType: string, visibility: IndexVisibility, loaded: boolean) => void)
    | null = null;
  /**
   * While a whole load runs: the keys a change was read for meanwhile. What that read found is
   * newer than a page the load read before it, and the load may have passed the key already: the
   * load leaves such a key as the change left it, and does not sweep it away.
   */
  private changedWhileLoading: Set<string> | null = null;
  /** The whole load under way, if one is: the next waits for it (one set of marks at a time). */
  private loading: Promise<number> = Promise.resolve(0);
  /**
   * Rows that commits changed before the index was loaded: applied once it is, since an index
   * taken whole from an image would not show them (and the change feed must be told of them).
   */
  private early: DirectoryRow[] | null = [];
  /** Cluster mode: keys other instances changed, waiting to be read again (in this order). */
  private readonly heard = new Set<string>();
  private hearing = false;
  /** Cluster mode: what waits for a key's next read (a command's answer, `apply`), by hash. */
  private readonly waiting = new Map<string, (() => void)[]>();
  /**
   * Embedded mode, the directory image's position (issue 34): per partition, the seq and
   * checksum of the last record whose rows the index applied, every earlier one's applied too (a
   * worker answers its commits in their order). The partitions' tails at start (`startAt`).
   */
  private applied: number[] = new Array<number>(2 * PARTITION_COUNT).fill(0);
  /** Keys changed since the last image was taken (`imaged`): none, and the image is the index. */
  private changed = 0;

  constructor(
    private readonly log: Reads,
    private readonly holder: { member: string; endpoint: string },
    expectedKeys = 0,
    /** How a failed read waits before the next (a simulated run waits on its own clock). */
    private readonly retryWait: (attempt: number) => Promise<void> = backoff,
  ) {
    this.index = new DirectoryIndex(expectedKeys);
    this.localHolder = this.index.holderId(holder);
  }

  /**
   * Takes the index whole from an image whose position the caller found committed; the local
   * holder stays this run's (its endpoint may have changed).
   */
  adopt(image: IndexImage): void {
    if (image.holders[this.localHolder]?.member !== this.holder.member)
      throw new RangeError('the directory image was written for another member');
    this.index.adopt(image, new Map([[this.localHolder, this.holder]]));
  }

  private settle(
    hash: string,
    identifierType: string,
    visibility: IndexVisibility,
    loaded = false,
  ): void {
    this.index.set(hash, identifierType, this.localHolder, visibility);
    if (!loaded && this.changedWhileLoading !== null) {
      this.changedWhileLoading.add(hash);
      this.index.mark(hash);
    }
    this.observer?.(hash, identifierType, visibility, loaded);
  }

  /**
   * Builds the index from every committed row, in hash order; every `pauseEvery` rows it awaits
   * `pause` (so that work the observer queued can be written before more piles up). A load of
   * an index already built (cluster mode: read again after lost notes, or for the feed's new
   * writer) also removes the local keys whose rows went meanwhile: a key withdrawn while the
   * notes were lost was otherwise found by every lookup here until a restart (found by the
   * simulator, issue 30). Commands go on meanwhile: a key one changes is kept as its change read
   * it (changedWhileLoading). Two loads asked at once run one after the other.
   */
  load(options: LoadOptions = {}): Promise<number> {
    const run = this.loading.then(
      () => this.loadWhole(options),
      () => this.loadWhole(options),
    );
    this.loading = run;
    return run;
  }

  private async loadWhole(options: LoadOptions): Promise<number> {
    this.index.marking();
    this.changedWhileLoading = new Set();
    options.begin?.();
    try {
      const rows = await this.loadRows(options);
      this.index.sweep(this.localHolder);
      options.end?.();
      return rows;
    } finally {
      this.changedWhileLoading = null;
    }
  }

  private async loadRows(options: LoadOptions): Promise<number> {
    const pauseEvery = options.pauseEvery ?? 50_000;
    let hash = '';
    let type = '';
    let best: IndexVisibility = 'none';
    let rows = 0;
    let start: string | undefined;
    for (;;) {
      const range = { limit: DIRECTORY_READ_PAGE_ROWS, ...(start === undefined ? {} : { start }) };
      const page = await this.log.loadRange('directory', range);
      for (const { key, bytes } of page) {
        const rowHash = key.slice(0, key.indexOf('/'));
        if (rowHash !== hash) {
          if (hash !== '') this.settleLoaded(hash, type, best);
          hash = rowHash;
          best = 'none';
        }
        const row = directoryRows.read(key, bytes);
        type = row.t;
        if (RANK[row.v] > RANK[best]) best = row.v;
        rows++;
        if (options.pause !== undefined && rows % pauseEvery === 0) await options.pause();
      }
      if (page.length < DIRECTORY_READ_PAGE_ROWS) break;
      // The next page starts just after this one's last key.
      start = `${page[page.length - 1]!.key}\u0000`;
    }
    if (hash !== '') this.settleLoaded(hash, type, best);
    return rows;
  }

  /**
   * A key as a whole load found it: settled, and marked found (DirectoryIndex.sweep); left as it
   * is when a change was read for it meanwhile (newer than the load's page).
   */
  private settleLoaded(hash: string, identifierType: string, visibility: IndexVisibility): void {
    if (this.changedWhileLoading?.has(hash) === true) return;
    this.settle(hash, identifierType, visibility, true);
    this.index.mark(hash);
  }

  /**
   * Re-reads the rows of every key a command changed: at once from a log that reads in place;
   * from one across a network (cluster mode) in turn with the keys heard from other instances,
   * never holding the thread that serves HTTP (issue 29); then what it returns resolves once each
   * key was read after the call (or given up on), so that the command's answer can wait for it.
   */
  apply(
    changed: readonly DirectoryRow[],
    at?: { partition: number; seq: number; check: number },
  ): Promise<void> | undefined {
    this.changed += changed.length;
    if (at !== undefined && at.seq > this.applied[2 * at.partition]!) {
      this.applied[2 * at.partition] = at.seq;
      this.applied[2 * at.partition + 1] = at.check;
    }
    if (this.early !== null) {
      this.early.push(...changed);
      return undefined;
    }
    if (!(this.log instanceof ReadsInPlace)) {
      const hashes = [...new Set(changed.map((row) => row.identifierHash))];
      const read = hashes.map(
        (hash) => new Promise<void>((resolve) => this.waitFor(hash, resolve)),
      );
      for (const hash of hashes) this.heard.add(hash);
      if (!this.hearing) void this.rereadHeard();
      return Promise.all(read).then(() => undefined);
    }
    for (const hash of new Set(changed.map((r) => r.identifierHash))) {
      try {
        this.reread(hash, changed.find((r) => r.identifierHash === hash)!.identifierType);
      } catch (error) {
        // Cluster mode: the database went away after the commit. The key is read again once it
        // answers, as a key another instance changed would be (issue 29).
        if (!unreachable(error)) throw error;
        this.heard.add(hash);
        if (!this.hearing) void this.rereadHeard();
      }
    }
    return undefined;
  }

  /** The partitions' tails before any worker could commit: what the index holds at least. */
  startAt(tails: readonly number[]): void {
    for (let p = 0; 2 * p < tails.length; p++) {
      if (tails[2 * p]! <= this.applied[2 * p]!) continue;
      this.applied[2 * p] = tails[2 * p]!;
      this.applied[2 * p + 1] = tails[2 * p + 1]!;
    }
  }

  /** The image's position: what `applied` says now. */
  get position(): number[] {
    return [...this.applied];
  }

  /** Keys changed since the last image was taken. */
  get changes(): number {
    return this.changed;
  }

  /** An image of the index as it was when `changes` keys had changed was written. */
  imaged(changes: number): void {
    this.changed -= changes;
  }

  /**
   * After the index was taken from an image: reads again every key a commit after the image's
   * position changed (`partitions`: per partition, the seq and checksum it was taken at), as
   * each commit listed them (`directory_changes`); how many keys.
   */
  async catchUp(partitions: readonly number[]): Promise<number> {
    const hashes = new Set<string>();
    for (let p = 0; 2 * p < partitions.length; p++)
      await listedKeys(this.log, directoryChangeRows.after(p, partitions[2 * p]!), hashes);
    for (const hash of hashes) {
      const rows = await this.log.loadRange('directory', { start: `${hash}/`, end: `${hash}0` });
      this.settleRows(hash, '', rows);
    }
    this.changed += hashes.size;
    return hashes.size;
  }

  private waitFor(hash: string, read: () => void): void {
    const waiting = this.waiting.get(hash);
    if (waiting === undefined) this.waiting.set(hash, [read]);
    else waiting.push(read);
  }

  /**
   * Cluster mode (P22): re-reads the keys another instance's commit changed, as told by its
   * note (postgres-log.ts), which names each key by its hash alone.
   */
  applyHashes(hashes: readonly string[]): void {
    if (this.early !== null) {
      this.apply(
        hashes.map((hash) => ({
          key: hash,
          identifierHash: hash,
          identifierType: '',
          visibility: null,
        })),
      );
      return;
    }
    for (const hash of hashes) this.heard.add(hash);
    if (!this.hearing) void this.rereadHeard();
  }

  /**
   * Reads again, one at a time and in the order heard, the keys other instances changed: a key
   * the database did not answer for is tried again with backoff until it does; a key heard again
   * while read is read once more after.
   */
  private async rereadHeard(): Promise<void> {
    this.hearing = true;
    let attempt = 0;
    while (this.heard.size > 0) {
      const hash = this.heard.values().next().value!;
      this.heard.delete(hash);
      // What waited before this read began is answered by it; what comes meanwhile, by the next.
      const waiting = this.waiting.get(hash) ?? [];
      this.waiting.delete(hash);
      try {
        const rows = await this.log.loadRange('directory', { start: `${hash}/`, end: `${hash}0` });
        this.settleRows(hash, '', rows);
        attempt = 0;
        for (const read of waiting) read();
      } catch (error) {
        if (!unreachable(error)) {
          for (const read of waiting) read();
          continue;
        }
        for (const read of waiting) this.waitFor(hash, read);
        this.heard.add(hash);
        await this.retryWait(attempt++);
      }
    }
    this.hearing = false;
  }

  /**
   * A key is as visible as its most visible row. Its type is the one given; for a key named by
   * its hash alone, its rows', or once it has none left the one the index holds it under (a key
   * the index does not hold and that has no rows stays out).
   */
  private reread(hash: string, type: string): void {
    this.settleRows(hash, type, this.log.scan('directory', { start: `${hash}/`, end: `${hash}0` }));
  }

  /** What reread concludes from the key's rows. */
  private settleRows(
    hash: string,
    type: string,
    rows: Iterable<{ key: string; bytes: Buffer }>,
  ): void {
    let best: IndexVisibility = 'none';
    let rowType: string | null = null;
    for (const { key, bytes } of rows) {
      const row = directoryRows.read(key, bytes);
      rowType ??= row.t;
      if (RANK[row.v] > RANK[best]) best = row.v;
    }
    const known = type !== '' ? type : (rowType ?? this.index.typeOf(hash));
    if (known !== null) this.settle(hash, known, best);
  }

  /**
   * The index is loaded (built or adopted) and the change feed's load is over: the rows commits
   * changed meanwhile are applied now, and from here on as they come.
   */
  ready(): void {
    const early = this.early ?? [];
    this.early = null;
    if (early.length > 0) this.apply(early);
  }
}
