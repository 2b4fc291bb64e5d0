// Wire schemas of SPEC G (payment instructions).
import { Type } from '@sinclair/typebox';
import { Amount, Capability, PathAddress, Reference, validator } from '../../protocol/schemas.js';

export const CreateInstruction = Type.Object({
  request: Type.Optional(Reference('req', 'a request reference')),
  address: Type.Optional(PathAddress),
  via: Capability,
  amount: Type.Optional(Amount),
});

export const validateCreateInstruction = validator(CreateInstruction);
