// What clients ask of the node in a run, what they were answered, and the invariants that hold
// between those answers and what the log says. The workload is small on purpose (a few keys of
// each kind), so that requests race on the same aggregates, the same idempotency keys and the same
// ceilings.
import type { RoutedCommand } from '../src/actors/types.js';
import {
  instructionDecider,
  type InstructionState,
} from '../src/domain/instruction/instruction.js';
import type { ReceiptState } from '../src/domain/receipt/receipt.js';
import { decodeView, encodeView } from '../src/reads/views.js';
import {
  addressInfoKey,
  subjectViewKey,
  type AddressInfo,
} from '../src/domain/subject/resolver.js';
import { isoTime, parseTime } from '../src/protocol/time.js';
import { partitionOf } from '../src/log/log.js';
import { deadlineRows } from '../src/reads/rows.js';
import { unframeRecord } from '../src/log/record.js';
import type { LogRecord } from '../src/actors/fold.js';
import type { Random } from './random.js';
import { SIM_LIMITS, T0, type Answer, type World } from './world.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const ADDRESS = 'path:0123456789ABCDEFabcdef';
const OPERATOR = { member: 'local', local: true };
const PAYER = { member: 'beta', local: false };
const MEMBERS = ['m1', 'm2'];
const RECEIPTS = 12;
const INSTRUCTIONS = 6;
/** A deadline may fire this late (a restart, a retry) and no later. */
const DEADLINE_SLACK_MS = 30_000;

/**
 * A state as text, the same for equal states however they were built: persistent collections
 * (an aggregate's children) as their entries, object keys sorted.
 */
function canonical(value: unknown): string | undefined {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}

/** Refused by the front end before any run: replayed, stale, its key in flight. */
const notRun = (a: Answer) => a.kind !== undefined && a.kind !== 'stored';

const connectionCommand = (
  key: string,
  name: string,
  input: unknown,
  caller: { member: string; local: boolean },
): RoutedCommand => ({ aggregate: 'connection', key, command: { name, input, caller } });

/** What the log holds of a connection's consumption: its total, and each delegation's. */
function consumedInLog(
  world: World,
  key: string,
): { total: number; delegations: Map<string, number> } {
  const consumed = { total: 0, delegations: new Map<string, number>() };
  for (const e of eventsInLog<{ amount: string; delegation: string | null }>(
    world,
    key,
    'consumed',
  )) {
    consumed.total += cents(e.amount);
    if (e.delegation !== null)
      consumed.delegations.set(
        e.delegation,
        (consumed.delegations.get(e.delegation) ?? 0) + cents(e.amount),
      );
  }
  return consumed;
}

/** The events of one type an aggregate's records in the log hold, in order. */
function* eventsInLog<E>(world: World, key: string, type: string): Iterable<E> {
  for (const { bytes } of world.disk.store.read(partitionOf(key), 0)) {
    const record = unframeRecord<LogRecord>(bytes);
    if (record.k !== key) continue;
    for (const e of record.e as ({ type: string } & E)[]) if (e.type === type) yield e;
  }
}

/** How far the instances' clocks may be apart (the simulator's skews stay within it). */
export const SKEW_MAX_MS = 60_000;

/** The UTC day a time range falls in, or null where it spans two. */
function dayWithin(from: number, to: number): string | null {
  const day = isoTime(from).slice(0, 10);
  return isoTime(to).slice(0, 10) === day ? day : null;
}

/** Per UTC day, the payee-check charges of a member the log holds (its records' events, P12). */
function chargesInLog(world: World, key: string): Map<string, number> {
  const days = new Map<string, number>();
  for (const e of eventsInLog<{ day: string }>(world, key, 'payee_check_charged'))
    days.set(e.day, (days.get(e.day) ?? 0) + 1);
  return days;
}

/** The statuses a receipt or an instruction can move to from each (SPEC's state machines). */
const NEXT: Record<string, string[]> = {
  pending: ['settled', 'failed', 'reversed'],
  settled: ['reversed'],
  open: ['used', 'expired', 'revoked'],
};

const ref = (prefix: string, n: number) => `${prefix}_${n.toString(16).padStart(32, '0')}`;
/**
 * The keys of a run: two in three crowded onto the budgets' partitions, so that aggregates share
 * partitions (their appends follow one another, a refold takes them all, a move moves them all),
 * the rest spread as chance has it.
 */
