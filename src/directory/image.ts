// The directory image: the index's typed arrays, holders and contributions, written to a file
// in the data directory while the node runs (a checkpoint, directory/checkpoint.ts) and at an
// orderly stop, and taken whole at the next start instead of rebuilding the index key by key
// from the `directory` and `replica` tables (tens of seconds for tens of millions of keys).
//
// Fault model. The image is a cache of what those tables say, never a source of truth:
// - It carries the position it reflects: per partition the seq and checksum of the last record
//   whose directory rows it holds (every `directory` row is written in the same commit as a
//   record, and beside them a `directory_changes` row listing their keys), the change feed's
//   last seq, and each followed member's cursor (every page of `replica` rows is written with its
//   cursor and a `directory_changes` row listing its keys). A start uses it only when the log
//   holds those very records (the same history), the feed has gone no further back and it was
//   taken of the members followed now, none of their committed cursors behind it; it then reads
//   again every key the commits and pages after its position listed (issue 34: a start after a
//   kill -9 under load costs the keys changed since the last image, not a rebuild). Otherwise
//   the index is rebuilt from the tables.
// - Its name (random) must be one the `directory_changes` table names as the image in use or
//   the one being written: an image older than the rows already pruned is never taken.
// - It is written to a temporary file, synced, then renamed over the old one (and the directory
//   synced): a crash at any point leaves the old image, the new one, or none, never a torn one.
// - A CRC-32 covers every byte; a file that fails it, is cut short or is longer than its header
//   says is ignored (rebuilt from the tables, never trusted).
import { closeSync, fsyncSync, openSync, rmSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { endianness } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import {
  DIRECTORY_IMAGE_CHUNK_BYTES,
  DIRECTORY_IMAGE_WRITE_BYTES,
  PRIVATE_FILE_MODE,
} from '../config.js';
import { lastRecord, type LmdbEnvironment } from '../log/lmdb-log.js';
import { PARTITION_COUNT } from '../log/log.js';
import { imageArrayLengths, type Holder, type IndexImage } from './index.js';

export const IMAGE_FILE = 'directory.image';
const TEMP_FILE = `${IMAGE_FILE}.tmp`;
const MAGIC = Buffer.from('PATHDIX1', 'latin1');
const FORMAT = 2;
const U32 = 4; // tidy: format (bytes of a 32-bit word)
const PREFIX_BYTES = MAGIC.length + U32;

/** The committed state an image reflects (see the fault model above). */
export interface ImagePosition {
  /** The local member the index was built for. */
  member: string;
  /**
   * Per partition, the seq and checksum of the last record whose directory rows the image holds,
   * every earlier one's too (0, 0: none).
   */
  partitions: number[];
  /** The change feed's last seq. */
  feed: number;
  /** Each followed member and its cursor, sorted by member. */
  followed: [member: string, cursor: number][];
  /** The image's own name, which the `directory_changes` table must name (imageNameRows). */
  name: string;
}

interface Header {
  format: number;
  endianness: string;
  slots: number;
  used: number;
  holders: Holder[];
  contributions: [string, number][];
  position: ImagePosition;
}

export type ImageRead =
  | { kind: 'read'; image: IndexImage; position: ImagePosition }
  | { kind: 'absent' }
  | { kind: 'damaged'; reason: string };

/**
 * The last record of every partition: its seq and the checksum its frame opens with. Two
 * histories that reach the same seqs differ in these checksums.
 */
export function partitionTails(env: LmdbEnvironment): number[] {
  const tails: number[] = [];
  for (let p = 0; p < PARTITION_COUNT; p++) {
    const last = lastRecord(env, p);
    const seq = last?.seq ?? 0;
    const crc = last !== undefined && last.bytes.length >= U32 ? last.bytes.readUInt32BE(0) : 0;
    tails.push(seq, crc);
  }
  return tails;
}

/**
 * Whether the log holds, in every partition, the record an image's position names, with the
 * checksum it names (one read a partition): the history the image was taken of.
 */
export function recordsHold(env: LmdbEnvironment, partitions: readonly number[]): boolean {
  for (let p = 0; p < PARTITION_COUNT; p++) {
    const seq = partitions[2 * p];
    if (seq === undefined || !Number.isInteger(seq) || seq < 0) return false;
    if (seq === 0) continue;
    const bytes = env.log.get([p, seq]);
    if (
      bytes === undefined ||
      bytes.length < U32 ||
      bytes.readUInt32BE(0) !== partitions[2 * p + 1]
    )
      return false;
  }
  return true;
}

/**
 * Writes the image atomically (temporary file, sync, rename, sync of the directory), in chunks
 * through the file system's own threads: the thread that serves HTTP never waits on the disk.
 */
export async function writeDirectoryImage(
  dataDir: string,
  image: IndexImage,
  position: ImagePosition,
): Promise<void> {
  const header: Header = {
    format: FORMAT,
    endianness: endianness(),
    slots: image.slots,
    used: image.used,
    holders: image.holders,
    contributions: image.contributions,
    position,
  };
  const headerBytes = Buffer.from(JSON.stringify(header), 'utf8');
  const prefix = Buffer.alloc(PREFIX_BYTES);
  MAGIC.copy(prefix, 0);
  prefix.writeUInt32BE(headerBytes.length, MAGIC.length);
  const parts = [
    prefix,
    headerBytes,
    ...[image.keys, image.values, image.occupiedBits].map(bytesOf),
  ];
  const temp = join(dataDir, TEMP_FILE);
  const file = await open(temp, 'w', PRIVATE_FILE_MODE);
  try {
    let crc = 0;
    for (const part of parts) crc = await writeAll(file, part, crc);
    const trailer = Buffer.alloc(U32);
    trailer.writeUInt32BE(crc, 0);
    await writeAll(file, trailer, crc);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(temp, join(dataDir, IMAGE_FILE));
  syncDirectory(dataDir);
}

/** Removes the image (an index that no image may describe, see Network.imageable). */
export function removeDirectoryImage(dataDir: string): void {
  rmSync(join(dataDir, IMAGE_FILE), { force: true });
  syncDirectory(dataDir);
}

/**
 * Reads and checks the image, straight into the arrays the index will use. Asynchronous file
 * reads: the front end reads it while the workers recover their partitions.
 */
export async function readDirectoryImage(dataDir: string): Promise<ImageRead> {
  let file;
  try {
    file = await open(join(dataDir, IMAGE_FILE), 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    throw error;
  }
  try {
    const size = (await file.stat()).size;
    const prefix = Buffer.alloc(PREFIX_BYTES);
    if ((await readFully(file, prefix, 0)) < PREFIX_BYTES || !prefix.subarray(0, 8).equals(MAGIC))
      return { kind: 'damaged', reason: 'not a directory image' };
    const headerLength = prefix.readUInt32BE(MAGIC.length);
    if (PREFIX_BYTES + headerLength + U32 > size) return { kind: 'damaged', reason: 'truncated' };
    const headerBytes = Buffer.alloc(headerLength);
    await readFully(file, headerBytes, PREFIX_BYTES);
    let crc = crc32(headerBytes, crc32(prefix));
    const header = parseHeader(headerBytes);
    if (header === null) return { kind: 'damaged', reason: 'unreadable header' };
    const lengths = imageArrayLengths(header.slots);
    const arrays = [lengths.keys, lengths.values, lengths.bits].map((n) => new Uint32Array(n));
    const words = lengths.keys + lengths.values + lengths.bits;
    const expected = PREFIX_BYTES + headerLength + U32 * words + U32;
    if (size < expected) return { kind: 'damaged', reason: 'truncated' };
    if (size > expected) return { kind: 'damaged', reason: 'longer than its header says' };
    let offset = PREFIX_BYTES + headerLength;
    for (const array of arrays) {
      const bytes = bytesOf(array);
      await readFully(file, bytes, offset);
      crc = crc32(bytes, crc);
      offset += bytes.length;
    }
    const trailer = Buffer.alloc(U32);
    await readFully(file, trailer, offset);
    if (trailer.readUInt32BE(0) !== crc) return { kind: 'damaged', reason: 'checksum mismatch' };
    const [keys, values, occupiedBits] = arrays as [Uint32Array, Uint32Array, Uint32Array];
    const { slots, used, holders, contributions, position } = header;
    const image = { slots, used, keys, values, occupiedBits, holders, contributions };
    return { kind: 'read', image, position };
  } finally {
    await file.close();
  }
}

function parseHeader(bytes: Buffer): Header | null {
  let header: Header;
  try {
    header = JSON.parse(bytes.toString('utf8')) as Header;
  } catch {
    return null;
  }
  const wellFormed =
    header.format === FORMAT &&
    header.endianness === endianness() &&
    Number.isInteger(header.slots) &&
    header.slots > 0 &&
    Number.isInteger(header.used) &&
    Array.isArray(header.holders) &&
    Array.isArray(header.contributions) &&
    typeof header.position?.member === 'string' &&
    typeof header.position.name === 'string' &&
    Array.isArray(header.position.partitions) &&
    header.position.partitions.length === 2 * PARTITION_COUNT;
  return wellFormed ? header : null;
}

const bytesOf = (array: Uint32Array) =>
  Buffer.from(array.buffer, array.byteOffset, array.byteLength);

/**
 * Writes `bytes` a few megabytes at a time, each part's CRC-32 taken just before it is written
 * (so no turn of the thread holds it long); the checksum carried on.
 */
async function writeAll(
  file: Awaited<ReturnType<typeof open>>,
  bytes: Buffer,
  crc: number,
): Promise<number> {
  for (let done = 0; done < bytes.length;) {
    const end = Math.min(bytes.length, done + DIRECTORY_IMAGE_WRITE_BYTES);
    crc = crc32(bytes.subarray(done, end), crc);
    for (let at = done; at < end;) at += (await file.write(bytes, at, end - at)).bytesWritten;
    done = end;
  }
  return crc;
}

/** Reads `target.length` bytes from `position` in chunks; returns how many it found. */
async function readFully(
  file: Awaited<ReturnType<typeof open>>,
  target: Buffer,
  position: number,
): Promise<number> {
  let done = 0;
  while (done < target.length) {
    const length = Math.min(target.length - done, DIRECTORY_IMAGE_CHUNK_BYTES);
    const { bytesRead } = await file.read(target, done, length, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

function syncDirectory(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
