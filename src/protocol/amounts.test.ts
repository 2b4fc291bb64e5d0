// Decimal amounts as strings, compared and summed exactly (P13), within their asset's unit (P23).
import { describe, expect, it } from 'vitest';
import {
  DECIMAL_PATTERN,
  addDecimal,
  amountRefusal,
  capabilitiesRefusal,
  compareDecimal,
  fiat,
  fractionDigitsAllowed,
  fractionRefusal,
  isDecimal,
  isZeroDecimal,
  subtractDecimal,
} from './amounts.js';

describe('isDecimal (P13: ^[0-9]+(\\.[0-9]+)?$)', () => {
  it('uses the pattern P13 names', () => {
    expect(DECIMAL_PATTERN).toBe('^[0-9]+(\\.[0-9]+)?$');
  });

  it.each([
    '0',
    '7',
    '10.50',
    '10.5',
    '0.000001',
    '007',
    '123456789012345678901234567890.123456789',
  ])('accepts %j', (text) => {
    expect(isDecimal(text)).toBe(true);
  });

  it.each([
    '1e3',
    '-1',
    '+1',
    '.5',
    '5.',
    ' 1',
    '1 ',
    '',
    '1,5',
    '1.2.3',
    '0x10',
    'NaN',
    'Infinity',
    '1_000',
    '\u0661',
    '10.50\n',
  ])('refuses %j', (text) => {
    expect(isDecimal(text)).toBe(false);
  });

  it('refuses values that are not strings', () => {
    for (const value of [1, 10.5, 10n, null, undefined, ['1'], { value: '1' }])
      expect(isDecimal(value)).toBe(false);
  });

  it('refuses an absurdly long string (bounded work)', () => {
    expect(isDecimal('9'.repeat(1000))).toBe(false);
  });
});

describe('compareDecimal (P13)', () => {
  it('"10.50" equals "10.5" and trailing or leading zeros do not matter', () => {
    expect(compareDecimal('10.50', '10.5')).toBe(0);
    expect(compareDecimal('10', '10.000')).toBe(0);
    expect(compareDecimal('007', '7')).toBe(0);
    expect(compareDecimal('0', '0.00')).toBe(0);
  });

  it('orders by value, not by text or length', () => {
    expect(compareDecimal('9', '10')).toBe(-1);
    expect(compareDecimal('10', '9')).toBe(1);
    expect(compareDecimal('0.9', '0.10')).toBe(1);
    expect(compareDecimal('1.999', '2')).toBe(-1);
  });

  it('is exact beyond 2^53, where floating point cannot tell the values apart', () => {
    expect(Number('9007199254740993')).toBe(Number('9007199254740992'));
    expect(compareDecimal('9007199254740993', '9007199254740992')).toBe(1);
    expect(
      compareDecimal(
        '100000000000000000000000000000.000000000000000001',
        '100000000000000000000000000000',
      ),
    ).toBe(1);
  });

  it('throws on a value that is not a decimal string (callers validate first)', () => {
    expect(() => compareDecimal('1e3', '1')).toThrow(RangeError);
    expect(() => compareDecimal('1', '-1')).toThrow(RangeError);
  });
});

describe('addDecimal and subtractDecimal (P13)', () => {
  it('0.1 + 0.2 is exactly 0.3', () => {
    expect(0.1 + 0.2).not.toBe(0.3);
    expect(addDecimal('0.1', '0.2')).toBe('0.3');
  });

  it('adds across scales and normalises the result (no trailing zeros)', () => {
    expect(addDecimal('10.50', '0.5')).toBe('11');
    expect(addDecimal('10.25', '0.005')).toBe('10.255');
    expect(addDecimal('0', '0')).toBe('0');
    expect(addDecimal('0.01', '0.09')).toBe('0.1');
  });

  it('adds exactly beyond 2^53', () => {
    expect(addDecimal('9007199254740993', '1')).toBe('9007199254740994');
    expect(addDecimal('99999999999999999999.99', '0.01')).toBe('100000000000000000000');
    expect(addDecimal('123456789012345678901234567890.1', '0.000000000000000000000000000001')).toBe(
      '123456789012345678901234567890.100000000000000000000000000001',
    );
  });

  it('subtracts exactly', () => {
    expect(subtractDecimal('0.3', '0.1')).toBe('0.2');
    expect(subtractDecimal('10.50', '10.5')).toBe('0');
    expect(subtractDecimal('100', '0.01')).toBe('99.99');
    expect(subtractDecimal('9007199254740993', '9007199254740992')).toBe('1');
  });

  it('a subtraction below zero gives a signed result, which callers must check for', () => {
    expect(subtractDecimal('1', '2.5')).toBe('-1.5');
    expect(subtractDecimal('0.1', '0.25')).toBe('-0.15');
  });

  it('sums and differences round-trip: (a + b) - b = a', () => {
    const pairs: [string, string][] = [
      ['10.50', '0.75'],
      ['0.000001', '999999.999999'],
      ['18446744073709551616', '0.1'],
    ];
    for (const [a, b] of pairs)
      expect(compareDecimal(subtractDecimal(addDecimal(a, b), b), a)).toBe(0);
  });

  it('throws on invalid operands', () => {
    expect(() => addDecimal('1', '.5')).toThrow(RangeError);
    expect(() => subtractDecimal('', '1')).toThrow(RangeError);
  });
});

