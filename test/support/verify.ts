// Independent verification for tests: RFC 8785 bytes from the `canonicalize` package and
// Ed25519 from @noble/ed25519 (strict), so the node's own signing code is not marking itself.
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';

ed.hashes.sha512 = sha512;

export function canonical(value: unknown): string {
  return (canonicalize as unknown as (v: unknown) => string)(value);
}

export function verifiesWith(object: Record<string, unknown>, publicKeyHex: string): boolean {
  const { signature, ...rest } = object;
  if (typeof signature !== 'string') return false;
  return ed.verify(Buffer.from(signature, 'hex'), Buffer.from(canonical(rest), 'utf8'), Buffer.from(publicKeyHex, 'hex'), { zip215: false });
}

export function digest(value: unknown): string {
  return `sha256:${createHash('sha256').update(canonical(value), 'utf8').digest('hex')}`;
}
