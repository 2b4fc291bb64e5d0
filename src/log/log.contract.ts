// The contract every `Log` implementation keeps, as one suite run against each of them
// (log.test.ts): records per partition in sequence order, table rows beside them, key ranges,
// snapshots, and everything an append acknowledged still there after the log is reopened.
// A new implementation (another store) passes this suite before the node may run on it.
import { describe, expect, it } from 'vitest';
import type { Log, LogEntry, Table, TableWrite } from './log.js';

export interface LogFactory {
  /** A new, empty log. */
  open(): Promise<Log> | Log;
  /**
   * The same log after an orderly close (what a restart sees); the old handle is not used again.
   */
  reopen(log: Log): Promise<Log> | Log;
  /** Releases everything `open` made. */
  dispose(): Promise<void> | void;
}

const entry = (partition: number, seq: number, text: string): LogEntry => ({
  partition,
  seq,
  bytes: Buffer.from(text),
});
const row = (table: Table, key: string, text: string | null): TableWrite => ({
  table,
  key,
  bytes: text === null ? null : Buffer.from(text),
});
const texts = (rows: Iterable<{ bytes: Buffer }>) =>
  [...rows].map((r) => Buffer.from(r.bytes).toString());
const keys = (rows: Iterable<{ key: string }>) => [...rows].map((r) => r.key);

