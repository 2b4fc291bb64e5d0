// Payment instructions (SPEC G, "States and transitions: Payment instruction"): where to send
// one payment on one capability, for a few minutes (P12), once.
//   open -> used (a receipt names it: docs/decisions.md)
//   open -> revoked (the issuer)
//   open -> expired (passage of expires_at)
//   used, revoked, expired: nowhere; reads answer 410 with the matching code.
// Issuing reads two committed facts of other aggregates through `reads`: the request (it must be
// open) and the address's terms (capability in force, live target, beneficiary).
import type {
  CommandOf,
  DecideContext,
  Decider,
  Decision,
  InputOf,
  Publication,
  ReadView,
} from '../decider.js';
import { amountRefusal, capabilityRefusal } from '../../protocol/amounts.js';
import { findCapability } from '../../protocol/capabilities.js';
import { invalid, refusal, type ErrorCode, type Refusal } from '../../protocol/errors.js';
import type { CapabilityT } from '../../protocol/schemas.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';
import { addressInfoKey, type AddressInfo } from '../subject/resolver.js';
import { LIVE_RAILS } from '../subject/schema.js';
import { openRequestOf } from '../request/request.js';
import { instructionCommands } from './schema.js';

export type InstructionStatus = 'open' | 'used' | 'expired' | 'revoked';

export interface InstructionState {
  reference: string;
  status: InstructionStatus;
  expires_at: string;
  request: string | null;
  payee_address: string;
  obtained_by: string | null;
  used_by: string | null;
  /** The signed object as issued (status open), JSON text. */
  envelope: string;
}

export type InstructionEvent =
  | { type: 'issued'; state: InstructionState }
  | { type: 'moved'; to: InstructionStatus; at: string; receipt?: string };

type Commands = typeof instructionCommands;
type Command = CommandOf<Commands>;
type Result = Decision<InstructionEvent> | Refusal;

const GONE: Record<Exclude<InstructionStatus, 'open'>, [ErrorCode, string]> = {
  used: ['path.instruction.used', 'this instruction was used'],
  expired: ['path.instruction.expired', 'this instruction has expired'],
  revoked: ['path.instruction.revoked', 'this instruction was revoked'],
};

export const instructionDecider: Decider<InstructionState, Commands, InstructionEvent> = {
  type: 'instruction',
  passivates: true,
  prefix: 'ins',
  commands: instructionCommands,

  reads(command: Command, _state, views): string[] {
    if (command.name !== 'issue') return [];
    const { request, address } = command.input;
    if (address !== undefined) return [addressInfoKey(address)];
    if (request === undefined) return [];
    const open = openRequestOf(views.get(request));
    return open !== null && !('code' in open) && open.payee.address !== null
      ? [request, addressInfoKey(open.payee.address)]
      : [request];
  },

  decide(command: Command, state: InstructionState | null, context: DecideContext): Result {
    if (command.name === 'issue') {
      if (state !== null) return invalid('reference', 'reference already in use');
      return issue(command.input, command.caller?.member ?? null, context);
    }
    if (state === null) return refusal('path.core.not_found', 'no such instruction');
    const at = isoTime(context.now);
    const expired = parseTime(state.expires_at)! <= context.now;
    switch (command.name) {
      case 'revoke':
        if (command.caller === null || !command.caller.local)
          return refusal('path.auth.forbidden', 'only the issuer may revoke an instruction');
        if (state.status === 'revoked')
          return {
            events: [],
            answer: { value: { reference: state.reference, status: 'revoked' } },
          };
        if (state.status !== 'open') return goneRefusal(state.status);
        if (expired) return goneRefusal('expired');
        return {
          events: [{ type: 'moved', to: 'revoked', at }],
          answer: { value: { reference: state.reference, status: 'revoked', revoked_at: at } },
        };
      case 'use':
        // A receipt naming the instruction: open -> used; payer and payee receipts may both name
        // it, and a follow-up may arrive twice (at least once): a second use changes nothing.
        if (state.status !== 'open')
          return {
            events: [],
            answer: { value: { reference: state.reference, status: state.status } },
          };
        return {
          events: [{ type: 'moved', to: 'used', at, receipt: command.input.receipt }],
          answer: { value: { reference: state.reference, status: 'used' } },
        };
      case 'tick':
        if (state.status !== 'open' || !expired) return { events: [], answer: { value: {} } };
        return { events: [{ type: 'moved', to: 'expired', at }], answer: { value: {} } };
    }
  },

  evolve(state: InstructionState | null, event: InstructionEvent): InstructionState {
    if (event.type === 'issued') return event.state;
    if (state === null) throw new Error('instruction moved before it was issued');
    return { ...state, status: event.to, used_by: event.receipt ?? state.used_by };
  },

  publications(state: InstructionState): Publication[] {
    if (state.status !== 'open')
      return [{ key: state.reference, view: { gone: goneRefusal(state.status) } }];
    const expiry = { at: parseTime(state.expires_at)!, code: 'path.instruction.expired' as const };
    return [{ key: state.reference, view: { text: state.envelope, signed: true, expiry } }];
  },

  deadline(state: InstructionState): number | null {
    return state.status === 'open' ? parseTime(state.expires_at) : null;
  },
};

