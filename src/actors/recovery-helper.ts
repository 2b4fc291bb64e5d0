// Thread entry of a recovery helper: folds the partitions it claims that have records to replay
// (after their snapshot, if any; every checksum checked) on a core the shards leave idle at
// start, and hands each partition's states to its shard, framed, as soon as it is folded, until
// none is left to claim.
import { workerData } from 'node:worker_threads';
import { DECIDERS } from '../domain/index.js';
import { LmdbLog, openEnvironment } from '../log/lmdb-log.js';
import { foldPartition, frameFolded, recordsToReplay, type Held } from './fold.js';
import { Claims, type FromRecoveryHelper, type RecoveryHelperData } from './recovery.js';

const data = workerData as RecoveryHelperData;
const port = data.port;
const env = openEnvironment(data.dataDir);
const log = new LmdbLog(env);
const deciders = new Map(DECIDERS.map((d) => [d.type, d]));
const claims = new Claims(data.claims, data.partitions);

try {
  for (
    let p: number | undefined = claims.given(data.helper);
    p !== undefined;
    p = claims.fromBack()
  ) {
    // A partition with nothing to replay is left to its worker: its snapshot's states would be
    // read here, encoded again and read there, which costs the worker what reading the snapshot
    // itself does. One with records to replay (a kill -9 between snapshots leaves every written
    // partition so) is folded here: the worker reads the states handed over instead of folding
    // the records, which costs it several times less.
    const snapshot = log.readSnapshot(p);
    if (!recordsToReplay(log, p, snapshot)) {
      const left: FromRecoveryHelper = { t: 'left', partition: p };
      port.postMessage(left);
      continue;
    }
    const held = new Map<string, Held>();
    const hold = (type: string, state: unknown) => ({ type, state });
    const partition = foldPartition(log, deciders, p, { held, hold }, snapshot);
    // Handed over at once: the worker reads it between the partitions it folds itself.
    // Copied, not transferred: a small frame may share its memory with other buffers.
    const message: FromRecoveryHelper = {
      t: 'folded',
      partition: p,
      framed: await frameFolded(partition, held),
    };
    port.postMessage(message);
  }
  const done: FromRecoveryHelper = { t: 'done' };
  port.postMessage(done);
} catch (error) {
  const message: FromRecoveryHelper = { t: 'failed', message: (error as Error).message };
  port.postMessage(message);
} finally {
  port.close();
  await log.close();
}
