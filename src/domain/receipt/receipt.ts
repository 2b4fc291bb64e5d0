// Settlement receipts (SPEC J, "States and transitions: Settlement receipt").
// Each statement is a signed envelope; a move signs a new envelope whose `supersedes` is the
// digest of the one it replaces (P3). Earlier envelopes stay in the transitions list as signed.
//
// States and where they may move:
//   pending  -> settled | failed
//   settled  -> reversed
//   failed, reversed: nowhere
// A payee receipt is issued settled; a payer receipt is issued pending or failed.
import type {
  CommandOf,
  DecideContext,
  Decider,
  Decision,
  InputOf,
  Publication,
} from '../decider.js';
import { amountRefusal, capabilityRefusal, feesRefusal } from '../../protocol/amounts.js';
import { digestOf } from '../../protocol/digest.js';
import { invalid, refusal, type Refusal } from '../../protocol/errors.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime } from '../../protocol/time.js';
import { receiptCommands, type ReasonCode, type TransitionReceiptInput } from './schema.js';

export type ReceiptStatus = 'pending' | 'settled' | 'failed' | 'reversed';

const MOVES: Record<ReceiptStatus, readonly ReceiptStatus[]> = {
  pending: ['settled', 'failed'],
  settled: ['reversed'],
  failed: [],
  reversed: [],
};

/** One step of a receipt's chain, as listed by `GET /receipts/{reference}/transitions`. */
export interface Step {
  from: ReceiptStatus | null;
  to: ReceiptStatus;
  reason_code: ReasonCode | null;
  occurred_at: string;
}

/**
 * What a receipt keeps in memory: its status and steps. The signed envelopes are in the log
 * (for replay) and in the views (for reading and for the next move), never held here, so a
 * million receipts cost little memory and replay fast.
 */
export interface ReceiptState {
  reference: string;
  status: ReceiptStatus;
  steps: Step[];
}

export type ReceiptEvent =
  | { type: 'issued'; reference: string; step: Step; envelope: string }
  | { type: 'moved'; step: Step; envelope: string };

type Commands = typeof receiptCommands;
type Command = CommandOf<Commands>;
export type IssueCommand = InputOf<Commands, 'issue'>;

type Envelope = Record<string, unknown>;

export const RECEIPT_EVENT = 'receipt.issued';

export const receiptDecider: Decider<ReceiptState, Commands, ReceiptEvent> = {
  type: 'receipt',
  passivates: true,
  prefix: 'rcp',
  commands: receiptCommands,

  reads(command: Command, state: ReceiptState | null): string[] {
    return command.name === 'transition' && state !== null
      ? [state.reference, transitionsViewKey(state.reference)]
      : [];
  },

  decide(
    command: Command,
    state: ReceiptState | null,
    context: DecideContext,
  ): Decision<ReceiptEvent> | Refusal {
    switch (command.name) {
      case 'issue':
        if (state !== null)
          return refusal('path.core.invalid_request', 'reference already in use', {
            field: 'reference',
          });
        return issue(command.input, context);
      case 'transition':
        if (state === null) return refusal('path.core.not_found', 'no such receipt');
        if (command.caller === null || !command.caller.local) {
          return refusal('path.auth.forbidden', 'only the issuer of a receipt may move it');
        }
        return transition(state, command.input, context);
    }
  },

  evolve(state: ReceiptState | null, event: ReceiptEvent): ReceiptState {
    if (event.type === 'issued')
      return { reference: event.reference, status: event.step.to, steps: [event.step] };
    if (state === null) throw new Error('receipt moved before it was issued');
    return { ...state, status: event.step.to, steps: [...state.steps, event.step] };
  },
};

export function transitionsViewKey(reference: string): string {
  return `${reference}/transitions`;
}

