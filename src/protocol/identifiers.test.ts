// Identifier normalisation and hashing (SPEC B identifier formats, principle 4; PROTOCOL P8):
// accepted forms and their exact normalised value, refused forms as 400 refusals that name the
// field and never quote the value, and the profile's identifier_hash vectors byte for byte.
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { statusOf } from './errors.js';
import { identifierHash, normaliseIdentifier, type LookupKeyType } from './identifiers.js';

interface HashCase {
  identifier_type: LookupKeyType;
  input: string;
  normalised: string;
  message: string;
  hash: string;
}
const vectors = JSON.parse(
  readFileSync(new URL('../../../shared/vectors/protocol-vectors.json', import.meta.url), 'utf8'),
) as {
  identifier_hash: { pepper_hex: string; cases: HashCase[] };
};

function accepted(type: LookupKeyType, raw: string): string {
  const result = normaliseIdentifier(type, raw);
  if (!result.ok)
    throw new Error(`${type} ${JSON.stringify(raw)} was refused: ${result.refusal.message}`);
  return result.value;
}

/** A refusal is a 400 invalid_request naming the field, whose message does not quote the value. */
function expectRefused(type: LookupKeyType, raw: string, field = 'identifier'): void {
  const result = normaliseIdentifier(type, raw, field);
  expect(result.ok, `${type} ${JSON.stringify(raw)} should be refused`).toBe(false);
  if (result.ok) return;
  expect(result.refusal.code).toBe('path.core.invalid_request');
  expect(statusOf(result.refusal.code)).toBe(400);
  expect(result.refusal.detail).toEqual({ field });
  if (raw.trim() !== '') {
    expect(result.refusal.message).not.toContain(raw.trim());
    expect(JSON.stringify(result.refusal)).not.toContain(JSON.stringify(raw.trim()).slice(1, -1));
  }
}

/** ISO 7064 MOD 97-10 as ISO 17442 defines it for LEIs, written independently of the node. */
function leiCheck(lei: string): bigint {
  const digits = [...lei].map((c) => (/[A-Z]/.test(c) ? String(c.charCodeAt(0) - 55) : c)).join('');
  return BigInt(digits) % 97n;
}

describe('P8 identifier_hash vectors', () => {
  const pepper = Buffer.from(vectors.identifier_hash.pepper_hex, 'hex');

  it('has cases for phone, email and bank_account', () => {
    expect(vectors.identifier_hash.cases.map((c) => c.identifier_type).sort()).toEqual([
      'bank_account',
      'email',
      'phone',
    ]);
  });

  for (const c of vectors.identifier_hash.cases) {
    it(
      `P8 vector ${c.identifier_type}: ` +
        `input normalises to ${c.normalised} and hashes byte for byte`,
      () => {
        expect(accepted(c.identifier_type, c.input)).toBe(c.normalised);
        expect(c.message).toBe(`${c.identifier_type}:${c.normalised}`);
        expect(identifierHash(pepper, c.identifier_type, c.normalised)).toBe(c.hash);
        expect(
          identifierHash(pepper, c.identifier_type, accepted(c.identifier_type, c.input)),
        ).toBe(c.hash);
      },
    );
  }

  it(
    'P8 identifier_hash is lowercase hex HMAC-SHA-256 ' +
      'over "<type>:<normalised>", the type covered',
    () => {
      const h = identifierHash(pepper, 'lei', '5493001KJTIIGC8Y1R12');
      expect(h).toMatch(/^[0-9a-f]{64}$/);
      expect(h).toBe(createHmac('sha256', pepper).update('lei:5493001KJTIIGC8Y1R12').digest('hex'));
      // Same value under another type, or under another pepper, is another hash.
      expect(identifierHash(pepper, 'reg', '5493001KJTIIGC8Y1R12')).not.toBe(h);
      expect(identifierHash(Buffer.alloc(32, 7), 'lei', '5493001KJTIIGC8Y1R12')).not.toBe(h);
    },
  );
});

