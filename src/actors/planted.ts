// Known bugs, planted one at a time by the simulator's own test (issue 30) to show it finds each:
// every switch is off in the node, and only sim/ turns one on, within one run. Each names the
// rule of the node it breaks.

export type Plant =
  /**
   * P22: the store writes what an instance sends for a partition it no longer holds (the check
   * cluster mode's database makes of every write, postgres-schema.ts; sim/disk.ts models it).
   */
  | 'skip-held-check'
  /** P14: a command is answered before its commit is durable. */
  | 'answer-before-flush'
  /** P14: a command's new state is adopted before its commit is durable. */
  | 'evolve-before-commit'
  /** STYLE 12: the follow-ups a crash left unfinished are not carried out at the next start. */
  | 'drop-follow-up-after-crash'
  /**
   * P22: the feed's new writer appends from the sequence it knew before it took the feed over,
   * without reading the feed as the earlier writer left it (network/feed.ts, resync).
   */
  | 'append-before-resync'
  /**
   * Issue 33: a batch that moves or clears its aggregate's deadline writes the new row and
   * leaves the old one (shard.ts, deadlineMoved): the durable schedule wakes it for nothing.
   */
  | 'keep-old-deadline-row'
  /** Issue 33: a commit writes the aggregate's state row as it was before the commit. */
  | 'stale-state-row'
  /**
   * Issue 33: the sweep lets go of aggregates whose state no row holds (one folded from a
   * snapshot before its next commit, or one past state_row_bytes_max).
   */
  | 'passivate-unrowed'
  /**
   * Issue 33: a fold ignores the state a record carries where its aggregate's row stopped
   * (`s`, an aggregate grown past state_row_bytes_max), and folds it from nothing instead.
   */
  | 'ignore-state-before';

export const PLANTS: readonly Plant[] = [
  'skip-held-check',
  'answer-before-flush',
  'evolve-before-commit',
  'drop-follow-up-after-crash',
  'append-before-resync',
  'keep-old-deadline-row',
  'stale-state-row',
  'passivate-unrowed',
  'ignore-state-before',
];

let current: Plant | null = null;

/** Whether `plant` is the bug planted now (never, outside the simulator's planted runs). */
export const planted = (plant: Plant): boolean => current === plant;

/** Plants one bug (or none, with null) until the next call: sim/ alone calls it. */
export function plant(which: Plant | null): void {
  current = which;
}
