// Published answers ("views"): the exact bytes the front end serves for a public read, written
// in the same commit as the record that produced them. A view may carry a deadline: from then
// on the front end answers the stated 410 code itself, so an expiry is exact to the
// millisecond even before the scheduler's tick has recorded it.
// Layout: CRC-32 of the rest | status u16 | flags u8 | deadline f64 (ms, 0 = none) |
// partition u16 | seq f64 (the record the view reflects, issue 28) | gone-code length u8 |
// gone code | JSON body.
import { crc32 } from 'node:zlib';
import type { Reply } from '../actors/types.js';
import type { RecordPosition } from '../log/log.js';

const FIXED_BYTES = 26; // tidy: format (the fixed fields of the layout above)
const FLAG_SIGNED = 1;
const AT = { partition: 15, seq: 17, goneLength: 25 } as const; // tidy: format (offsets above)

/** The stored bytes of a view, written in the commit of the record at `position`. */
export function encodeView(reply: Reply, position: RecordPosition): Buffer {
  const gone = reply.expiry?.code ?? '';
  const goneBytes = Buffer.byteLength(gone);
  const bodyBytes = Buffer.byteLength(reply.body);
  const out = Buffer.allocUnsafe(FIXED_BYTES + goneBytes + bodyBytes);
  out.writeUInt16BE(reply.status, 4);
  out.writeUInt8(reply.signed ? FLAG_SIGNED : 0, 6);
  out.writeDoubleBE(reply.expiry?.at ?? 0, 7);
  out.writeUInt16BE(position.partition, AT.partition);
  out.writeDoubleBE(position.seq, AT.seq);
  out.writeUInt8(goneBytes, AT.goneLength);
  out.write(gone, FIXED_BYTES, 'latin1');
  out.write(reply.body, FIXED_BYTES + goneBytes, 'utf8');
  out.writeUInt32BE(crc32(out.subarray(4)), 0);
  return out;
}

export interface View {
  status: number;
  signed: boolean;
  /** When set: from `at` (ms) on, the answer is 410 with `code`. */
  expiry: { at: number; code: string } | null;
  /** The JSON body, a view into the stored bytes. */
  body: Buffer;
  /** The log record it reflects. */
  position: RecordPosition;
}

/** The view, or null when its checksum fails (damaged at rest: never served). */
export function decodeView(bytes: Buffer): View | null {
  if (bytes.length < FIXED_BYTES || crc32(bytes.subarray(4)) !== bytes.readUInt32BE(0)) return null;
  const at = bytes.readDoubleBE(7);
  const goneBytes = bytes.readUInt8(AT.goneLength);
  return {
    status: bytes.readUInt16BE(4),
    signed: (bytes.readUInt8(6) & FLAG_SIGNED) !== 0,
    expiry:
      at === 0
        ? null
        : { at, code: bytes.toString('latin1', FIXED_BYTES, FIXED_BYTES + goneBytes) },
    body: bytes.subarray(FIXED_BYTES + goneBytes),
    position: { partition: bytes.readUInt16BE(AT.partition), seq: bytes.readDoubleBE(AT.seq) },
  };
}
