// What the lookups and their confirmation answer (SPEC D, P17), as schemas for the OpenAPI
// document (P19): the signed answer of budget.ts signAnswers, the unsigned one of a batch,
// a batch item that did not normalise, and the holder's confirmation of confirm.ts.
import { Type } from '@sinclair/typebox';
import { ErrorEnvelope, Member, Nullable, Signed } from '../../protocol/responses.js';
import { Sha256Hex } from '../../protocol/schemas.js';

const Found = {
  identifier_type: Type.String(),
  identifier_hash: Sha256Hex,
  found: Type.Boolean(),
  member: Nullable(Member),
  endpoint: Nullable(Type.String()),
};

export const SonarAnswer = Signed(
  {
    kind: Type.Literal('sonar_answer'),
    ...Found,
    requester: Member,
    nonce: Nullable(Type.String()),
  },
  'a lookup answer, signed (SPEC D): the same shape whether found or not',
);

const UnsignedAnswer = Type.Object(Found, { description: 'a lookup answer of an unsigned batch' });

const ItemRefused = Type.Object(
  { identifier_type: Type.String(), error: ErrorEnvelope.properties.error },
  { description: 'a batch item that did not normalise (P17): not looked up, not charged' },
);

export const BatchAnswer = Type.Object({
  count: Type.Integer({ minimum: 1 }),
  signed: Type.Boolean(),
  results: Type.Array(Type.Union([SonarAnswer, UnsignedAnswer, ItemRefused])),
});

export const HolderConfirmation = Signed(
  {
    kind: Type.Literal('holder_confirmation'),
    identifier_type: Type.String(),
    identifier_hash: Sha256Hex,
    member: Member,
    requester: Nullable(Type.String()),
    nonce: Nullable(Type.String()),
    held: Type.Boolean(),
  },
  "the holder's confirmation of a lookup answer, signed (SPEC D)",
);
