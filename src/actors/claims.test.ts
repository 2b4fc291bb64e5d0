// A request's claims ride in its command's commit (issue 29): the cluster's log refuses an append
// whose replay mark or idempotency answer another commit holds (ClaimTakenError), and the appends
// of its partition that would follow on from a refused one (NotWrittenError), writing nothing of
// either. The shard answers the command whose claim was taken and decides the batch's others
// again (COMMIT_REDO_MAX), its partition's next seq restored, or the partition folded again when
// a later append of it was made meanwhile. The log here is the in-memory one, refusing as the
// cluster's does when told to; the shard is the real one.
import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../clock.js';
import { COMMIT_REDO_MAX, DEFAULT_LIMITS } from '../config.js';
import type { Decider } from '../domain/decider.js';
import {
  ClaimTakenError,
  NotFollowingError,
  NotWrittenError,
  PARTITION_COUNT,
  partitionOf,
  type LogEntry,
  type Table,
  type TableWrite,
} from '../log/log.js';
import { MemoryLog } from '../log/memory-log.js';
import { frameRecord, recordCheck, unframeRecord } from '../log/record.js';
import { headRows } from '../reads/rows.js';
import { newReference } from '../protocol/ids.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import type { ChainFault } from './chain.js';
import type { LogRecord } from './fold.js';
import { logReads, PartitionWalk } from './scrub.js';
import { Shard } from './shard.js';
import type { CommandResult, RoutedCommand } from './types.js';

const signer = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
const ALL = Array.from({ length: PARTITION_COUNT }, (_, p) => p);
const UNTIL = Date.parse('2026-11-27T13:00:00Z');

/** A tally: each `add` appends one item, so that several commands of one batch each commit. */
type Tally = { items: string[] };
const tallyCommands = { add: Type.String() };
type Added = { type: 'added'; item: string };

/** The tally's decider; `decided` hears every command it decides. */
function tallyDecider(decided: string[]): Decider<Tally, typeof tallyCommands, Added> {
  return {
    type: 'tally',
    prefix: null,
    commands: tallyCommands,
    decide(command) {
      decided.push(command.input);
      return {
        events: [{ type: 'added', item: command.input }],
        answer: { value: { item: command.input }, created: true },
      };
    },
    evolve: (state, event) => ({ items: [...(state?.items ?? []), event.item] }),
  };
}

/** Why the log refused an append, and how many records it carried. */
type Refusal = { why: 'claim' | 'told' | 'gap'; records: number };

/**
 * The in-memory log, refusing appends as the cluster's log does (postgres-log.ts), with nothing
 * written: one carrying a claim another commit holds (ClaimTakenError), one whose records do not
 * follow on from the last of their partition the log took (NotFollowingError, as PN002), and
 * the next ones it is told to (NotWrittenError). Its refusals can be held back, as a database's
 * answer on its way.
 */
class ClaimsLog extends MemoryLog {
  /** Claims another commit holds, as `table key`. */
  private readonly held = new Set<string>();
  /** How many of the next appends are refused with NotWrittenError (Infinity: all). */
  refuseNext = 0;
  /** Refusals wait for `deliver` while set. */
  holding = false;
  readonly refused: Refusal[] = [];
  private readonly undelivered: (() => void)[] = [];
  /** The last seq of each partition the log took. */
  private readonly accepted = new Map<number, number>();

  override append(entries: readonly LogEntry[], writes: readonly TableWrite[]): Promise<void> {
    const refusal = this.refusal(entries, writes);
    if (refusal === null) {
      for (const e of entries) this.accepted.set(e.partition, e.seq);
      return super.append(entries, writes);
    }
    this.refused.push({ why: refusal.why, records: entries.length });
    return new Promise((_, reject) => {
      if (this.holding) this.undelivered.push(() => reject(refusal.error));
      else reject(refusal.error);
    });
  }

  /** Delivers the refusals held back, in the order their appends came. */
  deliver(): void {
    this.holding = false;
    for (const refuse of this.undelivered.splice(0)) refuse();
  }

  private refusal(
    entries: readonly LogEntry[],
    writes: readonly TableWrite[],
  ): { why: Refusal['why']; error: Error } | null {
    const claim = writes.find((w) => w.until !== undefined && this.held.has(`${w.table} ${w.key}`));
    if (claim !== undefined)
      return { why: 'claim', error: new ClaimTakenError(claim.table, claim.key) };
    const first = entries[0];
    if (first !== undefined && first.seq !== (this.accepted.get(first.partition) ?? 0) + 1)
      return { why: 'gap', error: new NotFollowingError('the records do not follow on') };
    if (this.refuseNext === 0) return null;
    this.refuseNext--;
    return { why: 'told', error: new NotWrittenError('an earlier append did not commit') };
  }

