// The index probed by the words of a key (findWords) answers exactly as probed by its hex (find):
// the same holder for a visible key, null for a hidden, removed, absent or other-type key.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DirectoryIndex } from './index.js';

const hash = (n: number) => createHash('sha256').update(`key-${n}`).digest('hex');
const KEYS = 20_000;

/** The first 128 bits of a hash as four words, written at `at` of a larger array. */
function wordsOf(hex: string, at: number): Uint32Array {
  const words = new Uint32Array(at + 4 + 3);
  for (let w = 0; w < 4; w++) words[at + w] = parseInt(hex.slice(w * 8, w * 8 + 8), 16);
  return words;
}

describe('DirectoryIndex.findWords (SPEC D)', () => {
  it('answers every key as find does: visible, hidden, removed, absent, other type', () => {
    const index = new DirectoryIndex();
    const alpha = index.holderId({ member: 'alpha', endpoint: 'https://alpha' });
    const beta = index.holderId({ member: 'beta', endpoint: 'https://beta' });
    for (let n = 0; n < KEYS; n++) {
      const visibility = n % 4 === 0 ? 'none' : n % 4 === 1 ? 'public' : 'network';
      index.set(hash(n), n % 2 === 0 ? 'email' : 'phone', n % 3 === 0 ? beta : alpha, visibility);
    }
    // Every eighth key is removed after being set.
    for (let n = 0; n < KEYS; n += 8)
      index.set(hash(n), 'email', n % 3 === 0 ? beta : alpha, 'none');
    let found = 0;
    for (let n = 0; n < KEYS + 2_000; n++) {
      const hex = hash(n);
      const at = n % 5;
      for (const type of ['email', 'phone', 'lei']) {
        const expected = index.find(hex, type);
        expect(index.findWords(wordsOf(hex, at), at, type)).toBe(expected);
        if (expected !== null) found++;
      }
    }
    expect(found).toBeGreaterThan(KEYS / 3);
  });
});

/** Every answer of an index, and its contributions, as one comparable list. */
function everything(index: DirectoryIndex, keys: number): string[] {
  const all: string[] = [];
  for (let n = 0; n < keys; n++)
    for (const type of ['email', 'phone'])
      all.push(`${index.find(hash(n), type)?.member ?? '-'} ${index.visibilityOf(hash(n))}`);
  for (const member of ['alpha', 'beta'])
    for (const type of ['email', 'phone']) all.push(String(index.contribution(member, type)));
  return all;
}

describe('IndexCopy (issue 34: the directory image taken while the index changes)', () => {
  it('is the index as it is when the copy ends, whatever changed between its parts', () => {
    // Sized so that the changes below never make the table grow.
    const index = new DirectoryIndex(60_000);
    const alpha = index.holderId({ member: 'alpha', endpoint: 'https://alpha' });
    const beta = index.holderId({ member: 'beta', endpoint: 'https://beta' });
    for (let n = 0; n < KEYS; n++)
      index.set(hash(n), 'email', n % 3 === 0 ? beta : alpha, 'network');
    const copy = index.copy();
    let n = 0;
    // Between parts: new keys claim slots on both sides of the copy's front, old keys change
    // visibility or leave, a whole load marks and sweeps.
    while (!copy.step(1024)) {
      for (let k = 0; k < 40; k++, n++) {
        index.set(hash(KEYS + n), 'phone', alpha, 'public');
        index.set(
          hash((n * 7) % KEYS),
          'email',
          n % 3 === 0 ? beta : alpha,
          n % 2 ? 'none' : 'public',
        );
      }
    }
    expect(n).toBeGreaterThan(1000);
    const image = copy.image();
    const taken = new DirectoryIndex();
    taken.holderId({ member: 'alpha', endpoint: 'https://alpha' });
    taken.holderId({ member: 'beta', endpoint: 'https://beta' });
    taken.adopt(image, new Map());
    expect(taken.size).toBe(index.size);
    expect(everything(taken, KEYS + n + 100)).toEqual(everything(index, KEYS + n + 100));
    // Changes after the copy ended are not in it.
    index.set(hash(KEYS + n), 'phone', alpha, 'public');
    expect(taken.find(hash(KEYS + n), 'phone')).toBeNull();
  });

  it('is given up when the table grows meanwhile (its arrays are replaced)', () => {
    const index = new DirectoryIndex();
    const alpha = index.holderId({ member: 'alpha', endpoint: 'https://alpha' });
    const copy = index.copy();
    copy.step(1024);
    for (let n = 0; n < 100_000 && !copy.abandoned; n++)
      index.set(hash(n), 'email', alpha, 'network');
    expect(copy.abandoned).toBe(true);
    while (!copy.step(1 << 20));
    expect(() => copy.image()).toThrow(/not complete/);
  });
});
