// Time-driven moves (expiry): aggregates name their next deadline, the scheduler wakes them
// with a `tick` command at that time, naming their type, since one may be out of memory then
// (issue 33). Deadlines sit in a binary min-heap (stale entries are skipped lazily); one timer
// is armed, for the earliest.
import type { Clock, Timer } from '../clock.js';

interface Entry {
  at: number;
  key: string;
}

export class Scheduler {
  private readonly due = new Map<string, { at: number; type: string }>();
  private readonly heap: Entry[] = [];
  private timer: Timer | null = null;
  private armedAt = Infinity;

  constructor(
    private readonly clock: Clock,
    private readonly wake: (key: string, type: string) => void,
  ) {}

  /** Sets (or clears, with null) the deadline of one aggregate, of type `type`. */
  schedule(key: string, at: number | null, type = ''): void {
    if (at === null) {
      this.due.delete(key);
      return;
    }
    if (this.due.get(key)?.at === at) return;
    this.due.set(key, { at, type });
    this.push({ at, key });
    if (at < this.armedAt) this.arm(at);
  }

  /** Clears the deadlines of the aggregates `which` names (a partition given away). */
  forget(which: (key: string) => boolean): void {
    for (const key of this.due.keys()) if (which(key)) this.due.delete(key);
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
    this.armedAt = Infinity;
  }

  private arm(at: number): void {
    this.timer?.cancel();
    this.armedAt = at;
    this.timer = this.clock.setTimer(() => this.fire(), at - this.clock.now());
  }

  private fire(): void {
    this.timer = null;
    this.armedAt = Infinity;
    const now = this.clock.now();
    while (this.heap.length > 0 && this.heap[0]!.at <= now) {
      const { at, key } = this.pop();
      const due = this.due.get(key);
      if (due?.at !== at) continue;
      this.due.delete(key);
      this.wake(key, due.type);
    }
    while (this.heap.length > 0 && this.due.get(this.heap[0]!.key)?.at !== this.heap[0]!.at)
      this.pop();
    if (this.heap.length > 0) this.arm(this.heap[0]!.at);
  }

  private push(entry: Entry): void {
    const h = this.heap;
    h.push(entry);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.at <= h[i]!.at) break;
      [h[parent], h[i]] = [h[i]!, h[parent]!];
      i = parent;
    }
  }

  private pop(): Entry {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && h[l]!.at < h[m]!.at) m = l;
        if (r < h.length && h[r]!.at < h[m]!.at) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i]!, h[m]!];
        i = m;
      }
    }
    return top;
  }
}