export function logContract(name: string, factory: LogFactory): void {
  describe(`Log contract: ${name}`, () => {
    const withLog = async (test: (log: Log) => Promise<void>) => {
      const log = await factory.open();
      try {
        await test(log);
      } finally {
        await factory.dispose();
      }
    };

    it(
      'reads the records of one partition in sequence order, ' +
        'after a given seq, apart from other partitions',
      () =>
        withLog(async (log) => {
          await log.append([entry(5, 1, 'a'), entry(5, 2, 'b'), entry(6, 1, 'x')], []);
          await log.append([entry(5, 3, 'c')], []);
          expect(texts(log.read(5, 0))).toEqual(['a', 'b', 'c']);
          expect([...log.read(5, 1)].map((r) => r.seq)).toEqual([2, 3]);
          expect(texts(log.read(6, 0))).toEqual(['x']);
          expect([...log.read(7, 0)]).toEqual([]);
          expect([...log.read(5, 3)]).toEqual([]);
        }),
    );

    it("gives a partition's last seq, 0 for a partition with no record, apart from others", () =>
      withLog(async (log) => {
        await log.append([entry(5, 1, 'a'), entry(5, 2, 'b'), entry(6, 1, 'x')], []);
        await log.append([entry(5, 3, 'c')], []);
        expect([log.lastSeq(4), log.lastSeq(5), log.lastSeq(6), log.lastSeq(7)]).toEqual([
          0, 3, 1, 0,
        ]);
        expect(log.lastSeq(0)).toBe(0);
      }));

    it('replays the same records through a decoder, each decoded as it is read', () =>
      withLog(async (log) => {
        const long = 'l'.repeat(5000);
        await log.append([entry(5, 1, 'a'), entry(5, 2, long), entry(6, 1, 'x')], []);
        await log.append([entry(5, 3, 'c')], []);
        const decoded = (p: number, after: number) =>
          [...log.replay(p, after, (bytes) => bytes.toString())].map((r) => [r.seq, r.value]);
        expect(decoded(5, 0)).toEqual([
          [1, 'a'],
          [2, long],
          [3, 'c'],
        ]);
        expect(decoded(5, 2)).toEqual([[3, 'c']]);
        expect(decoded(6, 0)).toEqual([[1, 'x']]);
        expect(decoded(7, 0)).toEqual([]);
      }));

    it('lands the table rows of an append with its records, and a null row deletes', () =>
      withLog(async (log) => {
        await log.append(
          [entry(1, 1, 'r')],
          [row('views', 'rcp_a', 'view-a'), row('outbox', 'evt_1', 'event')],
        );
        log.refresh();
        expect(log.get('views', 'rcp_a')?.toString()).toBe('view-a');
        expect(log.get('outbox', 'evt_1')?.toString()).toBe('event');
        expect(log.get('idempotency', 'rcp_a')).toBeUndefined();
        await log.append([entry(1, 2, 's')], [row('views', 'rcp_a', null)]);
        log.refresh();
        expect(log.get('views', 'rcp_a')).toBeUndefined();
        expect(texts(log.read(1, 0))).toEqual(['r', 's']);
      }));

    it('writes rows outside any record (housekeeping), durable when it resolves', () =>
      withLog(async (log) => {
        await log.write([row('journal', 'k1', 'one'), row('journal', 'k2', 'two')]);
        await log.write([row('journal', 'k1', null)]);
        log.refresh();
        expect(keys(log.scan('journal'))).toEqual(['k2']);
      }));

    it('scans a table in key order: start inclusive, end exclusive, reversed, limited', () =>
      withLog(async (log) => {
        await log.write(['a/1', 'a/2', 'a/3', 'b/1', 'c'].map((k) => row('usage', k, k)));
        log.refresh();
        expect(keys(log.scan('usage'))).toEqual(['a/1', 'a/2', 'a/3', 'b/1', 'c']);
        expect(keys(log.scan('usage', { start: 'a/', end: 'a0' }))).toEqual(['a/1', 'a/2', 'a/3']);
        expect(keys(log.scan('usage', { start: 'a/2', end: 'b/1' }))).toEqual(['a/2', 'a/3']);
        expect(keys(log.scan('usage', { start: 'a/', end: 'a0', reverse: true }))).toEqual([
          'a/3',
          'a/2',
          'a/1',
        ]);
        expect(
          keys(log.scan('usage', { start: 'a/', end: 'a0', reverse: true, limit: 2 })),
        ).toEqual(['a/3', 'a/2']);
        expect(keys(log.scan('usage', { end: 'b' }))).toEqual(['a/1', 'a/2', 'a/3']);
        expect(keys(log.scan('usage', { start: 'b', limit: 1 }))).toEqual(['b/1']);
        expect(keys(log.scan('usage', { start: 'd' }))).toEqual([]);
      }));

    it('loads a row and a range as get and scan read them, without blocking (issue 29)', () =>
      withLog(async (log) => {
        await log.write(['a/1', 'a/2', 'a/3', 'b/1'].map((k) => row('usage', k, k)));
        expect((await log.load('usage', 'a/2'))?.toString()).toBe('a/2');
        expect(await log.load('usage', 'a/9')).toBeUndefined();
        expect(await log.load('views', 'a/2')).toBeUndefined();
        expect(keys(await log.loadRange('usage'))).toEqual(['a/1', 'a/2', 'a/3', 'b/1']);
        const range = { start: 'a/', end: 'a0', reverse: true, limit: 2 };
        expect(keys(await log.loadRange('usage', range))).toEqual(['a/3', 'a/2']);
        const [first] = await log.loadRange('usage', { start: 'b' });
        expect(first?.bytes.toString()).toBe('b/1');
      }));

    it('lends a value for one call, cut to its length, each read its own bytes', () =>
      withLog(async (log) => {
        // The short value read after the long one: a buffer shared between reads and longer
        // than the value shows here as the long value's tail or as a wrong length.
        const long = 'L'.repeat(3000);
        await log.write([row('views', 'long', long), row('views', 'short', 'short')]);
        log.refresh();
        const lent = (key: string) =>
          log.peek('views', key, (bytes, named) => ({
            named,
            text: bytes.toString(),
            length: bytes.length,
            same: bytes.equals(Buffer.from(key === 'long' ? long : 'short')),
          }));
        for (const key of ['long', 'short', 'long', 'short']) {
          const text = key === 'long' ? long : 'short';
          expect(lent(key)).toEqual({ named: key, text, length: text.length, same: true });
        }
        let called = false;
        expect(log.peek('views', 'none', () => (called = true))).toBeUndefined();
        expect(called).toBe(false);
      }));

    it('lends the value last committed: a rewrite of the same length is seen', () =>
      withLog(async (log) => {
        await log.write([row('views', 'v', 'first')]);
        log.refresh();
        expect(log.peek('views', 'v', (bytes) => bytes.toString())).toBe('first');
        await log.write([row('views', 'v', 'again')]);
        log.refresh();
        expect(log.peek('views', 'v', (bytes) => bytes.toString())).toBe('again');
        await log.write([row('views', 'v', null)]);
        log.refresh();
        expect(log.peek('views', 'v', (bytes) => bytes.toString())).toBeUndefined();
      }));

    it('changes the peek version before a peek can answer differently', () =>
      withLog(async (log) => {
        await log.write([row('views', 'v', 'first')]);
        log.refresh();
        const first = log.peekVersion();
        expect(log.peek('views', 'v', (bytes) => bytes.toString())).toBe('first');
        expect(log.peekVersion()).toBe(first);
        await log.write([row('views', 'v', 'again')]);
        log.refresh();
        const again = log.peekVersion();
        expect(again).not.toBe(first);
        expect(log.peek('views', 'v', (bytes) => bytes.toString())).toBe('again');
        await log.write([row('views', 'v', null)]);
        log.refresh();
        expect(log.peekVersion()).not.toBe(again);
        expect(log.peek('views', 'v', (bytes) => bytes.toString())).toBeUndefined();
      }));

    it('lends a value larger than any read buffer whole', () =>
      withLog(async (log) => {
        // lmdb-js hands values over 16 MiB as a view of the map rather than a copy.
        const big = Buffer.alloc(17 * 1024 * 1024, 7);
        big[big.length - 1] = 9;
        await log.write([{ table: 'views', key: 'big', bytes: big }, row('views', 's', 's')]);
        log.refresh();
        expect(log.peek('views', 's', (bytes) => bytes.toString())).toBe('s');
        expect(log.peek('views', 'big', (bytes) => Buffer.compare(bytes, big))).toBe(0);
        expect(log.peek('views', 's', (bytes) => bytes.toString())).toBe('s');
      }));

    it('keeps tables apart: the same key in two tables is two rows', () =>
      withLog(async (log) => {
        await log.write([row('views', 'k', 'in views'), row('directory', 'k', 'in directory')]);
        log.refresh();
        expect(log.get('views', 'k')?.toString()).toBe('in views');
        expect(log.get('directory', 'k')?.toString()).toBe('in directory');
        expect(keys(log.scan('deliveries'))).toEqual([]);
      }));

    it('returns bytes exactly as written, binary included', () =>
      withLog(async (log) => {
        const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
        await log.append(
          [{ partition: 9, seq: 1, bytes }],
          [{ table: 'replay', key: 'bin', bytes }],
        );
        log.refresh();
        expect(Buffer.compare([...log.read(9, 0)][0]!.bytes, bytes)).toBe(0);
        expect(Buffer.compare(log.get('replay', 'bin')!, bytes)).toBe(0);
      }));

    it('loads records and a snapshot as read and readSnapshot give them (issue 29)', () =>
      withLog(async (log) => {
        await log.append([entry(5, 1, 'a'), entry(5, 2, 'b'), entry(6, 1, 'x')], []);
        await log.append([entry(5, 3, 'c')], []);
        const text = (records: { seq: number; bytes: Buffer }[]) =>
          records.map((r) => `${r.seq}:${r.bytes.toString()}`);
        expect(text(await log.loadRecords(5, 0, 10))).toEqual(['1:a', '2:b', '3:c']);
        expect(text(await log.loadRecords(5, 1, 1))).toEqual(['2:b']);
        expect(await log.loadRecords(5, 3, 10)).toEqual([]);
        expect(await log.loadSnapshot(5)).toBeUndefined();
        await log.writeSnapshot(5, Buffer.from('state'));
        expect((await log.loadSnapshot(5))?.toString()).toBe('state');
      }));

    it('keeps one snapshot per partition; a new one replaces the old', () =>
      withLog(async (log) => {
        expect(log.readSnapshot(4)).toBeUndefined();
        await log.writeSnapshot(4, Buffer.from('first'));
        await log.writeSnapshot(4, Buffer.from('second'));
        await log.writeSnapshot(5, Buffer.from('other'));
        expect(log.readSnapshot(4)?.toString()).toBe('second');
        expect(log.readSnapshot(5)?.toString()).toBe('other');
      }));

    it('P14: all an append or write acknowledged is there after the log is reopened', async () => {
      const log = await factory.open();
      try {
        await log.append(
          [entry(2, 1, 'one'), entry(2, 2, 'two')],
          [row('views', 'v', 'view'), row('idempotency', 'i', 'answer')],
        );
        await log.write([row('cursors', 'member', 'cursor')]);
        await log.writeSnapshot(2, Buffer.from('snap'));
        const reopened = await factory.reopen(log);
        expect(texts(reopened.read(2, 0))).toEqual(['one', 'two']);
        expect(reopened.get('views', 'v')?.toString()).toBe('view');
        expect(reopened.get('idempotency', 'i')?.toString()).toBe('answer');
        expect(reopened.get('cursors', 'member')?.toString()).toBe('cursor');
        expect(reopened.readSnapshot(2)?.toString()).toBe('snap');
      } finally {
        await factory.dispose();
      }
    });

    it('appends issued together without waiting all resolve, and all are read back', () =>
      withLog(async (log) => {
        await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            log.append([entry(3, i + 1, `r${i + 1}`)], [row('views', `k${i}`, `v${i}`)]),
          ),
        );
        log.refresh();
        expect([...log.read(3, 0)].map((r) => r.seq)).toEqual(
          Array.from({ length: 50 }, (_, i) => i + 1),
        );
        expect(keys(log.scan('views'))).toHaveLength(50);
      }));
  });
}
