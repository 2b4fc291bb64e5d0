// Wire schemas and commands of SPEC I (checkout sessions).
import { Type } from '@sinclair/typebox';
import { HttpUrl as Url, Reference, Rfc3339, validator } from '../../protocol/schemas.js';

export const CreateSession = Type.Object({
  request_reference: Reference('req', 'a request reference'),
  success_url: Url,
  cancel_url: Url,
  webhook_url: Type.Optional(Url),
  expires_at: Type.Optional(Rfc3339),
});

export const validateCreateSession = validator(CreateSession);

/** The checkout aggregate's commands and their inputs. */
export const checkoutCommands = {
  /**
   * The merchant opens a session on one of its open requests. `id` is the merchant-side handle,
   * `reference` the payer-facing one, `url` the payer's link (P4) made from the base URL.
   */
  open: Type.Intersect([
    CreateSession,
    Type.Object({
      id: Type.String({ pattern: '^cs_[0-9a-f]{32}$' }),
      reference: Type.String({ pattern: '^chk_[0-9a-f]{32}$' }),
      url: Type.String(),
    }),
  ]),
  /** The merchant reads its session. */
  read: Type.Object({}),
  /** A payer tries to pay: open -> open. */
  attempt: Type.Object({}),
  complete: Type.Object({}),
  /** The merchant withdraws it. */
  revoke: Type.Object({}),
  /** Time passes: expiry. */
  tick: Type.Null(),
};
