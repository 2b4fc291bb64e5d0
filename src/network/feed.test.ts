// The change feed converges on the directory whatever happened in between: a start merges the
// feed's state with the directory's keys and appends exactly the changes the feed missed.
import { describe, expect, it } from 'vitest';
import { LocalDirectory } from '../directory/directory.js';
import { NotHeldError } from '../log/log.js';
import { MemoryLog } from '../log/memory-log.js';
import { UnavailableError } from '../log/unavailable.js';
import { frame } from '../log/record.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import { FeedPublisher } from './feed.js';

const signer = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
const hash = (n: number) => n.toString(16).padStart(64, '0');

async function loadWith(log: MemoryLog): Promise<FeedPublisher> {
  const feed = new FeedPublisher(log, () => Date.parse('2026-11-22T00:00:00Z'));
  const directory = new LocalDirectory(log, { member: 'beta', endpoint: 'http://beta' });
  directory.observer = (h, t, v, loaded) => feed.observe(h, t, v, loaded);
  feed.beginLoad();
  await directory.load({ pause: () => feed.drainIfLarge(2), pauseEvery: 1 });
  feed.endLoad();
  await feed.flush();
  return feed;
}

const entries = async (feed: FeedPublisher, after = 0) =>
  JSON.parse(await feed.page(after, 100, 'beta', 'http://beta', signer)).entries as {
    identifier_hash: string;
    visibility: string | null;
  }[];

/** A directory built and ready over `log`, telling `feed` of every key it observes. */
async function directoryTelling(log: MemoryLog, feed: FeedPublisher): Promise<LocalDirectory> {
  const directory = new LocalDirectory(log, { member: 'beta', endpoint: 'http://beta' });
  await directory.load();
  directory.ready();
  directory.observer = (h, t, v, loaded) => feed.observe(h, t, v, loaded);
  return directory;
}

/** The directory row of key `n`, a phone number at `v`. */
const phoneRow = (n: number, v: 'network' | 'public' = 'network') => ({
  table: 'directory' as const,
  key: `${hash(n)}/idn/${n}`,
  bytes: frame({ t: 'phone', v }),
});

/** Keys 1 to 4 in the directory, and the feed stating them (sequence 4). */
async function fourKeysStated(log: MemoryLog): Promise<void> {
  await log.write([phoneRow(1), phoneRow(2), phoneRow(3), phoneRow(4)]);
  expect((await loadWith(log)).sequence).toBe(4);
}

