// Recovery spread over spare cores. At start a shard folds its partitions one after another;
// where cores would otherwise sit idle (fewer workers than cores, the front end waiting), the
// pool lends some of a worker's partitions to helper threads, started beside the worker, that
// fold those with no snapshot (replay is the long part) at the same time and hand the states to
// the worker over a channel of their own,
// framed (their checksum checked on arrival). Replay's checks are the helpers' own: a damaged
// record refuses the start with the same message.
import { MessageChannel, MessagePort, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { RECOVERY_HANDOFF_POLL_MS, WORKER_YOUNG_GENERATION_MB } from '../config.js';
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

/** One message per folded partition, then `done`; or `failed` at the first damage found. */
export type FromRecoveryHelper =
  | { t: 'folded'; partition: number; framed: FramedFold }
  | { t: 'done' }
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
    // The entry as bundled into one file (scripts/bundle.ts), as the worker's is.
    const thread = new Worker(new URL('../bundled/recovery-helper.js', import.meta.url), {
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
 * What the worker's shard folds elsewhere: the partitions lent, and their states as the helpers
 * hand them over, one partition at a time and still framed. The shard reads each into its slots
 * between the partitions it folds itself, so that reading overlaps the helpers' folding.
 */
export class Elsewhere {
  readonly partitions: ReadonlySet<number>;
  private readonly working: Set<MessagePort>;

  constructor(lent: readonly Lent[] = []) {
    this.partitions = new Set(lent.flatMap((l) => l.partitions));
    this.working = new Set(lent.map((l) => l.port));
  }

  /** Every helper has said it is done. */
  get finished(): boolean {
    return this.working.size === 0;
  }

  /** The partitions handed over since last asked, without waiting; a helper's failure throws. */
  arrived(): [partition: number, framed: FramedFold][] {
    const out: [number, FramedFold][] = [];
    for (const port of this.working) {
      for (let r = receiveMessageOnPort(port); r !== undefined; r = receiveMessageOnPort(port)) {
        const message = r.message as FromRecoveryHelper;
        if (message.t === 'failed') throw new RecoveryError(message.message);
        if (message.t === 'folded') out.push([message.partition, message.framed]);
        else {
          this.working.delete(port);
          port.close();
          break;
        }
      }
    }
    return out;
  }

  /** A pause while the helpers fold, once this thread has nothing else to do. */
  pause(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, RECOVERY_HANDOFF_POLL_MS));
  }
}
