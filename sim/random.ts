// The simulator's one source of chance: a seeded xoroshiro128+ (pure-rand). Every choice of a run
// (which command, which fault, when the disk flushes, how far time moves) comes from it, so that
// a seed replays its run exactly.
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';

export class Random {
  private readonly rng: RandomGenerator;

  constructor(readonly seed: number) {
    this.rng = xoroshiro128plus(seed);
  }

  /** An integer in [from, to]. */
  int(from: number, to: number): number {
    return uniformInt(this.rng, from, to);
  }

  /** A number in [0, 1), as Math.random gives one. */
  fraction(): number {
    return this.int(0, 2 ** 30 - 1) / 2 ** 30;
  }

  /** True with probability `p` (in thousandths, rounded). */
  chance(p: number): boolean {
    return this.int(0, 999) < Math.round(p * 1000);
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('nothing to pick from');
    return items[this.int(0, items.length - 1)]!;
  }

  /** One of the weighted choices: `[weight, value]`, weights in whole numbers. */
  weighted<T>(choices: readonly (readonly [number, T])[]): T {
    const total = choices.reduce((sum, [w]) => sum + w, 0);
    let at = this.int(0, total - 1);
    for (const [w, value] of choices) {
      if (at < w) return value;
      at -= w;
    }
    throw new Error('weights must be positive');
  }
}
