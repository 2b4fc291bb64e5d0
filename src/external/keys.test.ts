// SPEC L (POST /discovery, `key` parsed strictly by `key_type`) and docs/decisions.md "External
// registry discovery": each key type with valid and invalid keys, and the zone(s) a parse names.
// Check digits used below are computed here from each scheme's published rule, independently of
// the parser under test.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EXTERNAL_KEY_TYPES, parseExternalKey } from './keys.js';

/**
 * Thailand's 13-digit id: the 13th digit is (11 -
 * (sum of d[i] * (13 - i), i = 0..11) mod 11) mod 10.
 */
function thaiId(body12: string): string {
  let sum = 0;
  for (let i = 0; i < 12; i++) sum += Number(body12[i]) * (13 - i);
  return `${body12}${(11 - (sum % 11)) % 10}`;
}

/** ISO 7064 MOD 97-10, letters as 10..35: a valid IBAN leaves 1. */
function mod97(iban: string): number {
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  const digits = [...rearranged]
    .map((c) => (/[A-Z]/.test(c) ? String(c.charCodeAt(0) - 55) : c))
    .join('');
  return Number(BigInt(digits) % 97n);
}

const zonesOf = (type: Parameters<typeof parseExternalKey>[0], raw: string) =>
  parseExternalKey(type, raw)?.zones;

describe('SPEC L: the key types', () => {
  it('the seven key types of SPEC L are the ones parsed', () => {
    expect([...EXTERNAL_KEY_TYPES].sort()).toEqual([
      'alias',
      'email',
      'iban',
      'phone',
      'random',
      'tax',
      'vpa',
    ]);
  });
});

describe("SPEC L phone keys: E.164 only, and the zone is the number's country", () => {
  const valid: [string, string][] = [
    ['+55 11 91234-5678', 'BR'],
    ['+5521987654321', 'BR'],
    ['+91 98765 43210', 'IN'],
    ['+919812345678', 'IN'],
    ['+65 8123 4567', 'SG'],
    ['+65 6123 4567', 'SG'],
    ['+66 81 234 5678', 'TH'],
    ['+34 612 345 678', 'ES'],
    ['+1 650 253 0000', 'US'],
  ];
  for (const [raw, country] of valid) {
    it(`${raw} parses, zone ${country}`, () => {
      expect(zonesOf('phone', raw)).toEqual([country]);
    });
  }

  const refused: [string, string][] = [
    ['national form with a trunk prefix (BR)', '011 91234 5678'],
    ['national form with an area code in brackets (BR)', '(11) 91234-5678'],
    ['national digits without + (IN)', '9876543210'],
    ['international dialling prefix 00 instead of +', '0055 11 91234 5678'],
    ['letters in the number', '+55 11 9ABCD-5678'],
    ['letters only', '+phone'],
    ['too short: country and area code only', '+55 11'],
    ['too short: country code only', '+91'],
    ['too short for the country', '+65 8123'],
    ['no such country code', '+999 1234 5678'],
    ['empty', ''],
  ];
  for (const [what, raw] of refused) {
    it(`refused: ${what} (${JSON.stringify(raw)})`, () => {
      expect(parseExternalKey('phone', raw)).toBeNull();
    });
  }
});

describe('SPEC L email keys: email syntax, no zone', () => {
  for (const raw of ['ana.souza@example.com.br', 'Payee+Tag@Example.ORG', 'x1@sub.example.co.uk']) {
    it(`${raw} parses with no zone`, () => {
      expect(parseExternalKey('email', raw)).toEqual({ zones: null });
    });
  }
  for (const raw of [
    'ana.souza.example.com',
    'ana@@example.com',
    '@example.com',
    'ana@',
    'ana@localhost',
    'ana souza@example.com',
    'ana@exa mple.com',
  ]) {
    it(`refused: ${JSON.stringify(raw)}`, () => {
      expect(parseExternalKey('email', raw)).toBeNull();
    });
  }
});

describe("SPEC L tax keys: check digits where the zone has them; the zone is the scheme's", () => {
  it("a valid CPF (529.982.247-25), formatted or bare, is Brazil's", () => {
    expect(zonesOf('tax', '529.982.247-25')).toEqual(['BR']);
    expect(zonesOf('tax', '52998224725')).toEqual(['BR']);
  });
  it('a CPF with a wrong check digit is refused (529.982.247-26, 529.982.247-15)', () => {
    expect(parseExternalKey('tax', '529.982.247-26')).toBeNull();
    expect(parseExternalKey('tax', '529.982.247-15')).toBeNull();
  });
  it("a valid CNPJ (11.222.333/0001-81), formatted or bare, is Brazil's", () => {
    expect(zonesOf('tax', '11.222.333/0001-81')).toEqual(['BR']);
    expect(zonesOf('tax', '11222333000181')).toEqual(['BR']);
  });
  it('a CNPJ with a wrong check digit is refused (11.222.333/0001-82)', () => {
    expect(parseExternalKey('tax', '11.222.333/0001-82')).toBeNull();
  });
  it("a Thai 13-digit id with its checksum is Thailand's; a wrong last digit is refused", () => {
    for (const body of ['110170020345', '310050012378', '050123456789']) {
      const id = thaiId(body);
      expect(id).toHaveLength(13);
      expect(zonesOf('tax', id), id).toEqual(['TH']);
      const wrong = `${body}${(Number(id[12]) + 1) % 10}`;
      expect(parseExternalKey('tax', wrong), wrong).toBeNull();
    }
  });
  it("Singapore UENs (business, local company, other entity forms) are Singapore's", () => {
    for (const uen of ['53123456D', '201912345K', 'T08LL1234A'])
      expect(zonesOf('tax', uen), uen).toEqual(['SG']);
  });
  it('malformed UENs are refused', () => {
    for (const uen of ['2019123K', '20191234567K', 'T08L1234A', 'X08LL1234A'])
      expect(parseExternalKey('tax', uen), uen).toBeNull();
  });
  it("an Australian ABN (51 824 753 556) is Australia's; a wrong digit is refused", () => {
    expect(zonesOf('tax', '51 824 753 556')).toEqual(['AU']);
    expect(zonesOf('tax', '51824753556')).toEqual(['AU']);
    expect(parseExternalKey('tax', '51 824 753 557')).toBeNull();
    expect(parseExternalKey('tax', '52 824 753 556')).toBeNull();
  });
  it(
    'all-same digits are refused even where the check digits would work out ' +
      '(CPF 111.111.111-11, CNPJ of zeros)',
    () => {
      for (const raw of [
        '111.111.111-11',
        '000.000.000-00',
        '00000000000',
        '99999999999',
        '00.000.000/0000-00',
        '11111111111111',
        '0000000000000',
        '1111111111111',
      ]) {
        expect(parseExternalKey('tax', raw), raw).toBeNull();
      }
    },
  );
  it('letters, wrong lengths and empty are refused', () => {
    for (const raw of ['529.982.247-2X', '5299822472', '529982247250', 'tax-number', ''])
      expect(parseExternalKey('tax', raw), raw).toBeNull();
  });
});

