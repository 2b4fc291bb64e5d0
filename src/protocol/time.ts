// RFC 3339 UTC timestamps (P13) and their parsing.

/** RFC 3339 UTC with `Z`, whole or fractional seconds. */
const RFC3339_UTC = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?Z$/;

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

/** Milliseconds since the epoch, or null when the text is not an RFC 3339 UTC time. */
export function parseTime(text: unknown): number | null {
  if (typeof text !== 'string') return null;
  const m = RFC3339_UTC.exec(text);
  if (m === null) return null;
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) return null;
  // Date.parse rolls over impossible dates (Feb 30); refuse them by checking the fields back.
  const d = new Date(ms);
  if (
    d.getUTCFullYear() !== Number(m[1]) ||
    d.getUTCMonth() + 1 !== Number(m[2]) ||
    d.getUTCDate() !== Number(m[3]) ||
    d.getUTCHours() !== Number(m[4]) ||
    d.getUTCMinutes() !== Number(m[5]) ||
    d.getUTCSeconds() !== Number(m[6])
  )
    return null;
  return ms;
}
