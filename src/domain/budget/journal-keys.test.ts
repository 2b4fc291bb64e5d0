// The packed keys of a lookup call (journal-keys.ts): bytes that are not a packing are told
// apart rather than journalled, and a packing spelled out as msgpack is byte for byte what
// msgpackr writes for the journal's list of [type, hash, found]; so is the journal row of a call
// (journal-rows.ts) the frame of its JournalEntry.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { journalRows } from './journal-rows.js';
import { frame, packValue } from '../../log/record.js';
import type { JournalEntry } from '../decider.js';
import {
  isPackedKeys,
  KEY_TYPES,
  packedKeysMsgpack,
  packJournalKeys,
  type JournalKey,
} from './journal-keys.js';

const hashOf = (n: number) => createHash('sha256').update(String(n)).digest('hex');
const keysOf = (n: number): JournalKey[] =>
  Array.from({ length: n }, (_, i) => ({
    identifier_type: KEY_TYPES[i % KEY_TYPES.length]!,
    identifier_hash: hashOf(i),
    found: i % 3 === 0,
  }));
const listed = (keys: JournalKey[]): JournalEntry['keys'] =>
  keys.map((k) => [k.identifier_type, k.identifier_hash, k.found]);

describe('packed journal keys (P8: type, hash, found)', () => {
  it('spells out a packing as the msgpack of its [type, hash, found] list, in order', () => {
    // Around each change of the array header: fixarray, array16, array32.
    for (const n of [0, 1, 7, 15, 16, 500, 65_535, 65_536]) {
      const keys = keysOf(n);
      const packed = packJournalKeys(keys);
      expect(isPackedKeys(packed), `${n} keys`).toBe(true);
      expect(packedKeysMsgpack(packed).equals(packValue(listed(keys))), `${n} keys`).toBe(true);
    }
  });

  it("writes a call's journal row as the frame of its JournalEntry, and reads it back so", () => {
    const requesters = [
      'beta',
      'local',
      `m-${'x'.repeat(40)}`,
      'caf\u00e9 \u{1F600}',
      'r'.repeat(300),
    ];
    for (const requester of requesters) {
      for (const n of [0, 3, 500]) {
        const keys = keysOf(n);
        const entry: JournalEntry = {
          requester,
          at: '2026-11-23T15:00:00.000Z',
          keys: listed(keys),
        };
        const write = journalRows.entry({ ...entry, keys: packJournalKeys(keys) }, 'id-1');
        expect(write.key).toBe(journalRows.key(entry.at, requester, 'id-1'));
        expect(write.bytes!.equals(frame(entry)), `${requester}, ${n} keys`).toBe(true);
        expect(journalRows.read(write.key, write.bytes!)).toEqual(entry);
      }
    }
  });

  it('refuses to pack a key no lookup has, and tells bytes that are not a packing', () => {
    const key = { identifier_type: 'email', identifier_hash: hashOf(1), found: true };
    expect(() => packJournalKeys([{ ...key, identifier_type: 'nickname' }])).toThrow(TypeError);
    expect(() => packJournalKeys([{ ...key, identifier_hash: 'abc' }])).toThrow(TypeError);
    const packed = packJournalKeys([key, key]);
    expect(isPackedKeys(packed.subarray(1))).toBe(false);
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
      expect(isPackedKeys(bad), `byte ${at} = ${value}`).toBe(false);
    }
  });

  it('packs into a buffer of its own, to be moved to a worker without taking others', () => {
    for (const n of [0, 1, 3, 500]) {
      const packed = packJournalKeys(keysOf(n));
      expect(packed.byteOffset).toBe(0);
      expect(packed.buffer.byteLength).toBe(packed.byteLength);
    }
  });
});
