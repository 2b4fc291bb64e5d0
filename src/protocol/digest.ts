// `sha256:` digests over canonical bytes (P3): supersedes, commitment, consent and binds digests.
import { createHash } from 'node:crypto';
import { canonicalBytes } from './canonical.js';

export const DIGEST_PREFIX = 'sha256:';

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Digest of a whole object; for an envelope this includes its `signature` (P3). */
export function digestOf(value: unknown): string {
  return DIGEST_PREFIX + sha256Hex(canonicalBytes(value));
}
