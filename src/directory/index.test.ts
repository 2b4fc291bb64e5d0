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
