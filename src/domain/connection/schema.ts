// Wire schemas of SPEC K (connections, mandates, delegations).
import { Type } from '@sinclair/typebox';
import {
  Decimal, MemberName, Reference, Rfc3339, Text, validator,
} from '../../protocol/schemas.js';

const Currency = Text({ maxLength: 64 });

export const CreateConnection = Type.Object({
  grantee: MemberName,
  subject_id: Reference('sub', 'a subject id'),
  capabilities: Type.Record(Type.String({ minLength: 1, maxLength: 64 }), Type.Boolean(), { maxProperties: 64 }),
  mode: Type.Union([Type.Literal('per_operation_signature'), Type.Literal('persistent_consent')]),
  max_single: Decimal,
  max_total: Decimal,
  currency: Currency,
  expires_at: Rfc3339,
  schedule: Type.Optional(Type.Object({ interval: Type.String({ maxLength: 128 }), max_per_period: Decimal })),
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

export const validateCreateConnection = validator(CreateConnection);
export const validateConsume = validator(Consume);
export const validateDelegationConsume = validator(DelegationConsume);
export const validateRevoke = validator(Revoke);
export const validateCreateDelegation = validator(CreateDelegation);
