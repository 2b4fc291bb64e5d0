// Wire schemas and commands of SPEC G (payment instructions).
import { Type } from '@sinclair/typebox';
import { Amount, Capability, PathAddress, Reference, Rfc3339 } from '../../protocol/schemas.js';

export const CreateInstruction = Type.Object({
  request: Type.Optional(Reference('req', 'a request reference')),
  address: Type.Optional(PathAddress),
  via: Capability,
  amount: Type.Optional(Amount),
});

/** The instruction aggregate's commands and their inputs. */
export const instructionCommands = {
  /** Issue for a request or an address (exactly one), on the capability `via`. */
  issue: Type.Intersect([CreateInstruction, Type.Object({ reference: Type.String() })]),
  /** The issuer withdraws it. */
  revoke: Type.Object({}),
  /** A receipt names it (a follow-up of the receipt's commit). */
  use: Type.Object({ receipt: Type.String() }),
  /** Time passes: expiry. */
  tick: Type.Null(),
};

/** What revoking answers; a second revoke answers without the time. */
export const InstructionRevoked = Type.Object({
  reference: Reference('ins', 'an instruction reference'),
  status: Type.Literal('revoked'),
  revoked_at: Type.Optional(Rfc3339),
});