describe('phone (SPEC B: E.164, normalisation normative; P8)', () => {
  it('accepts E.164 with spaces, dashes, dots or brackets and normalises to + and digits', () => {
    expect(accepted('phone', '+442079460958')).toBe('+442079460958');
    expect(accepted('phone', '+44 20 7946 0958')).toBe('+442079460958');
    expect(accepted('phone', '+44-20-7946-0958')).toBe('+442079460958');
    expect(accepted('phone', '  +44 20 7946 0958  ')).toBe('+442079460958');
    expect(accepted('phone', '+1-202-555-0143')).toBe('+12025550143');
    expect(accepted('phone', '+1 (415) 555-2671')).toBe('+14155552671');
    expect(accepted('phone', '+49 30 901820')).toBe('+4930901820');
  });

  it('every accepted form of one number yields the same hash', () => {
    const pepper = Buffer.alloc(32, 1);
    const hashes = new Set(
      ['+442079460958', '+44 20 7946 0958', '+44-20-7946-0958'].map((r) =>
        identifierHash(pepper, 'phone', accepted('phone', r)),
      ),
    );
    expect(hashes.size).toBe(1);
  });

  it('refuses a national form without +', () => {
    expectRefused('phone', '020 7946 0958');
    expectRefused('phone', '442079460958');
    expectRefused('phone', '00442079460958');
  });

  it('refuses invalid numbers: too short, too long, unassigned country code, doubled +', () => {
    expectRefused('phone', '+44 20 7946');
    expectRefused('phone', '+4420794609580000');
    expectRefused('phone', '+999 123456');
    expectRefused('phone', '++442079460958');
  });

  it('refuses a number followed by trailing text (not E.164)', () => {
    expectRefused('phone', '+44 20 7946 0958abc');
  });

  it('refuses empty and over-long values without quoting them', () => {
    expectRefused('phone', '');
    expectRefused('phone', `+44${'1'.repeat(330)}`);
  });

  it('names the field it was given (e.g. target for an ownership binding)', () => {
    expectRefused('phone', '020 7946 0958', 'target');
  });
});

describe('email (P8: trimmed, lower-cased, IDNA domain)', () => {
  it('trims and lower-cases', () => {
    expect(accepted('email', '  Alice.Liddell@Example.COM ')).toBe('alice.liddell@example.com');
    expect(accepted('email', 'BOB@EXAMPLE.ORG')).toBe('bob@example.org');
    expect(accepted('email', 'carol+tag@sub.example.co.uk')).toBe('carol+tag@sub.example.co.uk');
  });

  it('converts an internationalised domain to ASCII', () => {
    expect(accepted('email', 'user@Bücher.DE')).toBe('user@xn--bcher-kva.de');
    expect(accepted('email', 'user@bücher.de')).toBe('user@xn--bcher-kva.de');
    expect(accepted('email', 'user@xn--bcher-kva.de')).toBe('user@xn--bcher-kva.de');
  });

  it('refuses forms that are not an address', () => {
    expectRefused('email', 'nobody-at-all');
    expectRefused('email', '@example.com');
    expectRefused('email', 'alice@');
    expectRefused('email', 'al ice@example.com');
    expectRefused('email', 'alice@example');
    expectRefused('email', 'alice@exa mple.com');
    expectRefused('email', 'alice@ex..com');
    expectRefused('email', 'alice@b@example.com');
    expectRefused('email', 'alice@[127.0.0.1]');
  });
});

describe('bank_account (SPEC B: carries its scheme, never inferred; P8)', () => {
  it('iban: with spaces or lower case is upper-cased without spaces', () => {
    expect(accepted('bank_account', 'iban:GB82WEST12345698765432')).toBe(
      'iban:GB82WEST12345698765432',
    );
    expect(accepted('bank_account', 'iban:GB82 WEST 1234 5698 7654 32')).toBe(
      'iban:GB82WEST12345698765432',
    );
    expect(accepted('bank_account', 'iban:gb82 west 1234 5698 7654 32')).toBe(
      'iban:GB82WEST12345698765432',
    );
    expect(accepted('bank_account', 'IBAN:GB82WEST12345698765432')).toBe(
      'iban:GB82WEST12345698765432',
    );
    expect(accepted('bank_account', 'iban:DE89 3704 0044 0532 0130 00')).toBe(
      'iban:DE89370400440532013000',
    );
  });

  it('refuses an IBAN with a bad mod-97 check or empty', () => {
    expectRefused('bank_account', 'iban:GB83WEST12345698765432');
    expectRefused('bank_account', 'iban:DE89370400440532013001');
    expectRefused('bank_account', 'iban:');
  });

  it('refuses a value without a scheme: the scheme is never inferred from a country', () => {
    expectRefused('bank_account', 'GB82WEST12345698765432');
    expectRefused('bank_account', 'GB82 WEST 1234 5698 7654 32');
    expectRefused('bank_account', 'sortcode:12345612345678');
  });

  it('bban: keeps the value without spaces', () => {
    expect(accepted('bank_account', 'bban:12345612345678')).toBe('bban:12345612345678');
    expect(accepted('bank_account', 'bban:1234 5612 3456 78')).toBe('bban:12345612345678');
  });

  it('refuses a malformed bban', () => {
    expectRefused('bank_account', 'bban:');
    expectRefused('bank_account', 'bban:x!');
  });
});

