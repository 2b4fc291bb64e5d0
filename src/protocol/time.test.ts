// RFC 3339 UTC timestamps with `Z` (P13, and P5 for Path-Timestamp).
import { describe, expect, it } from 'vitest';
import { isoTime, parseTime } from './time.js';

const NOON = Date.UTC(2026, 10, 21, 12, 0, 0);

describe('parseTime accepts (P13)', () => {
  it('whole seconds with Z', () => {
    expect(parseTime('2026-11-21T12:00:00Z')).toBe(NOON);
  });

  it('fractional seconds with Z (P5: both forms are valid)', () => {
    expect(parseTime('2026-11-21T12:00:00.123Z')).toBe(NOON + 123);
    expect(parseTime('2026-11-21T12:00:00.5Z')).toBe(NOON + 500);
    expect(parseTime('2026-11-21T12:00:00.000Z')).toBe(NOON);
  });

  it('more than three fractional digits, at millisecond precision', () => {
    expect(parseTime('2026-11-21T12:00:00.123456789Z')).toBe(NOON + 123);
  });

  it('29 February in a leap year, and the ends of the day', () => {
    expect(parseTime('2024-02-29T00:00:00Z')).toBe(Date.UTC(2024, 1, 29));
    expect(parseTime('2026-12-31T23:59:59Z')).toBe(Date.UTC(2026, 11, 31, 23, 59, 59));
    expect(parseTime('2026-01-01T00:00:00Z')).toBe(Date.UTC(2026, 0, 1));
  });

  it('what isoTime writes', () => {
    for (const ms of [0, NOON, NOON + 1, Date.UTC(2099, 5, 30, 23, 59, 59, 999)])
      expect(parseTime(isoTime(ms))).toBe(ms);
  });
});

describe('parseTime refuses (P13)', () => {
  it.each([
    ['an offset instead of Z', '2026-11-21T12:00:00+00:00'],
    ['a non-zero offset', '2026-11-21T13:00:00+01:00'],
    ['a missing Z', '2026-11-21T12:00:00'],
    ['a lowercase z', '2026-11-21T12:00:00z'],
    ['a space instead of T', '2026-11-21 12:00:00Z'],
    ['30 February', '2026-02-30T12:00:00Z'],
    ['29 February outside a leap year', '2026-02-29T12:00:00Z'],
    ['31 April', '2026-04-31T12:00:00Z'],
    ['month 13', '2026-13-01T12:00:00Z'],
    ['hour 24', '2026-11-21T24:00:00Z'],
    ['minute 60', '2026-11-21T12:60:00Z'],
    ['a date without a time', '2026-11-21'],
    ['missing seconds', '2026-11-21T12:00Z'],
    ['a dot without digits', '2026-11-21T12:00:00.Z'],
    ['a comma as decimal mark', '2026-11-21T12:00:00,5Z'],
    ['a two-digit year', '26-11-21T12:00:00Z'],
    ['surrounding whitespace', ' 2026-11-21T12:00:00Z'],
    ['a human date', 'Sat, 21 Nov 2026 12:00:00 GMT'],
    ['epoch seconds', '1795262400'],
    ['the empty string', ''],
  ])('%s', (_name, text) => {
    expect(parseTime(text)).toBeNull();
  });

  it('values that are not strings', () => {
    for (const value of [NOON, null, undefined, new Date(NOON), {}])
      expect(parseTime(value)).toBeNull();
  });
});
