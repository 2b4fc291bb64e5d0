// Wire schemas of the receipt routes (SPEC J).
import { Type, type Static } from '@sinclair/typebox';
import {
  Amount,
  Capability,
  Fee,
  MemberName,
  RailReference,
  Reference,
  Text,
} from '../../protocol/schemas.js';

export const REASON_CODES = [
  'rail_unavailable',
  'rail_rejected',
  'destination_unknown',
  'destination_closed',
  'limit_exceeded',
  'compliance_blocked',
  'insufficient_funds',
  'expired',
] as const;
export type ReasonCode = (typeof REASON_CODES)[number];

const ReasonCodeSchema = Type.Union(REASON_CODES.map((c) => Type.Literal(c)));
const RAIL_REFERENCES_MAX = 64; // tidy: format (SPEC J bounds a receipt's rail references)
const Party = Type.Object({ member: MemberName });
const RequestReference = Reference('req', 'a request reference');
const InstructionReference = Reference('ins', 'an instruction reference');

export const IssueReceipt = Type.Object({
  issued_by: Type.Union([Type.Literal('payer'), Type.Literal('payee')]),
  request: Type.Optional(Type.Union([Type.Null(), RequestReference])),
  instruction: Type.Optional(Type.Union([Type.Null(), InstructionReference])),
  via: Capability,
  sent: Type.Optional(Type.Union([Type.Null(), Amount])),
  received: Type.Optional(Type.Union([Type.Null(), Amount])),
  fx: Type.Optional(Type.Union([Type.Null(), Type.Object({})])),
  fees: Type.Optional(Type.Array(Fee, { maxItems: 32 })),
  rail_references: Type.Optional(Type.Array(RailReference, { maxItems: RAIL_REFERENCES_MAX })),
  attestations: Type.Optional(Type.Array(Type.Unknown(), { maxItems: 32 })),
  status: Type.Optional(
    Type.Union([Type.Literal('pending'), Type.Literal('settled'), Type.Literal('failed')]),
  ),
  reason_code: Type.Optional(Type.Union([Type.Null(), ReasonCodeSchema])),
  reason: Type.Optional(Text()),
  payer: Type.Optional(Party),
  payee: Type.Optional(Party),
});
export type IssueReceiptInput = Static<typeof IssueReceipt>;

export const TransitionReceipt = Type.Object({
  to: Type.Union([Type.Literal('settled'), Type.Literal('failed'), Type.Literal('reversed')]),
  reason_code: Type.Optional(Type.Union([Type.Null(), ReasonCodeSchema])),
  reason: Type.Optional(Text()),
  rail_references: Type.Optional(Type.Array(RailReference, { maxItems: RAIL_REFERENCES_MAX })),
});
export type TransitionReceiptInput = Static<typeof TransitionReceipt>;

export const VerifyReceipt = Type.Object({
  envelope: Type.Object({}),
  issuer_public_key: Type.String({ maxLength: 128 }),
});

/** The receipt aggregate's commands and their inputs. */
export const receiptCommands = {
  /** Issue a receipt under a fresh reference (made by the route). */
  issue: Type.Intersect([IssueReceipt, Type.Object({ reference: Type.String() })]),
  /** Move it (its issuer only). */
  transition: TransitionReceipt,
};

/** What checking an envelope answers (SPEC J): valid, or why not. */
export const VerifyAnswer = Type.Object({
  valid: Type.Boolean(),
  reason: Type.Optional(Type.String()),
});
