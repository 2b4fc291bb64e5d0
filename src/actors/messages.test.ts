// The turn batcher (messages.ts) over a real MessageChannel: the messages of one turn leave in
// one postMessage, in order; a buffer named for transfer is moved (the sender's copy is
// detached), others are copied.
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/support/wait.js';
import { turnBatcher } from './messages.js';

const ports: MessagePort[] = [];
afterEach(() => {
  for (const port of ports.splice(0)) port.close();
});

function channel(chunkMax?: number) {
  const { port1, port2 } = new MessageChannel();
  ports.push(port1, port2);
  const received: unknown[][] = [];
  const arrived = new Promise<void>((resolve) =>
    port2.on('message', (messages: unknown[]) => {
      received.push(messages);
      resolve();
    }),
  );
  const posted: number[] = [];
  const batcher = turnBatcher<{ n: number; bytes?: Uint8Array }>((messages, transfer) => {
    posted.push(messages.length);
    port1.postMessage(messages, transfer);
  }, chunkMax);
  return { batcher, received, arrived, posted };
}

describe('the turn batcher', () => {
  it('sends the messages of one turn together and in order, moving the named buffers', async () => {
    const { batcher, received, arrived } = channel();
    const moved = Uint8Array.from([1, 2, 3]);
    const copied = Uint8Array.from([4, 5]);
    batcher.send({ n: 1, bytes: moved }, [moved.buffer]);
    batcher.send({ n: 2, bytes: copied });
    batcher.send({ n: 3 });
    await arrived;
    expect(received).toHaveLength(1);
    const messages = received[0] as { n: number; bytes?: Uint8Array }[];
    expect(messages.map((m) => m.n)).toEqual([1, 2, 3]);
    expect([...messages[0]!.bytes!]).toEqual([1, 2, 3]);
    expect([...messages[1]!.bytes!]).toEqual([4, 5]);
    expect(moved.byteLength).toBe(0);
    expect(copied.byteLength).toBe(2);
  });

  it('flushes at once when asked; a later turn moves only what it is told to', async () => {
    const { batcher, received, arrived } = channel();
    const moved = Uint8Array.from([9]);
    batcher.send({ n: 1, bytes: moved }, [moved.buffer]);
    batcher.flush();
    expect(moved.byteLength).toBe(0);
    await arrived;
    const kept = Uint8Array.from([7]);
    batcher.send({ n: 2, bytes: kept });
    batcher.flush();
    expect(kept.byteLength).toBe(1);
    expect(received[0]).toHaveLength(1);
  });

  it('with a chunk size, posts each full chunk at once and the rest at the turn end', async () => {
    const { batcher, received, posted } = channel(3);
    for (let n = 1; n <= 7; n++) batcher.send({ n });
    // Two full chunks left during the turn, while it was still sending; the seventh waits.
    expect(posted).toEqual([3, 3]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(posted).toEqual([3, 3, 1]);
    const order = () =>
      received.flatMap((messages) => (messages as { n: number }[]).map((m) => m.n));
    await waitFor('the three messages', () => received.length === 3);
    expect(order()).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });
});
