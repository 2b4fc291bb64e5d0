// Wire schemas and commands of SPEC I (checkout sessions).
import { Type } from '@sinclair/typebox';
import { Member, Nullable, OneOf } from '../../protocol/responses.js';
import { HttpUrl as Url, Reference, Rfc3339 } from '../../protocol/schemas.js';

export const CreateSession = Type.Object({
  request_reference: Reference('req', 'a request reference'),
  success_url: Url,
  cancel_url: Url,
  webhook_url: Type.Optional(Url),
  expires_at: Type.Optional(Rfc3339),
});

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

const SessionId = Reference('cs', 'a checkout session id');
const SessionReference = Reference('chk', 'a checkout reference');
/** A session's statuses, named once: the decider's type and the answer's schema both read it. */
export const SESSION_STATUSES = ['open', 'completed', 'expired', 'revoked'] as const;
const SessionStatus = OneOf(SESSION_STATUSES);

/** What opening a session answers: both handles and the payer's link (P4). */
export const SessionOpened = Type.Object({
  id: SessionId,
  reference: SessionReference,
  url: Type.String(),
  status: Type.Literal('open'),
  request_reference: Reference('req', 'a request reference'),
  success_url: Type.String(),
  cancel_url: Type.String(),
  expires_at: Rfc3339,
});

/** The merchant's view of its session. */
export const SessionView = Type.Object({
  id: SessionId,
  reference: SessionReference,
  status: SessionStatus,
  request_reference: Reference('req', 'a request reference'),
  success_url: Type.String(),
  cancel_url: Type.String(),
  payer_member: Nullable(Member),
  attempts: Type.Integer({ minimum: 0 }),
  expires_at: Rfc3339,
  completed_at: Nullable(Rfc3339),
});

/** The data of the session events (P11): the merchant's view and when it was revoked. */
export const SessionEventData = Type.Composite([
  SessionView,
  Type.Object({ revoked_at: Nullable(Rfc3339) }),
]);

export const SessionAttempted = Type.Object({
  reference: SessionReference,
  attempts: Type.Integer({ minimum: 1 }),
});

export const SessionCompleted = Type.Object({
  reference: SessionReference,
  status: Type.Literal('completed'),
  completed_at: Rfc3339,
  success_url: Type.String(),
});

export const SessionRevoked = Type.Object({
  reference: SessionReference,
  status: Type.Literal('revoked'),
  revoked_at: Rfc3339,
});