describe('isZeroDecimal (P13)', () => {
  it('zero in any spelling is zero', () => {
    for (const zero of ['0', '0.0', '000', '0.000000']) expect(isZeroDecimal(zero)).toBe(true);
  });

  it('the smallest positive amounts are not zero', () => {
    for (const amount of ['0.01', '0.000000000000000000000000000001', '1'])
      expect(isZeroDecimal(amount)).toBe(false);
  });

  it('throws on an invalid operand', () => {
    expect(() => isZeroDecimal('-0')).toThrow(RangeError);
  });
});

const eur = fiat('EUR');
const token = { asset_type: 'token', asset_code: 'USDC' };

describe("fractionDigitsAllowed (P23: an amount within its asset's unit)", () => {
  it.each([
    ['EUR', 2],
    ['USD', 2],
    ['JPY', 0],
    ['KRW', 0],
    ['BHD', 3],
    ['KWD', 3],
    ['TND', 3],
    ['CLF', 4],
  ])('fiat %s: its ISO 4217 minor unit, %i digits', (code, digits) => {
    expect(fractionDigitsAllowed(fiat(code))).toBe(digits);
  });

  it('a token: 18 digits, whatever its code (a token named like a currency is a token)', () => {
    expect(fractionDigitsAllowed(token)).toBe(18);
    expect(fractionDigitsAllowed({ asset_type: 'token', asset_code: 'EUR' })).toBe(18);
  });

  it('a lower-case ISO code is the same currency: no way around the rule', () => {
    expect(fractionDigitsAllowed(fiat('eur'))).toBe(2);
    expect(fractionDigitsAllowed(fiat('jpy'))).toBe(0);
  });

  it('a code outside ISO 4217, or another asset type, keeps the 18-digit bound of a token', () => {
    expect(fractionDigitsAllowed(fiat('ZZZ'))).toBe(18);
    expect(fractionDigitsAllowed(fiat('USDC'))).toBe(18);
    expect(fractionDigitsAllowed({ asset_type: 'points', asset_code: 'EUR' })).toBe(18);
  });
});

describe('fractionRefusal (P23)', () => {
  it.each([
    ['EUR', '12.50'],
    ['EUR', '12.5'],
    ['EUR', '12'],
    ['EUR', '0.01'],
    ['JPY', '15'],
    ['BHD', '1.005'],
    ['BHD', '1.5'],
  ])('%s %s is within the minor unit', (code, value) => {
    expect(fractionRefusal(value, fiat(code), 'amount')).toBeNull();
  });

  it.each([
    ['EUR', '0.001', 2],
    ['EUR', '0.0000000000000000000001', 2],
    ['EUR', '1.000', 2],
    ['EUR', '12.500', 2],
    ['JPY', '1.5', 0],
    ['JPY', '15.0', 0],
    ['BHD', '1.0005', 3],
    ['BHD', '1.0000', 3],
  ])('%s %s is refused: 400 naming the field and the %i digits allowed', (code, value, digits) => {
    expect(fractionRefusal(value, fiat(code), 'max_total')).toEqual({
      code: 'path.core.invalid_request',
      message: expect.stringContaining('max_total may carry'),
      detail: { field: 'max_total', max_fraction_digits: digits },
    });
  });

  it('the message says what is allowed in words, with the currency', () => {
    expect(fractionRefusal('1.000', eur, 'amount')?.message).toBe(
      'amount may carry at most 2 fractional digits (the minor unit of EUR; trailing zeros count)',
    );
    expect(fractionRefusal('1.5', fiat('jpy'), 'amount')?.message).toBe(
      'amount may carry no fractional digits (the minor unit of JPY; trailing zeros count)',
    );
  });

  it('a token carries 18 fractional digits, not 19', () => {
    expect(fractionRefusal(`0.${'1'.repeat(18)}`, token, 'amount')).toBeNull();
    expect(fractionRefusal(`0.${'1'.repeat(19)}`, token, 'amount')?.detail).toEqual({
      field: 'amount',
      max_fraction_digits: 18,
    });
  });

  it('an absent optional value is not refused', () => {
    expect(fractionRefusal(undefined, eur, 'max_total')).toBeNull();
  });
});

describe('amountRefusal and capabilitiesRefusal (P23: every amount, fee and ceiling)', () => {
  const amount = (value: string, asset_code = 'EUR', asset_type = 'fiat') => ({
    value,
    asset_type,
    asset_code,
  });

  it('an Amount is checked against its own asset, and its value is the field named', () => {
    expect(amountRefusal(amount('10.50'), 'amount')).toBeNull();
    expect(amountRefusal(null, 'sent')).toBeNull();
    expect(amountRefusal(amount('10.505'), 'amount')?.detail).toEqual({
      field: 'amount.value',
      max_fraction_digits: 2,
    });
    expect(amountRefusal(amount('10.505', 'USDC', 'token'), 'amount')).toBeNull();
  });

  it('a fee or a ceiling of any capability in the list is named by its path', () => {
    const fine = { fees: [{ amount: amount('0.25') }], limits: { max_single: amount('100') } };
    expect(capabilitiesRefusal([fine, fine], 'accepts')).toBeNull();
    const badFee = { fees: [{ amount: amount('0.25') }, { amount: amount('0.255') }] };
    expect(capabilitiesRefusal([fine, badFee], 'accepts')?.detail).toEqual({
      field: 'accepts.1.fees.1.amount.value',
      max_fraction_digits: 2,
    });
    const badLimit = { limits: { max_single: amount('100.5', 'JPY') } };
    expect(capabilitiesRefusal([badLimit], 'accepts')?.detail).toEqual({
      field: 'accepts.0.limits.max_single.value',
      max_fraction_digits: 0,
    });
  });
});