describe('the change feed at start', () => {
  it('appends every visible local key once, and nothing on a second start', async () => {
    const log = new MemoryLog();
    await log.write([
      { table: 'directory', key: `${hash(1)}/idn/a`, bytes: frame({ t: 'phone', v: 'network' }) },
      { table: 'directory', key: `${hash(2)}/idn/b`, bytes: frame({ t: 'email', v: 'public' }) },
      { table: 'directory', key: `${hash(3)}/idn/c`, bytes: frame({ t: 'email', v: 'network' }) },
    ]);
    const first = await loadWith(log);
    expect((await entries(first)).map((e) => [e.identifier_hash, e.visibility])).toEqual([
      [hash(1), 'network'],
      [hash(2), 'public'],
      [hash(3), 'network'],
    ]);
    const second = await loadWith(log);
    expect(second.sequence).toBe(3);
  });

  it('appends changes the feed missed: a key gone, a key turned public, a new key', async () => {
    const log = new MemoryLog();
    await log.write([
      { table: 'directory', key: `${hash(1)}/idn/a`, bytes: frame({ t: 'phone', v: 'network' }) },
      { table: 'directory', key: `${hash(2)}/idn/b`, bytes: frame({ t: 'email', v: 'network' }) },
    ]);
    await loadWith(log);
    // Changes committed to the directory whose feed entries were lost (a crash in between).
    await log.write([
      { table: 'directory', key: `${hash(1)}/idn/a`, bytes: null },
      { table: 'directory', key: `${hash(2)}/idn/b`, bytes: frame({ t: 'email', v: 'public' }) },
      { table: 'directory', key: `${hash(4)}/idn/d`, bytes: frame({ t: 'phone', v: 'network' }) },
    ]);
    const feed = await loadWith(log);
    expect((await entries(feed, 2)).map((e) => [e.identifier_hash, e.visibility]).sort()).toEqual(
      [
        [hash(1), null],
        [hash(2), 'public'],
        [hash(4), 'network'],
      ].sort(),
    );
  });

  it('a key held by two registrations leaves the feed only when the last goes', async () => {
    const log = new MemoryLog();
    await log.write([
      { table: 'directory', key: `${hash(5)}/idn/x`, bytes: frame({ t: 'phone', v: 'network' }) },
      { table: 'directory', key: `${hash(5)}/idn/y`, bytes: frame({ t: 'phone', v: 'public' }) },
    ]);
    const feed = await loadWith(log);
    expect((await entries(feed)).map((e) => e.visibility)).toEqual(['public']);
  });

  it('cluster mode: a new holder of the feed appends nothing before it resyncs', async () => {
    const log = new MemoryLog();
    const rows = [1, 2].map((n) => ({
      table: 'directory' as const,
      key: `${hash(n)}/idn/${n}`,
      bytes: frame({ t: 'phone', v: 'network' }),
    }));
    // This instance's publisher, made before the earlier writer wrote its entry: its sequence
    // is behind the feed's.
    const epoch = { now: 0n };
    const writing = {
      epoch: () => epoch.now,
      write: (w: Parameters<MemoryLog['write']>[0]) => log.write(w),
    };
    const taker = new FeedPublisher(log, () => Date.parse('2026-11-22T00:00:00Z'), writing);
    await log.write([rows[0]!]);
    const earlier = await loadWith(log);
    expect((await entries(earlier)).map((e) => e.identifier_hash)).toEqual([hash(1)]);
    // It takes the partition: a change it hears before its resync is not appended (its sequence
    // would be the earlier writer's), and is found by the resync's load instead.
    epoch.now = 2n;
    await log.write([rows[1]!]);
    taker.observe(hash(2), 'phone', 'network');
    await taker.flush();
    expect((await entries(taker)).map((e) => e.identifier_hash)).toEqual([hash(1)]);
    taker.resync();
    const directory = new LocalDirectory(log, { member: 'beta', endpoint: 'http://beta' });
    directory.observer = (h, t, v, loaded) => taker.observe(h, t, v, loaded);
    taker.beginLoad();
    await directory.load();
    taker.endLoad();
    await taker.flush();
    expect((await entries(taker)).map((e) => [e.identifier_hash, e.visibility])).toEqual([
      [hash(1), 'network'],
      [hash(2), 'network'],
    ]);
  });
});

describe('the feed while commands change keys during its load', () => {
  it('states each change once, newest last, removing no key the load is yet to reach', async () => {
    // Cluster mode: the feed's new writer loads the directory beside the feed's state while
    // commands go on; a key changed meanwhile is observed out of the load's hash order.
    const log = new MemoryLog();
    const change = (n: number, v: 'network' | 'public') => ({
      key: `${hash(n)}/idn/${n}`,
      identifierType: 'phone',
      identifierHash: hash(n),
      visibility: v,
    });
    await log.write([phoneRow(1, 'network'), phoneRow(3, 'network'), phoneRow(4, 'network')]);
    const first = await loadWith(log);
    expect(first.sequence).toBe(3);
    const feed = new FeedPublisher(log, () => Date.parse('2026-11-22T00:00:00Z'));
    const directory = await directoryTelling(log, feed);
    let changed = false;
    const pause = async () => {
      if (changed) return;
      changed = true;
      // After the load read its page: key 2 registered, key 4 turned public.
      await log.write([phoneRow(2, 'network'), phoneRow(4, 'public')]);
      await directory.apply([change(2, 'network'), change(4, 'public')]);
    };
    feed.beginLoad();
    await directory.load({ pause, pauseEvery: 1 });
    feed.endLoad();
    await feed.flush();
    expect(changed).toBe(true);
    expect((await entries(feed, 3)).map((e) => [e.identifier_hash, e.visibility])).toEqual([
      [hash(2), 'network'],
      [hash(4), 'public'],
    ]);
    // A start after it finds nothing the feed missed.
    const again = await loadWith(log);
    expect(again.sequence).toBe(5);
  });
});

