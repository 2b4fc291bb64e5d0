// Decimal amounts as strings (P13): parsed to scaled integers, compared and summed exactly.
// No value ever passes through a floating-point number.

export const DECIMAL_PATTERN = '^[0-9]+(\\.[0-9]+)?$';
const DECIMAL = new RegExp(DECIMAL_PATTERN);

/** A decimal held as an integer count of 10^-scale units. */
interface Scaled {
  units: bigint;
  scale: number;
}

export function isDecimal(text: unknown): text is string {
  return typeof text === 'string' && text.length <= 64 && DECIMAL.test(text);
}

function parse(text: string): Scaled {
  if (!isDecimal(text)) throw new RangeError('not a decimal string');
  const dot = text.indexOf('.');
  if (dot < 0) return { units: BigInt(text), scale: 0 };
  return { units: BigInt(text.slice(0, dot) + text.slice(dot + 1)), scale: text.length - dot - 1 };
}

function align(a: Scaled, b: Scaled): [bigint, bigint, number] {
  const scale = Math.max(a.scale, b.scale);
  return [
    a.units * 10n ** BigInt(scale - a.scale),
    b.units * 10n ** BigInt(scale - b.scale),
    scale,
  ];
}

function format(units: bigint, scale: number): string {
  const negative = units < 0n;
  let digits = (negative ? -units : units).toString();
  if (scale > 0) {
    digits = digits.padStart(scale + 1, '0');
    let whole = digits.slice(0, digits.length - scale);
    let fraction = digits.slice(digits.length - scale).replace(/0+$/, '');
    if (whole === '') whole = '0';
    digits = fraction ? `${whole}.${fraction}` : whole;
  }
  return negative ? `-${digits}` : digits;
}

/** -1, 0 or 1, exactly. "10.50" equals "10.5". */
export function compareDecimal(a: string, b: string): number {
  const [x, y] = align(parse(a), parse(b));
  return x < y ? -1 : x > y ? 1 : 0;
}

export function addDecimal(a: string, b: string): string {
  const [x, y, scale] = align(parse(a), parse(b));
  return format(x + y, scale);
}

/**
 * a - b; callers check `compareDecimal(a, b) >= 0` first where a negative result is meaningless.
 */
export function subtractDecimal(a: string, b: string): string {
  const [x, y, scale] = align(parse(a), parse(b));
  return format(x - y, scale);
}

export function isZeroDecimal(a: string): boolean {
  return parse(a).units === 0n;
}
