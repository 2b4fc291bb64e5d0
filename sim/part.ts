// A part of the node a run drives beside the shards (the feed, webhook delivery, the directory
// index): what it does when an instance starts or takes a partition up, the steps of its own the
// seed may choose, and the invariants it keeps. World and Run know parts only through this.
import type { CommandResult } from '../src/actors/types.js';
import type { Violation } from './model.js';
import type { SimInstance } from './world.js';

export interface SimPart {
  readonly name: string;
  /** An instance has started (after its recovery, before it takes requests). */
  started?(instance: SimInstance): void;
  /** An instance has taken partition `p` up (folded it), cluster mode. */
  tookUp?(instance: SimInstance, p: number): Promise<void>;
  /**
   * A command committed, as the instance that ran it hears its result (the pool's afterCommit),
   * and in cluster mode the instance that forwarded it too (the router's onRemote).
   */
  committed?(instance: SimInstance, result: CommandResult): void;
  /**
   * The steps this part offers, with their weights: each, when chosen, runs and returns the
   * line the trace shows of it (null: nothing happened).
   */
  steps?(): readonly (readonly [number, () => string | null | Promise<string | null>])[];
  /** Checked after every step: violations that must never be seen, even for a moment. */
  watch?(): Violation[];
  /** The end of a run, faults healed: brings the part level (rounds of flushing follow). */
  heal?(): Promise<void>;
  /** Whether the part still has work under way (the run's end waits for none). */
  busy?(): boolean;
  /** Checked once the run has healed and settled. */
  check?(): Violation[];
}
