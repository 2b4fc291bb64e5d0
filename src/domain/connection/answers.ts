// What the connection aggregate answers (SPEC K), as schemas for the OpenAPI document (P19):
// the objects signed at read (objects.ts), the consent and binds signed at creation (grant.ts),
// the counters after a consume (consume.ts) and the usage page (routes.ts).
import { Type } from '@sinclair/typebox';
import { Digest, Member, Nullable, OneOf, Signed } from '../../protocol/responses.js';
import { Decimal, Reference, Rfc3339 } from '../../protocol/schemas.js';

const ConnectionReference = Reference('con', 'a connection reference');
const DelegationReference = Reference('dlg', 'a delegation reference');
const Status = OneOf(['active', 'revoked', 'expired'] as const);
const Capabilities = Type.Record(Type.String(), Type.Boolean());
const Schedule = Type.Object({ interval: Type.String(), max_per_period: Decimal });

const Counters = {
  consumed_total: Decimal,
  consumed_operations: Type.Integer({ minimum: 0 }),
  remaining_total: Decimal,
};

const Revocation = { revoked_at: Nullable(Rfc3339), revoked_by: Nullable(Member) };

/** The subject's consent, as the operator collected it (signed once, at creation). */
export const ConsentObject = Signed(
  {
    type: Type.Literal('path.consent'),
    connection: ConnectionReference,
    grantor: Member,
    grantee: Member,
    subject_id: Reference('sub', 'a subject id'),
    capabilities: Capabilities,
    mode: Type.String(),
    max_single: Decimal,
    max_total: Decimal,
    currency: Type.String(),
    expires_at: Rfc3339,
    schedule: Type.Optional(Schedule),
    collected_at: Rfc3339,
  },
  "a connection's consent, signed (SPEC K)",
);

export const ConnectionCreated = Type.Object({
  reference: ConnectionReference,
  grantee: Member,
  status: Type.Literal('active'),
  mode: Type.String(),
  consent_digest: Digest,
  expires_at: Rfc3339,
});

export const ConnectionObject = Signed(
  {
    type: Type.Literal('path.connection'),
    reference: ConnectionReference,
    grantor: Member,
    grantee: Member,
    subject_id: Reference('sub', 'a subject id'),
    status: Status,
    mode: Type.String(),
    capabilities: Capabilities,
    max_single: Decimal,
    max_total: Decimal,
    currency: Type.String(),
    expires_at: Rfc3339,
    schedule: Nullable(Schedule),
    consent_digest: Digest,
    consent: ConsentObject,
    ...Counters,
    ...Revocation,
  },
  'a connection, signed at read: terms as consented, status and counters as they are now',
);

const BindsTo = Type.Object({
  capability: Type.String(),
  amount: Decimal,
  currency: Type.String(),
  destination_commitment: Type.String(),
});

/** What a delegation binds its delegate to (signed once, at creation). */
export const BindsObject = Signed(
  {
    type: Type.Literal('path.delegation.binds'),
    delegation: DelegationReference,
    connection: ConnectionReference,
    grantor: Member,
    delegate: Member,
    binds_to: BindsTo,
    max_total: Decimal,
    expires_at: Rfc3339,
  },
  "a delegation's binds, signed (SPEC K)",
);

export const DelegationCreated = Type.Object({
  reference: DelegationReference,
  delegate: Member,
  status: Type.Literal('active'),
  binds_digest: Digest,
  expires_at: Rfc3339,
});

export const DelegationObject = Signed(
  {
    type: Type.Literal('path.delegation'),
    reference: DelegationReference,
    connection: ConnectionReference,
    delegate: Member,
    status: Status,
    binds_to: BindsTo,
    max_total: Decimal,
    expires_at: Rfc3339,
    binds: BindsObject,
    binds_digest: Digest,
    ...Counters,
    ...Revocation,
  },
  'a delegation, signed at read: terms as bound, status and counters as they are now',
);

export const Consumed = Type.Object({ ok: Type.Literal(true), ...Counters });

/** A delegated consume: the delegation's counters and what remains of its parent's ceiling. */
export const DelegationConsumed = Type.Object({
  ok: Type.Literal(true),
  ...Counters,
  parent_consumed_total: Decimal,
  parent_remaining_total: Decimal,
});

/** A revocation as recorded; a second revoke answers the first. */
export const Revoked = Type.Object({
  reference: Type.String(),
  status: Type.Literal('revoked'),
  revoked_at: Rfc3339,
  revoked_by: Member,
});

/** A usage page (SPEC K, P12): the most recent rows, oldest first, and the log's length. */
export const UsagePage = Type.Object({
  reference: Type.String(),
  count: Type.Integer({ minimum: 0 }),
  total: Type.Integer({ minimum: 0 }),
  usage: Type.Array(
    Type.Object({
      capability: Type.String(),
      amount: Decimal,
      currency: Type.String(),
      operation_ref: Type.String(),
      occurred_at: Rfc3339,
      destination_commitment: Type.Optional(Type.String()),
      delegation: Type.Optional(DelegationReference),
    }),
  ),
});
