// Decimal amounts as strings (P13): parsed to scaled integers, compared and summed exactly.
// No value ever passes through a floating-point number. An amount is also bounded by its asset's
// unit (P23): the fractional digits it may carry, one rule for every route that takes one.
import currencyCodes from 'currency-codes';
import { TOKEN_FRACTION_DIGITS_MAX } from '../config.js';
import { refusal, type Refusal } from './errors.js';

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

/** An asset as an Amount or a Capability names it (SPEC "Shared types"). */
export interface Asset {
  asset_type: string;
  asset_code: string;
}

/** An Amount (SPEC "Shared types"): a decimal string of one asset. */
export interface AssetAmount extends Asset {
  value: string;
}

/** The amounts a Capability carries: its fees and its ceiling for one payment. */
export interface PricedCapability {
  fees?: readonly { amount: AssetAmount }[];
  limits?: { max_single?: AssetAmount };
}

/** A connection's or delegation's `currency` names a fiat currency (P23). */
export const fiat = (currency: string): Asset => ({ asset_type: 'fiat', asset_code: currency });

/**
 * ISO 4217 codes and their minor-unit digits, from the `currency-codes` package (which gives the
 * codes with no minor unit, XAU, XDR and the like, 0 digits). Read once: a consume looks here.
 */
const MINOR_UNIT_DIGITS = new Map(currencyCodes.data.map((c) => [c.code, c.digits]));

/**
 * A fiat asset's ISO 4217 code and its digits, or undefined. Codes are looked up regardless of
 * case, as the package does ("eur" is the euro): a lower-case code is no way around the rule.
 */
function iso4217(asset: Asset): { code: string; digits: number } | undefined {
  if (asset.asset_type !== 'fiat') return undefined;
  const code = asset.asset_code.toUpperCase();
  const digits = MINOR_UNIT_DIGITS.get(code);
  return digits === undefined ? undefined : { code, digits };
}

/**
 * The fractional digits an amount of `asset` may carry (P23): a fiat currency's ISO 4217 minor
 * unit (EUR 2, JPY 0, BHD 3), and 18 for a token. A code the table does not know (a fiat
 * `asset_code` or `currency` outside ISO 4217, an asset type other than fiat and token) was
 * accepted before P23 and still is; its amounts are bounded as a token's, the finest unit the
 * protocol knows.
 */
export function fractionDigitsAllowed(asset: Asset): number {
  return iso4217(asset)?.digits ?? TOKEN_FRACTION_DIGITS_MAX;
}

/** Fractional digits as written, trailing zeros included: "1.000" has 3 (one value, one form). */
export function fractionDigitsOf(text: string): number {
  const dot = text.indexOf('.');
  return dot < 0 ? 0 : text.length - dot - 1;
}

/**
 * The 400 for a decimal `value` of `asset` at `field` that carries more fractional digits than
 * the asset allows (P23), naming the field and the digits allowed; null when it is within them
 * (or absent: an optional field not given).
 */
export function fractionRefusal(
  value: string | undefined,
  asset: Asset,
  field: string,
): Refusal | null {
  if (value === undefined) return null;
  const allowed = fractionDigitsAllowed(asset);
  if (fractionDigitsOf(value) <= allowed) return null;
  const known = iso4217(asset);
  const unit =
    known !== undefined
      ? `the minor unit of ${known.code}`
      : asset.asset_type === 'token'
        ? "a token's finest unit"
        : 'the bound of an asset with no known ISO 4217 minor unit';
  const digits = allowed === 0 ? 'no fractional digits' : `at most ${allowed} fractional digits`;
  return refusal(
    'path.core.invalid_request',
    `${field} may carry ${digits} (${unit}; trailing zeros count)`,
    { field, max_fraction_digits: allowed },
  );
}

/** fractionRefusal of an Amount at `field` (its `value` is named); none for an absent one. */
export function amountRefusal(
  amount: AssetAmount | null | undefined,
  field: string,
): Refusal | null {
  return amount == null ? null : fractionRefusal(amount.value, amount, `${field}.value`);
}

/** fractionRefusal of each Fee's amount in `fees` at `field`. */
export function feesRefusal(
  fees: readonly { amount: AssetAmount }[] | undefined,
  field: string,
): Refusal | null {
  const list = fees ?? [];
  for (let i = 0; i < list.length; i++) {
    const refused = amountRefusal(list[i]!.amount, `${field}.${i}.amount`);
    if (refused !== null) return refused;
  }
  return null;
}

/** fractionRefusal of each amount of a Capability at `field`: its fees and its `max_single`. */
export function capabilityRefusal(capability: PricedCapability, field: string): Refusal | null {
  return (
    feesRefusal(capability.fees, `${field}.fees`) ??
    amountRefusal(capability.limits?.max_single, `${field}.limits.max_single`)
  );
}

/** The first refusal of a list of capabilities (`accepts`) at `field`, or null. */
export function capabilitiesRefusal(
  capabilities: readonly PricedCapability[],
  field: string,
): Refusal | null {
  for (let i = 0; i < capabilities.length; i++) {
    const refused = capabilityRefusal(capabilities[i]!, `${field}.${i}`);
    if (refused !== null) return refused;
  }
  return null;
}
