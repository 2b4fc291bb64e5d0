// Thread entry of a recovery helper, on a core the shards leave idle at start. First it checks
// the partitions it claims (every checksum, before the node answers anyone) beside its worker,
// and says what it found. Then, while the node already answers, it folds the partitions it
// claims that have records to replay (after their snapshot, if any) and hands each partition's
// states to its shard, framed, as soon as it is folded, until none is left to claim.
import { workerData } from 'node:worker_threads';
import { DECIDERS } from '../domain/index.js';
import { openThreadLog } from '../log/open.js';
import { checkPartitions, foldPartition, frameFolded, recordsToReplay, type Held } from './fold.js';
import { Claims, type FromRecoveryHelper, type RecoveryHelperData } from './recovery.js';

const data = workerData as RecoveryHelperData;
const port = data.port;
const log = await openThreadLog(data);
const deciders = new Map(DECIDERS.map((d) => [d.type, d]));
const checks = new Claims(data.checks, data.partitions);
const folds = new Claims(data.folds, data.partitions);
const say = (message: FromRecoveryHelper) => port.postMessage(message);

try {
  say({ t: 'checked', ...checkPartitions(log, () => checks.fromBack()) });
  for (let p = folds.given(data.helper) as number | undefined; p !== undefined;) {
    // A partition with nothing to replay is left to its worker: its snapshot's states would be
    // read here, encoded again and read there, which costs the worker what reading the snapshot
    // itself does. One with records to replay (a kill -9 between snapshots leaves every written
    // partition so) is folded here: the worker reads the states handed over instead of folding
    // the records, which costs it several times less.
    const snapshot = log.readSnapshot(p);
    if (!recordsToReplay(log, p, snapshot)) say({ t: 'left', partition: p });
    else {
      const held = new Map<string, Held>();
      const hold = (type: string, state: unknown) => ({ type, state });
      const partition = foldPartition(log, deciders, p, { held, hold }, snapshot);
      // Handed over at once: the worker reads it between the partitions it folds itself.
      // Copied, not transferred: a small frame may share its memory with other buffers.
      say({ t: 'folded', partition: p, framed: await frameFolded(partition, held) });
    }
    p = folds.fromBack();
  }
  say({ t: 'done' });
} catch (error) {
  say({ t: 'failed', message: (error as Error).message });
} finally {
  port.close();
  await log.close();
}
