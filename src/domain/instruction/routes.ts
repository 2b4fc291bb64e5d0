// Routes of SPEC G: payment instructions.
import { instructionDecider } from './instruction.js';
import { CreateInstruction, InstructionRevoked } from './schema.js';
import { newReference } from '../../protocol/ids.js';
import { InstructionObject } from '../../protocol/responses.js';
import type { RouteSpec } from '../../http/router.js';
import type { Handler } from '../../http/server.js';
import type { Services } from '../../http/services.js';
import { commandRoute, ownReference, publicRead } from '../../http/routes/table.js';

export function instructionRoutes(services: Services): RouteSpec<Handler>[] {
  const what = 'instruction';
  return [
    commandRoute(services, {
      operation: 'instructions.create',
      summary: 'Issue a payment instruction',
      description:
        'Issues a signed payment instruction for a payment request (no credential needed) or ' +
        "for an address alone (a member's, recorded as obtaining it), by one of the accepted " +
        'ways, and answers it (SPEC G).',
      method: 'POST',
      path: '/instructions',
      auth: 'optional',
      idempotent: true,
      decider: instructionDecider,
      command: 'issue',
      what,
      body: CreateInstruction,
      responses: { 201: InstructionObject },
      errors: [
        'path.core.not_found',
        'path.auth.forbidden',
        'path.request.expired',
        'path.request.revoked',
        'path.request.not_open',
        'path.address.revoked',
        'path.address.capability_not_accepted',
      ],
      key: () => newReference('ins'),
      input: (_context, body, reference) => ({ ...body, reference }),
    }),
    publicRead(services, {
      operation: 'instructions.get',
      summary: 'Read a payment instruction',
      description:
        'Answers the signed payment instruction to anyone; once used, expired or revoked it ' +
        'answers 410 with its code (SPEC G).',
      path: '/instructions/:reference',
      decider: instructionDecider,
      what,
      object: InstructionObject,
      gone: ['path.instruction.used', 'path.instruction.expired', 'path.instruction.revoked'],
    }),
    commandRoute(services, {
      operation: 'instructions.revoke',
      summary: 'Revoke a payment instruction',
      description:
        'Revokes an open payment instruction, as the member that issued it, and answers its ' +
        'status (SPEC G).',
      method: 'POST',
      path: '/instructions/:reference/revoke',
      auth: 'member',
      decider: instructionDecider,
      command: 'revoke',
      what,
      responses: { 200: InstructionRevoked },
      errors: [
        'path.auth.forbidden',
        'path.instruction.used',
        'path.instruction.expired',
        'path.instruction.revoked',
      ],
      key: ownReference(instructionDecider),
      input: () => ({}),
    }),
  ];
}