  hold(table: Table, key: string): void {
    this.held.add(`${table} ${key}`);
  }
}

function started(log: ClaimsLog) {
  const fatal: unknown[] = [];
  const trouble: number[] = [];
  const decided: string[] = [];
  const shard = new Shard({
    partitions: ALL,
    log,
    deciders: [tallyDecider(decided)],
    clock: new SimulatedClock(Date.parse('2026-11-27T12:00:00Z')),
    member: 'alpha',
    signer: () => signer,
    newId: newReference,
    snapshotEveryRecords: 1e6,
    mailboxDepthMax: 1024,
    limits: DEFAULT_LIMITS,
    onFatal: (error) => fatal.push(error),
    onTrouble: (_, partition) => trouble.push(partition),
  });
  return { shard, fatal, trouble, decided };
}

/** An `add` to tally `key`, with the request's idempotency key and replay mark, if any. */
function add(key: string, item: string, claims: { scope?: string; replay?: string } = {}) {
  const routed: RoutedCommand = {
    aggregate: 'tally',
    key,
    command: { name: 'add', input: item, caller: { member: 'alpha', local: true } },
  };
  if (claims.scope !== undefined) routed.idempotency = { scope: claims.scope, requestHash: item };
  if (claims.replay !== undefined)
    routed.replay = { key: claims.replay, keyId: 'key_1', until: UNTIL };
  return routed;
}

/**
 * Submits `first`, then `batch` while its append is on its way: they wait in the aggregate's
 * mailbox meanwhile, and are decided together as one batch once it is durable.
 */
function submitBatch(shard: Shard, first: RoutedCommand, batch: RoutedCommand[]) {
  const answered = shard.submit(first);
  return { first: answered, batch: batch.map((routed) => shard.submit(routed)) };
}

const itemsOf = (shard: Shard, key: string) => (shard.stateOf(key) as Tally | null)?.items;

/** The items the partition's records added, in log order. */
function loggedItems(log: ClaimsLog, p: number): string[] {
  return [...log.read(p, 0)].flatMap((r) =>
    (unframeRecord<LogRecord>(r.bytes).e as Added[]).map((e) => e.item),
  );
}

/** The partition's records are seqs 1..count, each linked to the one before, the head the last. */
function expectChain(log: ClaimsLog, p: number, count: number): void {
  expect([...log.read(p, 0)].map((r) => r.seq)).toEqual(
    Array.from({ length: count }, (_, i) => i + 1),
  );
  const faults: ChainFault[] = [];
  const walk = new PartitionWalk(logReads(log), p, (fault) => faults.push(fault));
  while (!walk.step(100));
  walk.finish();
  expect(faults).toEqual([]);
}

function expectUnavailable(result: CommandResult): void {
  expect(result.committed).toBe(false);
  expect(result.reply.status).toBe(503);
  const body = JSON.parse(result.reply.body) as { error: { code: string } };
  expect(body.error.code).toBe('path.core.unavailable');
}

describe('issue 29: a claim of a batch taken by another commit', () => {
  for (const kind of ['idempotency', 'replay'] as const) {
    it(`the command whose ${kind} claim is taken answers so; the others commit`, async () => {
      const log = new ClaimsLog();
      const { shard, fatal, trouble, decided } = started(log);
      await shard.recover();
      const key = 'tally_claims';
      const p = partitionOf(key);
      // Each command claims both its mark and its answer: the kind said is the one taken.
      const claims = (n: number) => ({ scope: `scope-${n}`, replay: `mark-${n}` });
      log.hold(kind, kind === 'replay' ? 'mark-2' : 'scope-2');
      const { first, batch } = submitBatch(shard, add(key, 'zero'), [
        add(key, 'one', claims(1)),
        add(key, 'two', claims(2)),
        add(key, 'three', claims(3)),
      ]);
      expect((await first).committed).toBe(true);
      const [one, two, three] = await Promise.all(batch);
      // Refused once, with all three records (one batch); nothing of it written.
      expect(log.refused).toEqual([{ why: 'claim', records: 3 }]);
      expect(two!.taken).toBe(kind);
      expect(two!.committed).toBe(false);
      for (const other of [one!, three!]) {
        expect(other.committed).toBe(true);
        expect(other.reply.status).toBe(201);
        expect(other.taken).toBeUndefined();
      }
      // Decided again, the taken one not: 'two' was decided once, in the refused batch.
      expect(decided).toEqual(['zero', 'one', 'two', 'three', 'one', 'three']);
      expectChain(log, p, 3);
      expect(loggedItems(log, p)).toEqual(['zero', 'one', 'three']);
      expect(itemsOf(shard, key)).toEqual(['zero', 'one', 'three']);
      // The others' answers and marks are stored; the taken one's are another commit's.
      for (const n of [1, 3]) {
        expect(log.get('idempotency', `scope-${n}`)).toBeDefined();
        expect(log.get('replay', `mark-${n}`)).toBeDefined();
      }
      expect(log.get('idempotency', 'scope-2')).toBeUndefined();
      expect(log.get('replay', 'mark-2')).toBeUndefined();
      expect(fatal).toEqual([]);
      expect(trouble).toEqual([]);
    });
  }

  for (const kind of ['idempotency', 'replay'] as const) {
    it(`one ${kind} claim twice in a batch: the second is taken, not decided`, async () => {
      const log = new ClaimsLog();
      const { shard, fatal, decided } = started(log);
      await shard.recover();
      const key = 'tally_twice';
      const p = partitionOf(key);
      const same = kind === 'replay' ? { replay: 'mark' } : { scope: 'scope' };
      const { first, batch } = submitBatch(shard, add(key, 'zero'), [
        add(key, 'one', same),
        add(key, 'again', same),
      ]);
      expect((await first).committed).toBe(true);
      const [one, again] = await Promise.all(batch);
      expect(one!.committed).toBe(true);
      expect(again!.committed).toBe(false);
      expect(again!.taken).toBe(kind);
      expect(decided).toEqual(['zero', 'one']);
      expect(log.refused).toEqual([]);
      expectChain(log, p, 2);
      expect(loggedItems(log, p)).toEqual(['zero', 'one']);
      expect(itemsOf(shard, key)).toEqual(['zero', 'one']);
      expect(fatal).toEqual([]);
    });
  }
});

