// Wire schemas of SPEC H (payment requests).
import { Type } from '@sinclair/typebox';
import { Amount, Capability, Reference, Rfc3339, Text, validator } from '../../protocol/schemas.js';

export const CreateRequest = Type.Object({
  amount: Type.Optional(Amount),
  accepts: Type.Array(Capability, { minItems: 1, maxItems: 64 }),
  address_id: Type.Optional(Reference('adr', 'an address id')),
  order_reference: Type.Optional(Text({ maxLength: 256 })),
  expires_at: Type.Optional(Rfc3339),
});

export const validateCreateRequest = validator(CreateRequest);
