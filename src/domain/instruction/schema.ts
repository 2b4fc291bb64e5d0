// Wire schemas of SPEC G (payment instructions).
import { Type } from '@sinclair/typebox';
import { Amount, Capability, validator } from '../../protocol/schemas.js';

export const CreateInstruction = Type.Object({
  request: Type.Optional(Type.String({ pattern: '^req_[0-9a-f]{32}$' })),
  address: Type.Optional(Type.String({ pattern: '^path:[A-Za-z0-9]{1,64}$' })),
  via: Capability,
  amount: Type.Optional(Amount),
});

export const validateCreateInstruction = validator(CreateInstruction);