function keysOf(prefix: string, count: number, base: number): string[] {
  const crowded = new Set(MEMBERS.map((m) => partitionOf(`budget/${m}`)));
  const keys: string[] = [];
  for (let n = base; keys.length < count; n++) {
    const key = ref(prefix, n);
    if (keys.length % 3 === 2 || crowded.has(partitionOf(key))) keys.push(key);
  }
  return keys;
}

const RECEIPT_KEYS = keysOf('rcp', RECEIPTS, 0xa000);
/**
 * Two connections of one subject, granted to PAYER: a per-operation one and a standing mandate
 * (persistent consent), each with its ceilings (SPEC K); the first cuts delegations to DELEGATE.
 */
const CONNECTION_KEYS = keysOf('con', 2, 0xc000);
const DELEGATION_KEYS = [ref('dlg', 0xd000), ref('dlg', 0xd001)];
const SUBJECT = ref('sub', 0xe000);
const DELEGATE = { member: 'gamma', local: false };
const CEILINGS = { max_single: '20.00', max_total: '60.00' };
const DELEGATION = { amount: '10.00', max_total: '30.00', commitment: 'iban-commitment-1' };
const AMOUNTS = ['5.00', '10.00', '20.00', '25.00'];
/** An amount in cents. */
const cents = (amount: string) => Math.round(Number(amount) * 100);
const INSTRUCTION_KEYS = keysOf('ins', INSTRUCTIONS, 0xb000);
const receiptRef = (n: number) => RECEIPT_KEYS[n]!;
const instructionRef = (n: number) => INSTRUCTION_KEYS[n]!;

/** What a run starts from: the address instructions name, the subject connections are for. */
export function seededViews(): { key: string; bytes: Buffer }[] {
  const subject = encodeView({ status: 200, body: '{}', signed: false }, { partition: 0, seq: 1 });
  return [addressView(), { key: subjectViewKey(SUBJECT), bytes: subject }];
}

/** The address the instructions are issued for, as its subject publishes it (seeded once). */
export function addressView(): { key: string; bytes: Buffer } {
  const info: AddressInfo = {
    id: ref('adr', 1),
    address: ADDRESS,
    revoked: false,
    intent_version: 1,
    accepts: [EUR],
    targets: [{ ...EUR, is_default: true, beneficiary_format: null, beneficiary: null }],
  };
  const body = JSON.stringify(info);
  const bytes = encodeView({ status: 200, body, signed: false }, { partition: 0, seq: 1 });
  return { key: addressInfoKey(ADDRESS), bytes };
}

type Op =
  | { kind: 'issue-receipt'; reference: string; instruction: string | null }
  | { kind: 'settle-receipt'; reference: string }
  | { kind: 'issue-instruction'; reference: string }
  | { kind: 'charge'; member: string }
  | { kind: 'create-connection'; reference: string; mode: Mode }
  | { kind: 'consume'; reference: string; amount: string; op: string }
  | { kind: 'create-delegation'; reference: string; delegation: string }
  | { kind: 'consume-delegation'; reference: string; delegation: string; op: string };

type Mode = 'per_operation_signature' | 'persistent_consent';

/** One request a client sent, and what became of it. */
export interface Sent {
  op: Op;
  routed: RoutedCommand;
  answer?: Answer | null;
  /** The instance's time when it was sent, and when its answer came. */
  at: number;
  answeredAt?: number;
  /** Where its sending and its answer came among all sendings and answers of the run. */
  sentOrder: number;
  answeredOrder?: number;
}

export interface Violation {
  invariant: string;
  detail: string;
}

/** Durable states, as a fresh fold of the log holds them. */
export type States = (key: string) => unknown;

export class Model {
  readonly sent: Sent[] = [];
  /** Reads clients made of in-memory states: what they saw must stay true (committed). */
  private readonly seen: { key: string; status: string }[] = [];
  private marks = 0;
  private scopes = 0;
  private order = 0;
  private operations = 0;

  constructor(private readonly random: Random) {}

  /** Every key a run can touch. */
  keys(): string[] {
    return [
      ...Array.from({ length: RECEIPTS }, (_, n) => receiptRef(n)),
      ...Array.from({ length: INSTRUCTIONS }, (_, n) => instructionRef(n)),
      ...MEMBERS.map((m) => `budget/${m}`),
      ...CONNECTION_KEYS,
    ];
  }

