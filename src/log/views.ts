// Published answers ("views"): the exact bytes the front end serves for a public read, written
// in the same commit as the record that produced them. Layout: CRC-32 of the rest, status
// (u16), flags (u8: bit 0 = carries a signed object), then the JSON body.
import { crc32 } from 'node:zlib';
import type { Reply } from '../actors/types.js';

const HEADER_BYTES = 7;
const FLAG_SIGNED = 1;

export function encodeView(reply: Reply): Buffer {
  const bodyBytes = Buffer.byteLength(reply.body);
  const out = Buffer.allocUnsafe(HEADER_BYTES + bodyBytes);
  out.writeUInt16BE(reply.status, 4);
  out.writeUInt8(reply.signed ? FLAG_SIGNED : 0, 6);
  out.write(reply.body, HEADER_BYTES, 'utf8');
  out.writeUInt32BE(crc32(out.subarray(4)), 0);
  return out;
}

export interface View {
  status: number;
  signed: boolean;
  /** The JSON body, a view into the stored bytes. */
  body: Buffer;
}

/** The view, or null when its checksum fails (damaged at rest: never served). */
export function decodeView(bytes: Buffer): View | null {
  if (bytes.length < HEADER_BYTES || crc32(bytes.subarray(4)) !== bytes.readUInt32BE(0)) return null;
  return { status: bytes.readUInt16BE(4), signed: (bytes.readUInt8(6) & FLAG_SIGNED) !== 0, body: bytes.subarray(HEADER_BYTES) };
}
