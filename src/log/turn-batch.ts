// Calls made in one event-loop turn, sent together: the cluster store's claims (postgres-log.ts)
// are one statement for every request of a turn rather than a round trip each. Under load a turn
// holds many requests, and each round trip costs a socket write and read on the front end's
// thread.
export class TurnBatch<I, O> {
  private waiting: { input: I; resolve: (output: O) => void; reject: (error: unknown) => void }[] =
    [];

  /** `run` answers a batch's inputs in their order. */
  constructor(private readonly run: (inputs: I[]) => Promise<O[]>) {}

  call(input: I): Promise<O> {
    return new Promise((resolve, reject) => {
      if (this.waiting.length === 0) setImmediate(() => this.flush());
      this.waiting.push({ input, resolve, reject });
    });
  }

  private flush(): void {
    const batch = this.waiting;
    this.waiting = [];
    this.run(batch.map((b) => b.input)).then(
      (outputs) => batch.forEach((b, i) => b.resolve(outputs[i]!)),
      (error: unknown) => batch.forEach((b) => b.reject(error)),
    );
  }
}

/**
 * The first call of each key in a batch, and the later ones apart: a statement may not claim
 * one key twice, and only the first call of a key can win it.
 */
export function firstOfEach<I>(inputs: I[], keyOf: (input: I) => string): boolean[] {
  const seen = new Set<string>();
  return inputs.map((input) => {
    const key = keyOf(input);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
