// The receipt decider alone (SPEC J, "States and transitions: Settlement receipt"): given
// events, when a command, then events or a refusal; every row of the state table, the issue
// rules, and the follow-up to a named instruction.
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../protocol/digest.js';
import { verifyObject } from '../../protocol/signing.js';
import { BETA, deciderSpec, LOCAL, SPEC_NOW } from '../spec.js';
import type { ReadView } from '../decider.js';
import { receiptDecider, transitionsViewKey, type ReceiptEvent } from './receipt.js';

const spec = deciderSpec(receiptDecider);
const REF = `rcp_${'1'.repeat(32)}`;
const INS = `ins_${'2'.repeat(32)}`;
const BOOK = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '10.00', asset_type: 'fiat', asset_code: 'EUR' };
const RAIL = [{ type: 'book_entry', value: 'BE-1' }];
/** A payee's receipt as issued, whole: each refusal test changes one field of it. */
const PAYEE_ISSUE = {
  reference: REF,
  issued_by: 'payee' as const,
  via: BOOK,
  received: AMOUNT,
  rail_references: RAIL,
};
const PUBLIC_KEY = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';

type Status = 'pending' | 'settled' | 'failed' | 'reversed';

/** A receipt issued with `status`, and the views the runtime would have committed for it. */
function issued(status: 'pending' | 'settled' | 'failed' = 'pending') {
  const input =
    status === 'settled'
      ? {
          reference: REF,
          issued_by: 'payee' as const,
          via: BOOK,
          received: AMOUNT,
          rail_references: RAIL,
        }
      : {
          reference: REF,
          issued_by: 'payer' as const,
          via: BOOK,
          status,
          ...(status === 'failed' ? { reason_code: 'rail_rejected' as const } : {}),
        };
  const decision = spec
    .given([])
    .when('issue', input)
    .then(() => undefined);
  const text = (decision.answer as { text: string }).text;
  const views: Record<string, ReadView> = { [REF]: { text, gone: null } };
  return { events: decision.events, views, text };
}

/** A receipt moved along `path`, with its committed views after each move. */
function movedAlong(path: Status[]) {
  const first = issued(
    path[0] === 'settled' ? 'settled' : path[0] === 'failed' ? 'failed' : 'pending',
  );
  const events: ReceiptEvent[] = [...first.events];
  const views = { ...first.views };
  for (const to of path.slice(1)) {
    const extra =
      to === 'failed'
        ? { reason_code: 'rail_rejected' as const }
        : to === 'settled'
          ? { rail_references: RAIL }
          : {};
    const d = spec
      .given(events, { views })
      .when('transition', { to: to as 'settled' | 'failed' | 'reversed', ...extra })
      .then(() => undefined);
    events.push(...d.events);
    for (const p of d.publications ?? [])
      views[p.key] = { text: (p.view as { text: string }).text, gone: null };
  }
  return { events, views };
}

describe('receipt: issue (SPEC J)', () => {
  it('a payee receipt is issued settled and signed; its commit announces it', () => {
    const d = spec
      .given([])
      .when('issue', {
        reference: REF,
        issued_by: 'payee',
        via: BOOK,
        received: AMOUNT,
        rail_references: RAIL,
      })
      .then(() => undefined);
    expect(d.answer).toMatchObject({ signed: true, created: true });
    const envelope = JSON.parse((d.answer as { text: string }).text);
    expect(envelope).toMatchObject({
      type: 'path.receipt',
      reference: REF,
      status: 'settled',
      issued_by: 'payee',
      payee: { member: 'local' },
      supersedes: null,
    });
    expect(verifyObject(envelope, PUBLIC_KEY).valid).toBe(true);
    expect(d.outbox?.map((e) => e.event)).toEqual(['receipt.issued']);
    expect(d.publications?.map((p) => p.key)).toEqual([REF]);
    expect(d.followUps).toEqual([]);
  });

  it('naming an instruction writes the follow-up that uses it (STYLE 12)', () => {
    const d = spec
      .given([])
      .when('issue', { reference: REF, issued_by: 'payer', via: BOOK, instruction: INS })
      .then(() => undefined);
    expect(d.followUps).toEqual([
      { aggregate: 'instruction', key: INS, name: 'use', input: { receipt: REF } },
    ]);
  });

  it('refuses what SPEC J forbids at issue, naming the field', () => {
    const payee = PAYEE_ISSUE;
    spec
      .given([])
      .when('issue', { ...payee, status: 'pending' })
      .thenRefused('path.core.invalid_request', { field: 'status' });
    spec
      .given([])
      .when('issue', { ...payee, received: null })
      .thenRefused('path.core.invalid_request', { field: 'received' });
    spec
      .given([])
      .when('issue', { ...payee, rail_references: [] })
      .thenRefused('path.core.invalid_request', { field: 'rail_references' });
    spec
      .given([])
      .when('issue', { ...payee, payee: { member: 'beta' } })
      .thenRefused('path.core.invalid_request', { field: 'payee' });
    const payer = { reference: REF, issued_by: 'payer' as const, via: BOOK };
    spec
      .given([])
      .when('issue', { ...payer, status: 'settled' })
      .thenRefused('path.core.invalid_request', { field: 'status' });
    spec
      .given([])
      .when('issue', { ...payer, status: 'failed' })
      .thenRefused('path.core.invalid_request', { field: 'reason_code' });
    spec
      .given([])
      .when('issue', { ...payer, reason_code: 'expired' })
      .thenRefused('path.core.invalid_request', { field: 'reason_code' });
    spec
      .given(issued().events)
      .when('issue', payer)
      .thenRefused('path.core.invalid_request', { field: 'reference' });
  });

  it("P23: refuses an amount, fee or ceiling beyond its asset's unit, naming it", () => {
    const payee = PAYEE_ISSUE;
    const eur = (value: string) => ({ ...AMOUNT, value });
    const refused = (change: Record<string, unknown>, field: string, digits: number) =>
      spec
        .given([])
        .when('issue', { ...payee, ...change })
        .thenRefused('path.core.invalid_request', { field, max_fraction_digits: digits });
    refused({ received: eur('10.001') }, 'received.value', 2);
    refused({ sent: eur('10.000') }, 'sent.value', 2);
    const fee = (value: string) => ({ kind: 'operator', amount: eur(value), paid_by: 'payer' });
    refused({ fees: [fee('0.25'), fee('0.255')] }, 'fees.1.amount.value', 2);
    const jpy = { value: '100.5', asset_type: 'fiat', asset_code: 'JPY' };
    refused({ via: { ...BOOK, limits: { max_single: jpy } } }, 'via.limits.max_single.value', 0);
    const usdc = { value: `1.${'0'.repeat(19)}`, asset_type: 'token', asset_code: 'USDC' };
    refused({ sent: usdc }, 'sent.value', 18);
    const bhd = { value: '1.005', asset_type: 'fiat', asset_code: 'BHD' };
    spec
      .given([])
      .when('issue', { ...payee, received: bhd, fees: [fee('0.25')] })
      .then((events) => expect(events).toHaveLength(1));
  });
});

