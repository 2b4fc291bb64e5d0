// `path-node verify --data-dir D` (issue 28): a stopped node's data directory, or a backup,
// checked offline and read-only: every log record's checksum and link, every snapshot and the
// record it names, every partition's head (the walk of the scrub, src/actors/scrub.ts, at full
// speed), every row of every table against its checksum, and every view and usage row against
// the log (none may name a record beyond its partition's last). Each damaged item is printed by
// partition and seq, or by table and key (keys are hashes and references, never a clear
// identifier), then a summary; the exit code says whether the directory is sound.
import { existsSync } from 'node:fs';
import { VERIFY_STEP_RECORDS } from '../config.js';
import { join, resolve } from 'node:path';
import { logReads, PartitionWalk, RowWalk, type RowFault } from '../actors/scrub.js';
import type { ChainFault } from '../actors/chain.js';
import { DataDirInUse, lockDataDir } from '../log/data-dir.js';
import { ENV_FILE, LmdbLog, withEnvironment, type LmdbEnvironment } from '../log/lmdb-log.js';
import { holdsLog, PARTITION_COUNT, TABLES, type Log } from '../log/log.js';
import { frameHolds } from '../log/record.js';
import { LOG_FORMAT, NodeStore } from '../store.js';
import { lmdbStoreTables } from '../log/node-tables.js';

/** The directory could not be looked at (none there, or a node serves it). */
export class VerifyRefused extends Error {
  override name = 'VerifyRefused';
}

/** A damaged item: of the log (ChainFault), or a table row (RowFault when it names a record). */
export type Damaged =
  ChainFault | RowFault | { item: 'row'; table: string; key: string; message: string };

export interface Verified {
  sound: boolean;
  partitions: number;
  records: number;
  snapshots: number;
  heads: number;
  rows: number;
  damaged: number;
}

/** Checks the data directory, telling `each` of every damaged item; answers the summary. */
export async function verifyDataDir(
  dataDir: string,
  each: (damaged: Damaged) => void,
): Promise<Verified> {
  if (!existsSync(join(dataDir, ENV_FILE)))
    throw new VerifyRefused(`no node data in ${resolve(dataDir)}`);
  let lock;
  try {
    lock = lockDataDir(dataDir);
  } catch (error) {
    if (!(error instanceof DataDirInUse)) throw error;
    throw new VerifyRefused(`${error.message}: stop it first, or verify a backup of it`);
  }
  try {
    return await withEnvironment(dataDir, (env) => verifyEnvironment(env, each), {
      readOnly: true,
    });
  } finally {
    lock.release();
  }
}

function verifyEnvironment(env: LmdbEnvironment, each: (damaged: Damaged) => void): Verified {
  const log = new LmdbLog(env);
  const format = new NodeStore(lmdbStoreTables(env)).logFormat();
  const verified: Verified = {
    sound: true,
    partitions: PARTITION_COUNT,
    records: 0,
    snapshots: 0,
    heads: 0,
    rows: 0,
    damaged: 0,
  };
  const found = (damaged: Damaged) => {
    verified.sound = false;
    verified.damaged++;
    each(damaged);
  };
  if (format !== LOG_FORMAT) {
    // Never served (a directory the command line made): nothing to check. Of another layout:
    // this build cannot read it, and says so rather than calling all of it damaged.
    if (format === undefined && !holdsLog(log)) return verified;
    const message = `the log is in layout ${format ?? 1}; this build reads layout ${LOG_FORMAT}`;
    found({ item: 'row', table: 'meta', key: 'log_format', message });
    return verified;
  }
  walkLog(log, verified, found);
  verifyRows(log, verified, found);
  return verified;
}

function walkLog(log: Log, verified: Verified, found: (damaged: Damaged) => void): void {
  for (let p = 0; p < PARTITION_COUNT; p++) {
    if (log.readSnapshot(p) !== undefined) verified.snapshots++;
    const walk = new PartitionWalk(logReads(log), p, found);
    while (!walk.step(VERIFY_STEP_RECORDS));
    walk.finish();
    verified.records += walk.records;
  }
}

/**
 * Every row of every table against its checksum; the rows that name the record they were
 * written with (views, usage) against the log too, as the scrub walks them (RowWalk, which
 * walks the stored answers too).
 */
function verifyRows(log: Log, verified: Verified, found: (damaged: Damaged) => void): void {
  const walked = new RowWalk(log, found);
  while (!walked.step(VERIFY_STEP_RECORDS));
  verified.rows += walked.rows;
  for (const table of TABLES) {
    if (table === 'views' || table === 'usage' || table === 'idempotency') continue;
    for (const { key, bytes } of log.scan(table)) {
      verified.rows++;
      if (table === 'heads') verified.heads++;
      if (frameHolds(bytes)) continue;
      const message = `table '${table}' row '${key}' fails its checksum (damaged at rest)`;
      found({ item: 'row', table, key, message });
    }
  }
}
