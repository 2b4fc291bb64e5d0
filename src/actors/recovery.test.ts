// The claims of a worker's partitions at start (recovery.ts): the worker from the front, its
// helpers from the back, each partition claimed exactly once, also by threads claiming at once.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Claims } from './recovery.js';

/** Partitions of one worker of four: every fourth. */
const PARTITIONS = Array.from({ length: 64 }, (_, i) => 4 * i + 1);

function drain(next: () => number | undefined): number[] {
  const out: number[] = [];
  for (let p = next(); p !== undefined; p = next()) out.push(p);
  return out;
}

describe('claims of partitions at start', () => {
  it('the worker claims from the front, helpers from the back, given partitions excluded', () => {
    const claims = new Claims(Claims.share(PARTITIONS.length, 2), PARTITIONS);
    const given = [claims.given(0), claims.given(1)];
    expect(given).toEqual([PARTITIONS[63], PARTITIONS[62]]);
    const front: number[] = [];
    const back: number[] = [];
    // Interleaved unevenly: three claims from the front for each from the back.
    for (let i = 0; ; i++) {
      const p = i % 4 === 3 ? claims.fromBack() : claims.fromFront();
      if (p === undefined) break;
      (i % 4 === 3 ? back : front).push(p);
    }
    expect(front).toEqual([...front].sort((a, b) => a - b));
    expect(back).toEqual([...back].sort((a, b) => b - a));
    expect(front[0]).toBe(PARTITIONS[0]);
    expect(back[0]).toBe(PARTITIONS[61]);
    expect([...front, ...back, ...given].sort((a, b) => a - b)).toEqual(PARTITIONS);
    expect(claims.fromFront()).toBeUndefined();
    expect(claims.fromBack()).toBeUndefined();
  });

  it('with no helpers the worker claims every partition in order', () => {
    const claims = new Claims(Claims.share(PARTITIONS.length), PARTITIONS);
    expect(drain(() => claims.fromFront())).toEqual(PARTITIONS);
  });

  it('threads claiming at once from both ends claim each partition exactly once', async () => {
    const many = Array.from({ length: 30_000 }, (_, i) => i);
    const shared = Claims.share(many.length);
    // All three start claiming together, once each has loaded the module.
    const gate = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
    // The compiled module, as the node's threads run it (tests run after the build).
    const compiled = new URL('../../dist/src/actors/recovery.js', import.meta.url).href;
    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      import(workerData.compiled).then(({ Claims }) => {
        const claims = new Claims(workerData.shared, workerData.many);
        Atomics.add(workerData.gate, 0, 1);
        while (Atomics.load(workerData.gate, 0) < 3);
        const out = [];
        const next = () => workerData.front ? claims.fromFront() : claims.fromBack();
        for (let p = next(); p !== undefined; p = next()) out.push(p);
        parentPort.postMessage(out);
      });`;
    const claimed = (front: boolean) =>
      new Promise<number[]>((done, fail) => {
        const thread = new Worker(code, {
          eval: true,
          workerData: { compiled, shared, many, front, gate },
        });
        thread.once('message', done);
        thread.once('error', fail);
      });
    const all = await Promise.all([claimed(true), claimed(false), claimed(false)]);
    expect(all.flat().sort((a, b) => a - b)).toEqual(many);
  });
});

describe('claims out of turn', () => {
  it('a partition claimed out of turn is skipped by both ends; claimAll leaves none', () => {
    const claims = new Claims(Claims.share(PARTITIONS.length), PARTITIONS);
    expect(claims.claim(PARTITIONS[0]!)).toBe(true);
    expect(claims.claim(PARTITIONS[0]!)).toBe(false);
    expect(claims.claim(PARTITIONS[63]!)).toBe(true);
    expect(claims.fromFront()).toBe(PARTITIONS[1]);
    expect(claims.fromBack()).toBe(PARTITIONS[62]);
    expect(claims.claim(PARTITIONS[1]!)).toBe(false);
    expect(() => claims.claim(0)).toThrow(RangeError);
    claims.claimAll();
    expect(claims.fromFront()).toBeUndefined();
    expect(claims.fromBack()).toBeUndefined();
  });
});
