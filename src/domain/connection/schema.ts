// Wire schemas and commands of SPEC K (connections, mandates, delegations).
import { Type } from '@sinclair/typebox';
import { Decimal, MemberName, Reference, Rfc3339, Text } from '../../protocol/schemas.js';

const Currency = Text({ maxLength: 64 });
const CapabilityName = Type.String({ minLength: 1, maxLength: 64 });

export const CreateConnection = Type.Object({
  grantee: MemberName,
  subject_id: Reference('sub', 'a subject id'),
  capabilities: Type.Record(CapabilityName, Type.Boolean(), { maxProperties: 64 }),
  mode: Type.Union([Type.Literal('per_operation_signature'), Type.Literal('persistent_consent')]),
  max_single: Decimal,
  max_total: Decimal,
  currency: Currency,
  expires_at: Rfc3339,
  schedule: Type.Optional(
    Type.Object({
      interval: Type.String({ maxLength: 128 }),
      max_per_period: Decimal,
    }),
  ),
});

export const Consume = Type.Object({
  capability: Text({ maxLength: 64 }),
  amount: Decimal,
  currency: Currency,
  operation_ref: Text({ maxLength: 256 }),
});

export const DelegationConsume = Type.Object({
  capability: Text({ maxLength: 64 }),
  amount: Decimal,
  currency: Currency,
  destination_commitment: Text({ maxLength: 256 }),
  operation_ref: Text({ maxLength: 256 }),
});

export const Revoke = Type.Object({ reason: Type.Optional(Text({ maxLength: 1024 })) });

export const CreateDelegation = Type.Object({
  delegate: MemberName,
  capability: Text({ maxLength: 64 }),
  amount: Decimal,
  currency: Currency,
  destination_commitment: Text({ maxLength: 256 }),
  max_total: Type.Optional(Decimal),
  expires_at: Rfc3339,
});

/** A fresh reference, made by the route (P9). */
const WithReference = Type.Object({ reference: Type.String() });
/** The delegation a command concerns, inside its parent connection's aggregate. */
const Delegation = Type.Object({ delegation: Type.String({ pattern: '^dlg_[0-9a-f]{32}$' }) });

/**
 * The connection aggregate's commands and their inputs. A delegation lives in its parent
 * connection's aggregate (found through the route index), so its commands go there too.
 */
export const connectionCommands = {
  /** The local member (the grantor) creates a connection for one of its subjects. */
  create: Type.Intersect([CreateConnection, WithReference]),
  /** Either party reads the connection, signed at read. */
  read: Type.Object({}),
  /** Either party asks the length of the usage log (the route then reads its page). */
  usage: Type.Object({}),
  /** The grantee consumes. */
  consume: Consume,
  /** Either party revokes (the grantor withdraws, the grantee renounces). */
  revoke: Revoke,
  /** The grantor cuts a delegation under a fresh reference. */
  'create-delegation': Type.Intersect([CreateDelegation, WithReference]),
  'read-delegation': Delegation,
  'usage-delegation': Delegation,
  /** The named delegate consumes exactly what the delegation binds. */
  'consume-delegation': Type.Intersect([DelegationConsume, Delegation]),
  /** The grantor, the parent grantee or the delegate revokes. */
  'revoke-delegation': Type.Intersect([Revoke, Delegation]),
};
