// Reads of the `directory_changes` table (issue 34): the keys commits and followed pages listed
// after a directory image's position, and the image the table names. Read by a start that takes
// the image (directory.ts, follower.ts, network.ts) and written by the checkpoints
// (checkpoint.ts).
import type { Reads, ScanRange } from '../log/log.js';
import {
  directoryChangeRows,
  IMAGE_NAMES_KEY,
  imageNameRows,
  type ImageNames,
} from '../reads/rows.js';
import { pages } from '../reads/housekeeping.js';

/** What the `directory_changes` table names as the image in use and the one being written. */
export async function loadImageNames(log: Reads): Promise<ImageNames | undefined> {
  const bytes = await log.load('directory_changes', IMAGE_NAMES_KEY);
  return bytes === undefined ? undefined : imageNameRows.read(IMAGE_NAMES_KEY, bytes);
}

/**
 * Adds to `into` every key the `directory_changes` rows in `range` list (a partition's commits
 * or a followed member's pages, after an image's position), read a page at a time.
 */
export async function listedKeys(log: Reads, range: ScanRange, into: Set<string>): Promise<void> {
  for await (const { key, bytes } of pages(log, 'directory_changes', range))
    for (const hash of directoryChangeRows.read(key, bytes).h) into.add(hash);
}
