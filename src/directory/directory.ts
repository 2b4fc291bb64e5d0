// The front end's directory: the in-memory index, loaded from the committed `directory` rows at
// start and kept current from the rows each command reports. Several registrations of one key
// (two subjects with one phone number) are separate rows; the key is as visible as its most
// visible row, and leaves the index only when its last row goes.
import type { DirectoryRow } from '../actors/types.js';
import type { Log } from '../log/log.js';
import { unframeRow } from '../log/record.js';
import { DirectoryIndex, type IndexImage, type IndexVisibility } from './index.js';

interface StoredRow {
  t: string;
  v: 'public' | 'network';
}

const RANK: Record<IndexVisibility, number> = { none: 0, network: 1, public: 2 };

export class LocalDirectory {
  readonly index: DirectoryIndex;
  readonly localHolder: number;
  /**
   * Told the local visibility of every key at load and
   * of every key a command changes (the change feed).
   */
  observer: ((hash: string, identifierType: string, visibility: IndexVisibility) => void) | null =
    null;
  /**
   * Rows that commits changed before the index was loaded: applied once it is, since an index
   * taken whole from an image would not show them (and the change feed must be told of them).
   */
  private early: DirectoryRow[] | null = [];

  constructor(
    private readonly log: Log,
    private readonly holder: { member: string; endpoint: string },
    expectedKeys = 0,
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

  private settle(hash: string, identifierType: string, visibility: IndexVisibility): void {
    this.index.set(hash, identifierType, this.localHolder, visibility);
    this.observer?.(hash, identifierType, visibility);
  }

  /**
   * Builds the index from every committed row, in hash order; every `pauseEvery` rows it awaits
   * `pause` (so that work the observer queued can be written before more piles up).
   */
  async load(options: { pause?: () => Promise<void>; pauseEvery?: number } = {}): Promise<number> {
    const pauseEvery = options.pauseEvery ?? 50_000;
    let hash = '';
    let type = '';
    let best: IndexVisibility = 'none';
    let rows = 0;
    for (const { key, bytes } of this.log.scan('directory')) {
      const rowHash = key.slice(0, key.indexOf('/'));
      if (rowHash !== hash) {
        if (hash !== '') this.settle(hash, type, best);
        hash = rowHash;
        best = 'none';
      }
      const row = unframeRow<StoredRow>('directory', key, bytes);
      type = row.t;
      if (RANK[row.v] > RANK[best]) best = row.v;
      rows++;
      if (options.pause !== undefined && rows % pauseEvery === 0) await options.pause();
    }
    if (hash !== '') this.settle(hash, type, best);
    return rows;
  }

  /** Re-reads the rows of every key a command changed. */
  apply(changed: readonly DirectoryRow[]): void {
    if (this.early !== null) {
      this.early.push(...changed);
      return;
    }
    for (const hash of new Set(changed.map((r) => r.identifierHash)))
      this.reread(hash, changed.find((r) => r.identifierHash === hash)!.identifierType);
  }

  /**
   * Cluster mode (P22): re-reads the keys another instance's commit changed, as told by its
   * note (postgres-log.ts), which names each key by its hash alone.
   */
  applyHashes(hashes: readonly string[]): void {
    this.apply(
      hashes.map((hash) => ({
        key: hash,
        identifierHash: hash,
        identifierType: '',
        visibility: null,
      })),
    );
  }

  /**
   * A key is as visible as its most visible row. Its type is the one given; for a key named by
   * its hash alone, its rows', or once it has none left the one the index holds it under (a key
   * the index does not hold and that has no rows stays out).
   */
  private reread(hash: string, type: string): void {
    let best: IndexVisibility = 'none';
    let rowType: string | null = null;
    for (const { key, bytes } of this.log.scan('directory', {
      start: `${hash}/`,
      end: `${hash}0`,
    })) {
      const row = unframeRow<StoredRow>('directory', key, bytes);
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
