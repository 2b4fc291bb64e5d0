// Wire schemas and commands of SPEC H (payment requests).
import { Type } from '@sinclair/typebox';
import { Nullable, OneOf } from '../../protocol/responses.js';
import { Amount, Capability, Reference, Rfc3339, Text } from '../../protocol/schemas.js';

export const CreateRequest = Type.Object({
  amount: Type.Optional(Amount),
  accepts: Type.Array(Capability, { minItems: 1, maxItems: 64 }),
  address_id: Type.Optional(Reference('adr', 'an address id')),
  order_reference: Type.Optional(Text({ maxLength: 256 })),
  expires_at: Type.Optional(Rfc3339),
});

/** The request aggregate's commands and their inputs. */
export const requestCommands = {
  /**
   * Create; bound to the standing intent of `address_id` when given. `url` is the payer's link
   * (P4), made by the front end from its base URL and returned on creation only.
   */
  create: Type.Intersect([
    CreateRequest,
    Type.Object({ reference: Type.String({ pattern: '^req_[0-9a-f]{32}$' }), url: Type.String() }),
  ]),
  /** Any member marks it paid. */
  paid: Type.Object({}),
  /** The issuer withdraws it. */
  revoke: Type.Object({}),
  /** Time passes: expiry. */
  tick: Type.Null(),
};

const RequestReference = Reference('req', 'a request reference');

/** What creating a request answers: the payer's link (P4) is given here only. */
export const RequestCreated = Type.Object({
  reference: RequestReference,
  url: Type.String(),
  status: Type.Literal('created'),
  expires_at: Nullable(Rfc3339),
});

/** What marking paid or revoking answers. */
export const RequestMoved = Type.Object({
  reference: RequestReference,
  status: OneOf(['paid', 'revoked'] as const),
});
