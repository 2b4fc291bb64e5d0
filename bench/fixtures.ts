// Real objects for the benchmarks: a typical payee receipt request, the signed envelope and the
// log record the receipt decider makes from it. Nothing here is hand-written JSON of an envelope:
// it all comes from the node's own decider, so the sizes and shapes are the ones the node writes.
import { DEFAULT_LIMITS } from '../src/config.js';
import { isRefusal, type DecideContext } from '../src/domain/decider.js';
import { receiptDecider, type ReceiptEvent, type ReceiptState } from '../src/domain/receipt/receipt.js';
import type { TableWrite } from '../src/log/log.js';
import { stateRows } from '../src/reads/rows.js';
import { newReference } from '../src/protocol/ids.js';
import { generateSeedHex, signingKeyFromSeed, type SigningKey } from '../src/protocol/signing.js';

/** The body of a typical `POST /receipts` (as in test/receipts.test.ts). */
export const PAYEE_RECEIPT_BODY = {
  issued_by: 'payee',
  via: { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' },
  received: { value: '10.50', asset_type: 'fiat', asset_code: 'EUR' },
  rail_references: [{ type: 'book_entry', value: 'BE-1' }],
  payer: { member: 'beta' },
} as const;

/**
 * A log record as src/actors/shard.ts writes it: the events of one command for one aggregate,
 * marked as one whose state its commit also wrote as a `states` row (`w: 1`, issue 33).
 */
export interface ReceiptLogRecord {
  a: 'receipt';
  k: string;
  e: ReceiptEvent[];
  t: number;
  w: 1;
}

export interface IssuedReceipt {
  reference: string;
  /** The signed envelope as the node stores and serves it. */
  envelopeText: string;
  events: ReceiptEvent[];
}

export const MEMBER = 'local';

export function freshSigningKey(): SigningKey {
  return signingKeyFromSeed(generateSeedHex().seedHex);
}

/** Runs the receipt decider's `issue` exactly as a shard does. */
export function issueReceipt(key: SigningKey, now: number, reference = newReference('rcp')): IssuedReceipt {
  const input = { ...PAYEE_RECEIPT_BODY, via: { ...PAYEE_RECEIPT_BODY.via }, received: { ...PAYEE_RECEIPT_BODY.received },
    rail_references: [...PAYEE_RECEIPT_BODY.rail_references], payer: { ...PAYEE_RECEIPT_BODY.payer }, reference };
  const context: DecideContext = { now, member: MEMBER, signer: key, newId: newReference, limits: DEFAULT_LIMITS, views: new Map(), dev: false };
  const decision = receiptDecider.decide({ name: 'issue', input, caller: { member: MEMBER, local: true } }, null, context);
  if (isRefusal(decision)) throw new Error(`the receipt fixture was refused: ${decision.message}`);
  if (!('text' in decision.answer)) throw new Error('the receipt decider answered no signed text');
  return { reference, envelopeText: decision.answer.text, events: decision.events };
}

/** The receipt's `states` row as the commit of its record writes it (seq: that record's). */
export function receiptStateRow(issued: IssuedReceipt, seq: number): TableWrite {
  const state = issued.events.reduce<ReceiptState | null>(receiptDecider.evolve, null);
  return stateRows.write(issued.reference, { a: 'receipt', q: seq, s: state });
}

export function receiptRecord(issued: IssuedReceipt, now: number): ReceiptLogRecord {
  return { a: 'receipt', k: issued.reference, e: issued.events, t: now, w: 1 };
}
