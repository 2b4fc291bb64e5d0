// References (P9): a prefix and 128 random bits, drawn from a pool of random bytes that hands out
// each byte once, across refills of the pool.
import { describe, expect, it } from 'vitest';
import { isReferenceShaped, newAddress, newReference } from './ids.js';

describe('P9: references', () => {
  it('are shaped and never repeat across several refills of the pool', () => {
    const references = Array.from({ length: 1000 }, () => newReference('rcp'));
    expect(references.every((r) => isReferenceShaped(r, 'rcp'))).toBe(true);
    expect(new Set(references).size).toBe(references.length);
    const halves = references.flatMap((r) => [r.slice(4, 20), r.slice(20)]);
    expect(new Set(halves).size).toBe(halves.length);
  });

  it('addresses are 22 base-62 digits and never repeat', () => {
    const addresses = Array.from({ length: 600 }, () => newAddress());
    expect(addresses.every((a) => /^path:[0-9A-Za-z]{22}$/.test(a))).toBe(true);
    expect(new Set(addresses).size).toBe(addresses.length);
  });
});
