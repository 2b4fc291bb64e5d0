// The replay window (P5, issue 33) answers as a Map of digests in insertion order would: the same
// membership and size after every step of long random runs that grow the ring, empty it and
// shrink it again, with digests whose first words collide so that probes and the back-shifting
// removal are exercised, not just the happy path.
import { describe, expect, it } from 'vitest';
import { mulberry32 as generator } from '../../bench/request-plans.js';
import { DigestWindow } from './replay-window.js';

/** A 16-byte digest whose first word is one of `homes` values (colliding on purpose). */
function digestOf(random: () => number, homes: number): Buffer {
  const digest = Buffer.alloc(16);
  digest.writeUInt32LE(Math.floor(random() * homes), 0);
  for (let w = 1; w < 4; w++) digest.writeUInt32LE(Math.floor(random() * 2 ** 32), w * 4);
  return digest;
}

/** The model: a Map in insertion order, forgetting from the front while the time has passed. */
function forgetModel(model: Map<string, number>, now: number): void {
  for (const [key, until] of model) {
    if (until > now) break;
    model.delete(key);
  }
}

describe('the replay window (P5)', () => {
  for (const homes of [3, 64, 2 ** 32])
    it(`answers as a Map would as it grows, empties and shrinks (first words of ${homes})`, () => {
      const random = generator(homes);
      const window = new DigestWindow();
      const model = new Map<string, number>();
      const kept: Buffer[] = [];
      let now = 0;
      for (let step = 0; step < 60_000; step++) {
        const phase = Math.floor(step / 10_000) % 2;
        const r = random();
        // Filling phases add more than time takes away; emptying phases the reverse.
        if (r < (phase === 0 ? 0.7 : 0.2)) {
          const digest = digestOf(random, homes);
          const until = now + 1 + Math.floor(random() * 50);
          const key = digest.toString('hex');
          if (model.has(key)) continue;
          window.add(digest, until);
          model.set(key, until);
          kept.push(digest);
        } else if (r < 0.9) {
          now += Math.floor(random() * (phase === 0 ? 2 : 20));
          window.forgetExpired(now);
          forgetModel(model, now);
        } else {
          const probe =
            random() < 0.5 && kept.length > 0
              ? kept[Math.floor(random() * kept.length)]!
              : digestOf(random, homes);
          expect(window.has(probe)).toBe(model.has(probe.toString('hex')));
        }
        expect(window.size).toBe(model.size);
      }
      for (const digest of kept) expect(window.has(digest)).toBe(model.has(digest.toString('hex')));
      expect([...window.entries()].map((e) => [e.digest.toString('hex'), e.until])).toEqual([
        ...model,
      ]);
    });

  it('holds at most a quarter past its entries as it fills, gives memory back emptying', () => {
    const random = generator(7);
    const window = new DigestWindow();
    // 16 + 8 bytes a ring slot, and 4 for each of half again as many index slots.
    const SLOT_BYTES = 30;
    for (let n = 0; n < 100_000; n++) {
      window.add(digestOf(random, 2 ** 32), n);
      if (n % 997 === 0) expect(window.bytes).toBeLessThanOrEqual((n + 16) * 1.25 * SLOT_BYTES + 8);
    }
    expect(window.size).toBe(100_000);
    expect(window.bytes).toBeGreaterThanOrEqual(100_000 * SLOT_BYTES);
    expect(window.bytes).toBeLessThanOrEqual(100_000 * 1.25 * SLOT_BYTES + 8);
    window.forgetExpired(99_989);
    expect(window.size).toBe(10);
    expect(window.bytes).toBeLessThanOrEqual(40 * SLOT_BYTES + 8);
    // Its entries are all still found after the ring was rebuilt smaller.
    const left = [...window.entries()];
    expect(left.map((e) => e.until)).toEqual(Array.from({ length: 10 }, (_, n) => 99_990 + n));
    for (const { digest } of left) expect(window.has(digest)).toBe(true);
  });
});
