// The thread behind the PostgreSQL log's synchronous reads (postgres-log.ts): the `Log` interface
// reads synchronously, as LMDB's map does, so each read is sent here and the caller waits
// (synckit: a worker thread, Atomics.wait) while this thread asks the database on a connection
// of its own. Every read is one statement in autocommit: it sees every commit made before it.
//
// A read that fails because the database was unreachable is marked so before it crosses back
// (`unavailable`, READ_UNAVAILABLE): the error that reaches the caller is a copy, and the caller
// turns the mark into an UnavailableError (postgres-log.ts).
import pg from 'pg';
import { runAsWorker } from 'synckit';
import { ROW_BYTES, scanStatement, type RowRange } from './postgres-schema.js';
import { connectionSettings, findPrimary, READ_UNAVAILABLE, unreachable } from './unavailable.js';

export type ReadRequest =
  | { op: 'open'; url: string }
  | { op: 'get'; table: string; key: string }
  | ({ op: 'scan' } & RowRange)
  | { op: 'records'; partition: number; afterSeq: number; limit: number }
  | { op: 'lastSeq'; partition: number }
  | { op: 'snapshot'; partition: number }
  | { op: 'close' };

export type ReadAnswer =
  | null
  | number
  | Uint8Array
  | { key: string; bytes: Uint8Array }[]
  | { seq: number; bytes: Uint8Array }[];

let url: string | null = null;
let client: pg.Client | null = null;

/**
 * The reader's connection, opened again when it was lost (the server restarted, a network
 * fault): a read under way when it broke fails, the next one reconnects.
 */
async function connected(): Promise<pg.Client> {
  if (client !== null) return client;
  if (url === null) throw new Error('the PostgreSQL reader is not open');
  await findPrimary(url);
  const opening = new pg.Client(connectionSettings(url));
  opening.on('error', () => drop(opening));
  opening.on('end', () => drop(opening));
  await opening.connect();
  client = opening;
  return opening;
}

/**
 * Forgets a connection that failed and ends it: one whose statement timed out still waits for
 * that statement's answer, and `end` destroys its socket.
 */
function drop(lost: pg.Client): void {
  if (client === lost) client = null;
  void lost.end().catch(() => undefined);
}

/** Answers `request`; a failure of reachability drops the connection and is marked so. */
async function answerMarked(request: ReadRequest): Promise<ReadAnswer> {
  try {
    return await answer(request);
  } catch (error) {
    if (!unreachable(error)) throw error;
    if (client !== null) drop(client);
    throw Object.assign(new Error(`the database was unreachable: ${(error as Error).message}`), {
      [READ_UNAVAILABLE]: true,
    });
  }
}

async function answer(request: ReadRequest): Promise<ReadAnswer> {
  switch (request.op) {
    case 'open': {
      url = request.url;
      await connected();
      return null;
    }
    case 'get': {
      const client = await connected();
      const found = await client.query<{ bytes: Buffer }>(ROW_BYTES, [request.table, request.key]);
      return found.rows[0]?.bytes ?? null;
    }
    case 'scan': {
      const [text, values] = scanStatement(request);
      const found = await (await connected()).query<{ key: string; bytes: Buffer }>(text, values);
      return found.rows;
    }
    case 'records': {
      const found = await (
        await connected()
      ).query<{ seq: string; bytes: Buffer }>(
        'select seq, bytes from records where partition = $1 and seq > $2 order by seq limit $3',
        [request.partition, request.afterSeq, request.limit],
      );
      return found.rows.map((row) => ({ seq: Number(row.seq), bytes: row.bytes }));
    }
    case 'lastSeq': {
      const found = await (
        await connected()
      ).query<{ seq: string | null }>('select max(seq) as seq from records where partition = $1', [
        request.partition,
      ]);
      return Number(found.rows[0]?.seq ?? 0);
    }
    case 'snapshot': {
      const found = await (
        await connected()
      ).query<{ bytes: Buffer }>('select bytes from snapshots where partition = $1', [
        request.partition,
      ]);
      return found.rows[0]?.bytes ?? null;
    }
    case 'close': {
      const open = client;
      [client, url] = [null, null];
      await open?.end().catch(() => undefined);
      return null;
    }
  }
}

runAsWorker(answerMarked);