function issue(input: IssueCommand, context: DecideContext): Decision<ReceiptEvent> | Refusal {
  const status = input.status ?? (input.issued_by === 'payee' ? 'settled' : 'pending');
  const reasonCode = input.reason_code ?? null;
  const railReferences = input.rail_references ?? [];
  const refused = issueRefusal(input, { status, reasonCode, railReferences });
  if (refused !== null) return refused;

  const self = { member: context.member };
  const body: Envelope = {
    type: 'path.receipt',
    reference: input.reference,
    issuer: context.member,
    issued_by: input.issued_by,
    payer: input.issued_by === 'payer' ? self : (input.payer ?? { member: null }),
    payee: input.issued_by === 'payee' ? self : (input.payee ?? { member: null }),
    request: input.request ?? null,
    instruction: input.instruction ?? null,
    via: input.via,
    sent: input.sent ?? null,
    received: input.received ?? null,
    fx: input.fx ?? null,
    fees: input.fees ?? [],
    rail_references: railReferences,
    attestations: input.attestations ?? [],
    status,
    reason_code: reasonCode,
    ...(input.reason === undefined ? {} : { reason: input.reason }),
    supersedes: null,
    route: null,
  };
  const occurredAt = isoTime(context.now);
  const envelope = signObject(
    { ...body, ...envelopeFields(context.signer, occurredAt) },
    context.signer,
  );
  const text = JSON.stringify(envelope);
  const step: Step = { from: null, to: status, reason_code: reasonCode, occurred_at: occurredAt };
  return {
    events: [{ type: 'issued', reference: input.reference, step, envelope: text }],
    answer: { text, signed: true, created: true },
    outbox: [
      { id: context.newId('evt'), event: RECEIPT_EVENT, created_at: occurredAt, data_json: text },
    ],
    // The transitions list of a new receipt derives from its
    // envelope (firstTransitions): not written until it moves.
    publications: [{ key: input.reference, view: { text, signed: true } }],
    // An instruction named by a receipt is used from then on (docs/decisions.md): decided by the
    // instruction itself, after this commit and again after a crash (STYLE 12). One that is not
    // this node's is not found there, which ends the follow-up.
    followUps:
      typeof input.instruction === 'string'
        ? [
            {
              aggregate: 'instruction',
              key: input.instruction,
              name: 'use',
              input: { receipt: input.reference },
            },
          ]
        : [],
  };
}

/** Why a new receipt cannot be issued as given, or null: what each issuing side may state. */
function issueRefusal(
  input: IssueCommand,
  issued: { status: ReceiptStatus; reasonCode: string | null; railReferences: readonly unknown[] },
): Refusal | null {
  const { status, reasonCode, railReferences } = issued;
  const digits = amountsRefusal(input);
  if (digits !== null) return digits;
  if (input.issued_by === 'payee' && status !== 'settled')
    return invalid('status', 'a payee receipt is issued settled');
  if (input.issued_by === 'payer' && status === 'settled')
    return invalid('status', 'a payer receipt is issued pending or failed');
  if (input.issued_by === 'payee' && input.payee !== undefined)
    return invalid('payee', 'the payee of a payee receipt is the issuer, filled by the node');
  if (input.issued_by === 'payer' && input.payer !== undefined)
    return invalid('payer', 'the payer of a payer receipt is the issuer, filled by the node');
  if (status === 'settled' && (input.received === undefined || input.received === null))
    return invalid('received', 'received is required on a settled payee receipt');
  if (status === 'settled' && railReferences.length === 0)
    return invalid('rail_references', 'rail_references are required on a settled receipt');
  if (status === 'failed' && reasonCode === null)
    return invalid('reason_code', 'reason_code is required on a failed receipt');
  if (status !== 'failed' && reasonCode !== null)
    return invalid('reason_code', 'reason_code belongs to a failed receipt');
  return null;
}

/** P23: the amounts of `via`, what was sent and received, and the fees, within their unit. */
function amountsRefusal(input: IssueCommand): Refusal | null {
  return (
    capabilityRefusal(input.via, 'via') ??
    amountRefusal(input.sent, 'sent') ??
    amountRefusal(input.received, 'received') ??
    feesRefusal(input.fees, 'fees')
  );
}

