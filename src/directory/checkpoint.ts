// The directory image taken while the node runs (issue 34): a start after a kill -9 under load
// then takes the last image and reads again only the keys changed after it, instead of
// rebuilding the whole index from the tables (minutes for tens of millions of keys).
//
// Every `directory_image_interval_ms`, when keys changed (or followed members moved on) since the
// last image, the index is written a part at a time straight from its live arrays through the
// file system's threads (IndexWalk, ImageFile: no copy of it in memory, no turn of the thread
// that serves HTTP spent on it whole); in the turn the last part is written, the slots changed
// meanwhile are copied to be written again and the position taken (directory.ts, `position`: per
// partition the last record whose rows the index applied); then the change feed's entries so
// far are made durable and the image goes in place (image.ts). The `directory_changes` rows it
// covers are deleted only once it is durable. The table's `image` row names the image in use
// and the one being written, so a start never takes an image older than what was deleted: an
// image the crash caught half written is either the new one (named pending) or the old one
// (named current, its rows all still there).
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DIRECTORY_IMAGE_PART_SLOTS as PART_SLOTS, DIRECTORY_READ_PAGE_ROWS } from '../config.js';
import { PARTITION_COUNT, type Reads, type ScanRange, type TableWrite } from '../log/log.js';
import type { Network } from '../network/network.js';
import {
  directoryChangeRows,
  IMAGE_NAMES_KEY,
  imageNameRows,
  replicaChangeRows,
} from '../reads/rows.js';
import type { LocalDirectory } from './directory.js';
import {
  ImageFile,
  removeDirectoryImage,
  writeDirectoryImage,
  type ImagePosition,
} from './image.js';
import { pages } from '../reads/housekeeping.js';

export class DirectoryCheckpoints {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  /** The name of the image on disk that the table names as in use (null: none yet). */
  private current: string | null;
  /** The followed members' cursors that image was taken at. */
  private followed: string;

  constructor(
    private readonly options: {
      dataDir: string;
      log: Reads;
      directory: LocalDirectory;
      network: Network;
      logger: Logger;
      intervalMs: number;
      /** The position of the image this start took, if it took one. */
      current: ImagePosition | null;
    },
  ) {
    this.current = options.current?.name ?? null;
    this.followed = JSON.stringify(options.current?.followed ?? null);
  }

  /** Keys changed, or followed members moved on, since the image on disk was taken. */
  private changed(): boolean {
    const followed = this.options.network.imagePosition()?.followed ?? null;
    return this.options.directory.changes > 0 || JSON.stringify(followed) !== this.followed;
  }

  start(): void {
    this.timer = setInterval(() => void this.take(), this.options.intervalMs);
    this.timer.unref();
  }

  /** Takes an image now, unless one is being taken or no key changed since the last. */
  take(): Promise<void> {
    if (this.running !== null) return this.running;
    if (this.stopped || !this.changed()) return Promise.resolve();
    this.running = this.checkpoint()
      .catch((error: unknown) => {
        // Costs only the next start's speed: more keys to read again, or a rebuild.
        const err = { message: (error as Error).message };
        this.options.logger.warn({ err }, 'directory image not written');
      })
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /**
   * The orderly stop, once the commits are drained and applied and the feed's entries written:
   * the image at the partitions' tails, unless the image in use already is the index; none when
   * no image may describe the index (Network.imagePosition).
   */
  async stop(tails: number[]): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    await this.running;
    const { directory, network, dataDir } = this.options;
    const rest = network.imagePosition();
    if (rest === null) {
      await removeDirectoryImage(dataDir);
      return;
    }
    if (!this.changed() && this.current !== null) return;
    const { changes } = directory;
    const position = { ...rest, partitions: tails, name: randomUUID() };
    await this.naming(position);
    await writeDirectoryImage(dataDir, directory.index, position);
    await this.named(position, changes);
  }

  private async checkpoint(): Promise<void> {
    const { directory, network, logger, dataDir } = this.options;
    // No image may describe this index (a member no longer followed): none is written.
    if (network.imagePosition() === null) return;
    const started = performance.now();
    const walk = directory.index.walk();
    const file = await ImageFile.create(dataDir, walk.slots);
    try {
      for (let part = walk.part(PART_SLOTS); part !== null; part = walk.part(PART_SLOTS)) {
        await file.part(part);
        // The table grew meanwhile (or the stop began): the next round takes it.
        if (walk.abandoned || this.stopped) return await file.abandon();
      }
      // In the turn the last part was written: the index and its position as they are now.
      const end = walk.finish();
      const partitions = directory.position;
      const { changes } = directory;
      const rest = network.imagePosition();
      if (rest === null) return await file.abandon();
      const walkedMs = Math.round(performance.now() - started);
      const position = { ...rest, partitions, name: randomUUID() };
      await this.naming(position);
      await file.finish(end, position);
      await this.named(position, changes);
      const ms = Math.round(performance.now() - started);
      const fields = { keys: end.used, changes, patched: end.patches.length, walked_ms: walkedMs };
      logger.info({ ...fields, ms }, 'directory image written');
    } finally {
      await file.abandon();
    }
  }

  /**
   * Before an image goes in place: the feed's entries so far made durable (the image's feed
   * position is behind them), and the image named as pending.
   */
  private async naming(position: ImagePosition): Promise<void> {
    await this.options.network.feed.flush();
    const pending = { current: this.current, pending: position.name };
    await this.options.log.write([imageNameRows.write(IMAGE_NAMES_KEY, pending)]);
  }

  /** Once it is in place: the rows it covers deleted, and it named as the image in use. */
  private async named(position: ImagePosition, changes: number): Promise<void> {
    await this.prune(position);
    const inUse = { current: position.name, pending: null };
    await this.options.log.write([imageNameRows.write(IMAGE_NAMES_KEY, inUse)]);
    this.current = position.name;
    this.followed = JSON.stringify(position.followed);
    this.options.directory.imaged(changes);
  }

  /**
   * Deletes every `directory_changes` row the image covers: each partition's at or before its
   * position, each followed member's pages at or before its cursor, and the pages of members no
   * longer followed.
   */
  private async prune(position: ImagePosition): Promise<void> {
    const { log } = this.options;
    const followed = new Map(position.followed);
    const every = () => true;
    const ranges: [range: ScanRange, chosen: (key: string) => boolean][] = [];
    for (let p = 0; p < PARTITION_COUNT; p++)
      ranges.push([directoryChangeRows.through(p, position.partitions[2 * p]!), every]);
    for (const [member, cursor] of followed)
      ranges.push([replicaChangeRows.through(member, cursor), every]);
    ranges.push([replicaChangeRows.all, (key) => !followed.has(replicaChangeRows.memberOf(key))]);
    let deletes: TableWrite[] = [];
    for (const [range, chosen] of ranges) {
      for await (const { key } of pages(log, 'directory_changes', range)) {
        if (chosen(key)) deletes.push({ table: 'directory_changes', key, bytes: null });
        if (deletes.length < DIRECTORY_READ_PAGE_ROWS) continue;
        await log.write(deletes);
        deletes = [];
      }
    }
    if (deletes.length > 0) await log.write(deletes);
  }
}
