// The scrub's walk (issue 28): every record of a partition, those behind its snapshot too, each
// damaged item said once; a node appending while it walks raises no false alarm.
import { describe, expect, it } from 'vitest';
import { MemoryLog } from '../log/memory-log.js';
import { frameRecord, recordCheck } from '../log/record.js';
import { headRows, idempotencyRows } from '../reads/rows.js';
import { usageRows } from '../domain/connection/usage-rows.js';
import { encodeView } from '../reads/views.js';
import type { ChainFault } from './chain.js';
import { logReads, PartitionWalk, RowWalk, Scrub, type RowFault } from './scrub.js';
import { frameSnapshot } from './snapshot.js';

const P = 5;

/** Appends records `from`..`to` of partition P, chained, with the head in the same commit. */
async function appendRecords(log: MemoryLog, from: number, to: number): Promise<void> {
  let link = from === 1 ? 0 : recordCheck([...log.read(P, from - 2)][0]!.bytes);
  for (let seq = from; seq <= to; seq++) {
    const bytes = frameRecord({ a: 'receipt', k: `rcp_${seq}`, e: [], t: seq }, link);
    link = recordCheck(bytes);
    await log.append([{ partition: P, seq, bytes }], [headRows.head(P, { seq, check: link })]);
  }
}

function walkAll(log: MemoryLog): ChainFault[] {
  const faults: ChainFault[] = [];
  const walk = new PartitionWalk(logReads(log), P, (f) => faults.push(f));
  while (!walk.step(2));
  walk.finish();
  return faults;
}

describe('the scrub (issue 28)', () => {
  it('walks records behind the snapshot (no start reads them): finds a damaged one', async () => {
    const log = new MemoryLog();
    await appendRecords(log, 1, 6);
    const check = recordCheck([...log.read(P, 5)][0]!.bytes);
    await log.writeSnapshot(P, await frameSnapshot({ seq: 6, check, aggregates: [] }));
    expect(walkAll(log)).toEqual([]);
    log.corrupt(P, 2);
    const faults = walkAll(log);
    expect(faults.map((f) => [f.item, f.seq])).toEqual([['record', 2]]);
    expect(faults[0]!.message).toContain(`log record 2 of partition ${P} fails its checksum`);
  });

  it('records taken from behind the snapshot and off its end: chain, snapshot, head', async () => {
    const log = new MemoryLog();
    await appendRecords(log, 1, 6);
    const check = recordCheck([...log.read(P, 5)][0]!.bytes);
    await log.writeSnapshot(P, await frameSnapshot({ seq: 6, check, aggregates: [] }));
    log.remove(P, 3);
    log.remove(P, 6);
    expect(walkAll(log).map((f) => [f.item, f.seq])).toEqual([
      ['record', 4],
      ['snapshot', 6],
      ['head', 6],
    ]);
  });

  it('records appended while a partition is walked are no damage', async () => {
    const log = new MemoryLog();
    await appendRecords(log, 1, 3);
    const faults: ChainFault[] = [];
    const walk = new PartitionWalk(logReads(log), P, (f) => faults.push(f));
    expect(walk.step(2)).toBe(false);
    await appendRecords(log, 4, 9);
    while (!walk.step(2));
    walk.finish();
    expect(faults).toEqual([]);
    expect(walk.records).toBe(9);
  });

  it('says each damaged item once across passes, and counts it', async () => {
    const log = new MemoryLog();
    await appendRecords(log, 1, 4);
    log.corrupt(P, 3);
    const damage: ChainFault[] = [];
    let passes = 0;
    let done: () => void;
    const twoPasses = new Promise<void>((resolve) => (done = resolve));
    const scrub = new Scrub({
      log,
      partitions: () => [P, P + 1],
      rows: true,
      recordsPerSecond: 100,
      passPauseMs: 1,
      onDamage: (f) => damage.push(f),
      onPass: (pass) => {
        expect(pass).toEqual({ partitions: 2, records: 4, rows: 0, damaged: 1 });
        if (++passes === 2) done();
      },
      onError: (error) => {
        throw error;
      },
    });
    scrub.start();
    await twoPasses;
    scrub.stop();
    expect(damage.map((f) => [f.item, f.partition, f.seq])).toEqual([['record', P, 3]]);
    expect(scrub.damagedCount).toBe(1);
  });

  it("a view or usage row written with a record beyond its partition's log is found", async () => {
    const log = new MemoryLog();
    await appendRecords(log, 1, 6);
    const reply = { status: 200, body: '{}', signed: false };
    const usage = (index: number, seq: number) =>
      usageRows.entry({ owner: 'con_x', index, row: { n: index } }, { partition: P, seq });
    await log.write([
      { table: 'views', key: 'v_sound', bytes: encodeView(reply, { partition: P, seq: 6 }) },
      { table: 'views', key: 'v_ahead', bytes: encodeView(reply, { partition: P, seq: 7 }) },
      usage(1, 5),
      usage(2, 9),
    ]);
    const faults: RowFault[] = [];
    const walk = new RowWalk(log, (f) => faults.push(f));
    while (!walk.step(1));
    expect(walk.rows).toBe(4);
    expect(faults.map((f) => [f.table, f.key, f.partition, f.seq])).toEqual([
      ['views', 'v_ahead', P, 7],
      ['usage', usageRows.key('con_x', 2), P, 9],
    ]);
    expect(faults[0]!.message).toContain(
      `log record 7 of partition ${P}, beyond the end of its log`,
    );
    expect(faults[0]!.message).not.toContain('v_ahead');
  });

  it('a damaged stored answer is found, naming its table (no start reads them)', async () => {
    const log = new MemoryLog();
    const entry = (scope: string) => ({
      scope,
      requestHash: 'h',
      status: 201,
      body: '{}',
      signed: true,
      at: 1,
    });
    const sound = idempotencyRows.write('s_sound', entry('s_sound'));
    const damaged = idempotencyRows.write('s_damaged', entry('s_damaged'));
    damaged.bytes![damaged.bytes!.length - 1]! ^= 0xff;
    await log.write([sound, damaged]);
    const faults: RowFault[] = [];
    const walk = new RowWalk(log, (f) => faults.push(f));
    while (!walk.step(1));
    expect(walk.rows).toBe(2);
    expect(faults.map((f) => [f.table, f.key, f.partition, f.seq])).toEqual([
      ['idempotency', 's_damaged', null, null],
    ]);
    expect(faults[0]!.message).toBe(
      "a row of table 'idempotency' fails its checksum (damaged at rest)",
    );
  });
});
