// Identifier normalisation and hashing (P8). A clear identifier exists only in the memory of the
// request that carries it: these functions return the normalised form for hashing, and their
// refusals never quote the value.
import { createHmac } from 'node:crypto';
import { domainToASCII } from 'node:url';
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { electronicFormatIBAN, isValidIBAN } from 'ibantools';
import { IDENTIFIER_LENGTH_MAX } from '../config.js';
import { invalid, type Refusal } from './errors.js';

export const IDENTIFIER_TYPES = ['phone', 'email', 'bank_account', 'lei', 'reg', 'tax'] as const;
export type IdentifierType = (typeof IDENTIFIER_TYPES)[number];
/** Lookup also takes opaque addresses as keys (SPEC D). */
export type LookupKeyType = IdentifierType | 'address';

/**
 * The officially assigned ISO 3166-1 alpha-2 codes
 * (user-assigned and reserved codes such as UK or XK are not).
 */
const ISO_3166_ALPHA_2 = new Set(
  (
    'AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ ' +
    'BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM ' +
    'DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS ' +
    'GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN ' +
    'KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ ' +
    'MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM ' +
    'PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV ' +
    'SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI ' +
    'VN VU WF WS YE YT ZA ZM ZW'
  ).split(' '),
);

export function isCountryCode(code: string): boolean {
  return ISO_3166_ALPHA_2.has(code);
}

/** ISO 7064 MOD 97-10 over letters-as-numbers, as used by IBAN and LEI (ISO 17442). */
function mod97(text: string): number {
  let remainder = 0;
  for (const ch of text) {
    const digits = ch >= 'A' && ch <= 'Z' ? String(ch.charCodeAt(0) - 55) : ch;
    for (const d of digits) remainder = (remainder * 10 + (d.charCodeAt(0) - 48)) % 97;
  }
  return remainder;
}

type Normalised = { ok: true; value: string } | { ok: false; refusal: Refusal };
const refuse = (field: string, message: string): Normalised => ({
  ok: false,
  refusal: invalid(field, message),
});

/** The normalised form of an identifier of the given type (P8), or a 400 naming `field`. */
export function normaliseIdentifier(
  type: LookupKeyType,
  raw: string,
  field = 'identifier',
): Normalised {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > IDENTIFIER_LENGTH_MAX)
    return refuse(
      field,
      `${field} must be a non-empty string of at most ${IDENTIFIER_LENGTH_MAX} characters`,
    );
  return NORMALISERS[type](raw, field);
}

/** Each type's normal form (P8), given a non-empty string within the length limit. */
type Normaliser = (raw: string, field: string) => Normalised;

function normalisePhone(raw: string, field: string): Normalised {
  const trimmed = raw.trim();
  if (!trimmed.startsWith('+'))
    return refuse(field, 'a phone number must be in international form, starting with +');
  // Only digits and the usual separators: no extensions, no surrounding text.
  if (!/^\+[0-9 ().-]+$/.test(trimmed))
    return refuse(field, 'a phone number holds only digits, spaces, dots, dashes and parentheses');
  const parsed = parsePhoneNumberFromString(trimmed);
  if (parsed === undefined || !parsed.isValid()) return refuse(field, 'not a valid phone number');
  return { ok: true, value: parsed.number };
}