describe('receipt: the state table (SPEC J)', () => {
  const at = new Date(SPEC_NOW).toISOString();

  it('pending -> settled: a new envelope that supersedes the last; the transitions list', () => {
    const { events, views, text } = issued('pending');
    const d = spec
      .given(events, { views })
      .when('transition', { to: 'settled', rail_references: RAIL })
      .then((e) => {
        expect(e).toHaveLength(1);
        expect(e[0]).toMatchObject({
          type: 'moved',
          step: { from: 'pending', to: 'settled', reason_code: null, occurred_at: at },
        });
      });
    const envelope = JSON.parse((d.answer as { text: string }).text);
    expect(envelope.supersedes).toBe(digestOf(JSON.parse(text)));
    expect(verifyObject(envelope, PUBLIC_KEY).valid).toBe(true);
    expect(d.answer).toMatchObject({ created: true });
    const list = JSON.parse(
      (d.publications!.find((p) => p.key === transitionsViewKey(REF))!.view as { text: string })
        .text,
    );
    expect(list.transitions.map((t: { to: string }) => t.to)).toEqual(['pending', 'settled']);
  });

  it('pending -> failed needs a reason_code; settled carries none', () => {
    const { events, views } = issued('pending');
    spec
      .given(events, { views })
      .when('transition', { to: 'failed' })
      .thenRefused('path.core.invalid_request', { field: 'reason_code' });
    spec
      .given(events, { views })
      .when('transition', { to: 'failed', reason_code: 'rail_rejected' })
      .then((e) => expect(e).toHaveLength(1));
    spec
      .given(events, { views })
      .when('transition', { to: 'settled', reason_code: 'expired', rail_references: RAIL })
      .thenRefused('path.core.invalid_request', { field: 'reason_code' });
    spec
      .given(events, { views })
      .when('transition', { to: 'settled' })
      .thenRefused('path.core.invalid_request', { field: 'rail_references' });
  });

  it('settled -> reversed', () => {
    const { events, views } = movedAlong(['pending', 'settled']);
    spec
      .given(events, { views })
      .when('transition', { to: 'reversed' })
      .then((e) => expect(e[0]).toMatchObject({ step: { from: 'settled', to: 'reversed' } }));
  });

  it('every move the table does not list is refused 409, with from and to', () => {
    const refused: [Status[], 'settled' | 'failed' | 'reversed'][] = [
      [['pending'], 'reversed'],
      [['pending', 'settled'], 'failed'],
      [['pending', 'failed'], 'settled'],
      [['pending', 'failed'], 'reversed'],
      [['pending', 'settled', 'reversed'], 'settled'],
      [['pending', 'settled', 'reversed'], 'failed'],
    ];
    for (const [path, to] of refused) {
      const { events, views } = movedAlong(path);
      const extra = to === 'failed' ? { reason_code: 'rail_rejected' as const } : {};
      spec
        .given(events, { views })
        .when('transition', { to, ...extra })
        .thenRefused('path.settlement.transition_invalid', { from: path.at(-1), to });
    }
  });

  it('re-stating the state held answers the current envelope and appends nothing', () => {
    const { events, views } = movedAlong(['pending', 'settled']);
    const d = spec.given(events, { views }).when('transition', { to: 'settled' }).thenNothing();
    expect((d.answer as { text: string }).text).toBe(views[REF]!.text);
  });

  it('only the issuer (the local member) moves a receipt; an unknown receipt is not found', () => {
    const { events, views } = issued('pending');
    spec
      .given(events, { views })
      .when('transition', { to: 'settled', rail_references: RAIL }, BETA)
      .thenRefused('path.auth.forbidden');
    spec.given([]).when('transition', { to: 'settled' }, LOCAL).thenRefused('path.core.not_found');
  });
});
