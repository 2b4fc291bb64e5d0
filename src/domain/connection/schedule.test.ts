// SPEC K mandates: the schedule shape chosen in docs/decisions.md ("Mandate schedule"):
// `{ interval: "R[n]/<start>/P<k>(Y|M|W|D)", max_per_period: "<decimal>" }`. parseSchedule accepts
// and refuses forms; periodAt places a moment in its period: days and weeks by fixed length,
// calendar months and years by the calendar from the start (a mandate anchored on the 31st keeps
// the end of each month), -1 before the start and null after the last repetition.
import { describe, expect, it } from 'vitest';
import { parseSchedule, periodAt, type ParsedSchedule } from './schedule.js';

const ms = (text: string) => Date.parse(text);
const DAY = 86_400_000;

function parsed(interval: string, max_per_period = '15'): ParsedSchedule {
  const result = parseSchedule({ interval, max_per_period });
  if (typeof result === 'string') throw new Error(`expected ${interval} to parse: ${result}`);
  return result;
}

describe('SPEC K mandate schedule: parseSchedule (docs/decisions.md, P13)', () => {
  it('accepts an unbounded repeating interval of calendar months and keeps its parts', () => {
    const schedule = { interval: 'R/2026-01-31T00:00:00Z/P1M', max_per_period: '15' };
    expect(parseSchedule(schedule)).toEqual({
      start: ms('2026-01-31T00:00:00Z'),
      repetitions: null,
      unit: 'M',
      count: 1,
      maxPerPeriod: '15',
    });
  });

  it('accepts a repetition count, fractional-second starts and every unit Y, M, W, D', () => {
    expect(parsed('R12/2026-03-01T08:30:00.250Z/P2W', '0.5')).toEqual({
      start: ms('2026-03-01T08:30:00.250Z'),
      repetitions: 12,
      unit: 'W',
      count: 2,
      maxPerPeriod: '0.5',
    });
    expect(parsed('R3/2026-01-01T00:00:00Z/P30D')).toMatchObject({
      repetitions: 3,
      unit: 'D',
      count: 30,
    });
    expect(parsed('R/2024-02-29T00:00:00Z/P1Y')).toMatchObject({
      repetitions: null,
      unit: 'Y',
      count: 1,
    });
    expect(parsed('R/2026-01-01T00:00:00Z/P3M')).toMatchObject({ unit: 'M', count: 3 });
  });

  it.each([
    ['no repetition marker', '2026-01-01T00:00:00Z/P1M'],
    ['start/end instead of start/duration', 'R/2026-01-01T00:00:00Z/2026-02-01T00:00:00Z'],
    ['duration/end form', 'R/P1M/2026-02-01T00:00:00Z'],
    ['a time unit (hours)', 'R/2026-01-01T00:00:00Z/PT1H'],
    ['a combined duration', 'R/2026-01-01T00:00:00Z/P1M2D'],
    ['a fractional duration', 'R/2026-01-01T00:00:00Z/P1.5M'],
    ['a zero-length duration', 'R/2026-01-01T00:00:00Z/P0D'],
    ['a negative repetition count', 'R-1/2026-01-01T00:00:00Z/P1M'],
    ['an extra segment', 'R/2026-01-01T00:00:00Z/P1M/P1D'],
    ['a start with an offset instead of Z', 'R/2026-01-01T00:00:00+01:00/P1M'],
    ['a date-only start', 'R/2026-01-01/P1M'],
    ['an impossible start date', 'R/2026-02-30T00:00:00Z/P1M'],
    ['lower-case designators', 'r/2026-01-01T00:00:00Z/p1m'],
    ['an empty interval', ''],
  ])('refuses an interval with %s', (_label, interval) => {
    expect(typeof parseSchedule({ interval, max_per_period: '15' })).toBe('string');
  });

  it.each([['-1'], ['1e3'], ['1,5'], [''], ['.5'], ['5.'], ['ten']])(
    'refuses max_per_period %j (not a P13 decimal string)',
    (max) => {
      const schedule = { interval: 'R/2026-01-01T00:00:00Z/P1M', max_per_period: max };
      expect(typeof parseSchedule(schedule)).toBe('string');
    },
  );
});

