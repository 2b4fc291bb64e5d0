// Routes of SPEC G: payment instructions.
import { instructionDecider } from '../../domain/instruction/instruction.js';
import { validateCreateInstruction } from '../../domain/instruction/schema.js';
import { newReference } from '../../protocol/ids.js';
import type { RouteSpec } from '../router.js';
import type { Handler } from '../server.js';
import type { Services } from '../services.js';
import { commandRoute, ownReference, publicRead } from './table.js';

export function instructionRoutes(services: Services): RouteSpec<Handler>[] {
  const what = 'instruction';
  return [
    commandRoute(services, {
      operation: 'instructions.create',
      method: 'POST',
      path: '/instructions',
      auth: 'optional',
      idempotent: true,
      decider: instructionDecider,
      command: 'issue',
      what,
      body: validateCreateInstruction,
      key: () => newReference('ins'),
      input: (_context, body, reference) => ({ ...body, reference }),
    }),
    publicRead(services, {
      operation: 'instructions.get',
      path: '/instructions/:reference',
      decider: instructionDecider,
      what,
    }),
    commandRoute(services, {
      operation: 'instructions.revoke',
      method: 'POST',
      path: '/instructions/:reference/revoke',
      auth: 'member',
      decider: instructionDecider,
      command: 'revoke',
      what,
      key: ownReference(instructionDecider),
      input: () => ({}),
    }),
  ];
}
