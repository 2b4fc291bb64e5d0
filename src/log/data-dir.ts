// Ownership of a data directory (P16): one serving process per directory, and the directory and
// the node's files readable by its user alone.
//
// Why an OS lock and not a pid file: `serve.lock` is locked with an advisory lock (on Linux an
// open-file-description fcntl lock, flock elsewhere, from fs-native-extensions) and held for the
// life of the process. The kernel drops it when the holder exits in any way, kill -9 included,
// so a restart never meets a stale lock, and no one has to guess whether a recorded pid still
// belongs to the holder (pids are reused) or race another starter between check and write. The
// pid written into the file only names the holder in the refusal.
//
// The lock file is never removed: unlinking it while another starter has it open would let two
// processes each hold a lock, on two different files.
import {
  chmodSync,
  closeSync,
  constants,
  ftruncateSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { tryLock } from 'fs-native-extensions';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../config.js';
import { ENV_FILE, ENV_LOCK_FILE } from './lmdb-log.js';

export const LOCK_FILE = 'serve.lock';

/** Another `serve` holds the directory; the message names the directory and its pid. */
export class DataDirInUse extends Error {
  override name = 'DataDirInUse';
}

export interface DataDirLock {
  /** Lets the next `serve` in; the process exiting does the same. */
  release(): void;
}

/** The data directory is open to other users and this process cannot make it private (P16). */
export class DataDirOpen extends Error {
  override name = 'DataDirOpen';
}

/** A data directory made private at start: where it is, and its mode before and after. */
export interface NarrowedDir {
  data_dir: string;
  mode_before: string;
  mode_after: string;
}

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, '0');

/**
 * Makes the data directory private to the node's user (P16): created PRIVATE_DIR_MODE when it is
 * missing, and narrowed to it when it already exists with any permission for group or others
 * (made by hand before the first start, or by a node before issue 28). The secrets inside are
 * 0600 files, but an open directory still lets others list them and follow the node's changes.
 * Returns what it narrowed, or null. A directory it cannot narrow (not its owner, a read-only
 * file system) throws DataDirOpen: the node does not start in a directory it cannot keep private.
 */
export function privateDataDir(dataDir: string): NarrowedDir | null {
  mkdirSync(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const path = resolve(dataDir);
  const before = statSync(path).mode;
  if ((before & 0o077) === 0) return null;
  try {
    chmodSync(path, PRIVATE_DIR_MODE);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new DataDirOpen(
      `data directory ${path} is open to other users (mode ${octal(before)}) and this process ` +
        `cannot narrow it to ${octal(PRIVATE_DIR_MODE)} (${reason}: not its owner, or a ` +
        `read-only file system); make it private to the node's user or choose another ` +
        `--data-dir (P16)`,
    );
  }
  return { data_dir: path, mode_before: octal(before), mode_after: octal(PRIVATE_DIR_MODE) };
}

/** Takes the directory for this process, or throws DataDirInUse. Opens nothing else. */
export function lockDataDir(dataDir: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  // No O_TRUNC: the file may hold the current holder's pid, read below when the lock is refused.
  const fd = openSync(
    join(dataDir, LOCK_FILE),
    constants.O_RDWR | constants.O_CREAT,
    PRIVATE_FILE_MODE,
  );
  let locked = false;
  try {
    locked = tryLock(fd);
    if (!locked) {
      // Empty only in the instant between the holder's lock and its write.
      const holder = readFileSync(fd, 'utf8').trim() || 'not yet recorded';
      throw new DataDirInUse(
        `data directory ${resolve(dataDir)} is in use by another ` +
          `path-node serve (pid ${holder}); one node per data directory (P16)`,
      );
    }
    ftruncateSync(fd, 0);
    writeSync(fd, `${process.pid}\n`, 0);
  } finally {
    if (!locked) closeSync(fd);
  }
  return { release: () => closeSync(fd) };
}

/**
 * Narrows the node's own files to PRIVATE_FILE_MODE where a data directory made before P16 left
 * them open to others (new files are private from the start: see PRIVATE_UMASK); returns the
 * names it narrowed. The directory itself is privateDataDir's.
 */
export function tightenDataDir(dataDir: string): string[] {
  const narrowed: string[] = [];
  for (const name of [ENV_FILE, ENV_LOCK_FILE, LOCK_FILE]) {
    const path = join(dataDir, name);
    let stat;
    try {
      stat = lstatSync(path);
    } catch {
      continue;
    }
    if (!stat.isFile() || (stat.mode & 0o077) === 0) continue;
    chmodSync(path, PRIVATE_FILE_MODE);
    narrowed.push(name);
  }
  return narrowed;
}
