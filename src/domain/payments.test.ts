// Payment requests, instructions and checkout sessions as deciders, run through the Shard
// runtime over the in-memory log with a simulated clock ("States and transitions": payment
// request, checkout session, payment instruction; SPEC G, H, I; P11 outbox; P12 lifetime).
import { describe, expect, it } from 'vitest';
import { Shard } from '../actors/shard.js';
import { SimulatedClock } from '../clock.js';
import type { OutboxEvent } from '../actors/types.js';
import { MemoryLog } from '../log/memory-log.js';
import { unframe } from '../log/record.js';
import { decodeView, encodeView } from '../reads/views.js';
import { PARTITION_COUNT } from '../log/log.js';
import { DEFAULT_LIMITS } from '../config.js';
import { newReference } from '../protocol/ids.js';
import { signingKeyFromSeed } from '../protocol/signing.js';
import { isoTime } from '../protocol/time.js';
import { checkoutDecider, type SessionState } from './checkout/checkout.js';
import { instructionDecider, type InstructionState } from './instruction/instruction.js';
import { requestDecider, type RequestState } from './request/request.js';
import { addressInfoKey, type AddressInfo } from './subject/resolver.js';

/** The record a view written here names (issue 28): a partition's first. */
const AT_FIRST = { partition: 0, seq: 1 };

const signer = signingKeyFromSeed(
  '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
);
const ALL = Array.from({ length: PARTITION_COUNT }, (_, p) => p);
const LOCAL = { member: 'alpha', local: true };
const BETA = { member: 'beta', local: false };
const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const T0 = Date.parse('2026-11-21T12:00:00Z');
const ADDRESS = 'path:0123456789ABCDEFabcdef';

async function setup() {
  const clock = new SimulatedClock(T0);
  const log = new MemoryLog();
  const shard = new Shard({
    partitions: ALL,
    log,
    deciders: [requestDecider, instructionDecider, checkoutDecider],
    clock,
    member: 'alpha',
    limits: DEFAULT_LIMITS,
    signer: () => signer,
    newId: newReference,
    snapshotEveryRecords: 1_000_000,
    mailboxDepthMax: 1024,
    onFatal: (e) => {
      throw e;
    },
  });
  await shard.recover();
  return { clock, log, shard };
}

type Setup = Awaited<ReturnType<typeof setup>>;

/** Lets scheduled ticks run and the in-memory log flush (it flushes on the next macrotask). */
async function settle(): Promise<void> {
  for (let i = 0; i < 4; i++) await new Promise((r) => setImmediate(r));
}

async function createRequest({ shard }: Setup, expiresAt: number | null) {
  const reference = newReference('req');
  const result = await shard.submit({
    aggregate: 'request',
    key: reference,
    command: {
      name: 'create',
      caller: LOCAL,
      input: {
        reference,
        url: `http://node.test/path/${reference}`,
        accepts: [EUR],
        ...(expiresAt === null ? {} : { expires_at: isoTime(expiresAt) }),
      },
    },
  });
  expect(result.reply.status).toBe(201);
  return reference;
}

const requestCommand = ({ shard }: Setup, reference: string, name: string, caller = LOCAL) =>
  shard.submit({ aggregate: 'request', key: reference, command: { name, input: {}, caller } });

function view(log: MemoryLog, key: string) {
  const bytes = log.get('views', key);
  if (bytes === undefined) return undefined;
  const v = decodeView(bytes)!;
  return { status: v.status, body: JSON.parse(v.body.toString('utf8')), expiry: v.expiry };
}

function outbox(log: MemoryLog): OutboxEvent[] {
  return [...log.scan('outbox')].map(({ bytes }) => unframe<OutboxEvent>(bytes));
}