function normaliseEmail(raw: string, field: string): Normalised {
  const lowered = raw.trim().toLowerCase();
  const at = lowered.lastIndexOf('@');
  if (at <= 0 || at === lowered.length - 1) return refuse(field, 'not an email address');
  const local = lowered.slice(0, at);
  const domain = domainToASCII(lowered.slice(at + 1));
  const labels = domain.split('.');
  if (labels.length < 2 || labels.some((l) => !/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(l)))
    return refuse(field, 'the email domain is not valid');
  if (/[\s@<>()[\]\\,;:"]/.test(local) || local.length > 64)
    return refuse(field, 'the email local part is not valid');
  return { ok: true, value: `${local}@${domain}` };
}

function normaliseBankAccount(raw: string, field: string): Normalised {
  const colon = raw.indexOf(':');
  const scheme = colon < 0 ? '' : raw.slice(0, colon).trim().toLowerCase();
  const body = raw.slice(colon + 1).replace(/\s+/g, '');
  if (scheme === 'iban') {
    const iban = electronicFormatIBAN(body.toUpperCase());
    if (iban === null || !isValidIBAN(iban)) return refuse(field, 'not a valid IBAN');
    return { ok: true, value: `iban:${iban}` };
  }
  if (scheme === 'bban') {
    if (!/^[A-Za-z0-9-]{4,64}$/.test(body)) return refuse(field, 'not a valid BBAN');
    return { ok: true, value: `bban:${body}` };
  }
  return refuse(field, 'a bank account names its scheme: iban:<value> or bban:<value>');
}

function normaliseLei(raw: string, field: string): Normalised {
  const lei = raw.trim().toUpperCase();
  if (!/^[A-Z0-9]{18}[0-9]{2}$/.test(lei) || mod97(lei) !== 1)
    return refuse(field, 'not a valid LEI');
  return { ok: true, value: lei };
}

function normaliseRegistryNumber(raw: string, field: string): Normalised {
  const m = /^reg:([A-Za-z]{2}):([A-Za-z0-9._-]{1,64}):([A-Za-z0-9./ -]{1,64})$/.exec(raw.trim());
  if (m === null)
    return refuse(
      field,
      'a registry number is reg:<country>:<registry>:<number>, the registry part mandatory',
    );
  const country = m[1]!.toUpperCase();
  if (!isCountryCode(country)) return refuse(field, 'unknown country code');
  const number = m[3]!.replace(/[\s./-]/g, '').toUpperCase();
  if (number === '') return refuse(field, 'the registry number is empty');
  return { ok: true, value: `reg:${country}:${m[2]!.toLowerCase()}:${number}` };
}

function normaliseTaxNumber(raw: string, field: string): Normalised {
  const m = /^tax:([A-Za-z]{2}):([A-Za-z0-9./ -]{1,64})$/.exec(raw.trim());
  if (m === null) return refuse(field, 'a tax number is tax:<country>:<number>');
  const country = m[1]!.toUpperCase();
  if (!isCountryCode(country)) return refuse(field, 'unknown country code');
  const number = m[2]!.replace(/[\s./-]/g, '').toUpperCase();
  if (!/^[A-Z0-9]{2,32}$/.test(number)) return refuse(field, 'the tax number is not valid');
  return { ok: true, value: `tax:${country}:${number}` };
}

function normaliseAddress(raw: string, field: string): Normalised {
  const address = raw.trim();
  if (!/^path:[A-Za-z0-9]{22,64}$/.test(address))
    return refuse(field, 'an address is path:<opaque>');
  return { ok: true, value: address };
}

const NORMALISERS: Record<LookupKeyType, Normaliser> = {
  phone: normalisePhone,
  email: normaliseEmail,
  bank_account: normaliseBankAccount,
  lei: normaliseLei,
  reg: normaliseRegistryNumber,
  tax: normaliseTaxNumber,
  address: normaliseAddress,
};

/** identifier_hash = hex HMAC-SHA-256(pepper, "<type>:<normalised>") (P8). */
export function identifierHash(pepper: Buffer, type: LookupKeyType, normalised: string): string {
  return createHmac('sha256', pepper).update(`${type}:${normalised}`).digest('hex');
}

/** One lookup key as a caller gives it: a raw identifier, or its hash. */
export interface KeyItem {
  identifier_type: LookupKeyType;
  identifier?: string;
  identifier_hash?: string;
}

/**
 * The field a refusal about key `index` names: `identifier`
 * alone, or `items.<index>.identifier` in a batch.
 */
function keyField(index: number, batch: boolean): string {
  return batch ? `items.${index}.identifier` : 'identifier';
}

/**
 * A refusal for the first key that gives both or neither
 * of `identifier` and `identifier_hash`, or null.
 */
export function keyShapeRefusal(items: readonly KeyItem[], batch: boolean): Refusal | null {
  const bad = items.findIndex(
    (item) => (item.identifier === undefined) === (item.identifier_hash === undefined),
  );
  return bad < 0
    ? null
    : invalid(keyField(bad, batch), 'give exactly one of identifier or identifier_hash');
}

/** A lookup key's hash, or the 400 refusal of a key that does not normalise (P8). */
export type KeyHash = string | Refusal;

/**
 * The hash of each key of a run of lookup keys (P8), or, at its index, the refusal of a key that
 * does not normalise: a batch answers such a key alone (P17), a single lookup refuses the call.
 * `offset` is the run's index in the whole batch, so each refusal names its own item.
 */
export function hashKeys(
  pepper: Buffer,
  items: readonly KeyItem[],
  offset: number,
  batch: boolean,
): KeyHash[] {
  return items.map((item, i) => {
    if (item.identifier_hash !== undefined) return item.identifier_hash;
    const field = keyField(offset + i, batch);
    const normalised = normaliseIdentifier(item.identifier_type, item.identifier!, field);
    if (!normalised.ok) return normalised.refusal;
    return identifierHash(pepper, item.identifier_type, normalised.value);
  });
}
