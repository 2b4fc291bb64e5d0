// Byte helpers for the client (P18): UTF-8, hex and base64 without Buffer or any `node:` module,
// so the same code runs in a browser, a worker and Node.
import { bytesToHex, hexToBytes } from '@noble/hashes/utils.js';

const encoder = new TextEncoder();

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

export function toHex(bytes: Uint8Array): string {
  return bytesToHex(bytes);
}

/** Lowercase hex only (P1); null for anything else. */
export function fromLowerHex(hex: string, length: number): Uint8Array | null {
  if (hex.length !== length * 2 || !/^[0-9a-f]*$/.test(hex)) return null;
  return hexToBytes(hex);
}

/** Standard base64 (RFC 4648 section 4, padded); null when the text is not that. */
export function fromBase64(text: string): Uint8Array | null {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** Equal length and equal bytes, in time that does not depend on where they differ. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}
