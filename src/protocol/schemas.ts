// Shared wire schemas (typebox). Unknown members of incoming objects are allowed and kept
// (SPEC principle 6): schemas refuse wrong types of known fields, never unknown members.
//
// A refusal says what was expected in words (P7): a closed set lists its allowed values, and a
// string with a pattern carries a `description` that the message uses instead of the regex.
import { Kind, Type, type TSchema, type Static } from '@sinclair/typebox';
import { TypeCompiler, ValueErrorType, type ValueError } from '@sinclair/typebox/compiler';
import { DECIMAL_PATTERN } from './amounts.js';
import { TEXT_LENGTH_MAX } from '../config.js';
import { invalid, refusal, type Refusal } from './errors.js';
import { once } from '../once.js';

export const Text = (options: { maxLength?: number; minLength?: number } = {}) =>
  Type.String({
    minLength: options.minLength ?? 1,
    maxLength: options.maxLength ?? TEXT_LENGTH_MAX,
  });

export const Decimal = Type.String({
  pattern: DECIMAL_PATTERN,
  maxLength: 64,
  description:
    'a decimal amount written as a string, like "12.50": digits, then optionally a dot ' +
    'and more digits',
});

export const Rfc3339 = Type.String({
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?Z$',
  description: 'an RFC 3339 UTC time ending in Z, like "2026-11-21T12:00:00Z"',
});

/** A reference or id of this node (P9): the prefix, an underscore, 32 lowercase hex digits. */
export const Reference = (prefix: string, what: string) =>
  Type.String({
    pattern: `^${prefix}_[0-9a-f]{32}$`,
    description: `${what}: "${prefix}_" followed by 32 lowercase hex digits`,
  });

/** An opaque Path address (SPEC E). */
export const PathAddress = Type.String({
  pattern: '^path:[A-Za-z0-9]{1,64}$',
  description: 'a Path address: "path:" followed by 1 to 64 letters or digits',
});

export const HttpUrl = Type.String({
  minLength: 8,
  maxLength: 2048,
  pattern: '^https?://',
  description: 'an absolute URL starting with https:// (or http://)',
});

export const Sha256Hex = Type.String({
  pattern: '^[0-9a-f]{64}$',
  description: '64 lowercase hex digits',
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

export const MemberName = Type.String({
  pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$',
  description:
    'a member name: 1 to 63 letters, digits, dots, dashes or underscores, starting ' +
    'with a letter or digit',
});

export type AmountT = Static<typeof Amount>;
export type CapabilityT = Static<typeof Capability>;

export interface Validator<T> {
  /** The value typed, or a 400 refusal naming the first bad field. */
  (value: unknown): { ok: true; value: T } | { ok: false; refusal: Refusal };
}

/**
 * The schema's check is compiled when first asked for, not when the routes are made: a start
 * compiles none of them, and each costs about a millisecond once, on its route's first request.
 */
export function validator<S extends TSchema>(schema: S): Validator<Static<S>> {
  const compiled = once(() => TypeCompiler.Compile(schema));
  return (value) => {
    const check = compiled();
    if (check.Check(value)) return { ok: true, value: value as Static<S> };
    const first = check.Errors(value).First();
    if (first === undefined) return { ok: false, refusal: invalid('(body)', 'invalid request') };
    return { ok: false, refusal: refusalFor(first) };
  };
}

/** The 400 for a validation error: the field named, what it must be said in words (P7). */
function refusalFor(error: ValueError): Refusal {
  const field = error.path === '' ? '(body)' : error.path.slice(1).replaceAll('/', '.');
  const allowed = closedSet(error.schema);
  const detail = allowed === undefined ? { field } : { field, allowed };
  return refusal('path.core.invalid_request', messageFor(error, field), detail);
}

function messageFor(error: ValueError, field: string): string {
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return `${field} is required: ${inWords(error.schema)}`;
    case ValueErrorType.Union:
    case ValueErrorType.Literal:
      return `${field} must be ${inWords(error.schema)}`;
    case ValueErrorType.StringPattern:
      return typeof error.schema.description === 'string'
        ? `${field} must be ${error.schema.description}`
        : `${field} is not in the expected form`;
    default:
      return `${field}: ${error.message}`;
  }
}

/** The values of a closed set (literals and null, unions nested or not), or undefined. */
function closedSet(schema: TSchema): unknown[] | undefined {
  if (schema[Kind] === 'Literal') return [schema.const];
  if (schema[Kind] === 'Null') return [null];
  if (schema[Kind] !== 'Union') return undefined;
  const values: unknown[] = [];
  for (const member of schema.anyOf as TSchema[]) {
    const inner = closedSet(member);
    if (inner === undefined) return undefined;
    values.push(...inner);
  }
  return values;
}

/** What a value of `schema` looks like, in words; never the raw pattern. */
function inWords(schema: TSchema): string {
  if (typeof schema.description === 'string') return schema.description;
  const set = closedSet(schema);
  if (set !== undefined) {
    const quoted = set.map((v) => JSON.stringify(v));
    return quoted.length === 1 ? quoted[0]! : `one of ${quoted.join(', ')}`;
  }
  switch (schema[Kind]) {
    case 'Union':
      return (schema.anyOf as TSchema[]).map(inWords).join(' or ');
    case 'String':
      return 'a string';
    case 'Integer':
      return 'an integer';
    case 'Number':
      return 'a number';
    case 'Boolean':
      return 'true or false';
    case 'Array':
      return 'an array';
    case 'Object':
    case 'Record':
      return 'an object';
    default:
      return 'a value of the documented type';
  }
}
