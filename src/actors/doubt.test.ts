// A log that fails under the shard (issue 29: its database restarts, its connection is lost): the
// shard answers 503 and lives on. An append whose commit is in doubt makes its partition fold
// again from the log, which alone says what committed, before anything more of it is decided;
// a fold the log cannot serve answers the waiting commands 503 and is tried again by the next.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../clock.js';
import { DATABASE_RETRY_MAX_MS, DEFAULT_LIMITS } from '../config.js';
import { receiptDecider, type ReceiptState } from '../domain/receipt/receipt.js';
import { PARTITION_COUNT, partitionOf, type LogEntry, type TableWrite } from '../log/log.js';
import { MemoryLog } from '../log/memory-log.js';
import { UnavailableError } from '../log/unavailable.js';
import { newReference } from '../protocol/ids.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import { Shard } from './shard.js';
import type { CommandResult } from './types.js';
import { issueReceipt, LOCAL, settleReceipt } from '../../test/support/shards.js';

const signer = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
const ALL = Array.from({ length: PARTITION_COUNT }, (_, p) => p);

/** The in-memory log, made to fail as a database that went away does. */
class FailingLog extends MemoryLog {
  /** The next append fails: before it writes anything, or after it committed (in doubt). */
  nextAppend: 'lost' | 'committed-then-lost' | null = null;
  /** Reads fail: folds cannot be served. */
  down = false;

  override async append(entries: readonly LogEntry[], writes: readonly TableWrite[]) {
    const failing = this.nextAppend;
    this.nextAppend = null;
    if (failing === 'lost') throw new UnavailableError('connection lost before the commit');
    await super.append(entries, writes);
    if (failing === 'committed-then-lost') throw new UnavailableError('lost after the commit');
  }

  /** Snapshots fail. */
  snapshotsFail = false;

  override async writeSnapshot(partition: number, bytes: Buffer) {
    if (this.snapshotsFail) throw new UnavailableError('the database does not answer');
    return super.writeSnapshot(partition, bytes);
  }

  override readSnapshot(partition: number) {
    if (this.down) throw new UnavailableError('the database does not answer');
    return super.readSnapshot(partition);
  }
}

function shardOver(
  log: MemoryLog,
  fatal: unknown[],
  trouble: number[],
  snapshotEvery = 1e6,
  clock = new SimulatedClock(Date.parse('2026-11-27T12:00:00Z')),
) {
  return new Shard({
    partitions: ALL,
    log,
    deciders: [receiptDecider],
    clock,
    member: 'alpha',
    signer: () => signer,
    newId: newReference,
    snapshotEveryRecords: snapshotEvery,
    mailboxDepthMax: 1024,
    limits: DEFAULT_LIMITS,
    onFatal: (error) => fatal.push(error),
    onTrouble: (_, partition) => trouble.push(partition),
  });
}

const issue = (shard: Shard, reference: string) => shard.submit(issueReceipt(reference));
const settle = (shard: Shard, reference: string) => shard.submit(settleReceipt(reference));

/** The answer of a 503 for want of the database (P7), with its Retry-After seconds. */
function expectUnavailable(result: CommandResult): void {
  expect(result.committed).toBe(false);
  expect(result.reply.status).toBe(503);
  const body = JSON.parse(String(result.reply.body)) as {
    error: { code: string; detail?: { retry_after_seconds?: number } };
  };
  expect(body.error.code).toBe('path.core.unavailable');
  expect(body.error.detail?.retry_after_seconds).toBeGreaterThan(0);
}

async function started(log: FailingLog, clock?: SimulatedClock) {
  const fatal: unknown[] = [];
  const trouble: number[] = [];
  const shard = shardOver(log, fatal, trouble, 1e6, clock);
  await shard.recover();
  return { shard, fatal, trouble };
}

