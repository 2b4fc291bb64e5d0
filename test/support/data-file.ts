// The LMDB data file's header read as the node's start reads it (checkDataFile).
import { closeSync, openSync, readSync } from 'node:fs';

/** Where the last page of the data file's current commit ends, in bytes (4 KiB pages). */
export function lastPageEnd(file: string): number {
  const header = Buffer.alloc(2 * 4_096);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  const meta = (at: number) => ({
    lastPage: Number(header.readBigUInt64LE(at + 0x90)),
    txnId: header.readBigUInt64LE(at + 0x98),
  });
  const [first, second] = [meta(0), meta(4_096)];
  return ((second.txnId > first.txnId ? second : first).lastPage + 1) * 4_096;
}
