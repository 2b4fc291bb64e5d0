// Recovery spread over spare cores. At start a shard folds its partitions one after another;
// where cores would otherwise sit idle (fewer workers than cores, the front end waiting), the
// pool lends some of a worker's partitions to helper threads, started beside the worker, that
// fold those with no snapshot (replay is the long part) at the same time and hand the states to
// the worker over a channel of their own,
// framed (their checksum checked on arrival). Replay's checks are the helpers' own: a damaged
// record refuses the start with the same message.
import { MessageChannel, MessagePort, Worker } from 'node:worker_threads';
import { WORKER_YOUNG_GENERATION_MB } from '../config.js';
import { RecoveryError, type FramedFold } from './fold.js';

export interface RecoveryHelperData {
  dataDir: string;
  partitions: number[];
  /** Where the folded partitions go: the worker that owns them. */
  port: MessagePort;
}

/** Partitions a worker lends to one helper, and the end of the helper's channel it reads. */
export interface Lent {
  partitions: number[];
  port: MessagePort;
}

export type FromRecoveryHelper =
  | { t: 'folded'; folded: [partition: number, framed: FramedFold][] }
  | { t: 'failed'; message: string };

/**
 * Starts `helpers` threads, each lent every (helpers + 1)-th of the worker's partitions (the
 * worker keeps one share); returns what the worker is to be given. A helper that dies without a
 * word (out of memory) is fatal: its worker would wait for it for ever.
 */
export function startHelpers(options: {
  dataDir: string;
  partitions: readonly number[];
  helpers: number;
  heapMb: number;
  onFatal: (message: string) => void;
}): Lent[] {
  const { dataDir, partitions, helpers, heapMb, onFatal } = options;
  return Array.from({ length: helpers }, (_, h) => {
    const share = partitions.filter((_, i) => i % (helpers + 1) === h + 1);
    const { port1, port2 } = new MessageChannel();
    const workerData: RecoveryHelperData = { dataDir, partitions: share, port: port1 };
    const thread = new Worker(new URL('./recovery-helper.js', import.meta.url), {
      workerData,
      transferList: [port1],
      resourceLimits: {
        maxOldGenerationSizeMb: heapMb,
        maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB,
      },
    });
    thread.on('error', (error) => onFatal(`recovery helper: ${error.message}`));
    thread.on('exit', (code) => {
      if (code !== 0) onFatal(`recovery helper exited with code ${code}`);
    });
    return { partitions: share, port: port2 };
  });
}

/**
 * What the worker's shard folds elsewhere: the partitions lent, and their states once folded,
 * still framed (the shard reads each straight into its slots).
 */
export type Elsewhere = ReturnType<typeof foldElsewhere>;

export function foldElsewhere(lent: readonly Lent[]): {
  partitions: ReadonlySet<number>;
  folded: Promise<ReadonlyMap<number, FramedFold>>;
} {
  const folded = Promise.all(lent.map(({ port }) => received(port))).then(
    (parts) => new Map(parts.flat()),
  );
  // Awaited only once the shard has folded its own share; a failure waits for it there.
  folded.catch(() => undefined);
  return { partitions: new Set(lent.flatMap((l) => l.partitions)), folded };
}

function received(port: MessagePort): Promise<[number, FramedFold][]> {
  return new Promise((resolve, reject) => {
    port.once('message', (message: FromRecoveryHelper) => {
      port.close();
      if (message.t === 'failed') reject(new RecoveryError(message.message));
      else resolve(message.folded);
    });
  });
}