function goneRefusal(status: Exclude<InstructionStatus, 'open'>): Refusal {
  const [code, message] = GONE[status];
  return refusal(code, message);
}

const notAccepted = (message: string) =>
  refusal('path.address.capability_not_accepted', message, { field: 'via' });

/** What an instruction pays: the capability in force, the address's terms, the amount. */
interface Terms {
  info: AddressInfo;
  inForce: CapabilityT | undefined;
  amount: InputOf<Commands, 'issue'>['amount'] | null;
}

/** The terms of a request (it must be open and bound to an address) or of an address alone. */
function termsOf(
  input: InputOf<Commands, 'issue'>,
  caller: string | null,
  views: ReadonlyMap<string, ReadView>,
): Terms | Refusal {
  const { request, address, via } = input;
  if ((request === undefined) === (address === undefined))
    return invalid('request', 'give exactly one of request or address');
  if (request !== undefined) {
    const open = openRequestOf(views.get(request));
    if (open === null) return refusal('path.core.not_found', 'no such request');
    if ('code' in open) return open;
    if (open.payee.address === null) return notAccepted('this request is not bound to an address');
    const info = addressInfoOf(views.get(addressInfoKey(open.payee.address)));
    if (info === null) return refusal('path.core.not_found', 'no such address');
    return {
      info,
      inForce: findCapability(open.accepts, via),
      amount: open.amount ?? input.amount ?? null,
    };
  }
  // For an address alone the caller must be a member; issuance records who obtained it.
  if (caller === null)
    return refusal('path.auth.unauthenticated', 'request authentication failed', {
      reason: 'missing',
    });
  const info = addressInfoOf(views.get(addressInfoKey(address!)));
  if (info === null) return refusal('path.core.not_found', 'no such address');
  return { info, inForce: findCapability(info.accepts, via), amount: input.amount ?? null };
}

function addressInfoOf(view: ReadView | undefined): AddressInfo | null {
  return view === undefined || view.text === null ? null : (JSON.parse(view.text) as AddressInfo);
}

function issue(
  input: InputOf<Commands, 'issue'>,
  obtainedBy: string | null,
  context: DecideContext,
): Result {
  // P23: the amount, and the fees and ceiling of `via`, within their asset's unit.
  const digits = amountRefusal(input.amount, 'amount') ?? capabilityRefusal(input.via, 'via');
  if (digits !== null) return digits;
  const terms = termsOf(input, obtainedBy, context.views);
  if ('code' in terms) return terms;
  const { info, inForce } = terms;
  if (info.revoked) return refusal('path.address.revoked', 'this address was revoked');
  if (inForce === undefined) return notAccepted('via is not one of the capabilities in force');
  if (!(LIVE_RAILS as readonly string[]).includes(inForce.rail))
    return notAccepted('no instruction is issued on a reserved rail');
  const candidates = info.targets.filter(
    (t) =>
      t.rail === inForce.rail &&
      t.asset_type === inForce.asset_type &&
      t.asset_code === inForce.asset_code,
  );
  const target = candidates.find((t) => t.is_default) ?? candidates[0];
  if (target === undefined)
    return notAccepted('the address has no live target for this capability');
  const beneficiary =
    target.beneficiary_format === null
      ? { format: 'path_address', value: info.address }
      : { format: target.beneficiary_format, value: target.beneficiary };
  const at = isoTime(context.now);
  const expiresAt = isoTime(context.now + context.limits.instruction_lifetime_ms);
  const envelope = JSON.stringify(
    signObject(
      {
        type: 'path.instruction',
        reference: input.reference,
        issuer: context.member,
        payee: { member: context.member, address: info.address },
        request: input.request ?? null,
        intent_version: info.intent_version,
        via: inForce,
        beneficiary,
        payment_reference: input.reference,
        amount: terms.amount,
        single_use: true,
        status: 'open',
        expires_at: expiresAt,
        ...envelopeFields(context.signer, at),
      },
      context.signer,
    ),
  );
  const state: InstructionState = {
    reference: input.reference,
    status: 'open',
    expires_at: expiresAt,
    request: input.request ?? null,
    payee_address: info.address,
    obtained_by: obtainedBy,
    used_by: null,
    envelope,
  };
  return {
    events: [{ type: 'issued', state }],
    answer: { text: envelope, signed: true, created: true },
  };
}