  /** The next request, as the seed chooses it: a new one, or one sent before sent again. */
  next(now: number): Sent {
    const r = this.random;
    if (this.sent.length > 0 && r.chance(0.08)) {
      // A client that did not hear its answer sends the same request again: same idempotency
      // key and body, same signature and timestamp (so the same replay mark).
      const again = r.pick(this.sent.slice(-20));
      const sent = { op: again.op, routed: again.routed, at: now, sentOrder: ++this.order };
      this.sent.push(sent);
      return sent;
    }
    const op = r.weighted<() => Op>([
      [4, () => this.issueReceipt()],
      [2, () => ({ kind: 'settle-receipt', reference: receiptRef(r.int(0, RECEIPTS - 1)) })],
      [
        2,
        () => ({
          kind: 'issue-instruction',
          reference: instructionRef(r.int(0, INSTRUCTIONS - 1)),
        }),
      ],
      [3, () => ({ kind: 'charge', member: r.pick(MEMBERS) })],
      [1, () => this.connectionOp('create-connection')],
      [3, () => this.connectionOp('consume')],
      [1, () => this.connectionOp('create-delegation')],
      [2, () => this.connectionOp('consume-delegation')],
    ])();
    const routed = this.routedOf(op);
    if (r.chance(0.5)) routed.idempotency = { scope: `s${++this.scopes}`, requestHash: 'h' };
    routed.replay = { key: `m${++this.marks}`, keyId: 'k1', until: now + 600_000 };
    const sent = { op, routed, at: now, sentOrder: ++this.order };
    this.sent.push(sent);
    return sent;
  }

  private connectionOp(
    kind: 'create-connection' | 'consume' | 'create-delegation' | 'consume-delegation',
  ): Op {
    const r = this.random;
    const n = r.int(0, CONNECTION_KEYS.length - 1);
    const reference = CONNECTION_KEYS[n]!;
    const op = `op${++this.operations}`;
    switch (kind) {
      case 'create-connection':
        return {
          kind,
          reference,
          mode: n === 0 ? 'per_operation_signature' : 'persistent_consent',
        };
      case 'consume':
        return { kind, reference, amount: r.pick(AMOUNTS), op };
      case 'create-delegation':
        return { kind, reference: CONNECTION_KEYS[0]!, delegation: r.pick(DELEGATION_KEYS) };
      case 'consume-delegation':
        return { kind, reference: CONNECTION_KEYS[0]!, delegation: r.pick(DELEGATION_KEYS), op };
    }
  }

  private issueReceipt(): Op {
    const r = this.random;
    const instruction = r.chance(0.5) ? instructionRef(r.int(0, INSTRUCTIONS - 1)) : null;
    return { kind: 'issue-receipt', reference: receiptRef(r.int(0, RECEIPTS - 1)), instruction };
  }

  private routedOf(op: Op): RoutedCommand {
    switch (op.kind) {
      case 'issue-receipt': {
        const input = {
          reference: op.reference,
          issued_by: 'payer',
          via: EUR,
          ...(op.instruction === null ? {} : { instruction: op.instruction }),
        };
        return {
          aggregate: 'receipt',
          key: op.reference,
          command: { name: 'issue', input, caller: OPERATOR },
        };
      }
      case 'settle-receipt': {
        const input = { to: 'settled', rail_references: [{ type: 'book_entry', value: 'x' }] };
        return {
          aggregate: 'receipt',
          key: op.reference,
          command: { name: 'transition', input, caller: OPERATOR },
        };
      }
      case 'issue-instruction': {
        const input = { reference: op.reference, address: ADDRESS, via: EUR };
        return {
          aggregate: 'instruction',
          key: op.reference,
          command: { name: 'issue', input, caller: PAYER },
        };
      }
      case 'create-connection': {
        const input = {
          reference: op.reference,
          grantee: PAYER.member,
          subject_id: SUBJECT,
          capabilities: { pay: true },
          mode: op.mode,
          ...CEILINGS,
          currency: 'EUR',
          expires_at: isoTime(T0 + 30 * 86_400_000),
        };
        return connectionCommand(op.reference, 'create', input, OPERATOR);
      }
      case 'consume': {
        const input = {
          capability: 'pay',
          amount: op.amount,
          currency: 'EUR',
          operation_ref: op.op,
        };
        return connectionCommand(op.reference, 'consume', input, PAYER);
      }
      case 'create-delegation': {
        const input = {
          reference: op.delegation,
          delegate: DELEGATE.member,
          capability: 'pay',
          amount: DELEGATION.amount,
          currency: 'EUR',
          destination_commitment: DELEGATION.commitment,
          max_total: DELEGATION.max_total,
          expires_at: isoTime(T0 + 30 * 86_400_000),
        };
        return connectionCommand(op.reference, 'create-delegation', input, OPERATOR);
      }
      case 'consume-delegation': {
        const input = {
          delegation: op.delegation,
          capability: 'pay',
          amount: DELEGATION.amount,
          currency: 'EUR',
          destination_commitment: DELEGATION.commitment,
          operation_ref: op.op,
        };
        return connectionCommand(op.reference, 'consume-delegation', input, DELEGATE);
      }
      case 'charge':
        return {
          aggregate: 'budget',
          key: `budget/${op.member}`,
          command: {
            name: 'charge-payee-check',
            input: {},
            caller: { member: op.member, local: false },
          },
        };
    }
  }