describe('the feed beside a whole load it did not ask for', () => {
  it('walks beside its own load only, not one under way when it asked', async () => {
    // Cluster mode: an instance reading its index again after lost notes becomes the feed's
    // writer meanwhile; its republish's load runs after the first, and the feed's walk must
    // take the keys of its own load alone, in their order.
    const log = new MemoryLog();
    await fourKeysStated(log);
    const feed = new FeedPublisher(log, () => Date.parse('2026-11-22T00:00:00Z'));
    const directory = await directoryTelling(log, feed);
    let republished: Promise<number> | null = null;
    const reread = directory.load({
      pauseEvery: 1,
      pause: async () => {
        // The feed's partition taken while the read again is at its first key.
        republished ??= directory.load({
          begin: () => feed.beginLoad(),
          end: () => feed.endLoad(),
        });
      },
    });
    expect(await reread).toBe(4);
    expect(await republished).toBe(4);
    await feed.flush();
    expect(await entries(feed, 4)).toEqual([]);
    expect(feed.sequence).toBe(4);
  });
});

describe('the feed when its writer takes the feed again amid a republish', () => {
  it('states nothing of the load it began before (no key removed, none stated again)', async () => {
    // Cluster mode: the writer lost the feed's partition and took it back (a new epoch) while
    // its republish's load ran; that load's walk belongs to the old epoch and must end unheard.
    const log = new MemoryLog();
    await fourKeysStated(log);
    const epoch = { now: 1n };
    const writing = {
      epoch: () => epoch.now,
      write: (w: Parameters<MemoryLog['write']>[0]) => log.write(w),
    };
    const feed = new FeedPublisher(log, () => Date.parse('2026-11-22T00:00:00Z'), writing);
    const directory = await directoryTelling(log, feed);
    const beside = { begin: () => feed.beginLoad(), end: () => feed.endLoad() };
    let again: Promise<number> | null = null;
    let pauses = 0;
    feed.resync();
    const first = directory.load({
      ...beside,
      pauseEvery: 1,
      pause: async () => {
        // The partition taken back at a new epoch once the first load has told its first key.
        if (again !== null || ++pauses < 2) return;
        epoch.now = 2n;
        feed.resync();
        again = directory.load(beside);
      },
    });
    expect(await first).toBe(4);
    expect(await again).toBe(4);
    await feed.flush();
    expect(await entries(feed, 4)).toEqual([]);
  });
});

describe('the feed while its database does not answer (issue 29)', () => {
  const at = () => Date.parse('2026-11-22T00:00:00Z');
  /** A cluster writer holding the feed's partition whose writes fail as `failures` says. */
  function failingWriter(log: MemoryLog, failures: Error[]) {
    const writing = {
      epoch: () => 1n,
      write: (w: Parameters<MemoryLog['write']>[0]) => {
        const failure = failures.shift();
        return failure === undefined ? log.write(w) : Promise.reject(failure);
      },
    };
    const feed = new FeedPublisher(log, at, writing);
    feed.resync();
    return feed;
  }

  it('a round the database did not take is written once it answers, in order', async () => {
    const log = new MemoryLog();
    const lost = () => new UnavailableError('the database did not answer');
    const feed = failingWriter(log, [lost(), lost()]);
    feed.observe(hash(1), 'phone', 'network');
    await feed.flush();
    feed.observe(hash(2), 'phone', 'public');
    await feed.flush();
    expect((await entries(feed)).map((e) => [e.identifier_hash, e.visibility])).toEqual([
      [hash(1), 'network'],
      [hash(2), 'public'],
    ]);
  });

  it('a round the fence refused is forgotten, and the rounds after it are written', async () => {
    const log = new MemoryLog();
    const feed = failingWriter(log, [new NotHeldError('partition 0 is held elsewhere')]);
    feed.observe(hash(1), 'phone', 'network');
    await feed.flush();
    feed.observe(hash(2), 'phone', 'network');
    await feed.flush();
    expect((await entries(feed)).map((e) => e.identifier_hash)).toEqual([hash(2)]);
  });

  it('a write that fails otherwise fails its own flush, not every later one', async () => {
    const log = new MemoryLog();
    const write = log.write.bind(log);
    let fail = true;
    log.write = (w) => (fail ? Promise.reject(new RangeError('no room')) : write(w));
    const feed = new FeedPublisher(log, at);
    feed.observe(hash(1), 'phone', 'network');
    await expect(feed.flush()).rejects.toThrow('no room');
    fail = false;
    feed.observe(hash(2), 'phone', 'network');
    await feed.flush();
    expect((await entries(feed)).map((e) => e.identifier_hash)).toEqual([hash(2)]);
  });
});
