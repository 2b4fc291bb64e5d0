// The keys other instances changed (cluster mode, P22) are read again without holding the thread
// that serves HTTP, and while the database does not answer they wait and are read once it does
// (issue 29): none is lost, none throws. A command's own keys, from a log that does not read in
// place, are read in turn too, and the command's answer can wait for them (apply's promise).
import { describe, expect, it } from 'vitest';
import type { Log, ScanRange, Table } from '../log/log.js';
import { MemoryLog } from '../log/memory-log.js';
import { frame } from '../log/record.js';
import { UnavailableError } from '../log/unavailable.js';
import { LocalDirectory } from './directory.js';

const hash = (n: number) => n.toString(16).padStart(64, '0');
const holder = { member: 'beta', endpoint: 'http://beta' };

describe('keys heard from other instances (applyHashes)', () => {
  it('are read again once the database answers, after failing as a lost one', async () => {
    const log = new MemoryLog();
    const directory = new LocalDirectory(log, holder);
    await directory.load();
    directory.ready();
    // From here the synchronous read fails as a lost database's does (the thread would wait on
    // it, then throw), and `loadRange` fails twice so, then answers.
    const scan = log.scan.bind(log);
    log.scan = () => {
      throw new UnavailableError('no answer');
    };
    let reads = 0;
    log.loadRange = async (table, range) => {
      if (++reads <= 2) throw new UnavailableError('no answer');
      return [...scan(table, range)];
    };
    await log.write([
      { table: 'directory', key: `${hash(7)}/idn/a`, bytes: frame({ t: 'phone', v: 'network' }) },
    ]);
    directory.applyHashes([hash(7)]);
    await waitUntil(() => directory.index.find(hash(7), 'phone') !== null);
    expect(directory.index.find(hash(7), 'phone')?.member).toBe('beta');
    expect(reads).toBe(3);
  });
});

