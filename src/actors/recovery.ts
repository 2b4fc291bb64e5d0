// Recovery spread over spare cores. A start first checks every partition of a shard (every
// checksum: P14) and only then answers; it folds the partitions while it answers. Where cores
// would otherwise sit idle (fewer workers than cores), the pool starts helper threads beside each
// worker that check partitions with it, then fold those with records to replay (the long part;
// a partition whose snapshot no record follows is the worker's) and hand the states to the
// worker over a channel of their own, framed (their checksum checked on arrival). Damage found by
// a helper refuses the start with the same message. Partitions are claimed one at a time
// (Claims), so that the worker and its helpers finish together whatever the partitions hold, and
// one can be claimed out of turn for the command that needs it.
import { MessageChannel, MessagePort, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { RECOVERY_HANDOFF_POLL_MS, WORKER_YOUNG_GENERATION_MB } from '../config.js';
import { RecoveryError, type Checked, type FramedFold } from './fold.js';

export type { Checked };

/**
 * A worker's partitions, each claimed once by whoever takes it first: the worker from the front
 * (or one partition a command is waiting for, out of turn), its helpers from the back. Each
 * partition has a flag in shared memory, set atomically by its claimer. The last partitions can
 * be given out before any claim, one to each helper, so that every helper has work (and which
 * partition a helper takes first is known).
 */
export class Claims {
  private readonly flags: Int32Array;
  private readonly indexOf: Map<number, number>;
  private front = 0;
  private back: number;

  constructor(
    shared: SharedArrayBuffer,
    readonly partitions: readonly number[],
  ) {
    this.flags = new Int32Array(shared);
    this.indexOf = new Map(partitions.map((p, i) => [p, i]));
    this.back = partitions.length;
  }

  /** The shared flags of `count` partitions of which the last `given` are already given out. */
  static share(count: number, given = 0): SharedArrayBuffer {
    const shared = new SharedArrayBuffer(count * Int32Array.BYTES_PER_ELEMENT);
    new Int32Array(shared).fill(1, count - given);
    return shared;
  }

  /** The partition given to helper `h` before any claim. */
  given(h: number): number {
    return this.partitions[this.partitions.length - 1 - h]!;
  }

  /** The next unclaimed partition from the front; undefined once every one is claimed. */
  fromFront(): number | undefined {
    while (this.front < this.back) {
      const i = this.front++;
      if (this.take(i)) return this.partitions[i];
    }
    return undefined;
  }

  /** The next unclaimed partition from the back; undefined once every one is claimed. */
  fromBack(): number | undefined {
    while (this.back > this.front) {
      const i = --this.back;
      if (this.take(i)) return this.partitions[i];
    }
    return undefined;
  }

  /** Claims partition `p` out of turn: false if somebody has claimed it already. */
  claim(p: number): boolean {
    const i = this.indexOf.get(p);
    if (i === undefined) throw new RangeError(`partition ${p} is not among these claims`);
    return this.take(i);
  }

  /** Claims every partition left (the node stops: nobody is to start another). */
  claimAll(): void {
    for (let i = 0; i < this.partitions.length; i++) this.take(i);
  }

  private take(i: number): boolean {
    return Atomics.compareExchange(this.flags, i, 0, 1) === 0;
  }
}

export interface RecoveryHelperData {
  dataDir: string;
  store: string | null;
  /** The worker's partitions, the claims of their checks and of their folds (Claims). */
  partitions: number[];
  checks: SharedArrayBuffer;
  folds: SharedArrayBuffer;
  /** Which helper this is: it folds Claims.given(helper) first. */
  helper: number;
  /** Where the folded partitions go: the worker that owns them. */
  port: MessagePort;
}

/**
 * A helper's messages: `checked` once no partition is left to check; then one message per
 * partition it claims to fold, folded or `left` to the worker (no record follows its snapshot);
 * then `done`. Or `failed`, at the first damage found.
 */
export type FromRecoveryHelper =
  | ({ t: 'checked' } & Checked)
  | { t: 'folded'; partition: number; framed: FramedFold }
  | { t: 'left'; partition: number }
  | { t: 'done' }
  | { t: 'failed'; message: string };

/** What a worker is given of its helpers: the claims it shares with them, their channels. */
export interface Helped {
  checks: SharedArrayBuffer;
  folds: SharedArrayBuffer;
  ports: MessagePort[];
}

/**
 * Starts `helpers` threads (no more than there are partitions) that claim the worker's
 * partitions beside it; returns what the worker is to be given, and the threads (they end on
 * their own once no partition is left to claim). A helper that dies without a word (out of
 * memory) is fatal: its worker would wait for it for ever.
 */
export function startHelpers(options: {
  dataDir: string;
  store: string | null;
  partitions: number[];
  helpers: number;
  heapMb: number;
  onFatal: (message: string) => void;
}): { helped: Helped; threads: Worker[] } {
  const { dataDir, store, partitions, heapMb, onFatal } = options;
  const helpers = Math.min(options.helpers, partitions.length);
  const checks = Claims.share(partitions.length);
  const folds = Claims.share(partitions.length, helpers);
  const threads: Worker[] = [];
  const ports = Array.from({ length: helpers }, (_, helper) => {
    const { port1, port2 } = new MessageChannel();
    const workerData: RecoveryHelperData = {
      dataDir,
      store,
      partitions,
      checks,
      folds,
      helper,
      port: port1,
    };
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
    threads.push(thread);
    return port2;
  });
  return { helped: { checks, folds, ports }, threads };
}

/**
 * What the worker's shard shares with its helpers: the claims of its partitions' checks and
 * folds, what the helpers found checking, and the states of the partitions they fold as they
 * hand them over, one partition at a time and still framed. The shard reads each into its slots
 * between the partitions it folds itself, so that reading overlaps the helpers' folding.
 */
export class Elsewhere {
  private readonly working: Set<MessagePort>;
  private readonly checking: Set<MessagePort>;
  private readonly handed: [partition: number, framed: FramedFold | undefined][] = [];
  /** What the helpers found checking, added up as each says it is done. */
  readonly checked: Checked = { snapshots: 0, records: 0 };

  constructor(
    readonly checks: Claims,
    readonly folds: Claims,
    ports: readonly MessagePort[] = [],
  ) {
    this.working = new Set(ports);
    this.checking = new Set(ports);
  }

  /** No helpers: the shard claims every partition itself. */
  static none(partitions: readonly number[]): Elsewhere {
    const claims = () => new Claims(Claims.share(partitions.length), partitions);
    return new Elsewhere(claims(), claims());
  }

  /** Every helper has said it has no partition left to check. */
  get allChecked(): boolean {
    this.receive();
    return this.checking.size === 0;
  }

  /** Every helper has said it is done. */
  get finished(): boolean {
    this.receive();
    return this.working.size === 0;
  }

  /**
   * The partitions handed over since last asked, without waiting: folded (with their states) or
   * left to the shard (undefined). A helper's failure throws.
   */
  arrived(): [partition: number, framed: FramedFold | undefined][] {
    this.receive();
    return this.handed.splice(0);
  }

  /** Takes the helpers' messages waiting on their channels. */
  private receive(): void {
    for (const port of this.working) {
      for (let r = receiveMessageOnPort(port); r !== undefined; r = receiveMessageOnPort(port)) {
        const message = r.message as FromRecoveryHelper;
        if (message.t === 'failed') throw new RecoveryError(message.message);
        if (message.t === 'checked') {
          this.checked.snapshots += message.snapshots;
          this.checked.records += message.records;
          this.checking.delete(port);
        } else if (message.t === 'folded') this.handed.push([message.partition, message.framed]);
        else if (message.t === 'left') this.handed.push([message.partition, undefined]);
        else {
          this.working.delete(port);
          this.checking.delete(port);
          port.close();
          break;
        }
      }
    }
  }

  /** A pause while the helpers work, once this thread has nothing else to do. */
  pause(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, RECOVERY_HANDOFF_POLL_MS));
  }
}
