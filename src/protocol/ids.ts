// Public references and ids (P9): a type prefix and 128 random bits, never sequential.
import { randomBytes } from 'node:crypto';

export type ReferencePrefix =
  | 'req'
  | 'ins'
  | 'chk'
  | 'cs'
  | 'rcp'
  | 'con'
  | 'dlg'
  | 'att'
  | 'obd'
  | 'sub'
  | 'idn'
  | 'adr'
  | 'tgt'
  | 'evt';

export const REFERENCE_RANDOM_BYTES = 16; // tidy: format (P9: 128 random bits)

/**
 * Random bytes are drawn from the system's generator a pool at a time (one call per 256
 * references instead of one each) and handed out once each, never again.
 */
const POOL_REFERENCES = 256; // tidy: format (references per draw of random bytes)
let pool = Buffer.alloc(0);
let taken = 0;

/** The offset in `pool` of 128 fresh random bits. */
function fresh(): number {
  if (taken + REFERENCE_RANDOM_BYTES > pool.length) {
    pool = randomBytes(REFERENCE_RANDOM_BYTES * POOL_REFERENCES);
    taken = 0;
  }
  taken += REFERENCE_RANDOM_BYTES;
  return taken - REFERENCE_RANDOM_BYTES;
}

function freshHex(): string {
  const at = fresh();
  return pool.toString('hex', at, at + REFERENCE_RANDOM_BYTES);
}

export function newReference(prefix: ReferencePrefix): string {
  return `${prefix}_${freshHex()}`;
}

const REFERENCE_SHAPE = /^[a-z]{2,3}_[0-9a-f]{32}$/;

/** True for a string shaped like one of our references; used to refuse junk before routing. */
export function isReferenceShaped(text: string, prefix?: ReferencePrefix): boolean {
  return REFERENCE_SHAPE.test(text) && (prefix === undefined || text.startsWith(`${prefix}_`));
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ADDRESS_DIGITS = 22;

/** An opaque address (P9): `path:` and 128 random bits in 22 base-62 digits. */
export function newAddress(): string {
  let n = BigInt(`0x${freshHex()}`);
  let digits = '';
  for (let i = 0; i < ADDRESS_DIGITS; i++) {
    digits = BASE62[Number(n % 62n)]! + digits;
    n /= 62n;
  }
  return `path:${digits}`;
}