describe('issue 29: a shard lives through a log that fails', () => {
  it('an append lost before its commit answers 503; the same command then commits', async () => {
    const log = new FailingLog();
    const { shard, fatal, trouble } = await started(log);
    const reference = newReference('rcp');
    log.nextAppend = 'lost';
    expectUnavailable(await issue(shard, reference));
    expect(trouble.length).toBe(1);
    const again = await issue(shard, reference);
    expect(again.reply.status).toBe(201);
    expect(again.committed).toBe(true);
    expect((shard.stateOf(reference) as ReceiptState).status).toBe('pending');
    expect(fatal).toEqual([]);
    // One record: the lost append left nothing, and the retry took its seq without a gap.
    const records = [...log.read(troubleOf(trouble), 0)];
    expect(records.map((r) => r.seq)).toEqual([1]);
  });

  it('an append that committed though its answer was lost: the refold sees it', async () => {
    const log = new FailingLog();
    const { shard, fatal } = await started(log);
    const reference = newReference('rcp');
    log.nextAppend = 'committed-then-lost';
    expectUnavailable(await issue(shard, reference));
    // The log holds the receipt: the shard folds it back, and the retry finds it there (a second
    // issue of one reference is not a second receipt).
    const retried = await issue(shard, reference);
    expect(retried.committed).toBe(false);
    expect((shard.stateOf(reference) as ReceiptState).status).toBe('pending');
    expect((await settle(shard, reference)).committed).toBe(true);
    expect((shard.stateOf(reference) as ReceiptState).status).toBe('settled');
    expect(fatal).toEqual([]);
  });

  it('commands that queued behind a doubted append wait for the refold, then run', async () => {
    const log = new FailingLog();
    const { shard, fatal } = await started(log);
    const reference = newReference('rcp');
    log.nextAppend = 'committed-then-lost';
    const first = issue(shard, reference);
    const behind = settle(shard, reference);
    expectUnavailable(await first);
    // Decided against the state the log holds (pending), not the one held before (none).
    expect((await behind).committed).toBe(true);
    expect((shard.stateOf(reference) as ReceiptState).status).toBe('settled');
    expect(fatal).toEqual([]);
  });

  it('while the log cannot serve a fold, commands answer 503; once it can, they run', async () => {
    const log = new FailingLog();
    const { shard, fatal } = await started(log);
    const reference = newReference('rcp');
    expect((await issue(shard, reference)).committed).toBe(true);
    log.nextAppend = 'lost';
    log.down = true;
    expectUnavailable(await settle(shard, reference));
    expectUnavailable(await settle(shard, reference));
    log.down = false;
    expect((await settle(shard, reference)).committed).toBe(true);
    expect((shard.stateOf(reference) as ReceiptState).status).toBe('settled');
    expect(fatal).toEqual([]);
  });

  it('a partition the log could not fold is folded again with no command (issue 30)', async () => {
    // Its deadlines come back with its fold: waiting for its next command, one due meanwhile (an
    // instruction's expiry) never fired while no command came.
    const log = new FailingLog();
    const clock = new SimulatedClock(Date.parse('2026-11-27T12:00:00Z'));
    const { shard, fatal } = await started(log, clock);
    const reference = newReference('rcp');
    expect((await issue(shard, reference)).committed).toBe(true);
    const p = partitionOf(reference);
    log.nextAppend = 'lost';
    log.down = true;
    expectUnavailable(await settle(shard, reference));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(shard.holdsFolded(p)).toBe(false);
    log.down = false;
    clock.advance(DATABASE_RETRY_MAX_MS);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(shard.holdsFolded(p)).toBe(true);
    expect((shard.stateOf(reference) as ReceiptState).status).toBe('pending');
    expect(fatal).toEqual([]);
  });
});

describe('issue 29: a snapshot the log cannot take costs time, not the node', () => {
  it('is told, and written with a later record once the log takes it', async () => {
    const log = new FailingLog();
    const fatal: unknown[] = [];
    const trouble: number[] = [];
    const shard = shardOver(log, fatal, trouble, 2);
    await shard.recover();
    const reference = newReference('rcp');
    log.snapshotsFail = true;
    await issue(shard, reference);
    await settle(shard, reference);
    await waitUntil(() => trouble.length > 0);
    const partition = trouble[0]!;
    expect(log.readSnapshot(partition)).toBeUndefined();
    log.snapshotsFail = false;
    await shard.submit({
      aggregate: 'receipt',
      key: reference,
      command: {
        name: 'transition',
        input: { to: 'reversed', rail_references: [{ type: 'book_entry', value: 'y' }] },
        caller: LOCAL,
      },
    });
    await waitUntil(() => log.readSnapshot(partition) !== undefined);
    expect(fatal).toEqual([]);
  });
});

async function waitUntil(done: () => boolean): Promise<void> {
  for (let turns = 0; !done(); turns++) {
    if (turns > 1_000) throw new Error('never came to pass');
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function troubleOf(partitions: number[]): number {
  expect(partitions.length).toBeGreaterThan(0);
  return partitions[0]!;
}