describe('lei (P8: 20 characters with a valid ISO 17442 check)', () => {
  it('the sample LEIs pass ISO 17442 mod-97 == 1 computed here independently', () => {
    expect(leiCheck('5493001KJTIIGC8Y1R12')).toBe(1n);
    expect(leiCheck('529900T8BM49AURSDO55')).toBe(1n);
    expect(leiCheck('5493001KJTIIGC8Y1R13')).not.toBe(1n);
  });

  it('accepts valid LEIs, upper-casing them', () => {
    expect(accepted('lei', '5493001KJTIIGC8Y1R12')).toBe('5493001KJTIIGC8Y1R12');
    expect(accepted('lei', '529900T8BM49AURSDO55')).toBe('529900T8BM49AURSDO55');
    expect(accepted('lei', '5493001kjtiigc8y1r12')).toBe('5493001KJTIIGC8Y1R12');
  });

  it('refuses a wrong check digit, a wrong length and letters in the check digits', () => {
    expectRefused('lei', '5493001KJTIIGC8Y1R13');
    expectRefused('lei', '529900T8BM49AURSDO56');
    expectRefused('lei', '5493001KJTIIGC8Y1R1');
    expectRefused('lei', '5493001KJTIIGC8Y1R123');
    expectRefused('lei', '5493001KJTIIGC8Y1RAB');
  });
});

describe('reg (SPEC B: reg:<country>:<registry>:<number>, registry mandatory; P8)', () => {
  it('accepts the canonical form unchanged', () => {
    expect(accepted('reg', 'reg:GB:companies-house:01234567')).toBe(
      'reg:GB:companies-house:01234567',
    );
  });

  it('case and spacing variants of one registry number normalise to the same value', () => {
    expect(accepted('reg', 'reg:gb:companies-house:01234567')).toBe(
      'reg:GB:companies-house:01234567',
    );
    expect(accepted('reg', '  reg:GB:companies-house:01234567 ')).toBe(
      'reg:GB:companies-house:01234567',
    );
  });

  it('refuses a value whose registry part is missing', () => {
    expectRefused('reg', 'reg:GB:01234567');
    expectRefused('reg', 'reg:GB::01234567');
    expectRefused('reg', 'GB:companies-house:01234567');
  });

  it('refuses a country that is not an ISO 3166 alpha-2 code', () => {
    expectRefused('reg', 'reg:XX:companies-house:01234567');
    expectRefused('reg', 'reg:ZZ:companies-house:01234567');
    expectRefused('reg', 'reg:G1:companies-house:01234567');
    expectRefused('reg', 'reg:GBR:companies-house:01234567');
  });

  it('refuses UK, which is not an ISO 3166 alpha-2 code (the United Kingdom is GB)', () => {
    expectRefused('reg', 'reg:UK:companies-house:01234567');
  });
});

describe('tax (P8: tax:<ISO 3166 alpha-2>:<number>)', () => {
  it('accepts tax:BR:..., its number without punctuation', () => {
    expect(accepted('tax', 'tax:BR:12345678000195')).toBe('tax:BR:12345678000195');
    expect(accepted('tax', 'tax:BR:12.345.678/0001-95')).toBe('tax:BR:12345678000195');
    expect(accepted('tax', 'tax:br:123.456.789-09')).toBe('tax:BR:12345678909');
  });

  it('refuses malformed values', () => {
    expectRefused('tax', 'tax:BR');
    expectRefused('tax', 'tax:BR:');
    expectRefused('tax', 'BR:12345678000195');
    expectRefused('tax', 'tax:BR:!!??');
    expectRefused('tax', 'tax:XX:12345678000195');
  });
});

describe('address (P8: path:<opaque>)', () => {
  it('accepts path:<opaque>', () => {
    expect(accepted('address', 'path:0123456789ABCDEFabcdef')).toBe('path:0123456789ABCDEFabcdef');
  });

  it('refuses anything else', () => {
    expectRefused('address', '0123456789ABCDEFabcdef');
    expectRefused('address', 'path:short');
    expectRefused('address', 'path:0123456789ABCDEF-bcdef');
    expectRefused('address', 'pay:0123456789ABCDEFabcdef');
  });
});
