// Strict parsing of external keys by type (SPEC L): each key must parse as its type, and a parse
// tells the zone(s) it could belong to, so that only connectors of those zones are candidates.
// Parsing is done in the request's memory only; the raw key is never echoed, stored or logged.
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { electronicFormatIBAN, isValidIBAN } from 'ibantools';
import { normaliseIdentifier } from '../protocol/identifiers.js';

export const EXTERNAL_KEY_TYPES = [
  'phone',
  'email',
  'tax',
  'random',
  'alias',
  'iban',
  'vpa',
] as const;
export type ExternalKeyType = (typeof EXTERNAL_KEY_TYPES)[number];

/** Countries of the SEPA scheme, for IBAN keys (the EPC's list of scheme countries). */
const SEPA = new Set(
  (
    'AD AT BE BG CH CY CZ DE DK EE ES FI FR GB GI GR HR HU IE IS IT LI LT LU LV MC MT NL NO ' +
    'PL PT RO SE SI SK SM VA ' +
    'AX GF GP MQ YT RE BL MF PM GG JE IM'
  ).split(' '),
);

/**
 * Where a parsed key could be known: zones, or null
 * when its form names no zone (email, VPA, alias).
 */
export type ParsedKey = { zones: string[] | null };

const digitsOnly = (raw: string) => raw.replace(/[\s.\-/]/g, '');
const allSame = (d: string) => /^(\d)\1*$/.test(d);

/** Brazil's CPF (11 digits) and CNPJ (14 digits), each with two mod-11 check digits. */
function validBrazilianTax(raw: string): boolean {
  const d = digitsOnly(raw);
  if (!/^\d+$/.test(d) || allSame(d)) return false;
  const check = (body: string, weights: number[]) => {
    const sum = [...body].reduce((acc, c, i) => acc + Number(c) * weights[i]!, 0);
    const r = sum % 11;
    return r < 2 ? 0 : 11 - r;
  };
  if (d.length === 11) {
    const w1 = [10, 9, 8, 7, 6, 5, 4, 3, 2];
    const w2 = [11, 10, 9, 8, 7, 6, 5, 4, 3, 2];
    return check(d.slice(0, 9), w1) === Number(d[9]) && check(d.slice(0, 10), w2) === Number(d[10]);
  }
  if (d.length === 14) {
    const w1 = [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];
    const w2 = [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];
    return (
      check(d.slice(0, 12), w1) === Number(d[12]) && check(d.slice(0, 13), w2) === Number(d[13])
    );
  }
  return false;
}

/** Thailand's 13-digit citizen or juristic id: the last digit is (11 - sum mod 11) mod 10. */
function validThaiTax(raw: string): boolean {
  const d = digitsOnly(raw);
  if (!/^\d{13}$/.test(d)) return false;
  const sum = [...d.slice(0, 12)].reduce((acc, c, i) => acc + Number(c) * (13 - i), 0);
  return (11 - (sum % 11)) % 10 === Number(d[12]);
}

/** Singapore's UEN: 8 or 9 digits and a letter, or the T/S/R + year + entity-type form. */
function validSingaporeUen(raw: string): boolean {
  const k = raw.trim().toUpperCase();
  return (
    /^\d{8}[A-Z]$/.test(k) || /^\d{9}[A-Z]$/.test(k) || /^[TSR]\d{2}[A-Z]{2}\d{4}[A-Z]$/.test(k)
  );
}

/**
 * Australia's ABN: 11 digits, weighted checksum divisible
 * by 89 after subtracting 1 from the first digit.
 */
function validAustralianAbn(raw: string): boolean {
  const d = digitsOnly(raw);
  if (!/^\d{11}$/.test(d)) return false;
  const weights = [10, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19];
  const sum = [...d].reduce((acc, c, i) => acc + (Number(c) - (i === 0 ? 1 : 0)) * weights[i]!, 0);
  return sum % 89 === 0;
}

const TAX_ZONES: [string, (raw: string) => boolean][] = [
  ['BR', validBrazilianTax],
  ['TH', validThaiTax],
  ['SG', validSingaporeUen],
  ['AU', validAustralianAbn],
];

/**
 * The parse of a key of the given type, or null when it does not parse (400 external.key.invalid).
 */
export function parseExternalKey(type: ExternalKeyType, raw: string): ParsedKey | null {
  if (raw.length === 0 || raw.length > 320) return null;
  switch (type) {
    case 'phone': {
      if (!/^\+[0-9 ().-]+$/.test(raw.trim())) return null;
      const phone = parsePhoneNumberFromString(raw.trim());
      return phone?.isValid() && phone.country !== undefined ? { zones: [phone.country] } : null;
    }
    case 'email':
      return normaliseIdentifier('email', raw).ok ? { zones: null } : null;
    case 'tax': {
      const zones = TAX_ZONES.filter(([, valid]) => valid(raw)).map(([zone]) => zone);
      return zones.length > 0 ? { zones } : null;
    }
    case 'random':
      return /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(
        raw.trim(),
      )
        ? { zones: null }
        : null;
    case 'alias':
      return /^[A-Za-z0-9.-]{6,20}$/.test(raw.trim()) ? { zones: null } : null;
    case 'iban': {
      const iban = electronicFormatIBAN(raw.toUpperCase());
      if (iban === null || !isValidIBAN(iban)) return null;
      const country = iban.slice(0, 2);
      return { zones: SEPA.has(country) ? [country, 'SEPA'] : [country] };
    }
    case 'vpa':
      return /^[A-Za-z0-9._-]{2,256}@[A-Za-z][A-Za-z0-9]{1,63}$/.test(raw.trim())
        ? { zones: null }
        : null;
  }
}
