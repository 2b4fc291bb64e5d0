// Payment instructions (SPEC G, "States and transitions: Payment instruction"): where to send
// one payment on one capability, for a few minutes (P12), once.
//   open -> used (a receipt names it: docs/decisions.md)
//   open -> revoked (the issuer)
//   open -> expired (passage of expires_at)
//   used, revoked, expired: nowhere; reads answer 410 with the matching code.
import type { Command, DecideContext, Decider, Decision, Publication, Reply } from '../../actors/types.js';
import { errorBody, invalid, refusal, type ErrorCode } from '../../protocol/errors.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';

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

const ok = (status: number, value: unknown): Reply => ({ status, body: JSON.stringify(value), signed: false });

const GONE: Record<Exclude<InstructionStatus, 'open'>, [ErrorCode, string]> = {
  used: ['path.instruction.used', 'this instruction was used'],
  expired: ['path.instruction.expired', 'this instruction has expired'],
  revoked: ['path.instruction.revoked', 'this instruction was revoked'],
};

export const instructionDecider: Decider<InstructionState, InstructionEvent> = {
  type: 'instruction',

  decide(command: Command, state: InstructionState | null, context: DecideContext): Decision<InstructionEvent> {
    const input = (command.input ?? {}) as Record<string, any>;
    if (command.name === 'issue') {
      if (state !== null) return invalid('reference', 'reference already in use');
      return issue(input, context, command.caller?.member ?? null);
    }
    if (state === null) return refusal('path.core.not_found', 'no such instruction');
    const at = isoTime(context.now);
    const expired = parseTime(state.expires_at)! <= context.now;
    switch (command.name) {
      case 'revoke':
        if (command.caller === null || !command.caller.local) return refusal('path.auth.forbidden', 'only the issuer may revoke an instruction');
        if (state.status === 'revoked') return { events: [], reply: ok(200, { reference: state.reference, status: 'revoked' }) };
        if (state.status !== 'open') return goneRefusal(state.status);
        if (expired) return goneRefusal('expired');
        return { events: [{ type: 'moved', to: 'revoked', at }], reply: ok(200, { reference: state.reference, status: 'revoked', revoked_at: at }) };
      case 'use':
        // A receipt naming the instruction: open -> used; payer and payee receipts may both name it.
        if (state.status !== 'open') return { events: [], reply: ok(200, { reference: state.reference, status: state.status }) };
        return { events: [{ type: 'moved', to: 'used', at, receipt: input.receipt }], reply: ok(200, { reference: state.reference, status: 'used' }) };
      case 'tick':
        if (state.status !== 'open' || !expired) return { events: [], reply: ok(200, {}) };
        return { events: [{ type: 'moved', to: 'expired', at }], reply: ok(200, {}) };
      default:
        return refusal('path.core.not_found', 'no such operation on an instruction');
    }
  },

  evolve(state: InstructionState | null, event: InstructionEvent): InstructionState {
    if (event.type === 'issued') return event.state;
    if (state === null) throw new Error('instruction moved before it was issued');
    return { ...state, status: event.to, used_by: event.receipt ?? state.used_by };
  },

  publications(state: InstructionState): Publication[] {
    if (state.status !== 'open') {
      const [code, message] = GONE[state.status];
      return [{ key: state.reference, reply: { status: 410, body: errorBody(refusal(code, message)), signed: false } }];
    }
    return [{ key: state.reference, reply: { status: 200, body: state.envelope, signed: true, expiry: { at: parseTime(state.expires_at)!, code: 'path.instruction.expired' } } }];
  },

  deadline(state: InstructionState): number | null {
    return state.status === 'open' ? parseTime(state.expires_at) : null;
  },
};

function goneRefusal(status: Exclude<InstructionStatus, 'open'>) {
  const [code, message] = GONE[status];
  return refusal(code, message);
}

function issue(input: Record<string, any>, context: DecideContext, obtainedBy: string | null): Decision<InstructionEvent> {
  const at = isoTime(context.now);
  const expiresAt = isoTime(context.now + (input.lifetime_ms as number));
  const object = signObject({
    type: 'path.instruction',
    reference: input.reference,
    issuer: context.member,
    payee: { member: context.member, address: input.address },
    request: input.request ?? null,
    intent_version: input.intent_version ?? null,
    via: input.via,
    beneficiary: input.beneficiary,
    payment_reference: input.reference,
    amount: input.amount ?? null,
    single_use: true,
    status: 'open',
    expires_at: expiresAt,
    ...envelopeFields(context.signer, at),
  }, context.signer);
  const envelope = JSON.stringify(object);
  return {
    events: [{
      type: 'issued',
      state: {
        reference: input.reference, status: 'open', expires_at: expiresAt, request: input.request ?? null,
        payee_address: input.address, obtained_by: obtainedBy, used_by: null, envelope,
      },
    }],
    reply: { status: 201, body: envelope, signed: true },
  };
}