async function waitUntil(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe("a command's own keys (apply)", () => {
  it('are read again once the database answers when it went away after the commit', async () => {
    const log = new MemoryLog();
    const directory = new LocalDirectory(log, holder);
    await directory.load();
    directory.ready();
    await log.write([
      { table: 'directory', key: `${hash(8)}/idn/a`, bytes: frame({ t: 'email', v: 'public' }) },
    ]);
    // The read in place fails as a lost database's does; the later read answers.
    const scan = log.scan.bind(log);
    log.scan = () => {
      throw new UnavailableError('no answer');
    };
    log.loadRange = async (table, range) => [...scan(table, range)];
    const row = { key: 'a', identifierHash: hash(8), identifierType: 'email', visibility: null };
    expect(() => directory.apply([row])).not.toThrow();
    await waitUntil(() => directory.index.find(hash(8), 'email') !== null);
    expect(directory.index.find(hash(8), 'email')?.member).toBe('beta');
  });
});

describe("a command's own keys from a log that does not read in place (cluster mode)", () => {
  it('are read in turn, and what apply returns resolves once they are indexed', async () => {
    const memory = new MemoryLog();
    // As the PostgreSQL log on the front end's thread once it serves: a synchronous read throws
    // (issue 29), and a range read answers when the test lets it.
    let gate: Promise<void> = Promise.resolve();
    const log = {
      scan: () => {
        throw new Error('a synchronous read of directory on the thread that serves HTTP');
      },
      loadRange: async (table: Table, range?: ScanRange) => {
        await gate;
        return memory.loadRange(table, range);
      },
    } as unknown as Log;
    const directory = new LocalDirectory(log, holder);
    await directory.load();
    directory.ready();
    await memory.write([
      { table: 'directory', key: `${hash(9)}/idn/a`, bytes: frame({ t: 'email', v: 'public' }) },
    ]);
    let release!: () => void;
    gate = new Promise((resolve) => {
      release = resolve;
    });
    const row = { key: 'a', identifierHash: hash(9), identifierType: 'email', visibility: null };
    const read = directory.apply([row]);
    expect(read).toBeInstanceOf(Promise);
    let indexed = false;
    void read!.then(() => {
      indexed = directory.index.find(hash(9), 'email') !== null;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(directory.index.find(hash(9), 'email')).toBeNull();
    release();
    await read;
    expect(indexed).toBe(true);
    expect(directory.index.find(hash(9), 'email')?.member).toBe('beta');
  });
});

describe('a whole load of an index already built (issue 30)', () => {
  it('removes the local keys whose rows went while the index was not told', async () => {
    // Cluster mode: the notes of a withdrawal lost (the database restarted), the index is read
    // again whole; the withdrawn key must not stay findable here until a restart.
    // Hashes that differ in their first 128 bits, which the index keys on.
    const spread = (n: number) => n.toString(16).padStart(8, '0') + 'ab'.repeat(28);
    const log = new MemoryLog();
    const row = (n: number, t: string) => ({
      table: 'directory' as const,
      key: `${spread(n)}/idn/a`,
      bytes: frame({ t, v: 'network' }),
    });
    await log.write([row(1, 'phone'), row(2, 'phone'), row(3, 'email')]);
    const directory = new LocalDirectory(log, holder);
    await directory.load();
    directory.ready();
    expect(directory.index.find(spread(2), 'phone')?.member).toBe('beta');
    expect(directory.index.contribution('beta', 'phone')).toBe(2);
    await log.write([{ table: 'directory', key: `${spread(2)}/idn/a`, bytes: null }]);
    expect(await directory.load()).toBe(2);
    expect(directory.index.find(spread(2), 'phone')).toBeNull();
    expect(directory.index.visibilityOf(spread(2))).toBe('none');
    expect(directory.index.visibilityOf(spread(1))).toBe('network');
    expect(directory.index.find(spread(1), 'phone')?.member).toBe('beta');
    expect(directory.index.find(spread(3), 'email')?.member).toBe('beta');
    expect(directory.index.contribution('beta', 'phone')).toBe(1);
  });
});

describe('keys a command changes while a whole load runs', () => {
  // Cluster mode: a whole load (after lost notes, or for the feed's new writer) runs while
  // commands go on. The load reads the table a page at a time, so a key changed meanwhile may be
  // in a page it read before the change, or in none; what the change read is the newer.
  const spread = (n: number) => n.toString(16).padStart(8, '0') + 'cd'.repeat(28);
  const row = (n: number, v: 'network' | 'public' | null) => ({
    table: 'directory' as const,
    key: `${spread(n)}/idn/a`,
    bytes: v === null ? null : frame({ t: 'phone', v }),
  });
  const change = (n: number, v: 'network' | 'public' | null) => ({
    key: `${spread(n)}/idn/a`,
    identifierType: 'phone',
    identifierHash: spread(n),
    visibility: v,
  });

  it('keeps a key registered after the load read its page, and a withdrawal after it', async () => {
    const log = new MemoryLog();
    await log.write([row(1, 'network'), row(3, 'network')]);
    const directory = new LocalDirectory(log, holder);
    await directory.load();
    directory.ready();
    let changed = false;
    const pause = async () => {
      if (changed) return;
      changed = true;
      // After the load read its page: key 2 registered, key 3 withdrawn.
      await log.write([row(2, 'network'), row(3, null)]);
      await directory.apply([change(2, 'network'), change(3, null)]);
    };
    await directory.load({ pause, pauseEvery: 1 });
    expect(changed).toBe(true);
    expect(directory.index.find(spread(2), 'phone')?.member).toBe('beta');
    expect(directory.index.find(spread(3), 'phone')).toBeNull();
    expect(directory.index.find(spread(1), 'phone')?.member).toBe('beta');
    expect(directory.index.contribution('beta', 'phone')).toBe(2);
  });

  it('runs a second whole load asked for meanwhile after the first', async () => {
    // Cluster mode: the feed's new writer and a lost notes connection may each ask for one; the
    // second must still keep a change made while it runs (the first's end must not end that).
    const log = new MemoryLog();
    await log.write([row(1, 'network'), row(2, 'network'), row(3, 'public')]);
    const directory = new LocalDirectory(log, holder);
    await directory.load();
    directory.ready();
    let second: Promise<number> | null = null;
    let withdrawn = false;
    const whileSecond = async () => {
      if (withdrawn) return;
      withdrawn = true;
      await first;
      await log.write([row(3, null)]);
      await directory.apply([change(3, null)]);
    };
    const whileFirst = async () => {
      second ??= directory.load({ pause: whileSecond, pauseEvery: 1 });
    };
    const first = directory.load({ pause: whileFirst, pauseEvery: 1 });
    expect(await first).toBe(3);
    expect(await second).toBe(3);
    expect(withdrawn).toBe(true);
    expect(directory.index.find(spread(3), 'phone')).toBeNull();
    for (const n of [1, 2]) expect(directory.index.find(spread(n), 'phone')?.member).toBe('beta');
  });
});
