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

/** A clock that moves only when told to; timers fire during `advance`. */
export class SimulatedClock implements Clock {
  private timers: { at: number; callback: () => void; live: boolean }[] = [];

  constructor(private current: number) {}

  now(): number {
    return this.current;
  }

  setTimer(callback: () => void, delayMs: number): Timer {
    const timer = { at: this.current + Math.max(0, delayMs), callback, live: true };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.live = false;
      },
    };
  }

  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      const due = this.timers
        .filter((t) => t.live && t.at <= target)
        .sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      this.current = Math.max(this.current, due.at);
      due.live = false;
      due.callback();
    }
    this.timers = this.timers.filter((t) => t.live);
    this.current = target;
  }
}
