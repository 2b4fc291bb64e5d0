// Field sealing: registered names, account references and callers' external references are
// kept only as AES-256-GCM ciphertext, so neither the log nor the database holds them in the
// clear. The front end seals on arrival; only the code that must compare a value opens it.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const IV_BYTES = 12; // tidy: format (AES-GCM's 96-bit nonce)
const TAG_BYTES = 16; // tidy: format (AES-GCM's 128-bit tag)
const VERSION = 's1';

export function seal(key: Buffer, plaintext: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `${VERSION}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
}

export function unseal(key: Buffer, sealed: string): string {
  if (!sealed.startsWith(`${VERSION}.`)) throw new Error('unknown sealing version');
  const raw = Buffer.from(sealed.slice(VERSION.length + 1), 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
  decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([
    decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)),
    decipher.final(),
  ]).toString('utf8');
}
