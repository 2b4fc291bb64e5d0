// The steps of a payee check (SPEC F, P12). A member's check is first charged to its daily
// allowance (the budget aggregate); only a charge the budget accepts is followed by the check
// itself, on the subject that holds the address, and a refused charge is the call's answer as
// the budget gave it. A check within a payment context (no credential) is not charged: its
// allowances, like every rule of the check, are the subject decider's (payee-check.ts). The
// route finds the holder and sends the commands (`PayeeCheckSend`); the order is said here.
import type { Caller, CommandOf } from '../decider.js';
import { budgetDecider, budgetKey } from '../budget/budget.js';
import type { budgetCommands } from '../budget/schema.js';
import type { Input, SubjectCommands } from './decision.js';
import { subjectDecider } from './subject.js';

/** One command for one aggregate instance, as the runtime routes it. */
export interface Routed<C> {
  aggregate: string;
  key: string;
  command: C;
}

type Charge = Extract<CommandOf<typeof budgetCommands>, { name: 'charge-payee-check' }>;
type Check = Extract<CommandOf<SubjectCommands>, { name: 'payee-check' }>;

/** How the commands of a check are sent, and their replies made answers. */
export interface PayeeCheckSend<R extends { status: number }> {
  /** A command before the answer: any reply but 200 ends the call with it. */
  step(routed: Routed<Charge>): Promise<R>;
  /** The command whose reply answers the call. */
  answer(routed: Routed<Check>): Promise<R>;
}

/** A check of the address `input` names, held by `subject`, asked by `caller`. */
export async function payeeCheckSteps<R extends { status: number }>(
  send: PayeeCheckSend<R>,
  check: { caller: Caller | null; subject: string; input: Input<'payee-check'> },
): Promise<R> {
  const { caller, subject, input } = check;
  if (caller !== null) {
    const charge: Charge = { name: 'charge-payee-check', input: {}, caller };
    const key = budgetKey(caller.member);
    const charged = await send.step({ aggregate: budgetDecider.type, key, command: charge });
    if (charged.status !== 200) return charged;
  }
  const command: Check = { name: 'payee-check', input, caller };
  return send.answer({ aggregate: subjectDecider.type, key: subject, command });
}
