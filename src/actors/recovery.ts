// Recovery spread over spare cores. At start a shard folds its partitions one after another;
// where cores would otherwise sit idle (fewer workers than cores, the front end waiting), the
// pool starts helper threads beside the worker that fold partitions with records to replay (the
// long part; a partition whose snapshot no record follows is the worker's) at the same time and
// hand the states to the worker over a channel of their own, framed (their checksum checked on
// arrival). Replay's checks are the helpers' own: a damaged record refuses the start with the
// same message. Partitions are claimed one at a time (Claims), so that the worker and its
// helpers finish together whatever the partitions hold.
import { MessageChannel, MessagePort, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { RECOVERY_HANDOFF_POLL_MS, WORKER_YOUNG_GENERATION_MB } from '../config.js';
import { RecoveryError, type FramedFold } from './fold.js';

/** The largest count of partitions a claim word holds (front and back, 16 bits each). */
const CLAIMABLE_MAX = 0x7fff; // tidy: format (16 bits of a 32-bit word, its sign bit spared)
const BACK_SHIFT = 16; // tidy: format (the back index's place in the claim word)
const FRONT_MASK = 0xffff; // tidy: format (the front index's bits in the claim word)

/**
 * A worker's partitions, each claimed once by whoever is free first: the worker from the front,
 * its helpers from the back, through one shared word (the next front and back indices) changed
 * atomically. Each helper is given one partition from the back before any claim, so that every
 * helper has work (and which partition a helper folds first is known).
 */
export class Claims {
  private readonly word: Int32Array;

  constructor(
    shared: SharedArrayBuffer,
    readonly partitions: readonly number[],
  ) {
    this.word = new Int32Array(shared);
  }

  /** The shared word of `count` partitions of which the last `given` are already given out. */
  static share(count: number, given = 0): SharedArrayBuffer {
    if (count > CLAIMABLE_MAX) throw new RangeError(`${count} partitions to claim`);
    const shared = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
    new Int32Array(shared)[0] = (count - given) << BACK_SHIFT;
    return shared;
  }

  /** The partition given to helper `h` before any claim. */
  given(h: number): number {
    return this.partitions[this.partitions.length - 1 - h]!;
  }

  /** The next partition from the front; undefined once every one is claimed. */
  fromFront(): number | undefined {
    return this.claim(true);
  }

  /** The next partition from the back; undefined once every one is claimed. */
  fromBack(): number | undefined {
    return this.claim(false);
  }

  private claim(front: boolean): number | undefined {
    for (;;) {
      const word = Atomics.load(this.word, 0);
      const next = word & FRONT_MASK;
      const back = word >>> BACK_SHIFT;
      if (next >= back) return undefined;
      const claimed = front ? next : back - 1;
      const after = front ? (back << BACK_SHIFT) | (next + 1) : ((back - 1) << BACK_SHIFT) | next;
      if (Atomics.compareExchange(this.word, 0, word, after) === word)
        return this.partitions[claimed];
    }
  }
}

export interface RecoveryHelperData {
  dataDir: string;
  /** The worker's partitions, and their claims (Claims). */
  partitions: number[];
  claims: SharedArrayBuffer;
  /** Which helper this is: it folds Claims.given(helper) first. */
  helper: number;
  /** Where the folded partitions go: the worker that owns them. */
  port: MessagePort;
}

/**
 * One message per partition claimed, folded or `left` to the worker (no record follows its
 * snapshot), then `done`; or `failed` at the first damage found.
 */
export type FromRecoveryHelper =
  | { t: 'folded'; partition: number; framed: FramedFold }
  | { t: 'left'; partition: number }
  | { t: 'done' }
  | { t: 'failed'; message: string };

/** What a worker is given of its helpers: the claims it shares with them, their channels. */
export interface Helped {
  claims: SharedArrayBuffer;
  ports: MessagePort[];
}

/**
 * Starts `helpers` threads (no more than there are partitions) that claim the worker's
 * partitions beside it; returns what the worker is to be given. A helper that dies without a
 * word (out of memory) is fatal: its worker would wait for it for ever.
 */
export function startHelpers(options: {
  dataDir: string;
  partitions: number[];
  helpers: number;
  heapMb: number;
  onFatal: (message: string) => void;
}): Helped {
  const { dataDir, partitions, heapMb, onFatal } = options;
  const helpers = Math.min(options.helpers, partitions.length);
  const claims = Claims.share(partitions.length, helpers);
  const ports = Array.from({ length: helpers }, (_, helper) => {
    const { port1, port2 } = new MessageChannel();
    const workerData: RecoveryHelperData = { dataDir, partitions, claims, helper, port: port1 };
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
    return port2;
  });
  return { claims, ports };
}

/**
 * What the worker's shard shares with its helpers: the claims of its partitions, and the states
 * of those the helpers fold as they hand them over, one partition at a time and still framed.
 * The shard reads each into its slots between the partitions it folds itself, so that reading
 * overlaps the helpers' folding.
 */
export class Elsewhere {
  private readonly working: Set<MessagePort>;

  constructor(
    readonly claims: Claims,
    ports: readonly MessagePort[] = [],
  ) {
    this.working = new Set(ports);
  }

  /** No helpers: the shard claims every partition itself. */
  static none(partitions: readonly number[]): Elsewhere {
    return new Elsewhere(new Claims(Claims.share(partitions.length), partitions));
  }

  /** Every helper has said it is done. */
  get finished(): boolean {
    return this.working.size === 0;
  }

  /**
   * The partitions handed over since last asked, without waiting: folded (with their states) or
   * left to the shard (undefined). A helper's failure throws.
   */
  arrived(): [partition: number, framed: FramedFold | undefined][] {
    const out: [number, FramedFold | undefined][] = [];
    for (const port of this.working) {
      for (let r = receiveMessageOnPort(port); r !== undefined; r = receiveMessageOnPort(port)) {
        const message = r.message as FromRecoveryHelper;
        if (message.t === 'failed') throw new RecoveryError(message.message);
        if (message.t === 'folded') out.push([message.partition, message.framed]);
        else if (message.t === 'left') out.push([message.partition, undefined]);
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