describe('issue 29: a batch not written for want of what went before it', () => {
  it('a commit landed unseen (PN002): its partition folded again, a command commits', async () => {
    const log = new ClaimsLog();
    const { shard, fatal } = started(log);
    await shard.recover();
    const key = 'tally_unseen';
    const p = partitionOf(key);
    expect((await shard.submit(add(key, 'zero'))).committed).toBe(true);
    // A commit the shard gave up on lands after its fold (a blackhole's bytes delivered late):
    // the log holds a record the shard does not know of.
    const [last] = [...log.read(p, 0)];
    const record = { a: 'tally', k: key, e: [{ type: 'added', item: 'landed' }], t: 0 };
    const bytes = frameRecord(record, recordCheck(last!.bytes));
    // Its commit carried the partition's head, as every append's does (chain.ts).
    const head = headRows.head(p, { seq: 2, check: recordCheck(bytes) });
    await log.append([{ partition: p, seq: 2, bytes }], [head]);
    // The next command takes seq 2, which the log refuses as not following on; only a fold of the
    // partition says where it stands (restoring the seq would be refused the same way each time).
    const next = await shard.submit(add(key, 'one'));
    expect(next.committed).toBe(true);
    expect(log.refused).toEqual([{ why: 'gap', records: 1 }]);
    expect(loggedItems(log, p)).toEqual(['zero', 'landed', 'one']);
    expect(itemsOf(shard, key)).toEqual(['zero', 'landed', 'one']);
    expectChain(log, p, 3);
    expect(fatal).toEqual([]);
  });

  it('refused once: every command of the batch commits when decided again', async () => {
    const log = new ClaimsLog();
    const { shard, fatal, trouble } = started(log);
    await shard.recover();
    const key = 'tally_again';
    const p = partitionOf(key);
    const answered = shard.submit(add(key, 'zero'));
    // The append of 'zero' was made; the next one, the batch's, is refused.
    log.refuseNext = 1;
    const batch = ['one', 'two', 'three'].map((item) => shard.submit(add(key, item)));
    expect((await answered).committed).toBe(true);
    const results = await Promise.all(batch);
    expect(log.refused).toEqual([{ why: 'told', records: 3 }]);
    for (const result of results) {
      expect(result.committed).toBe(true);
      expect(result.reply.status).toBe(201);
    }
    expectChain(log, p, 4);
    expect(loggedItems(log, p)).toEqual(['zero', 'one', 'two', 'three']);
    expect(itemsOf(shard, key)).toEqual(['zero', 'one', 'two', 'three']);
    expect(fatal).toEqual([]);
    expect(trouble).toEqual([]);
  });

  it('always refused: 503 after COMMIT_REDO_MAX redos, nothing written; then served', async () => {
    const log = new ClaimsLog();
    const { shard, fatal, trouble } = started(log);
    await shard.recover();
    const key = 'tally_refused';
    const p = partitionOf(key);
    log.refuseNext = Infinity;
    expectUnavailable(await shard.submit(add(key, 'alone', { scope: 'alone' })));
    // Tried once, then decided again COMMIT_REDO_MAX times.
    expect(log.refused.length).toBe(COMMIT_REDO_MAX + 1);
    const { first, batch } = submitBatch(shard, add(key, 'zero', { scope: 'zero' }), [
      add(key, 'one', { scope: 'one' }),
      add(key, 'two', { scope: 'two' }),
    ]);
    for (const result of await Promise.all([first, ...batch])) expectUnavailable(result);
    expect(log.recordCount()).toBe(0);
    expect([...log.scan('idempotency')]).toEqual([]);
    expect([...log.scan('heads')]).toEqual([]);
    expect(itemsOf(shard, key)).toBeUndefined();
    // The log takes appends again: the next command commits, its record the partition's first.
    log.refuseNext = 0;
    const served = await shard.submit(add(key, 'served', { scope: 'served' }));
    expect(served.committed).toBe(true);
    expect(served.reply.status).toBe(201);
    expectChain(log, p, 1);
    expect(itemsOf(shard, key)).toEqual(['served']);
    expect(fatal).toEqual([]);
    expect(trouble).toEqual([]);
  });
});

