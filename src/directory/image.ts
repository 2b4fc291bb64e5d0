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
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
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
import { recordCheck } from '../log/record.js';
import {
  imageArrayLengths,
  WORDS_PER_KEY,
  type DirectoryIndex,
  type Holder,
  type IndexImage,
  type IndexPart,
  type IndexWalkEnd,
} from './index.js';

export const IMAGE_FILE = 'directory.image';
const TEMP_FILE = `${IMAGE_FILE}.tmp`;
const MAGIC = Buffer.from('PATHDIX2', 'latin1');
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
    const crc = last !== undefined && last.bytes.length >= U32 ? recordCheck(last.bytes) : 0;
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
    if (bytes === undefined || bytes.length < U32 || recordCheck(bytes) !== partitions[2 * p + 1])
      return false;
  }
  return true;
}

/**
 * An image being written (issue 34): the live index's arrays a part at a time, straight from
 * them to the file (no copy of the index in memory), then the slots that changed meanwhile
 * (IndexWalk), then the header, then the checksum, read back from the file, then atomically in
 * place (temporary file, sync, rename, sync of the directory). The file system's own threads do
 * the writing: the thread that serves HTTP never waits on the disk, and holds no turn longer
 * than one part's checksum.
 *
 * Layout: MAGIC, the slot count, the keys, the values, the occupied bits (the index's own words,
 * in this machine's byte order), the header (JSON), its length, and a CRC-32 of all before it.
 */
export class ImageFile {
  private closed = false;

  private constructor(
    private readonly dataDir: string,
    private readonly file: FileHandle,
    private readonly slots: number,
  ) {}

  static async create(dataDir: string, slots: number): Promise<ImageFile> {
    const file = await open(join(dataDir, TEMP_FILE), 'w+', PRIVATE_FILE_MODE);
    const prefix = Buffer.alloc(PREFIX_BYTES);
    MAGIC.copy(prefix, 0);
    prefix.writeUInt32BE(slots, MAGIC.length);
    await writeAt(file, prefix, 0);
    return new ImageFile(dataDir, file, slots);
  }

  /** One part of the live arrays, as the walk gave it (views, written as they are now). */
  async part(part: IndexPart): Promise<void> {
    const at = arrayOffsets(this.slots);
    await writeAt(this.file, bytesOf(part.keys), at.keys + part.from * WORDS_PER_KEY * U32);
    await writeAt(this.file, bytesOf(part.values), at.values + part.from * U32);
    await writeAt(this.file, bytesOf(part.bits), at.bits + (part.from >>> 5) * U32);
  }

  /** The walk's end: the slots changed since their part was written, then the header. */
  async finish(end: IndexWalkEnd, position: ImagePosition): Promise<void> {
    const at = arrayOffsets(this.slots);
    for (const patch of end.patches) {
      await writeAt(this.file, bytesOf(patch.key), at.keys + patch.slot * WORDS_PER_KEY * U32);
      await writeAt(this.file, word(patch.value), at.values + patch.slot * U32);
      await writeAt(this.file, word(patch.bits), at.bits + (patch.slot >>> 5) * U32);
    }
    const { used, holders, contributions } = end;
    const header: Header = {
      format: FORMAT,
      endianness: endianness(),
      slots: this.slots,
      used,
      holders,
      contributions,
      position,
    };
    const headerBytes = Buffer.from(JSON.stringify(header), 'utf8');
    const length = Buffer.alloc(U32);
    length.writeUInt32BE(headerBytes.length, 0);
    await writeAt(this.file, Buffer.concat([headerBytes, length]), at.end);
    const checked = at.end + headerBytes.length + U32;
    const trailer = Buffer.alloc(U32);
    trailer.writeUInt32BE(await checksum(this.file, checked), 0);
    await writeAt(this.file, trailer, checked);
    await this.file.sync();
    this.closed = true;
    await this.file.close();
    await rename(join(this.dataDir, TEMP_FILE), join(this.dataDir, IMAGE_FILE));
    await syncDirectory(this.dataDir);
  }

  /** Given up (the index grew, the node stops, a write failed): the temporary file goes. */
  async abandon(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.file.close();
    await rm(join(this.dataDir, TEMP_FILE), { force: true });
  }
}

