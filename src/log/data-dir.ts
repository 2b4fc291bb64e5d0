// Ownership of a data directory (P16): one serving process per directory, and the node's files
// readable by its user alone.
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
 * names it narrowed. A directory that already existed is the operator's and keeps its mode: it
 * may be a shared place (`--data-dir /srv`), and with private files it shows names alone.
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
