// A request body gathered from the chunks uWebSockets.js hands over (body.ts BodyBytes): the
// bytes are those sent, in order, whatever the chunking, and survive the reuse of each chunk's
// memory after its callback; a chunked body grows up to the limit and no further.
import { describe, expect, it } from 'vitest';
import { BodyBytes } from './body.js';

/** The body cut into chunks of the given sizes, each in an ArrayBuffer of its own. */
function chunksOf(body: Buffer, sizes: readonly number[]): ArrayBuffer[] {
  const chunks: ArrayBuffer[] = [];
  let at = 0;
  for (const size of sizes) {
    chunks.push(Uint8Array.from(body.subarray(at, at + size)).buffer);
    at += size;
  }
  expect(at).toBe(body.length);
  return chunks;
}

/** Adds each chunk, then overwrites its memory as uWebSockets.js does once the callback returns. */
function gather(bytes: BodyBytes, chunks: readonly ArrayBuffer[]): Buffer {
  for (const chunk of chunks) {
    bytes.add(chunk);
    new Uint8Array(chunk).fill(0x7a);
  }
  return bytes.body();
}

const body = Buffer.from(Array.from({ length: 45_000 }, (_, i) => (i * 31 + 7) & 0xff));
const LIMIT = 64 * 1024;

describe('a request body from its chunks (P12)', () => {
  it('with a declared length: one buffer of that length, whatever the chunking', () => {
    for (const sizes of [[45_000], [1, 44_999], [16_384, 16_384, 12_232], [20_000, 0, 25_000]]) {
      const read = gather(new BodyBytes(body.length, LIMIT), chunksOf(body, sizes));
      expect(read.equals(body), `chunks ${sizes}`).toBe(true);
      expect(read.buffer.byteLength).toBe(body.length);
    }
  });

  it('chunked (no declared length): grows as the chunks come, in order', () => {
    const sizes = [3, 5, 100, 1000, 7, 20_000, 23_885];
    const read = gather(new BodyBytes(null, LIMIT), chunksOf(body, sizes));
    expect(read.equals(body)).toBe(true);
  });

  it('chunked up to exactly the limit: the last growth stops at the limit', () => {
    const full = Buffer.alloc(LIMIT, 0x61);
    const read = gather(new BodyBytes(null, LIMIT), chunksOf(full, [40_000, 20_000, 5_536]));
    expect(read.equals(full)).toBe(true);
    expect(read.buffer.byteLength).toBe(LIMIT);
  });

  it('an empty body, declared or not, is empty', () => {
    for (const declared of [0, null]) {
      const read = gather(new BodyBytes(declared, LIMIT), [new ArrayBuffer(0)]);
      expect(read.length).toBe(0);
    }
  });

  it('a declared length is not held before its bytes arrive: the first buffer is bounded', () => {
    const before = process.memoryUsage().arrayBuffers;
    const waiting = Array.from({ length: 32 }, () => new BodyBytes(1024 * 1024, 1024 * 1024));
    const held = process.memoryUsage().arrayBuffers - before;
    expect(waiting).toHaveLength(32);
    // 32 bodies declared at 1 MiB each would hold 32 MiB; the first buffers hold 2 MiB.
    expect(held).toBeLessThan(8 * 1024 * 1024);
  });

  it('a declared length beyond the first buffer grows to exactly that length', () => {
    const large = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7) & 0xff));
    const sizes = [100_000, 100_000, 100_000];
    const read = gather(new BodyBytes(large.length, 1024 * 1024), chunksOf(large, sizes));
    expect(read.equals(large)).toBe(true);
    expect(read.buffer.byteLength).toBe(large.length);
  });
});