describe('"States and transitions: Payment request" with a simulated clock', () => {
  it(
    'created -> expired by the scheduler tick at expires_at, ' +
      'and not a millisecond before (SPEC H)',
    async () => {
      const s = await setup();
      const reference = await createRequest(s, T0 + 60_000);
      expect((s.shard.stateOf(reference) as RequestState).status).toBe('created');

      s.clock.advance(59_999);
      await settle();
      expect((s.shard.stateOf(reference) as RequestState).status).toBe('created');
      expect(view(s.log, reference)!.status).toBe(200);

      s.clock.advance(1);
      await settle();
      const state = s.shard.stateOf(reference) as RequestState;
      expect(state.status).toBe('expired');
      expect(state.transitions.map((t) => [t.from, t.to])).toEqual([
        [null, 'created'],
        ['created', 'expired'],
      ]);
      expect(state.transitions[1]!.at).toBe(isoTime(T0 + 60_000));
      // Later reads answer 410 path.request.expired from the committed view.
      const after = view(s.log, reference)!;
      expect(after.status).toBe(410);
      expect(after.body.error.code).toBe('path.request.expired');
    },
  );

  it('a request with no expires_at never expires (SPEC Limits: absent is indefinite)', async () => {
    const s = await setup();
    const reference = await createRequest(s, null);
    s.clock.advance(400 * 24 * 3600_000);
    await settle();
    expect((s.shard.stateOf(reference) as RequestState).status).toBe('created');
  });

  it(
    'paid is idempotent: the second paid answers 200 ' +
      'and appends no record and no second request.paid',
    async () => {
      const s = await setup();
      const reference = await createRequest(s, null);
      const first = await requestCommand(s, reference, 'paid', BETA);
      expect(first.reply.status).toBe(200);
      expect(JSON.parse(first.reply.body)).toEqual({ reference, status: 'paid' });
      expect(first.outbox).toHaveLength(1);
      const records = s.log.recordCount();
      const paidEvents = outbox(s.log).filter((e) => e.event === 'request.paid');
      expect(paidEvents).toHaveLength(1);

      s.clock.advance(1_000);
      const second = await requestCommand(s, reference, 'paid', LOCAL);
      expect(second.reply.status).toBe(200);
      expect(JSON.parse(second.reply.body)).toEqual({ reference, status: 'paid' });
      expect(second.outbox).toHaveLength(0);
      await settle();
      expect(s.log.recordCount()).toBe(records);
      expect(outbox(s.log).filter((e) => e.event === 'request.paid')).toHaveLength(1);
      const state = s.shard.stateOf(reference) as RequestState;
      expect(state.transitions.map((t) => t.to)).toEqual(['created', 'paid']);
      expect(state.transitions[1]!.by).toBe('beta');
    },
  );

  it('a paid request does not expire when expires_at passes', async () => {
    const s = await setup();
    const reference = await createRequest(s, T0 + 10_000);
    expect((await requestCommand(s, reference, 'paid', BETA)).reply.status).toBe(200);
    s.clock.advance(20_000);
    await settle();
    expect((s.shard.stateOf(reference) as RequestState).status).toBe('paid');
  });

  it(
    'revoke: only a local (issuer) caller; ' +
      'paid after revoke is 410 path.request.revoked; revoke after paid is 409 (P7)',
    async () => {
      const s = await setup();
      const reference = await createRequest(s, null);
      const refused = await requestCommand(s, reference, 'revoke', BETA);
      expect(refused.reply.status).toBe(403);
      expect(JSON.parse(refused.reply.body).error.code).toBe('path.auth.forbidden');
      expect((await requestCommand(s, reference, 'revoke', LOCAL)).reply.status).toBe(200);
      const paid = await requestCommand(s, reference, 'paid', BETA);
      expect(paid.reply.status).toBe(410);
      expect(JSON.parse(paid.reply.body).error.code).toBe('path.request.revoked');

      const other = await createRequest(s, null);
      await requestCommand(s, other, 'paid', BETA);
      const late = await requestCommand(s, other, 'revoke', LOCAL);
      expect(late.reply.status).toBe(409);
      expect(JSON.parse(late.reply.body).error.code).toBe('path.request.not_open');
    },
  );
});

describe('"States and transitions: Payment instruction" with a simulated clock (P12)', () => {
  /** The address's committed terms, as the subject aggregate publishes them. */
  async function withAddress(s: Setup) {
    const info: AddressInfo = {
      id: newReference('adr'),
      address: ADDRESS,
      revoked: false,
      intent_version: 1,
      accepts: [EUR],
      targets: [{ ...EUR, is_default: true, beneficiary_format: null, beneficiary: null }],
    };
    const bytes = encodeView({ status: 200, body: JSON.stringify(info), signed: false }, AT_FIRST);
    await s.log.write([{ table: 'views', key: addressInfoKey(ADDRESS), bytes }]);
  }

  /** Issued for the address alone, for the configured lifetime (DEFAULT_LIMITS: 5 minutes). */
  async function issue(s: Setup) {
    await withAddress(s);
    const reference = newReference('ins');
    const result = await s.shard.submit({
      aggregate: 'instruction',
      key: reference,
      command: { name: 'issue', caller: BETA, input: { reference, address: ADDRESS, via: EUR } },
    });
    expect(result.reply.status).toBe(201);
    return { reference, object: JSON.parse(result.reply.body) };
  }

  it('open -> expired at expires_at (issued for the configured lifetime), not before', async () => {
    const s = await setup();
    const { reference, object } = await issue(s);
    expect(object.expires_at).toBe(isoTime(T0 + 300_000));
    expect(object).toMatchObject({ status: 'open', single_use: true });
    s.clock.advance(299_999);
    await settle();
    expect((s.shard.stateOf(reference) as InstructionState).status).toBe('open');
    s.clock.advance(1);
    await settle();
    expect((s.shard.stateOf(reference) as InstructionState).status).toBe('expired');
    const after = view(s.log, reference)!;
    expect(after.status).toBe(410);
    expect(after.body.error.code).toBe('path.instruction.expired');
  });

  it('a used instruction stays used (410 path.instruction.used) and never expires', async () => {
    const s = await setup();
    const { reference } = await issue(s);
    const used = await s.shard.submit({
      aggregate: 'instruction',
      key: reference,
      command: { name: 'use', input: { receipt: newReference('rcp') }, caller: LOCAL },
    });
    expect(used.reply.status).toBe(200);
    s.clock.advance(400_000);
    await settle();
    expect((s.shard.stateOf(reference) as InstructionState).status).toBe('used');
    expect(view(s.log, reference)!.body.error.code).toBe('path.instruction.used');
  });
});

