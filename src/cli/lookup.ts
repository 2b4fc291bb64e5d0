// `path-node lookup`: bulk lookups from a CSV file, for operators who feed the node in bulk.
// Rows are read with a CSV library, sent in batches of the node's batch maximum with P5
// signatures, and written one output row per input row, in input order, whatever order the
// concurrent batches finish in. A 429 stops the run cleanly: what was answered is written, the
// resume point is printed, and `--resume` picks up after the last row of the output file.
//
// The output holds hashes, never the clear identifiers of the input. Exit codes: 0 done, 2 usage,
// 3 stopped by the lookup budget (resumable), 1 any other stop (resumable the same way).
import { createReadStream, existsSync, readFileSync, writeFileSync, appendFileSync } from 'node:fs';
import { parse } from 'csv-parse';
import { parse as parseAll } from 'csv-parse/sync';
import { stringify } from 'csv-stringify/sync';
import { DEFAULT_LIMITS, LOOKUP_FILE_TIMEOUT_MS } from '../config.js';
import { signedHeaders } from '../http/auth.js';
import { signingKeyFromSeed, type SigningKey } from '../protocol/signing.js';
import { Progress } from './progress.js';

export interface LookupFileOptions {
  baseUrl: string;
  keyId: string;
  privateKeyFile: string;
  in: string;
  out: string;
  concurrency: number;
  signed: boolean;
  resume: boolean;
}

/** Why a run cannot start: the command line's usage error. */
export class LookupUsageError extends Error {}

const COLUMNS = ['row', 'identifier_type', 'identifier_hash', 'found', 'member', 'endpoint'];
const ERROR_COLUMNS = ['error_code', 'error_message'];

type Item = { identifier_type: string; identifier?: string; identifier_hash?: string };
type Row = Record<string, string>;
type Batch = { first: number; items: (Item | Row)[] };
type Stop = { code: 1 | 3; message: string };

export async function lookupFile(options: LookupFileOptions): Promise<number> {
  const key = readKey(options.privateKeyFile);
  const url = await batchUrl(options.baseUrl);
  const columns = [...COLUMNS, ...ERROR_COLUMNS, ...(options.signed ? ['answer'] : [])];
  const done = startOutput(options, columns);
  const total = await countRows(options.in);
  const progress = new Progress({ total, done });
  const send = (batch: Batch) => sendBatch(url, key, options, batch);
  const stop = await runBatches(readBatches(options.in, done), send, {
    concurrency: options.concurrency,
    write: (rows) => {
      appendFileSync(options.out, stringify(rows, { columns }));
      progress.advance(rows.length);
    },
  });
  progress.finish();
  if (stop === null) return 0;
  const resumed = done + progress.written;
  process.stderr.write(
    `path-node lookup: ${stop.message}; ${resumed} of ${total} rows written to ` +
      `${options.out}; run again with --resume to continue from row ${resumed + 1}\n`,
  );
  return stop.code;
}

function readKey(file: string): SigningKey {
  if (!existsSync(file)) throw new LookupUsageError(`no such private key file: ${file}`);
  const hex = readFileSync(file, 'utf8').trim().toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(hex))
    throw new LookupUsageError('--private-key-file must hold the 32-byte private key as hex');
  return signingKeyFromSeed(hex);
}

/** The batch operation's URL from the node's discovery document: never an assumed prefix. */
async function batchUrl(baseUrl: string): Promise<string> {
  const origin = baseUrl.replace(/\/+$/, '');
  let doc: { endpoints?: Record<string, { url: string }> };
  try {
    const res = await fetch(`${origin}/.well-known/path-configuration`, {
      signal: AbortSignal.timeout(LOOKUP_FILE_TIMEOUT_MS),
    });
    doc = (await res.json()) as typeof doc;
  } catch (error) {
    throw new LookupUsageError(`cannot read ${origin}'s discovery document: ${String(error)}`);
  }
  const url = doc.endpoints?.['sonar.lookup_batch']?.url;
  if (url === undefined) throw new LookupUsageError(`${origin} publishes no batch lookup`);
  return url;
}

/** Writes the header of a new output file, or counts the rows a resumed one already has. */
function startOutput(options: LookupFileOptions, columns: string[]): number {
  if (!existsSync(options.out)) {
    writeFileSync(options.out, stringify([], { header: true, columns }));
    return 0;
  }
  if (!options.resume)
    throw new LookupUsageError(`${options.out} exists: pass --resume to continue it`);
  const rows = parseAll(readFileSync(options.out), { columns: true }) as Row[];
  return rows.length;
}

async function countRows(file: string): Promise<number> {
  let n = 0;
  for await (const _ of inputRows(file)) n++;
  return n;
}

function inputRows(file: string): AsyncIterable<Row> {
  if (!existsSync(file)) throw new LookupUsageError(`no such input file: ${file}`);
  return createReadStream(file).pipe(
    parse({ columns: true, skip_empty_lines: true, trim: true, bom: true }),
  );
}

/**
 * The input in batches, after the `skip` rows already answered. A row that names neither an
 * identifier nor a hash is answered here, at its place, and never sent.
 */
