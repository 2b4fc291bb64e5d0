// RFC 8785 (JSON Canonicalization Scheme) serialisation: the bytes every signature and
// digest is computed over (P2, P3). The `canonicalize` package is the RFC author's own
// implementation; this module only pins its use and its error handling in one place.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const serialize = require('canonicalize') as (value: unknown) => string | undefined;

export function canonicalJson(value: unknown): string {
  const text = serialize(value);
  if (text === undefined) throw new TypeError('value has no JSON form');
  return text;
}

export function canonicalBytes(value: unknown): Buffer {
  return Buffer.from(canonicalJson(value), 'utf8');
}