describe('"States and transitions: Checkout session" with a simulated clock (SPEC I, P11)', () => {
  async function open(
    s: Setup,
    expiresAt: number,
    webhookUrl = 'https://merchant.example/hooks/path',
  ) {
    const request = await createRequest(s, null);
    const reference = newReference('chk');
    const id = newReference('cs');
    const result = await s.shard.submit({
      aggregate: 'checkout',
      key: reference,
      command: {
        name: 'open',
        caller: LOCAL,
        input: {
          id,
          reference,
          url: `http://node.test/path/${reference}`,
          request_reference: request,
          success_url: 'https://merchant.example/ok',
          cancel_url: 'https://merchant.example/cancel',
          webhook_url: webhookUrl,
          expires_at: isoTime(expiresAt),
        },
      },
    });
    expect(result.reply.status).toBe(201);
    return { reference, id, request };
  }

  it(
    'open -> expired at expires_at with a checkout.session.expired ' +
      'outbox event for its webhook_url, not before',
    async () => {
      const s = await setup();
      const { reference, id } = await open(s, T0 + 30 * 60_000);
      s.clock.advance(30 * 60_000 - 1);
      await settle();
      expect((s.shard.stateOf(reference) as SessionState).status).toBe('open');
      expect(outbox(s.log).filter((e) => e.event === 'checkout.session.expired')).toHaveLength(0);

      s.clock.advance(1);
      await settle();
      expect((s.shard.stateOf(reference) as SessionState).status).toBe('expired');
      const events = outbox(s.log).filter((e) => e.event === 'checkout.session.expired');
      expect(events).toHaveLength(1);
      const event = events[0]!;
      expect(event.id).toMatch(/^evt_[0-9a-f]{32}$/);
      expect(s.log.get('outbox', event.id)).toBeDefined();
      expect(event.targets).toEqual(['https://merchant.example/hooks/path']);
      expect(event.created_at).toBe(isoTime(T0 + 30 * 60_000));
      expect(event.data).toMatchObject({ id, reference, status: 'expired', completed_at: null });
      // The payer-facing object now says expired.
      expect(view(s.log, reference)!.body).toMatchObject({
        type: 'path.checkout',
        status: 'expired',
      });
    },
  );

  it('a completed session does not expire and emits no checkout.session.expired', async () => {
    const s = await setup();
    const { reference } = await open(s, T0 + 60_000);
    const done = await s.shard.submit({
      aggregate: 'checkout',
      key: reference,
      command: { name: 'complete', input: {}, caller: BETA },
    });
    expect(done.reply.status).toBe(200);
    s.clock.advance(120_000);
    await settle();
    expect((s.shard.stateOf(reference) as SessionState).status).toBe('completed');
    expect(outbox(s.log).map((e) => e.event)).toEqual(['checkout.session.completed']);
  });

  it('of simultaneous completes exactly one wins; the request is left untouched', async () => {
    const s = await setup();
    const { reference, request } = await open(s, T0 + 60_000);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        s.shard.submit({
          aggregate: 'checkout',
          key: reference,
          command: { name: 'complete', input: {}, caller: BETA },
        }),
      ),
    );
    expect(answers.filter((a) => a.reply.status === 200)).toHaveLength(1);
    const losers = answers.filter((a) => a.reply.status !== 200);
    expect(losers).toHaveLength(19);
    for (const l of losers) {
      expect(l.reply.status).toBe(409);
      expect(JSON.parse(l.reply.body).error.code).toBe('path.checkout.session_not_open');
    }
    expect((s.shard.stateOf(request) as RequestState).status).toBe('created');
    expect(outbox(s.log).filter((e) => e.event === 'checkout.session.completed')).toHaveLength(1);
  });
});
