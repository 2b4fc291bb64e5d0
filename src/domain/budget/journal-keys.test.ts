// The packed keys of a lookup call (journal-keys.ts): what goes in comes out as the journal
// keeps it, and bytes that are not a packing are told apart rather than journalled.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { packJournalKeys, unpackJournalKeys, type JournalKey } from './journal-keys.js';

const hashOf = (n: number) => createHash('sha256').update(String(n)).digest('hex');
const TYPES = ['phone', 'email', 'bank_account', 'lei', 'reg', 'tax', 'address'];

describe('packed journal keys (P8: type, hash, found)', () => {
  it('unpacks to each key as [type, hash, found], in order', () => {
    const keys: JournalKey[] = Array.from({ length: 500 }, (_, i) => ({
      identifier_type: TYPES[i % TYPES.length]!,
      identifier_hash: hashOf(i),
      found: i % 3 === 0,
    }));
    expect(unpackJournalKeys(packJournalKeys(keys))).toEqual(
      keys.map((k) => [k.identifier_type, k.identifier_hash, k.found]),
    );
    expect(unpackJournalKeys(packJournalKeys([]))).toEqual([]);
  });

  it('refuses to pack a key no lookup has, and to unpack bytes that are not a packing', () => {
    const key = { identifier_type: 'email', identifier_hash: hashOf(1), found: true };
    expect(() => packJournalKeys([{ ...key, identifier_type: 'nickname' }])).toThrow(TypeError);
    expect(() => packJournalKeys([{ ...key, identifier_hash: 'abc' }])).toThrow(TypeError);
    const packed = packJournalKeys([key, key]);
    expect(unpackJournalKeys(packed.subarray(1))).toBeNull();
    for (const [at, value] of [
      [0, 7],
      [1, 2],
      [2, 0x47],
      [65, 0x22],
      [30, 0x41],
      [2, 0x2f],
      [66, 7],
    ] as const) {
      const bad = Uint8Array.from(packed);
      bad[at] = value;
      expect(unpackJournalKeys(bad), `byte ${at} = ${value}`).toBeNull();
    }
  });

  it('packs into a buffer of its own, to be moved to a worker without taking others', () => {
    for (const n of [0, 1, 3, 500]) {
      const keys = Array.from({ length: n }, (_, i) => ({
        identifier_type: 'phone',
        identifier_hash: hashOf(i),
        found: false,
      }));
      const packed = packJournalKeys(keys);
      expect(packed.byteOffset).toBe(0);
      expect(packed.buffer.byteLength).toBe(packed.byteLength);
    }
  });
});
