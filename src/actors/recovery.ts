// Recovery spread over spare cores. At start a shard folds its partitions one after another;
// where cores would otherwise sit idle (fewer workers than cores, the front end waiting), the
// shard lends some of its partitions to helper threads that fold them at the same time and hand
// the states back, framed (their checksum checked on arrival). Replay's checks are the helpers'
// own: a damaged record refuses the start with the same message.
import { Worker } from 'node:worker_threads';
import { RecoveryError, unframeFolded, type FoldedPartition, type FramedFold } from './fold.js';

export interface RecoveryHelperData {
  dataDir: string;
  partitions: number[];
}

export type FromRecoveryHelper =
  | { t: 'folded'; folded: [partition: number, framed: FramedFold][] }
  | { t: 'failed'; message: string };

/**
 * Lends every (helpers + 1)-th partition but one share to each of `helpers` threads; the shard
 * folds the share it keeps meanwhile, then takes the others' (Shard.recover).
 */
export function foldElsewhere(options: {
  dataDir: string;
  partitions: readonly number[];
  helpers: number;
  heapMb: number;
}): { partitions: ReadonlySet<number>; folded: Promise<ReadonlyMap<number, FoldedPartition>> } {
  const { dataDir, partitions, helpers, heapMb } = options;
  const shares = Array.from({ length: helpers }, (_, h) =>
    partitions.filter((_, i) => i % (helpers + 1) === h + 1),
  );
  const lent = new Set(shares.flat());
  const folded = Promise.all(shares.map((share) => helper(dataDir, share, heapMb))).then(
    (parts) => new Map(parts.flat()),
  );
  // Awaited only once the shard has folded its own share; a failure waits for it there.
  folded.catch(() => undefined);
  return { partitions: lent, folded };
}

function helper(
  dataDir: string,
  partitions: number[],
  heapMb: number,
): Promise<[number, FoldedPartition][]> {
  const workerData: RecoveryHelperData = { dataDir, partitions };
  const thread = new Worker(new URL('./recovery-helper.js', import.meta.url), {
    workerData,
    resourceLimits: { maxOldGenerationSizeMb: heapMb },
  });
  return new Promise((resolve, reject) => {
    thread.once('message', (message: FromRecoveryHelper) => {
      if (message.t === 'failed') reject(new RecoveryError(message.message));
      else resolve(message.folded.map(([p, framed]) => [p, unframeFolded(framed, p)]));
    });
    thread.once('error', reject);
    thread.once('exit', (code) => reject(new RecoveryError(`recovery helper exited (${code})`)));
  });
}
