// Known bugs, planted one at a time by the simulator's own test (issue 30) to show it finds each:
// every switch is off in the node, and only sim/ turns one on, within one run. Each names the
// rule of the node it breaks.

export type Plant =
  /** The log's fence (P22): an append of a partition whose lease moved on is written anyway. */
  | 'skip-fence'
  /** P14: a command is answered before its commit is durable. */
  | 'answer-before-flush'
  /** P14: a command's new state is adopted before its commit is durable. */
  | 'evolve-before-commit'
  /** STYLE 12: the follow-ups a crash left unfinished are not carried out at the next start. */
  | 'drop-follow-up-after-crash'
  /** P22: a partition's new holder decides on what it held before, without folding it again. */
  | 'append-before-resync';

export const PLANTS: readonly Plant[] = [
  'skip-fence',
  'answer-before-flush',
  'evolve-before-commit',
  'drop-follow-up-after-crash',
  'append-before-resync',
];

let current: Plant | null = null;

/** Whether `plant` is the bug planted now (never, outside the simulator's planted runs). */
export const planted = (plant: Plant): boolean => current === plant;

/** Plants one bug (or none, with null) until the next call: sim/ alone calls it. */
export function plant(which: Plant | null): void {
  current = which;
}
