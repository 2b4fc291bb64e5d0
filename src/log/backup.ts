// Backups of a data directory while its node runs (issue: operators). LMDB copies its own file
// inside one read transaction: the copy is the last commit at that instant, whole, with no torn
// page, whatever the node writes meanwhile. A plain file copy of a live memory-mapped file has no
// such promise. Every write the node acknowledged before the backup began was committed and
// synced before its answer (P14), so it is in the copy.
//
// What a backup holds: the whole log and every table, and the node's secrets (the signing keys,
// the pepper unless it is configured from outside, the sealing key, the webhook secrets, the
// credentials' public keys). It is as sensitive as the data directory and is written private to
// its user.
import { chmodSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../config.js';
import { ENV_FILE, withEnvironment } from './lmdb-log.js';

export class BackupRefused extends Error {
  override name = 'BackupRefused';
}

/** Copies the node's data file from `dataDir` into `outDir` (new or empty); returns its size. */
export async function backupDataDir(dataDir: string, outDir: string): Promise<{ bytes: number }> {
  if (!existsSync(join(dataDir, ENV_FILE)))
    throw new BackupRefused(`no node data in ${resolve(dataDir)}`);
  if (resolve(dataDir) === resolve(outDir))
    throw new BackupRefused('the backup must go to another directory than the data directory');
  if (existsSync(outDir) && readdirSync(outDir).length > 0)
    throw new BackupRefused(`${resolve(outDir)} is not empty; a backup goes to a new directory`);
  mkdirSync(outDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const target = join(outDir, ENV_FILE);
  await withEnvironment(dataDir, (env) => env.root.backup(target, false));
  chmodSync(target, PRIVATE_FILE_MODE);
  return { bytes: statSync(target).size };
}
