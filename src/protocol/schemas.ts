// Shared wire schemas (typebox). Unknown members of incoming objects are allowed and kept
// (SPEC principle 6): schemas refuse wrong types of known fields, never unknown members.
import { Type, type TSchema, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { DECIMAL_PATTERN } from './amounts.js';
import { TEXT_LENGTH_MAX } from '../config.js';
import { invalid, type Refusal } from './errors.js';

export const Text = (options: { maxLength?: number; minLength?: number } = {}) =>
  Type.String({
    minLength: options.minLength ?? 1,
    maxLength: options.maxLength ?? TEXT_LENGTH_MAX,
  });

export const Decimal = Type.String({ pattern: DECIMAL_PATTERN, maxLength: 64 });

export const Rfc3339 = Type.String({
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?Z$',
});

export const Amount = Type.Object({
  value: Decimal,
  asset_type: Text({ maxLength: 64 }),
  asset_code: Text({ maxLength: 64 }),
});

export const Fee = Type.Object({
  kind: Text({ maxLength: 64 }),
  amount: Amount,
  paid_by: Text({ maxLength: 64 }),
});

export const Capability = Type.Object({
  rail: Text({ maxLength: 64 }),
  asset_type: Text({ maxLength: 64 }),
  asset_code: Text({ maxLength: 64 }),
  chain: Type.Optional(
    Type.Object({
      slug: Type.Optional(Text({ maxLength: 128 })),
      caip2: Type.Optional(Text({ maxLength: 128 })),
      evm: Type.Optional(Type.Object({ chain_id: Type.Integer({ minimum: 0 }) })),
    }),
  ),
  standard: Type.Optional(Text({ maxLength: 64 })),
  contract: Type.Optional(Text({ maxLength: 256 })),
  fees: Type.Optional(Type.Array(Fee, { maxItems: 32 })),
  limits: Type.Optional(Type.Object({ max_single: Type.Optional(Amount) })),
});

export const RailReference = Type.Object({
  type: Text({ maxLength: 64 }),
  value: Text({ maxLength: 512 }),
});

export const MemberName = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' });

export type AmountT = Static<typeof Amount>;
export type CapabilityT = Static<typeof Capability>;

export interface Validator<T> {
  /** The value typed, or a 400 refusal naming the first bad field. */
  (value: unknown): { ok: true; value: T } | { ok: false; refusal: Refusal };
}

export function validator<S extends TSchema>(schema: S): Validator<Static<S>> {
  const check = TypeCompiler.Compile(schema);
  return (value) => {
    if (check.Check(value)) return { ok: true, value: value as Static<S> };
    const first = check.Errors(value).First();
    const field =
      first === undefined || first.path === ''
        ? '(body)'
        : first.path.slice(1).replaceAll('/', '.');
    return {
      ok: false,
      refusal: invalid(
        field,
        first === undefined ? 'invalid request' : `${field}: ${first.message}`,
      ),
    };
  };
}
