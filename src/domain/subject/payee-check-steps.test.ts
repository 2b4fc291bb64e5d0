// The steps of a payee check (SPEC F, P12): a member's check is charged to its daily allowance
// first and made only when the charge is accepted; a check within a payment context is not
// charged. The sender here records what it is asked and replies as it is told.
import { describe, expect, it } from 'vitest';
import { payeeCheckSteps, type PayeeCheckSend } from './payee-check-steps.js';

const INPUT = {
  address_id: 'adr_steps1',
  nonce: 'n-1',
  context: null,
  mode: 'display' as const,
};
const BETA = { member: 'beta', local: false };

interface Sent {
  as: 'step' | 'answer';
  aggregate: string;
  key: string;
  name: string;
  caller: unknown;
}

/** A sender that records each command and replies with the status given for its kind. */
function recorder(statuses: { step: number; answer: number }) {
  const sent: Sent[] = [];
  const send: PayeeCheckSend<{ status: number; from: string }> = {
    step: async ({ aggregate, key, command }) => {
      sent.push({ as: 'step', aggregate, key, name: command.name, caller: command.caller });
      return { status: statuses.step, from: 'budget' };
    },
    answer: async ({ aggregate, key, command }) => {
      sent.push({ as: 'answer', aggregate, key, name: command.name, caller: command.caller });
      expect(command.input).toEqual(INPUT);
      return { status: statuses.answer, from: 'subject' };
    },
  };
  return { sent, send };
}

describe('the steps of a payee check (SPEC F, P12)', () => {
  it("charges a member's daily allowance, then checks on the address's subject", async () => {
    const { sent, send } = recorder({ step: 200, answer: 200 });
    const reply = await payeeCheckSteps(send, { caller: BETA, subject: 'sub_1', input: INPUT });
    expect(reply).toEqual({ status: 200, from: 'subject' });
    expect(sent).toEqual([
      {
        as: 'step',
        aggregate: 'budget',
        key: 'budget/beta',
        name: 'charge-payee-check',
        caller: BETA,
      },
      { as: 'answer', aggregate: 'subject', key: 'sub_1', name: 'payee-check', caller: BETA },
    ]);
  });

  it('answers a refused charge as the budget gave it, and makes no check', async () => {
    const { sent, send } = recorder({ step: 429, answer: 200 });
    const reply = await payeeCheckSteps(send, { caller: BETA, subject: 'sub_1', input: INPUT });
    expect(reply).toEqual({ status: 429, from: 'budget' });
    expect(sent.map((s) => s.as)).toEqual(['step']);
  });

  it('charges nothing for a check within a payment context (no credential)', async () => {
    const { sent, send } = recorder({ step: 200, answer: 403 });
    const reply = await payeeCheckSteps(send, { caller: null, subject: 'sub_2', input: INPUT });
    expect(reply).toEqual({ status: 403, from: 'subject' });
    expect(sent).toEqual([
      { as: 'answer', aggregate: 'subject', key: 'sub_2', name: 'payee-check', caller: null },
    ]);
  });
});
