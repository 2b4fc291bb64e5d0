// Mandate schedules (docs/decisions.md): an ISO 8601 repeating interval with a per-period
// ceiling, `{ "interval": "R[n]/<start>/<duration>", "max_per_period": "<decimal>" }`. The
// duration is whole years, months, weeks or days (P1M, P2W, P30D …); calendar months step by the
// calendar, so a mandate anchored on the 31st keeps the end of each month.
import { isDecimal } from '../../protocol/amounts.js';
import { parseTime } from '../../protocol/time.js';

export interface Schedule {
  interval: string;
  max_per_period: string;
}

export interface ParsedSchedule {
  start: number;
  repetitions: number | null;
  unit: 'Y' | 'M' | 'W' | 'D';
  count: number;
  maxPerPeriod: string;
}

const INTERVAL = /^R(\d*)\/([^/]+)\/P(\d{1,4})([YMWD])$/;

export function parseSchedule(schedule: Schedule): ParsedSchedule | string {
  const m = INTERVAL.exec(schedule.interval);
  if (m === null) {
    return 'interval must be an ISO 8601 repeating interval R[n]/<start>/P<n>(Y|M|W|D)';
  }
  const start = parseTime(m[2]);
  if (start === null) return 'the interval start must be an RFC 3339 UTC time';
  const count = Number(m[3]);
  if (count < 1) return 'the interval duration must be at least one unit';
  if (!isDecimal(schedule.max_per_period)) return 'max_per_period must be a decimal string';
  return {
    start,
    repetitions: m[1] === '' ? null : Number(m[1]),
    unit: m[4] as ParsedSchedule['unit'],
    count,
    maxPerPeriod: schedule.max_per_period,
  };
}

function step(from: number, s: ParsedSchedule, periods: number): number {
  if (s.unit === 'D' || s.unit === 'W') {
    return from + periods * s.count * (s.unit === 'D' ? 86_400_000 : 7 * 86_400_000);
  }
  const d = new Date(from);
  const months = periods * s.count * (s.unit === 'Y' ? 12 : 1);
  const target = new Date(
    Date.UTC(
      d.getUTCFullYear(),
      d.getUTCMonth() + months,
      1,
      d.getUTCHours(),
      d.getUTCMinutes(),
      d.getUTCSeconds(),
      d.getUTCMilliseconds(),
    ),
  );
  const lastDay = new Date(
    Date.UTC(target.getUTCFullYear(), target.getUTCMonth() + 1, 0),
  ).getUTCDate();
  target.setUTCDate(Math.min(d.getUTCDate(), lastDay));
  return target.getTime();
}

/** The index of the period holding `now`: -1 before the start, null after the last repetition. */
export function periodAt(s: ParsedSchedule, now: number): number | null {
  if (now < s.start) return -1;
  let lo = 0;
  let hi = 1;
  while (step(s.start, s, hi) <= now) hi *= 2;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (step(s.start, s, mid) <= now) lo = mid;
    else hi = mid;
  }
  if (s.repetitions !== null && lo >= s.repetitions) return null;
  return lo;
}
