// P7: the validator's 400s name the field and say what it must be in words: a closed set lists
// its allowed values (in the message and in detail.allowed), a pattern is described, never shown.
import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { Decimal, MemberName, Reference, Rfc3339, validator } from './schemas.js';

const check = validator(
  Type.Object({
    to: Type.Union([Type.Literal('settled'), Type.Literal('failed')]),
    reason: Type.Optional(
      Type.Union([Type.Null(), Type.Union([Type.Literal('a'), Type.Literal('b')])]),
    ),
    request: Type.Optional(Type.Union([Type.Null(), Reference('req', 'a request reference')])),
    format: Type.Optional(Type.Literal('chain_address')),
    at: Type.Optional(Rfc3339),
    amount: Type.Optional(Decimal),
    member: Type.Optional(MemberName),
    code: Type.Optional(Type.String({ pattern: '^[A-Z]{3}$' })),
    count: Type.Optional(Type.Integer()),
  }),
);

const refusal = (value: unknown) => {
  const result = check(value);
  if (result.ok) throw new Error('expected a refusal');
  expect(result.refusal.code).toBe('path.core.invalid_request');
  return result.refusal;
};

describe('validator messages (P7)', () => {
  it('a closed set: the allowed values in the message and in detail.allowed', () => {
    expect(refusal({ to: 'pending' })).toEqual({
      code: 'path.core.invalid_request',
      message: 'to must be one of "settled", "failed"',
      detail: { field: 'to', allowed: ['settled', 'failed'] },
    });
  });

  it('a nested nullable closed set is flattened, null included', () => {
    const r = refusal({ to: 'settled', reason: 'c' });
    expect(r.message).toBe('reason must be one of null, "a", "b"');
    expect(r.detail).toEqual({ field: 'reason', allowed: [null, 'a', 'b'] });
  });

  it('a single literal, and a missing closed-set field', () => {
    expect(refusal({ to: 'failed', format: 'iban' }).message).toBe(
      'format must be "chain_address"',
    );
    expect(refusal({}).message).toBe('to is required: one of "settled", "failed"');
  });

  it('patterns are described in words, and a union of described kinds is joined with "or"', () => {
    const message = (extra: object) => refusal({ to: 'settled', ...extra }).message;
    expect(message({ at: '2026-11-21T12:00:00+01:00' })).toBe(
      'at must be an RFC 3339 UTC time ending in Z, like "2026-11-21T12:00:00Z"',
    );
    expect(message({ amount: '1e3' })).toMatch(/^amount must be a decimal amount/);
    expect(message({ member: '-x' })).toMatch(/^member must be a member name/);
    expect(message({ request: 'req_1' })).toBe(
      'request must be null or a request reference: "req_" followed by 32 lowercase hex digits',
    );
    for (const extra of [{ at: 'x' }, { amount: 'x' }, { member: '-' }, { request: 'x' }]) {
      expect(message(extra)).not.toMatch(/\^|\$|\\d|\[0-9|Expected/);
    }
  });

  it('a pattern without a description still never shows the regex', () => {
    expect(refusal({ to: 'settled', code: 'eur' }).message).toBe(
      'code is not in the expected form',
    );
  });

  it("other mistakes keep the field and the library's words", () => {
    const r = refusal({ to: 'settled', count: 1.5 });
    expect(r.detail).toEqual({ field: 'count' });
    expect(r.message).toMatch(/^count: /);
  });

  it('the value given is never quoted back', () => {
    expect(JSON.stringify(refusal({ to: 'secret-value-77' }))).not.toContain('secret-value-77');
  });
});