describe('SPEC K mandate schedule: periodAt', () => {
  it('is -1 before the start and 0 from the start instant', () => {
    const s = parsed('R/2026-05-10T12:00:00Z/P1D');
    expect(periodAt(s, ms('2026-05-10T11:59:59.999Z'))).toBe(-1);
    expect(periodAt(s, ms('2020-01-01T00:00:00Z'))).toBe(-1);
    expect(periodAt(s, ms('2026-05-10T12:00:00Z'))).toBe(0);
  });

  it('steps days by whole days (P1D and P30D)', () => {
    const daily = parsed('R/2026-05-10T12:00:00Z/P1D');
    const start = ms('2026-05-10T12:00:00Z');
    expect(periodAt(daily, start + DAY - 1)).toBe(0);
    expect(periodAt(daily, start + DAY)).toBe(1);
    expect(periodAt(daily, start + 365 * DAY + 5)).toBe(365);
    const monthly = parsed('R/2026-05-10T12:00:00Z/P30D');
    expect(periodAt(monthly, start + 30 * DAY - 1)).toBe(0);
    expect(periodAt(monthly, start + 30 * DAY)).toBe(1);
    expect(periodAt(monthly, start + 95 * DAY)).toBe(3);
  });

  it('steps weeks by seven days (P1W and P2W)', () => {
    const start = ms('2026-01-05T00:00:00Z');
    const weekly = parsed('R/2026-01-05T00:00:00Z/P1W');
    expect(periodAt(weekly, start + 7 * DAY - 1)).toBe(0);
    expect(periodAt(weekly, start + 7 * DAY)).toBe(1);
    expect(periodAt(weekly, start + 52 * 7 * DAY)).toBe(52);
    const fortnightly = parsed('R/2026-01-05T00:00:00Z/P2W');
    expect(periodAt(fortnightly, start + 14 * DAY - 1)).toBe(0);
    expect(periodAt(fortnightly, start + 14 * DAY)).toBe(1);
    expect(periodAt(fortnightly, start + 41 * DAY)).toBe(2);
  });

  it('steps calendar months from Jan 31 to Feb 29 (leap year), Mar 31, Apr 30', () => {
    const s = parsed('R/2024-01-31T00:00:00Z/P1M');
    expect(periodAt(s, ms('2024-02-28T23:59:59.999Z'))).toBe(0);
    expect(periodAt(s, ms('2024-02-29T00:00:00Z'))).toBe(1);
    expect(periodAt(s, ms('2024-03-30T23:59:59.999Z'))).toBe(1);
    expect(periodAt(s, ms('2024-03-31T00:00:00Z'))).toBe(2);
    expect(periodAt(s, ms('2024-04-29T23:59:59.999Z'))).toBe(2);
    expect(periodAt(s, ms('2024-04-30T00:00:00Z'))).toBe(3);
    // the anchor is the start, not the previous period: May 31 again, not May 30
    expect(periodAt(s, ms('2024-05-30T12:00:00Z'))).toBe(3);
    expect(periodAt(s, ms('2024-05-31T00:00:00Z'))).toBe(4);
    // across a year end: Dec 31 2024 begins period 11, Jan 31 2025 period 12
    expect(periodAt(s, ms('2024-12-31T00:00:00Z'))).toBe(11);
    expect(periodAt(s, ms('2025-01-30T23:59:59Z'))).toBe(11);
    expect(periodAt(s, ms('2025-01-31T00:00:00Z'))).toBe(12);
  });

  it('steps calendar months from Jan 31 to Feb 28 in a common year, then Mar 31', () => {
    const s = parsed('R/2023-01-31T00:00:00Z/P1M');
    expect(periodAt(s, ms('2023-02-27T23:59:59.999Z'))).toBe(0);
    expect(periodAt(s, ms('2023-02-28T00:00:00Z'))).toBe(1);
    expect(periodAt(s, ms('2023-03-30T23:59:59.999Z'))).toBe(1);
    expect(periodAt(s, ms('2023-03-31T00:00:00Z'))).toBe(2);
  });

  it('keeps the time of day of the start when stepping months', () => {
    const s = parsed('R/2026-01-15T18:30:00Z/P1M');
    expect(periodAt(s, ms('2026-02-15T18:29:59.999Z'))).toBe(0);
    expect(periodAt(s, ms('2026-02-15T18:30:00Z'))).toBe(1);
  });

  it('steps several months at a time (P3M: quarters)', () => {
    const s = parsed('R/2026-01-31T00:00:00Z/P3M');
    expect(periodAt(s, ms('2026-04-30T00:00:00Z'))).toBe(1);
    expect(periodAt(s, ms('2026-04-29T23:59:59.999Z'))).toBe(0);
    expect(periodAt(s, ms('2026-07-31T00:00:00Z'))).toBe(2);
    expect(periodAt(s, ms('2026-07-30T00:00:00Z'))).toBe(1);
  });

  it('steps years by the calendar (Feb 29 anchor -> Feb 28 in common years, 29 in 2028)', () => {
    const s = parsed('R/2024-02-29T00:00:00Z/P1Y');
    expect(periodAt(s, ms('2025-02-27T23:59:59.999Z'))).toBe(0);
    expect(periodAt(s, ms('2025-02-28T00:00:00Z'))).toBe(1);
    expect(periodAt(s, ms('2028-02-28T23:59:59.999Z'))).toBe(3);
    expect(periodAt(s, ms('2028-02-29T00:00:00Z'))).toBe(4);
    const biennial = parsed('R/2026-06-01T00:00:00Z/P2Y');
    expect(periodAt(biennial, ms('2028-05-31T23:59:59.999Z'))).toBe(0);
    expect(periodAt(biennial, ms('2028-06-01T00:00:00Z'))).toBe(1);
  });

  it('answers null after the last repetition of R3, and the periods before it', () => {
    const s = parsed('R3/2026-01-31T00:00:00Z/P1M');
    expect(periodAt(s, ms('2026-01-30T00:00:00Z'))).toBe(-1);
    expect(periodAt(s, ms('2026-01-31T00:00:00Z'))).toBe(0);
    expect(periodAt(s, ms('2026-02-28T00:00:00Z'))).toBe(1);
    expect(periodAt(s, ms('2026-03-31T00:00:00Z'))).toBe(2);
    expect(periodAt(s, ms('2026-04-29T23:59:59.999Z'))).toBe(2);
    expect(periodAt(s, ms('2026-04-30T00:00:00Z'))).toBeNull();
    expect(periodAt(s, ms('2030-01-01T00:00:00Z'))).toBeNull();
    const days = parsed('R3/2026-01-01T00:00:00Z/P1D');
    expect(periodAt(days, ms('2026-01-03T23:59:59.999Z'))).toBe(2);
    expect(periodAt(days, ms('2026-01-04T00:00:00Z'))).toBeNull();
  });

  it('an unbounded interval never ends', () => {
    const s = parsed('R/2026-01-01T00:00:00Z/P1D');
    expect(periodAt(s, ms('2126-01-01T00:00:00Z'))).toBe(36_524);
  });
});
