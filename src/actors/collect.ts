// A full garbage collection of a worker's heap (issue 33). V8 collects as a thread allocates, so a
// worker that has let go of many aggregates and then has nothing to do would keep the heap their
// states filled, and the memory under it, until its next burst of work: the shard asks for one
// collection then (Shard.passivate), and the heap gives its pages back.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** The collection: `gc`, exposed to a context made after the flag is set. */
export function fullCollection(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/**
 * Bounds how far each JavaScript heap of the process (the front end's and every worker's: V8's
 * flags are the process's) grows past the live memory its last full collection left (issue 33).
 * Left to itself, V8 lets a large heap grow to four times that before collecting it again: the
 * front end, whose answers leave garbage that outlives a young collection, swung between about
 * 90 and 140 MiB of heap for 35 MiB live under a steady load, and each full collection of the
 * larger heap paused its answers for longer. V8 reads the flag at each collection.
 */
export function boundHeapGrowth(percent: number): void {
  setFlagsFromString(`--heap-growing-percent=${percent}`);
}

/**
 * The front end's collection once the node falls quiet (issue 33). The front end makes garbage
 * with every answer (requests parsed, replies framed) and, quiet, allocates too little for V8 to
 * collect it soon: after a burst, the heap and the memory under it stay at their peak for minutes.
 * `check` runs every sweep: once the count of work done (answers, and whatever else leaves
 * garbage behind it) has stood still for `idleMs`, with at least `after` done since the last
 * collection, it collects once.
 */
export class IdleCollector {
  private seen = 0;
  private stillSince: number;
  private collectedAt = 0;

  constructor(
    private readonly options: {
      work: () => number;
      idleMs: number;
      after: number;
      collect: () => void;
    },
    now: number,
  ) {
    this.stillSince = now;
  }

  /** Answers whether it collected. */
  check(now: number): boolean {
    const work = this.options.work();
    if (work !== this.seen) {
      this.seen = work;
      this.stillSince = now;
      return false;
    }
    if (now - this.stillSince < this.options.idleMs) return false;
    if (work - this.collectedAt < this.options.after) return false;
    this.collectedAt = work;
    this.options.collect();
    return true;
  }
}