function transition(
  state: ReceiptState,
  input: TransitionReceiptInput,
  context: DecideContext,
): Decision<ReceiptEvent> | Refusal {
  const current = context.views.get(state.reference)?.text;
  if (current === undefined || current === null)
    throw new Error(`receipt ${state.reference} has no committed envelope`);
  const listed =
    context.views.get(transitionsViewKey(state.reference))?.text ?? firstTransitions(current);
  // Re-stating the state already held answers the current envelope and appends nothing.
  if (input.to === state.status) return { events: [], answer: { text: current, signed: true } };
  if (!MOVES[state.status].includes(input.to)) {
    return refusal(
      'path.settlement.transition_invalid',
      `a ${state.status} receipt cannot move to ${input.to}`,
      { from: state.status, to: input.to },
    );
  }
  const reasonCode = input.reason_code ?? null;
  if (input.to === 'failed' && reasonCode === null)
    return invalid('reason_code', 'reason_code is required to move to failed');
  if (input.to === 'settled' && reasonCode !== null)
    return invalid('reason_code', 'a settled receipt carries no reason_code');

  const previous = JSON.parse(current) as Envelope;
  const railReferences = [
    ...(previous.rail_references as unknown[]),
    ...(input.rail_references ?? []),
  ];
  if (input.to === 'settled' && railReferences.length === 0)
    return invalid('rail_references', 'rail_references are required on a settled receipt');

  const { signature: _replaced, reason: _previousReason, ...kept } = previous;
  const occurredAt = isoTime(context.now);
  const body: Envelope = {
    ...kept,
    rail_references: railReferences,
    status: input.to,
    reason_code: reasonCode,
    ...(input.reason === undefined ? {} : { reason: input.reason }),
    supersedes: digestOf(previous),
    route: null,
    ...envelopeFields(context.signer, occurredAt),
  };
  const envelope = signObject(body, context.signer);
  const text = JSON.stringify(envelope);
  const step: Step = {
    from: state.status,
    to: input.to,
    reason_code: reasonCode,
    occurred_at: occurredAt,
  };
  // The listed envelopes are JSON.stringify output: parsing and writing them again is byte-exact.
  const earlier = (JSON.parse(listed) as { transitions: (Step & { envelope: unknown })[] })
    .transitions;
  return {
    events: [{ type: 'moved', step, envelope: text }],
    answer: { text, signed: true, created: true },
    publications: published(
      state.reference,
      text,
      transitionsDocument(state.reference, input.to, [...earlier, { ...step, envelope }]),
    ),
  };
}

/**
 * `GET /receipts/{reference}` (and `/path/{reference}`) and
 * `GET /receipts/{reference}/transitions`.
 */
function published(reference: string, envelope: string, transitions: string): Publication[] {
  return [
    { key: reference, view: { text: envelope, signed: true } },
    { key: transitionsViewKey(reference), view: { text: transitions, signed: true } },
  ];
}

/**
 * The transitions list of a receipt that has not moved: its one step is read off its envelope
 * (`status`, `reason_code`, `signed_at`). The front end serves this for `GET …/transitions`
 * until the first move publishes the list itself.
 */
export function firstTransitions(envelopeText: string): string {
  const e = JSON.parse(envelopeText) as {
    reference: string;
    status: ReceiptStatus;
    reason_code: ReasonCode | null;
    signed_at: string;
  };
  return transitionsDocument(e.reference, e.status, [
    {
      from: null,
      to: e.status,
      reason_code: e.reason_code,
      occurred_at: e.signed_at,
      envelope: JSON.parse(envelopeText),
    },
  ]);
}

/** The transitions document: every step, oldest first, with the envelope it produced. */
function transitionsDocument(
  reference: string,
  status: ReceiptStatus,
  steps: (Step & { envelope: unknown })[],
): string {
  return JSON.stringify({
    reference,
    status,
    transitions: steps.map((t) => ({
      from: t.from,
      to: t.to,
      reason_code: t.reason_code,
      occurred_at: t.occurred_at,
      envelope: t.envelope,
    })),
  });
}
