// The payee check (SPEC F): the holder compares the proposed name with the registered one and
// answers a signed result; the answer never carries any other identifier, account detail, KYC
// level or balance. Who may ask: a member credential, or a payment context (an open request or
// instruction issued for the address), read through `reads`. Allowances (P12): checks per
// payment context over its life, and distinct names per requester, address and day (a name
// asked again is free); the member's daily allowance is the budget aggregate's.
import type { Caller, DecideContext, ReadView } from '../decider.js';
import { refusal, type Refusal } from '../../protocol/errors.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime } from '../../protocol/time.js';
import { maskedName, matchName } from '../payee/names.js';
import { openRequestOf } from '../request/request.js';
import { withLiveAddress } from './addresses.js';
import type { Input, Result } from './decision.js';
import type { PaymentContextInput } from './schema.js';
import {
  addressesOf,
  contextChecksOf,
  namesCheckedOf,
  type AddressEntry,
  type SubjectState,
} from './state.js';

type Check = Input<'payee-check'>;

/** One check as the allowances count it. */
interface Asked {
  requester: string;
  day: string;
  /** The payment context's reference, when one carried the call. */
  contextRef: string | null;
  /** Today's distinct names of this requester on this address: `<address id>|<requester>|<day>`. */
  namesKey: string;
}

const contextReference = (c: PaymentContextInput) => ('request' in c ? c.request : c.instruction);

/** The committed view a payment context names: the request or instruction itself. */
export function payeeCheckReads(input: Check): string[] {
  return input.context === null ? [] : [contextReference(input.context)];
}

/** SPEC F: an open (not paid, revoked or expired) request or instruction issued for `address`. */
function contextOpen(c: PaymentContextInput, view: ReadView | undefined, address: string | null) {
  if ('request' in c) {
    const request = openRequestOf(view);
    return request !== null && !('code' in request) && request.payee.address === address;
  }
  if (view === undefined || view.text === null) return false;
  const instruction = JSON.parse(view.text) as { status?: string; payee?: { address?: string } };
  return instruction.status === 'open' && instruction.payee?.address === address;
}

/** Who asks (it goes inside the signature): the member, or the context that carried the call. */
function requesterOf(
  s: SubjectState,
  input: Check,
  caller: Caller | null,
  views: DecideContext['views'],
): string | Refusal {
  const c = input.context;
  if (c === null) {
    if (caller === null) {
      const message = 'request authentication failed';
      return refusal('path.auth.unauthenticated', message, { reason: 'missing' });
    }
    return caller.member;
  }
  const address = addressesOf(s).get(input.address_id)?.address ?? null;
  if (!contextOpen(c, views.get(contextReference(c)), address)) {
    const message = 'the context is not an open payment context for this key';
    return refusal('path.auth.context_refused', message);
  }
  if (caller !== null) return caller.member;
  return 'request' in c ? `request:${c.request}` : `instruction:${c.instruction}`;
}

export function payeeCheck(
  s: SubjectState,
  input: Check,
  caller: Caller | null,
  context: DecideContext,
): Result {
  const requester = requesterOf(s, input, caller, context.views);
  if (typeof requester !== 'string') return requester;
  return withLiveAddress(s, input.address_id, (a) => {
    const day = isoTime(context.now).slice(0, 10);
    const asked: Asked = {
      requester,
      day,
      namesKey: `${a.id}|${requester}|${day}`,
      contextRef: input.context === null ? null : contextReference(input.context),
    };
    return allowanceSpent(s, input, asked, context) ?? answer(s, a, input, asked, context);
  });
}

/** A record with `payee_check` disabled, or none, is never checked: `unavailable` (SPEC F). */
const checkable = (s: SubjectState) =>
  s.payee_record !== null && s.payee_record.payee_check === 'enabled';

/** The refusal of a check over one of the subject's allowances (P12), or null. */
function allowanceSpent(
  s: SubjectState,
  input: Check,
  asked: Asked,
  context: DecideContext,
): Refusal | null {
  const contextMax = context.limits.payee_check_context_max;
  const checked =
    asked.contextRef === null ? 0 : contextChecksOf(s.payee_checks).get(asked.contextRef);
  if ((checked ?? 0) >= contextMax) {
    const message = 'the payee checks of this payment context are spent';
    const detail = { allowance: contextMax, window: 'context' };
    return refusal('path.finder.budget_exhausted', message, detail);
  }
  // Only a name that is compared counts: with nothing to compare against, nothing is learnt.
  if (!checkable(s) || input.mode !== 'verify') return null;
  const namesMax = context.limits.payee_check_names_per_day_max;
  const seen = namesCheckedOf(s.payee_checks).get(asked.namesKey) ?? [];
  if (seen.includes(input.name_key) || seen.length < namesMax) return null;
  const message = 'too many different names checked for this address today';
  const detail = { allowance: namesMax, window: 'calendar_day' };
  return refusal('path.finder.budget_exhausted', message, detail);
}

function answer(
  s: SubjectState,
  a: AddressEntry,
  input: Check,
  asked: Asked,
  context: DecideContext,
): Result {
  let result = 'unavailable';
  let displayName: string | null = null;
  if (checkable(s)) {
    if (context.unseal === undefined) throw new Error('payee check needs the sealing key');
    const registered = context.unseal(s.payee_record!.name_sealed);
    if (input.mode === 'display') {
      result = 'shown';
      displayName = maskedName(registered, s.subject_type);
    } else {
      result = matchName(registered, context.unseal(input.name_sealed), s.subject_type);
      if (result === 'close_match') displayName = maskedName(registered, s.subject_type);
    }
  }
  const signed = signObject(
    {
      kind: 'payee_check',
      key: a.address,
      requester: asked.requester,
      mode: input.mode,
      result,
      ...(displayName === null ? {} : { display_name: displayName }),
      subject_type: s.subject_type,
      nonce: input.nonce,
      ...envelopeFields(context.signer, isoTime(context.now)),
    },
    context.signer,
  );
  const counted = checkable(s) && input.mode === 'verify';
  return {
    events: [
      {
        type: 'payee_checked',
        day: asked.day,
        context: asked.contextRef,
        names_key: counted ? asked.namesKey : null,
        name_key: counted && input.mode === 'verify' ? input.name_key : null,
      },
    ],
    answer: { text: JSON.stringify(signed), signed: true },
  };
}
