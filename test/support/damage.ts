// Damage at rest, made by tests with the node stopped: one byte of a stored record or row flipped,
// as a failing disk would, to show that a start refuses what it cannot verify (P14).
import { join } from 'node:path';
import { open } from 'lmdb';

/** Flips one byte of the last log record of a partition; answers that record's sequence. */
export async function damageLastRecord(dir: string, partition: number): Promise<number> {
  const env = open({ path: join(dir, 'node.mdb'), maxDbs: 32, compression: false });
  const log = env.openDB<Buffer, [number, number]>({ name: 'log', encoding: 'binary' });
  const end = [partition, 0] as [number, number];
  const range = log.getRange({ start: [partition + 1, 0], end, reverse: true, limit: 1 });
  const last = [...range][0]!;
  const damaged = Buffer.from(last.value);
  damaged[damaged.length - 1] ^= 0xff;
  await log.put(last.key, damaged);
  await env.flushed;
  await env.close();
  return last.key[1];
}

/** Flips one byte of the first row of a table; answers the row's key. */
export async function damageFirstRow(dir: string, table: string): Promise<string> {
  const env = open({ path: join(dir, 'node.mdb'), maxDbs: 32, compression: false });
  const db = env.openDB<Buffer, string>({ name: table, encoding: 'binary' });
  const row = [...db.getRange({ limit: 1 })][0]!;
  const damaged = Buffer.from(row.value);
  damaged[damaged.length - 1] ^= 0xff;
  await db.put(row.key, damaged);
  await env.flushed;
  await env.close();
  return row.key;
}

/**
 * Takes one log record of a partition out of the log, as a lost write or a careless hand would
 * (the last one, or record `seq`); answers the record's sequence. Nothing else is touched: its
 * commit's rows, the partition's head, stay as they were.
 */
export async function removeRecord(dir: string, partition: number, seq?: number): Promise<number> {
  const env = open({ path: join(dir, 'node.mdb'), maxDbs: 32, compression: false });
  const log = env.openDB<Buffer, [number, number]>({ name: 'log', encoding: 'binary' });
  const end = [partition, 0] as [number, number];
  const range = log.getRange({ start: [partition + 1, 0], end, reverse: true, limit: 1 });
  const taken = seq ?? [...range][0]!.key[1];
  if (!(await log.remove([partition, taken]))) throw new Error(`no record ${taken} of ${partition}`);
  await env.flushed;
  await env.close();
  return taken;
}

/**
 * Flips one byte of log record `seq` of a partition: byte `at` (from the end when negative: the
 * last, inside its value, by default; 0 is the first byte of its checksum).
 */
export async function damageRecord(dir: string, partition: number, seq: number, at = -1): Promise<void> {
  const env = open({ path: join(dir, 'node.mdb'), maxDbs: 32, compression: false });
  const log = env.openDB<Buffer, [number, number]>({ name: 'log', encoding: 'binary' });
  const damaged = Buffer.from(log.get([partition, seq])!);
  damaged[at < 0 ? damaged.length + at : at] ^= 0xff;
  await log.put([partition, seq], damaged);
  await env.flushed;
  await env.close();
}