  /** An answer came. */
  answered(sent: Sent, answer: Answer | null, at: number): void {
    sent.answer = answer;
    sent.answeredAt = at;
    sent.answeredOrder = ++this.order;
  }

  /** A client read an aggregate's state in memory (a receipt's status). */
  saw(key: string, state: unknown): void {
    const status = (state as { status?: string } | null)?.status;
    if (status !== undefined) this.seen.push({ key, status });
  }

  // ---- Invariants. Each returns its violations; none is a pass. ----

  /**
   * no acknowledged write lost or changed: every answer that said "committed" is in the log
   * (a receipt issued or settled, an instruction issued, a charge counted), and so is every
   * state a client read.
   */
  acknowledgedKept(world: World, durable: States): Violation[] {
    const out: Violation[] = [];
    const charged = new Map<string, number>();
    const consumed = new Map<string, number>();
    for (const s of this.sent) {
      if (s.answer?.committed !== true || s.answer.status >= 300) continue;
      const state = durable(s.routed.key) as { status?: string } | null;
      const lost = (what: string) =>
        out.push({
          invariant: 'acknowledged-kept',
          detail: `${what} ${s.routed.key} answered ${s.answer!.status}, not in the log`,
        });
      if (s.op.kind === 'charge') charged.set(s.routed.key, (charged.get(s.routed.key) ?? 0) + 1);
      else if (s.op.kind === 'consume' || s.op.kind === 'consume-delegation')
        consumed.set(
          s.routed.key,
          (consumed.get(s.routed.key) ?? 0) +
            cents((s.routed.command.input as { amount: string }).amount),
        );
      else if (s.op.kind === 'create-delegation') continue;
      else if (state === null) lost(s.op.kind);
      else if (s.op.kind === 'settle-receipt' && state.status !== 'settled') lost('settle');
    }
    for (const [key, n] of consumed) {
      const logged = consumedInLog(world, key).total;
      if (logged < n)
        out.push({
          invariant: 'acknowledged-kept',
          detail: `${key}: ${n} consumed as answered, ${logged} in the log`,
        });
    }
    for (const [key, n] of charged) {
      const logged = [...chargesInLog(world, key).values()].reduce((a, b) => a + b, 0);
      if (logged < n)
        out.push({
          invariant: 'acknowledged-kept',
          detail: `${key}: ${n} charges answered, ${logged} in the log`,
        });
    }
    for (const { key, status } of this.seen) {
      const state = durable(key) as { status?: string } | null;
      const later = [status, ...(NEXT[status] ?? [])];
      if (state === null || !later.includes(state.status ?? ''))
        out.push({
          invariant: 'reads-committed',
          detail: `${key} was read as ${status}, the log holds ${state?.status ?? 'nothing'}`,
        });
    }
    return out;
  }

  /** one winner per race: one receipt or instruction per reference was ever answered created. */
  oneWinner(): Violation[] {
    const created = new Map<string, Set<string>>();
    for (const s of this.sent) {
      const creates = ['issue-receipt', 'issue-instruction', 'create-connection'];
      if (s.answer?.status !== 201 || !creates.includes(s.op.kind)) continue;
      const bodies = created.get(s.routed.key) ?? new Set();
      bodies.add(s.answer.body);
      created.set(s.routed.key, bodies);
    }
    return [...created]
      .filter(([, bodies]) => bodies.size > 1)
      .map(([key, bodies]) => ({
        invariant: 'one-winner',
        detail: `${key} created ${bodies.size} times`,
      }));
  }

