// Time as an input: the system clock in production, a simulated clock in tests, so that a
// failing sequence can be replayed exactly.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  now(): number;
  setTimer(callback: () => void, delayMs: number): Timer;
}

/** setTimeout's ceiling; longer waits re-arm. */
const TIMER_DELAY_MAX_MS = 2_147_483_647; // tidy: format (Node's: a longer delay fires at once)

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(callback, delayMs) {
    const handle = setTimeout(callback, Math.min(Math.max(0, delayMs), TIMER_DELAY_MAX_MS));
    handle.unref?.();
    return { cancel: () => clearTimeout(handle) };
  },
};

interface PendingTimer {
  at: number;
  /** Order of setting: timers due at the same moment fire in the order they were set. */
  order: number;
  callback: () => void;
  live: boolean;
}

const earlier = (a: PendingTimer, b: PendingTimer) =>
  a.at < b.at || (a.at === b.at && a.order < b.order);

/**
 * A clock that moves only when told to; timers fire during `advance`, soonest first, those due
 * at the same moment in the order they were set. They wait in a binary heap: a run of the
 * simulator sets millions.
 */
export class SimulatedClock implements Clock {
  private readonly heap: PendingTimer[] = [];
  private set = 0;

  constructor(private current: number) {}

  now(): number {
    return this.current;
  }

  setTimer(callback: () => void, delayMs: number): Timer {
    const timer = {
      at: this.current + Math.max(0, delayMs),
      order: this.set++,
      callback,
      live: true,
    };
    this.push(timer);
    return {
      cancel: () => {
        timer.live = false;
      },
    };
  }

  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      while (this.heap.length > 0 && !this.heap[0]!.live) this.pop();
      const due = this.heap[0];
      if (due === undefined || due.at > target) break;
      this.pop();
      this.current = Math.max(this.current, due.at);
      due.live = false;
      due.callback();
    }
    this.current = target;
  }

  private push(timer: PendingTimer): void {
    const heap = this.heap;
    let i = heap.push(timer) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!earlier(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  private pop(): void {
    const heap = this.heap;
    const last = heap.pop()!;
    if (heap.length === 0) return;
    heap[0] = last;
    for (let i = 0; ;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < heap.length && earlier(heap[left]!, heap[least]!)) least = left;
      if (right < heap.length && earlier(heap[right]!, heap[least]!)) least = right;
      if (least === i) return;
      [heap[i], heap[least]] = [heap[least]!, heap[i]!];
      i = least;
    }
  }
}