describe('SPEC L random keys: UUID, no zone', () => {
  it('UUID v4 keys parse, in either case', () => {
    for (let i = 0; i < 5; i++) {
      const uuid = randomUUID();
      expect(parseExternalKey('random', uuid), uuid).toEqual({ zones: null });
      expect(parseExternalKey('random', uuid.toUpperCase()), uuid).toEqual({ zones: null });
    }
    expect(parseExternalKey('random', '123e4567-e89b-42d3-a456-426614174000')).toEqual({
      zones: null,
    });
  });
  it('non-UUIDs are refused', () => {
    for (const raw of [
      'not-a-uuid',
      '123e4567-e89b-42d3-a456-42661417400',
      '123e4567-e89b-42d3-a456-4266141740000',
      'g23e4567-e89b-42d3-a456-426614174000',
      '123e4567-e89b-42d3-a456_426614174000',
      '{123e4567-e89b-42d3-a456-426614174000}x',
      '',
    ]) {
      expect(parseExternalKey('random', raw), raw).toBeNull();
    }
  });
});

describe('SPEC L alias keys: 6 to 20 letters, digits, dots, dashes; no zone', () => {
  it('6 and 20 characters parse, as do dots and dashes', () => {
    for (const raw of ['abc123', 'a'.repeat(20), 'mi.alias-pago', 'CASA.PERRO.MATE'])
      expect(parseExternalKey('alias', raw), raw).toEqual({ zones: null });
  });
  it('5 and 21 characters are refused, as are other characters', () => {
    for (const raw of ['abc12', 'a'.repeat(21), 'mi alias', 'mi_alias!', 'ana@alias', ''])
      expect(parseExternalKey('alias', raw), raw).toBeNull();
  });
});

describe('SPEC L iban keys: mod-97; zones are the country and, for SEPA countries, SEPA', () => {
  const valid: [string, string][] = [
    ['DE89370400440532013000', 'DE'],
    ['DE89 3704 0044 0532 0130 00', 'DE'],
    ['GB29NWBK60161331926819', 'GB'],
    ['GB29 NWBK 6016 1331 9268 19', 'GB'],
    ['FR1420041010050500013M02606', 'FR'],
  ];
  for (const [raw, country] of valid) {
    it(`${raw} parses, zones [${country}, SEPA]`, () => {
      expect(mod97(raw.replace(/ /g, ''))).toBe(1);
      expect(zonesOf('iban', raw)).toEqual([country, 'SEPA']);
    });
  }
  it('an IBAN of a country outside SEPA names only its country (BR)', () => {
    const raw = 'BR1800360305000010009795493C1';
    expect(mod97(raw)).toBe(1);
    expect(zonesOf('iban', raw)).toEqual(['BR']);
  });
  it('wrong check digits are refused (DE, GB, FR)', () => {
    for (const raw of [
      'DE88370400440532013000',
      'GB28NWBK60161331926819',
      'FR1520041010050500013M02606',
      'DE00370400440532013000',
    ]) {
      expect(mod97(raw)).not.toBe(1);
      expect(parseExternalKey('iban', raw), raw).toBeNull();
    }
  });
  it('a changed BBAN digit is refused, as are wrong lengths and non-IBANs', () => {
    for (const raw of [
      'DE89370400440532013001',
      'DE8937040044053201300',
      'XX89370400440532013000',
      '370400440532013000',
      '',
    ]) {
      expect(parseExternalKey('iban', raw), raw).toBeNull();
    }
  });
});

describe('SPEC L vpa keys: handle@provider, no zone', () => {
  it('handle@provider parses', () => {
    for (const raw of ['ramesh.kumar@okaxis', 'shop-42@ybl', 'a1@paytm'])
      expect(parseExternalKey('vpa', raw), raw).toEqual({ zones: null });
  });
  it('missing @, missing handle or missing provider is refused', () => {
    for (const raw of [
      'ramesh.kumar',
      'ramesh.kumar.okaxis',
      '@okaxis',
      'ramesh@',
      'ramesh@@okaxis',
      'ramesh kumar@okaxis',
      '',
    ]) {
      expect(parseExternalKey('vpa', raw), raw).toBeNull();
    }
  });
});
