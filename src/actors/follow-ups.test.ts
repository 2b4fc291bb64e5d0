// STYLE 12 over the in-memory log: "when the receipt commits, the instruction is used" is written
// in the receipt's commit and carried out from there, also when the node dies between the two.
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from '../clock.js';
import { DEFAULT_LIMITS } from '../config.js';
import { instructionDecider, type InstructionState } from '../domain/instruction/instruction.js';
import { receiptDecider } from '../domain/receipt/receipt.js';
import { addressInfoKey, type AddressInfo } from '../domain/subject/resolver.js';
import { PARTITION_COUNT } from '../log/log.js';
import { MemoryLog } from '../log/memory-log.js';
import { encodeView } from '../reads/views.js';
import { newReference } from '../protocol/ids.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import { carryOut, unfinishedFollowUps } from './follow-ups.js';
import { Shard } from './shard.js';
import type { RoutedCommand } from './types.js';

/** The record a view written here names (issue 28): a partition's first. */
const AT_FIRST = { partition: 0, seq: 1 };

const signer = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
const LOCAL = { member: 'alpha', local: true };
const BOOK = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const ADDRESS = 'path:AbCdEfGhIjKlMnOpQrStUv';

function shardOver(log: MemoryLog): Shard {
  return new Shard({
    partitions: Array.from({ length: PARTITION_COUNT }, (_, p) => p),
    log,
    deciders: [receiptDecider, instructionDecider],
    clock: new SimulatedClock(Date.parse('2026-11-21T12:00:00Z')),
    member: 'alpha',
    signer: () => signer,
    newId: newReference,
    snapshotEveryRecords: 1_000_000,
    mailboxDepthMax: 1024,
    limits: DEFAULT_LIMITS,
    onFatal: (e) => {
      throw e;
    },
  });
}

async function withAddress(log: MemoryLog): Promise<void> {
  const info: AddressInfo = {
    id: 'adr_1',
    address: ADDRESS,
    revoked: false,
    intent_version: null,
    accepts: [BOOK],
    targets: [{ ...BOOK, is_default: true, beneficiary_format: null, beneficiary: null }],
  };
  await log.write([
    {
      table: 'views',
      key: addressInfoKey(ADDRESS),
      bytes: encodeView({ status: 200, body: JSON.stringify(info), signed: false }, AT_FIRST),
    },
  ]);
}

const issueInstruction = (shard: Shard, reference: string) =>
  shard.submit({
    aggregate: 'instruction',
    key: reference,
    command: { name: 'issue', input: { reference, address: ADDRESS, via: BOOK }, caller: LOCAL },
  });

const receiptNaming = (instruction: string): RoutedCommand => {
  const reference = newReference('rcp');
  return {
    aggregate: 'receipt',
    key: reference,
    command: {
      name: 'issue',
      input: { reference, issued_by: 'payer', via: BOOK, instruction },
      caller: LOCAL,
    },
  };
};

const statusOf = (shard: Shard, reference: string) =>
  (shard.stateOf(reference) as InstructionState).status;
const options = (shard: Shard) => ({
  submit: (routed: RoutedCommand) => shard.submit(routed),
  retryMs: 1,
  retryMaxMs: 10,
  stopped: () => false,
});

describe('follow-ups (STYLE 12)', () => {
  it(
    "the receipt's commit writes the follow-up; " +
      'carried out, the instruction is used and the row is gone',
    async () => {
      const log = new MemoryLog();
      await withAddress(log);
      const shard = shardOver(log);
      await shard.recover();
      const instruction = newReference('ins');
      expect((await issueInstruction(shard, instruction)).reply.status).toBe(201);
      const issued = await shard.submit(receiptNaming(instruction));
      expect(issued.reply.status).toBe(201);
      expect(issued.followUps).toHaveLength(1);
      expect([...unfinishedFollowUps(log)]).toHaveLength(1);
      await carryOut(issued.followUps[0]!, options(shard));
      expect(statusOf(shard, instruction)).toBe('used');
      expect([...unfinishedFollowUps(log)]).toEqual([]);
    },
  );

  it("crash between receipt's commit and instruction's use: the next start uses it", async () => {
    const log = new MemoryLog();
    await withAddress(log);
    const first = shardOver(log);
    await first.recover();
    const instruction = newReference('ins');
    await issueInstruction(first, instruction);
    // The receipt commits; the node dies before the follow-up is routed.
    await first.submit(receiptNaming(instruction));
    log.crash();

    const next = shardOver(log);
    await next.recover();
    expect(statusOf(next, instruction)).toBe('open');
    const pending = [...unfinishedFollowUps(log)];
    expect(pending.map((f) => f.routed.command.name)).toEqual(['use']);
    for (const f of pending) await carryOut(f, options(next));
    expect(statusOf(next, instruction)).toBe('used');
    expect([...unfinishedFollowUps(log)]).toEqual([]);
  });

  it('carried out twice (at least once), the second use changes nothing', async () => {
    const log = new MemoryLog();
    await withAddress(log);
    const shard = shardOver(log);
    await shard.recover();
    const instruction = newReference('ins');
    await issueInstruction(shard, instruction);
    const issued = await shard.submit(receiptNaming(instruction));
    const f = issued.followUps[0]!;
    await carryOut(f, options(shard));
    const records = log.recordCount();
    await carryOut(f, options(shard));
    expect(log.recordCount()).toBe(records);
    expect(statusOf(shard, instruction)).toBe('used');
  });

  it(
    'a follow-up for an instruction this node does not hold ' +
      'ends as not found, its row removed',
    async () => {
      const log = new MemoryLog();
      const shard = shardOver(log);
      await shard.recover();
      const issued = await shard.submit(receiptNaming(newReference('ins')));
      await carryOut(issued.followUps[0]!, options(shard));
      expect([...unfinishedFollowUps(log)]).toEqual([]);
    },
  );
});
