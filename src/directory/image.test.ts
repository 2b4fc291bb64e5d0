// The directory image written and read back: the same answers for every key, the same holders and
// contributions; a damaged, truncated or lengthened image is refused, never adopted.
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PARTITION_COUNT } from '../log/log.js';
import { MemoryLog } from '../log/memory-log.js';
import { LocalDirectory } from './directory.js';
import {
  IMAGE_FILE,
  ImageFile,
  readDirectoryImage,
  writeDirectoryImage,
  type ImagePosition,
} from './image.js';
import { DirectoryIndex } from './index.js';

const hash = (n: number) => createHash('sha256').update(`key-${n}`).digest('hex');
const TYPES = ['phone', 'email', 'bank_account'];
const KEYS = 50_000;
const partitions = new Array<number>(2 * PARTITION_COUNT).fill(0);
partitions.splice(0, 2, 7, 123456);
const position: ImagePosition = {
  member: 'local',
  partitions,
  feed: 42,
  followed: [['beta', 9]],
  name: 'e3b0c442-image',
};

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** An index of local and replicated keys, some removed, past several doublings of its table. */
function sampleIndex(): DirectoryIndex {
  const index = new DirectoryIndex();
  const local = index.holderId({ member: 'local', endpoint: 'http://old' });
  const beta = index.holderId({ member: 'beta', endpoint: 'http://beta' });
  for (let n = 0; n < KEYS; n++) {
    const visibility = n % 3 === 0 ? 'public' : 'network';
    index.set(hash(n), TYPES[n % 3]!, n % 5 === 0 ? beta : local, visibility);
  }
  for (let n = 0; n < KEYS; n += 7)
    index.set(hash(n), TYPES[n % 3]!, n % 5 === 0 ? beta : local, 'none');
  return index;
}

async function written(index: DirectoryIndex): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'path-image-'));
  dirs.push(dir);
  await writeDirectoryImage(dir, index, position);
  return dir;
}

describe('the directory image', () => {
  it("reads back as the index it was written from, with this run's local holder", async () => {
    const index = sampleIndex();
    const dir = await written(index);
    const read = await readDirectoryImage(dir);
    expect(read.kind).toBe('read');
    if (read.kind !== 'read') return;
    expect(read.position).toEqual(position);
    const directory = new LocalDirectory(new MemoryLog(), {
      member: 'local',
      endpoint: 'http://new',
    });
    directory.adopt(read.image);
    const adopted = directory.index;
    expect(adopted.size).toBe(index.size);
    const answers = (of: DirectoryIndex, localEndpoint: string) => {
      const all: string[] = [];
      for (let n = 0; n < KEYS + 100; n++) {
        for (const type of TYPES) {
          const h = of.find(hash(n), type);
          all.push(
            h === null ? '-' : `${h.member} ${h.member === 'local' ? localEndpoint : h.endpoint}`,
          );
        }
      }
      return all;
    };
    expect(answers(adopted, 'http://new')).toEqual(answers(index, 'http://new'));
    expect(adopted.find(hash(1), 'email')?.endpoint).toBe('http://new');
    for (const member of ['local', 'beta', 'gamma'])
      for (const type of TYPES)
        expect(adopted.contribution(member, type)).toBe(index.contribution(member, type));
    // The adopted index goes on changing like any other.
    adopted.set(hash(KEYS + 1), 'email', directory.localHolder, 'network');
    expect(adopted.find(hash(KEYS + 1), 'email')?.member).toBe('local');
    expect(adopted.contribution('local', 'email')).toBe(index.contribution('local', 'email') + 1);
  });

  it('is refused for another member', async () => {
    const read = await readDirectoryImage(await written(sampleIndex()));
    if (read.kind !== 'read') throw new Error('image not read');
    const directory = new LocalDirectory(new MemoryLog(), {
      member: 'other',
      endpoint: 'http://x',
    });
    expect(() => directory.adopt(read.image)).toThrow(/another member/);
  });

  it('is absent when there is no file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'path-image-'));
    dirs.push(dir);
    expect(await readDirectoryImage(dir)).toEqual({ kind: 'absent' });
  });

  it('with any one byte changed, is refused as damaged', async () => {
    const dir = await written(sampleIndex());
    const path = join(dir, IMAGE_FILE);
    const original = readFileSync(path);
    for (const at of [3, 20, Math.floor(original.length / 2), original.length - 2]) {
      const damaged = Buffer.from(original);
      damaged[at] = damaged[at]! ^ 0x10;
      writeFileSync(path, damaged);
      expect((await readDirectoryImage(dir)).kind, `byte ${at}`).toBe('damaged');
    }
  });

  it('cut short or lengthened, is refused as damaged', async () => {
    const dir = await written(sampleIndex());
    const path = join(dir, IMAGE_FILE);
    const original = readFileSync(path);
    truncateSync(path, statSync(path).size - 4);
    expect(await readDirectoryImage(dir)).toEqual({ kind: 'damaged', reason: 'truncated' });
    truncateSync(path, 10);
    expect((await readDirectoryImage(dir)).kind).toBe('damaged');
    writeFileSync(path, Buffer.concat([original, Buffer.alloc(4)]));
    expect((await readDirectoryImage(dir)).kind).toBe('damaged');
  });
});