/** Writes the image of an index that does not change meanwhile (an orderly stop, tests). */
export async function writeDirectoryImage(
  dataDir: string,
  index: DirectoryIndex,
  position: ImagePosition,
): Promise<void> {
  const walk = index.walk();
  const file = await ImageFile.create(dataDir, walk.slots);
  try {
    for (let part = walk.part(Infinity); part !== null; part = walk.part(Infinity))
      await file.part(part);
    await file.finish(walk.finish(), position);
  } finally {
    await file.abandon();
  }
}

/** Removes the image (an index that no image may describe, see Network.imageable). */
export async function removeDirectoryImage(dataDir: string): Promise<void> {
  await rm(join(dataDir, IMAGE_FILE), { force: true });
  await syncDirectory(dataDir);
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
    const slots = prefix.readUInt32BE(MAGIC.length);
    if (slots === 0 || (slots & (slots - 1)) !== 0)
      return { kind: 'damaged', reason: 'not a directory image' };
    const at = arrayOffsets(slots);
    const tail = Buffer.alloc(2 * U32);
    if (size < at.end + tail.length) return { kind: 'damaged', reason: 'truncated' };
    await readFully(file, tail, size - tail.length);
    const headerLength = tail.readUInt32BE(0);
    const expected = at.end + headerLength + tail.length;
    if (size < expected) return { kind: 'damaged', reason: 'truncated' };
    if (size > expected) return { kind: 'damaged', reason: 'longer than its header says' };
    const lengths = imageArrayLengths(slots);
    const arrays = [lengths.keys, lengths.values, lengths.bits].map((n) => new Uint32Array(n));
    let crc = crc32(prefix);
    let offset = PREFIX_BYTES;
    for (const array of arrays) {
      const bytes = bytesOf(array);
      await readFully(file, bytes, offset);
      crc = crc32(bytes, crc);
      offset += bytes.length;
    }
    const headerBytes = Buffer.alloc(headerLength);
    await readFully(file, headerBytes, offset);
    crc = crc32(tail.subarray(0, U32), crc32(headerBytes, crc));
    if (tail.readUInt32BE(U32) !== crc) return { kind: 'damaged', reason: 'checksum mismatch' };
    const header = parseHeader(headerBytes);
    if (header === null || header.slots !== slots)
      return { kind: 'damaged', reason: 'unreadable header' };
    const [keys, values, occupiedBits] = arrays as [Uint32Array, Uint32Array, Uint32Array];
    const { used, holders, contributions, position } = header;
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

/** Where each array begins in the file, and where they end (the header's place). */
function arrayOffsets(slots: number): { keys: number; values: number; bits: number; end: number } {
  const lengths = imageArrayLengths(slots);
  const keys = PREFIX_BYTES;
  const values = keys + lengths.keys * U32;
  const bits = values + lengths.values * U32;
  return { keys, values, bits, end: bits + lengths.bits * U32 };
}

const word = (value: number) => bytesOf(Uint32Array.of(value));

/** Writes all of `bytes` at `position`, a few megabytes a call. */
async function writeAt(file: FileHandle, bytes: Buffer, position: number): Promise<void> {
  for (let done = 0; done < bytes.length;) {
    const length = Math.min(bytes.length - done, DIRECTORY_IMAGE_WRITE_BYTES);
    done += (await file.write(bytes, done, length, position + done)).bytesWritten;
  }
}

/** The CRC-32 of the file's first `length` bytes, read back a few megabytes a turn. */
async function checksum(file: FileHandle, length: number): Promise<number> {
  const chunk = Buffer.alloc(DIRECTORY_IMAGE_WRITE_BYTES);
  let crc = 0;
  for (let done = 0; done < length;) {
    const want = Math.min(chunk.length, length - done);
    const { bytesRead } = await file.read(chunk, 0, want, done);
    if (bytesRead === 0) throw new Error('the directory image being written ends early');
    crc = crc32(chunk.subarray(0, bytesRead), crc);
    done += bytesRead;
  }
  return crc;
}

/** Reads `target.length` bytes from `position` in chunks; returns how many it found. */
async function readFully(file: FileHandle, target: Buffer, position: number): Promise<number> {
  let done = 0;
  while (done < target.length) {
    const length = Math.min(target.length - done, DIRECTORY_IMAGE_CHUNK_BYTES);
    const { bytesRead } = await file.read(target, done, length, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

/** Syncs a directory (a rename or removal in it made durable) through the file system's threads. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