  /**
   * one answer per idempotency key (P7): a key commits once, and once it has, every answer to it
   * is the committed one, byte for byte. (A refusal commits nothing and stores nothing: a retry
   * before the key committed runs again.)
   */
  oneAnswerPerKey(): Violation[] {
    const committed = new Map<string, string>();
    const out: Violation[] = [];
    for (const s of this.sent) {
      const scope = s.routed.idempotency?.scope;
      const a = s.answer;
      if (scope === undefined || a == null || a.status >= 500 || notRun(a)) continue;
      const said = `${a.status} ${a.body}`;
      const first = committed.get(scope);
      if (first === undefined) {
        if (a.committed) committed.set(scope, said);
      } else if (a.committed || first !== said)
        out.push({
          invariant: 'one-answer-per-key',
          detail: `${scope} answered ${first.slice(0, 60)}, then ${a.committed ? 'committed ' : ''}${said.slice(0, 60)}`,
        });
    }
    return out;
  }

  /**
   * a replayed request refused (P5): one signed request has one effect at most. Of all its
   * sendings (concurrent, later, across restarts) one at most commits, and none commits once an
   * earlier sending was answered: it is refused as replayed, or answered what its commit stored
   * (P7). (A run that commits nothing has no effect: sendings that overlap may each run.)
   */
  replayRefused(): Violation[] {
    const runs = new Map<string, Sent[]>();
    for (const s of this.sent) {
      const mark = s.routed.replay?.key;
      const a = s.answer;
      if (mark === undefined || a == null || a.status === 503 || notRun(a) || a.kind === 'stored')
        continue;
      runs.set(mark, [...(runs.get(mark) ?? []), s]);
    }
    const out: Violation[] = [];
    for (const [mark, sent] of runs) {
      const committed = sent.filter((s) => s.answer!.committed);
      if (committed.length > 1)
        out.push({
          invariant: 'replay-refused',
          detail: `mark ${mark} committed ${committed.length} times`,
        });
      for (const later of committed) {
        const earlier = sent.find((s) => s !== later && s.answeredOrder! < later.sentOrder);
        if (earlier !== undefined)
          out.push({
            invariant: 'replay-refused',
            detail: `mark ${mark} ran again (answered ${later.answer!.status}) after its run was answered ${earlier.answer!.status}`,
          });
      }
    }
    return out;
  }

  /**
   * every ceiling exact: no member was charged past its daily allowance, and none was refused
   * for it while the log held less than the allowance.
   */
  ceilingExact(world: World): Violation[] {
    const out: Violation[] = [...this.connectionCeilings(world)];
    const max = SIM_LIMITS.payee_check_daily_max;
    for (const member of MEMBERS) {
      const key = `budget/${member}`;
      const days = chargesInLog(world, key);
      for (const [day, count] of days)
        if (count > max)
          out.push({
            invariant: 'ceiling-exact',
            detail: `${key} charged ${count} of ${max} on ${day}`,
          });
      // A refusal for the allowance, answered on a day whose charges the log holds below it.
      for (const [n, s] of this.sent.entries()) {
        if (s.routed.key !== key || s.answer?.status !== 429) continue;
        // Decided between its sending and its answer, on the holder's clock (skewed by a
        // minute at most): on the day both fall on, well inside it.
        const day = dayWithin(s.at - SKEW_MAX_MS, s.answeredAt! + SKEW_MAX_MS);
        if (day !== null && (days.get(day) ?? 0) < max)
          out.push({
            invariant: 'ceiling-exact',
            detail: `${key} #${n} refused on ${day} at ${days.get(day) ?? 0} of ${max}`,
          });
      }
    }
    return out;
  }

  /**
   * every ceiling exact, for connections, mandates and delegations (SPEC K): what the log holds
   * consumed stays within max_total (each delegation's within its own); and a consume refused
   * for a ceiling was above one even by the log's final totals.
   */
  private connectionCeilings(world: World): Violation[] {
    const out: Violation[] = [];
    const max = cents(CEILINGS.max_total);
    for (const key of CONNECTION_KEYS) {
      const { total, delegations } = consumedInLog(world, key);
      if (total > max)
        out.push({ invariant: 'ceiling-exact', detail: `${key} consumed ${total} of ${max}` });
      for (const [d, used] of delegations)
        if (used > cents(DELEGATION.max_total))
          out.push({
            invariant: 'ceiling-exact',
            detail: `${d} consumed ${used} of ${cents(DELEGATION.max_total)}`,
          });
      for (const s of this.sent) {
        if (s.routed.key !== key || s.answer == null || s.answer.kind !== undefined) continue;
        if (!s.answer.body.includes('path.connect.delegation_limit_reached')) continue;
        const amount = cents((s.routed.command.input as { amount: string }).amount);
        const delegation = s.op.kind === 'consume-delegation' ? s.op.delegation : null;
        const above =
          amount > cents(CEILINGS.max_single) ||
          total + amount > max ||
          (delegation !== null &&
            (delegations.get(delegation) ?? 0) + amount > cents(DELEGATION.max_total));
        if (!above)
          out.push({
            invariant: 'ceiling-exact',
            detail: `${key}: ${amount} refused at ${total} of ${max}`,
          });
      }
    }
    return out;
  }

