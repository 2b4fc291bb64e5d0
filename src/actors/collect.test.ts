import { execFileSync } from 'node:child_process';
import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { fullCollection, IdleCollector } from './collect.js';

describe('a full collection (issue 33)', () => {
  it('frees what nothing holds any more', async () => {
    const collect = fullCollection();
    let held: object | null = { payload: new Array(1_000).fill(0) };
    const weak = new WeakRef(held);
    // A WeakRef's target is kept until the end of the job that made or read it.
    await turn();
    held = null;
    expect(weak.deref()).toBeDefined();
    await turn();
    collect();
    expect(weak.deref()).toBeUndefined();
  });
});

describe('the bound on heap growth (issue 33)', () => {
  /**
   * The full collections a heap ran, in a process of its own, while it made garbage that
   * outlives young collections (a ring of 200,000 objects replaced one by one), beside 100,000
   * objects live throughout; its growth bounded by `percent` with the node's own function.
   */
  function fullCollections(percent: number): number {
    const compiled = new URL('../../dist/src/actors/collect.js', import.meta.url).href;
    const script = `
      import { constants, PerformanceObserver } from 'node:perf_hooks';
      import { boundHeapGrowth } from ${JSON.stringify(compiled)};
      boundHeapGrowth(${percent});
      let full = 0;
      const observer = new PerformanceObserver((list) => {
        const major = constants.NODE_PERFORMANCE_GC_MAJOR;
        for (const e of list.getEntries()) if (e.detail.kind === major) full++;
      });
      observer.observe({ entryTypes: ['gc'] });
      const live = Array.from({ length: 100_000 }, (_, i) => ({ i, key: 'k' + i }));
      const ring = new Array(200_000);
      for (let n = 0; n < 5_000_000; n++) ring[n % ring.length] = { n, text: 'v' + n, list: [n] };
      setTimeout(() => process.stdout.write(JSON.stringify({ full, live: live.length })), 50);`;
    // V8 sizes its generations from the machine's memory (a young generation large enough lets
    // the ring die young: no full collection at all), and marks on other threads as fast as the
    // machine lets it: the sizes are pinned here and the collector kept on this thread.
    const flags = [
      '--single-threaded-gc',
      '--max-semi-space-size=16',
      '--max-old-space-size=1024',
      '--input-type=module',
    ];
    const out = execFileSync(process.execPath, [...flags, '-e', script]);
    return (JSON.parse(out.toString('utf8')) as { full: number }).full;
  }

  it('sets how far the heap grows past what it holds live, read at each collection', () => {
    // Measured: 14, 8, 10 and 10 full collections at 50 % (Node.js 20, 22, 24, 26) against 5, 5,
    // 4 and 4 at 300 % (V8's own factor reaches 4x); both the same with the function a no-op.
    expect(fullCollections(50)).toBeGreaterThan(fullCollections(300));
  }, 60_000);
});

describe("the front end's collection once quiet (issue 33)", () => {
  const IDLE_MS = 60_000;
  const AFTER = 10;

  function collector() {
    const seen = { answers: 0, collections: 0 };
    const idle = new IdleCollector(
      {
        work: () => seen.answers,
        idleMs: IDLE_MS,
        after: AFTER,
        collect: () => seen.collections++,
      },
      0,
    );
    return { seen, idle };
  }

  it('collects once the answers stood still for the idle time, not again until more came', () => {
    const { seen, idle } = collector();
    seen.answers = 25;
    expect(idle.check(1_000)).toBe(false);
    expect(idle.check(1_000 + IDLE_MS - 1)).toBe(false);
    expect(idle.check(1_000 + IDLE_MS)).toBe(true);
    expect(seen.collections).toBe(1);
    // Still quiet: the garbage went with the first collection.
    expect(idle.check(1_000 + 3 * IDLE_MS)).toBe(false);
    seen.answers += AFTER;
    expect(idle.check(2_000 + 3 * IDLE_MS)).toBe(false);
    expect(idle.check(2_000 + 4 * IDLE_MS)).toBe(true);
    expect(seen.collections).toBe(2);
  });

  it('never collects while answers keep coming, however long', () => {
    const { seen, idle } = collector();
    for (let now = 0; now < 10 * IDLE_MS; now += 1_000) {
      seen.answers += 1;
      expect(idle.check(now)).toBe(false);
    }
    expect(seen.collections).toBe(0);
  });

  it('does not collect after fewer answers than it waits for, idle or not', () => {
    const { seen, idle } = collector();
    seen.answers = AFTER - 1;
    idle.check(0);
    expect(idle.check(5 * IDLE_MS)).toBe(false);
    expect(seen.collections).toBe(0);
  });
});