async function* readBatches(file: string, skip: number): AsyncGenerator<Batch> {
  const size = DEFAULT_LIMITS.lookup_batch_max;
  let row = 0;
  let batch: Batch = { first: skip + 1, items: [] };
  for await (const record of inputRows(file)) {
    row++;
    if (row <= skip) continue;
    if (row === 1) checkHeader(record);
    batch.items.push(itemOf(record, row));
    if (batch.items.length === size) {
      yield batch;
      batch = { first: row + 1, items: [] };
    }
  }
  if (batch.items.length > 0) yield batch;
}

function checkHeader(record: Row): void {
  if (!('identifier_type' in record) || !('identifier' in record || 'identifier_hash' in record))
    throw new LookupUsageError(
      'the input needs a header row with identifier_type and identifier (or identifier_hash)',
    );
}

function itemOf(record: Row, row: number): Item | Row {
  const type = record.identifier_type ?? '';
  if (record.identifier) return { identifier_type: type, identifier: record.identifier };
  if (record.identifier_hash)
    return { identifier_type: type, identifier_hash: record.identifier_hash };
  return {
    row: String(row),
    identifier_type: type,
    error_code: 'path.core.invalid_request',
    error_message: 'the row has neither identifier nor identifier_hash',
  };
}

const isItem = (entry: Item | Row): entry is Item => !('row' in entry);

/** Runs the batches, `concurrency` at a time, writing their rows in input order. */
async function runBatches(
  batches: AsyncGenerator<Batch>,
  send: (batch: Batch) => Promise<Row[] | Stop>,
  options: { concurrency: number; write: (rows: Row[]) => void },
): Promise<Stop | null> {
  const finished = new Map<number, Row[] | Stop>();
  let next = 0;
  let issued = 0;
  let stop: Stop | null = null;
  const flush = () => {
    while (finished.has(next) && stop === null) {
      const result = finished.get(next)!;
      finished.delete(next);
      if (!Array.isArray(result)) stop = result;
      else options.write(result);
      next++;
    }
  };
  const inFlight = new Set<Promise<void>>();
  for await (const batch of batches) {
    if (stop !== null) break;
    const index = issued++;
    const running: Promise<void> = send(batch).then((result) => {
      finished.set(index, result);
      flush();
      inFlight.delete(running);
    });
    inFlight.add(running);
    if (inFlight.size >= options.concurrency) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  flush();
  return stop;
}

async function sendBatch(
  url: string,
  key: SigningKey,
  options: LookupFileOptions,
  batch: Batch,
): Promise<Row[] | Stop> {
  const items = batch.items.filter(isItem);
  let answer: { status: number; json: any; headers: Headers };
  try {
    answer = items.length === 0 ? emptyAnswer() : await post(url, key, options, items);
  } catch (error) {
    return { code: 1, message: `the node did not answer (${String(error)})` };
  }
  if (answer.status === 429) return { code: 3, message: budgetSpent(answer.headers, Date.now()) };
  if (answer.status !== 200) {
    const code = answer.json?.error?.code ?? `HTTP ${answer.status}`;
    return { code: 1, message: `the node refused a batch: ${code}` };
  }
  return rowsOf(batch, answer.json.results as Record<string, unknown>[], options.signed);
}

/**
 * The budget's reset as a date and time (the node gives seconds from now, P12), and who can raise
 * it: the answering node's operator, with the settings that make the allowance.
 */
export function budgetSpent(headers: Headers, now: number): string {
  const raw = headers.get('ratelimit-reset') ?? headers.get('retry-after');
  const seconds = raw === null ? NaN : Number(raw);
  const at = now + seconds * 1000; // tidy: format (seconds to milliseconds)
  const reset = Number.isFinite(at)
    ? ` until ${new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z')}`
    : '';
  return (
    `the lookup budget is spent${reset}; the answering node's operator raises the allowance ` +
    'with --lookup-budget-base (lookups a month) or --lookup-budget-factor ' +
    '(lookups a month per contributed entry)'
  );
}

function emptyAnswer() {
  return { status: 200, json: { results: [] }, headers: new Headers() };
}

async function post(url: string, key: SigningKey, options: LookupFileOptions, items: Item[]) {
  const body = JSON.stringify({ items, signed: options.signed });
  const { pathname, search } = new URL(url);
  const signed = signedHeaders({
    keyId: options.keyId,
    key,
    method: 'POST',
    target: pathname + search,
    body,
  });
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...signed },
    body,
    signal: AbortSignal.timeout(LOOKUP_FILE_TIMEOUT_MS),
  });
  const json = await res.json().catch(() => null);
  return { status: res.status, json, headers: res.headers };
}

/** The batch's output rows in input order: the node's results, and the rows answered here. */
function rowsOf(batch: Batch, results: Record<string, unknown>[], signed: boolean): Row[] {
  let r = 0;
  return batch.items.map((entry, i) => {
    if (!isItem(entry)) return entry;
    const result = results[r++] ?? {};
    const error = result.error as { code?: string; message?: string } | undefined;
    const row: Row = {
      row: String(batch.first + i),
      identifier_type: String(result.identifier_type ?? entry.identifier_type),
      identifier_hash: String(result.identifier_hash ?? ''),
      found: error === undefined ? String(result.found === true) : '',
      member: typeof result.member === 'string' ? result.member : '',
      endpoint: typeof result.endpoint === 'string' ? result.endpoint : '',
      error_code: error?.code ?? '',
      error_message: error?.message ?? '',
    };
    if (signed && error === undefined) row.answer = JSON.stringify(result);
    return row;
  });
}