  /**
   * every committed receipt's instruction used (follow-ups, STYLE 12): no follow-up left, and an
   * instruction named by a receipt committed well before its expiry is used.
   */
  followUpsDone(world: World, durable: States, now: number): Violation[] {
    const out: Violation[] = [];
    const left = [...world.disk.store.scan('followups')].length;
    if (left > 0)
      out.push({ invariant: 'follow-ups-done', detail: `${left} follow-ups never carried out` });
    for (let n = 0; n < RECEIPTS; n++) {
      const reference = receiptRef(n);
      const bytes = world.disk.store.get('views', reference);
      const view = bytes === undefined ? null : decodeView(bytes);
      if (view === null || view.status !== 200) continue;
      const receipt = JSON.parse(view.body.toString()) as { instruction: string | null };
      const state = durable(reference) as ReceiptState | null;
      if (receipt.instruction === null || state === null) continue;
      const instruction = durable(receipt.instruction) as InstructionState | null;
      if (instruction === null) continue;
      // A receipt issued while the instruction was open (the instances' clocks may disagree by
      // the margin), and the instruction still within its lifetime now: nothing but its
      // follow-up decides it, and it must have. (One that expired meanwhile may have expired
      // before its follow-up reached it: a race the node allows.)
      const issuedAt = parseTime(state.steps[0]!.occurred_at)!;
      const expiresAt = parseTime(instruction.expires_at)!;
      const openedAt = expiresAt - SIM_LIMITS.instruction_lifetime_ms;
      if (issuedAt < openedAt + SKEW_MAX_MS || expiresAt <= now) continue;
      if (instruction.status !== 'used')
        out.push({
          invariant: 'follow-ups-done',
          detail: `${receipt.instruction} named by ${reference} is ${instruction.status}`,
        });
    }
    return out;
  }

  /** deadlines fire: no instruction open past its expiry (with its slack). */
  deadlinesFired(now: number, durable: States): Violation[] {
    const out: Violation[] = [];
    for (let n = 0; n < INSTRUCTIONS; n++) {
      const state = durable(instructionRef(n)) as InstructionState | null;
      if (state?.status === 'open' && parseTime(state.expires_at)! + DEADLINE_SLACK_MS < now)
        out.push({
          invariant: 'deadline-fired',
          detail: `${state.reference} open at ${isoTime(now)}, past ${state.expires_at}`,
        });
    }
    return out;
  }

  /**
   * the durable schedule (issue 33): one `deadlines` row per aggregate that has a deadline, at
   * that deadline, and no other row. Only instructions among the run's aggregates have one.
   */
  deadlineRowsExact(world: World, durable: States): Violation[] {
    const out: Violation[] = [];
    const expected = new Set<string>();
    for (const key of INSTRUCTION_KEYS) {
      const state = durable(key) as InstructionState | null;
      const at = state === null ? null : instructionDecider.deadline!(state);
      if (at !== null) expected.add(deadlineRows.key(partitionOf(key), at, key));
    }
    const stored = new Set([...world.disk.store.scan('deadlines')].map((row) => row.key));
    for (const key of expected)
      if (!stored.has(key)) out.push({ invariant: 'deadline-rows', detail: `no row ${key}` });
    for (const key of stored)
      if (!expected.has(key))
        out.push({ invariant: 'deadline-rows', detail: `a row too many: ${key}` });
    return out;
  }

  /** after recovery, state equal to a fresh fold of the log. */
  foldEqual(memory: States, durable: States): Violation[] {
    const out: Violation[] = [];
    for (const key of this.keys()) {
      const a = memory(key);
      const b = durable(key);
      if (canonical(a) !== canonical(b))
        out.push({
          invariant: 'fresh-fold',
          detail: `${key}: memory ${JSON.stringify(a)?.slice(0, 80)} log ${JSON.stringify(b)?.slice(0, 80)}`,
        });
    }
    return out;
  }
}