/** Every answer of an index, and its contributions, as one comparable list. */
function everything(index: DirectoryIndex, keys: number): string[] {
  const all: string[] = [];
  for (let n = 0; n < keys; n++)
    for (const type of TYPES)
      all.push(`${index.find(hash(n), type)?.member ?? '-'} ${index.visibilityOf(hash(n))}`);
  for (const member of ['local', 'beta'])
    for (const type of TYPES) all.push(String(index.contribution(member, type)));
  return all;
}

describe('the directory image taken while the index changes (issue 34, IndexWalk)', () => {
  it('is the index as it is when the walk ends, whatever changed between its parts', async () => {
    // Sized so that the changes below never make the table grow.
    const index = new DirectoryIndex(150_000);
    const local = index.holderId({ member: 'local', endpoint: 'http://local' });
    const beta = index.holderId({ member: 'beta', endpoint: 'http://beta' });
    for (let n = 0; n < KEYS; n++)
      index.set(hash(n), TYPES[n % 3]!, n % 5 ? local : beta, 'network');
    const dir = mkdtempSync(join(tmpdir(), 'path-image-'));
    dirs.push(dir);
    const walk = index.walk();
    const file = await ImageFile.create(dir, walk.slots);
    let n = 0;
    // While each part is written: new keys claim slots on both sides of the walk's front, old
    // keys change visibility or leave.
    for (let part = walk.part(4096); part !== null; part = walk.part(4096)) {
      const writing = file.part(part);
      for (let k = 0; k < 20; k++, n++) {
        index.set(hash(KEYS + n), TYPES[n % 3]!, local, 'public');
        const old = (n * 7) % KEYS;
        index.set(hash(old), TYPES[old % 3]!, old % 5 ? local : beta, n % 2 ? 'none' : 'public');
      }
      await writing;
    }
    expect(n).toBeGreaterThan(1000);
    const end = walk.finish();
    expect(end.patches.length).toBeGreaterThan(0);
    await file.finish(end, position);
    // Changes after the walk ended are not in the image.
    index.set(hash(KEYS + n), 'phone', local, 'public');
    const read = await readDirectoryImage(dir);
    if (read.kind !== 'read') throw new Error(`image not read: ${JSON.stringify(read)}`);
    const taken = new LocalDirectory(new MemoryLog(), {
      member: 'local',
      endpoint: 'http://local',
    });
    taken.adopt(read.image);
    expect(taken.index.size).toBe(index.size - 1);
    expect(taken.index.find(hash(KEYS + n), 'phone')).toBeNull();
    index.set(hash(KEYS + n), 'phone', local, 'none');
    expect(everything(taken.index, KEYS + n + 100)).toEqual(everything(index, KEYS + n + 100));
  });

  it('is given up when the table grows meanwhile (its arrays are replaced)', async () => {
    const index = new DirectoryIndex();
    const local = index.holderId({ member: 'local', endpoint: 'http://local' });
    const walk = index.walk();
    walk.part(1024);
    for (let n = 0; n < 100_000 && !walk.abandoned; n++)
      index.set(hash(n), 'email', local, 'network');
    expect(walk.abandoned).toBe(true);
    while (walk.part(1 << 20) !== null);
    expect(() => walk.finish()).toThrow(/not complete/);
    // And a file given up leaves nothing behind.
    const dir = mkdtempSync(join(tmpdir(), 'path-image-'));
    dirs.push(dir);
    const file = await ImageFile.create(dir, walk.slots);
    await file.abandon();
    expect(existsSync(join(dir, `${IMAGE_FILE}.tmp`))).toBe(false);
    expect(existsSync(join(dir, IMAGE_FILE))).toBe(false);
  });
});