describe('issue 29: an append of the partition made after a refused one', () => {
  it('the partition is folded again: both commit or answer, records follow on', async () => {
    const log = new ClaimsLog();
    const { shard, fatal, trouble, decided } = started(log);
    await shard.recover();
    const a = 'tally_a';
    const p = partitionOf(a);
    const b = sharing(p, a);
    log.hold('idempotency', 'taken');
    log.holding = true;
    const { first, batch } = submitBatch(shard, add(a, 'a0'), [
      add(a, 'a1', { scope: 'taken' }),
      add(a, 'a2', { scope: 'mine' }),
    ]);
    expect((await first).committed).toBe(true);
    // The batch of a1 and a2 was appended once 'a0' was durable; its refusal is on its way.
    expect(log.refused).toEqual([{ why: 'claim', records: 2 }]);
    // Meanwhile another aggregate of the partition appends after it: it cannot follow on.
    const other = shard.submit(add(b, 'b0'));
    expect(log.refused).toEqual([
      { why: 'claim', records: 2 },
      { why: 'gap', records: 1 },
    ]);
    log.deliver();
    const [a1, a2] = await Promise.all(batch);
    expect(a1!.taken).toBe('idempotency');
    expect(a1!.committed).toBe(false);
    expect(a2!.committed).toBe(true);
    expect((await other).committed).toBe(true);
    expect(decided.filter((item) => item === 'a1')).toEqual(['a1']);
    expectChain(log, p, 3);
    expect(loggedItems(log, p).sort()).toEqual(['a0', 'a2', 'b0']);
    expect(itemsOf(shard, a)).toEqual(['a0', 'a2']);
    expect(itemsOf(shard, b)).toEqual(['b0']);
    expect(log.get('idempotency', 'mine')).toBeDefined();
    expect(fatal).toEqual([]);
    expect(trouble).toEqual([]);
  });
});

describe('issue 29: appends of two aggregates of one partition, all refused', () => {
  it('each answers 503 after COMMIT_REDO_MAX redos, folded again between them', async () => {
    const log = new ClaimsLog();
    const { shard, fatal, trouble } = started(log);
    await shard.recover();
    const a = 'tally_a';
    const p = partitionOf(a);
    const b = sharing(p, a);
    // Each refused append of one is followed by the other's, which then cannot follow on: the
    // partition is folded again before they are decided again. A bound, so that a shard that
    // never gives up on them ends with them committed (and fails here) rather than never ending.
    log.refuseNext = 100;
    const [onA, onB] = await Promise.all([shard.submit(add(a, 'a0')), shard.submit(add(b, 'b0'))]);
    expectUnavailable(onA!);
    expectUnavailable(onB!);
    // Each tried once, then decided again COMMIT_REDO_MAX times.
    expect(log.refused.length).toBe(2 * (COMMIT_REDO_MAX + 1));
    expect(log.refused.filter((r) => r.why === 'gap').length).toBe(COMMIT_REDO_MAX + 1);
    expect(log.recordCount()).toBe(0);
    log.refuseNext = 0;
    const served = [shard.submit(add(a, 'a1')), shard.submit(add(b, 'b1'))];
    for (const result of await Promise.all(served)) expect(result.committed).toBe(true);
    expectChain(log, p, 2);
    expect(itemsOf(shard, a)).toEqual(['a1']);
    expect(itemsOf(shard, b)).toEqual(['b1']);
    expect(fatal).toEqual([]);
    expect(trouble).toEqual([]);
  });
});

/** A key other than `key` of partition `p`. */
function sharing(p: number, key: string): string {
  for (let n = 0; ; n++) {
    const other = `tally_${n}`;
    if (other !== key && partitionOf(other) === p) return other;
  }
}
