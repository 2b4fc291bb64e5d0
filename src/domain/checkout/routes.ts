// Routes of SPEC I (checkout sessions), as a table: each parses its body, picks the session's
// key and makes the ids. Every rule (the request must be open, a session's default expiry, the
// webhook policy) is decided by the aggregate, with the facts it reads itself.
import type { TSchema } from '@sinclair/typebox';
import { checkoutDecider } from './checkout.js';
import {
  CreateSession,
  SessionAttempted,
  SessionCompleted,
  SessionOpened,
  SessionRevoked,
  SessionView,
} from './schema.js';
import { isReferenceShaped, newReference } from '../../protocol/ids.js';
import type { RouteSpec } from '../../http/router.js';
import type { Handler } from '../../http/server.js';
import { ownerOf, type Services } from '../../http/services.js';
import { commandRoute, ownReference } from '../../http/routes/table.js';
import { linkOf, REQUEST_CLOSED } from '../request/routes.js';

export function checkoutRoutes(services: Services): RouteSpec<Handler>[] {
  return [...sessionOpening(services), ...sessionMoves(services)];
}

/** Opening a session, and reading it. */
function sessionOpening(services: Services): RouteSpec<Handler>[] {
  const what = 'checkout session';
  const decider = checkoutDecider;
  const path = '/checkout/sessions';
  return [
    commandRoute(services, {
      operation: 'checkout.create',
      summary: 'Open a checkout session',
      description:
        "Opens a checkout session on an open payment request of the caller's, with the " +
        'success and cancel links to hand the payer back to, and answers its id, reference and ' +
        'payer link (SPEC I).',
      method: 'POST',
      path,
      auth: 'member',
      idempotent: true,
      decider,
      command: 'open',
      what,
      body: CreateSession,
      responses: { 201: SessionOpened },
      errors: ['path.core.not_found', 'path.auth.forbidden', ...REQUEST_CLOSED],
      key: () => newReference('chk'),
      input: (_context, body, reference) => ({
        ...body,
        id: newReference('cs'),
        reference,
        url: linkOf(services, reference),
      }),
    }),
    // The merchant names a session by its id (cs_): the route index says which session holds it.
    commandRoute(services, {
      operation: 'checkout.get',
      summary: 'Read a checkout session',
      description:
        "Answers a checkout session, by its id, to the member that opened it; another member's " +
        'session answers 404 (SPEC I).',
      method: 'GET',
      path: `${path}/:id`,
      auth: 'member',
      decider,
      command: 'read',
      what,
      responses: { 200: SessionView },
      input: () => ({}),
      key: (context) => {
        const id = context.params.id ?? '';
        return isReferenceShaped(id, 'cs') ? ownerOf(services, id) : null;
      },
    }),
  ];
}

/** The payer-facing calls take the reference (chk_), never the id (SPEC I). */
function sessionMoves(services: Services): RouteSpec<Handler>[] {
  const move = <K extends 'attempt' | 'complete' | 'revoke'>(
    command: K,
    answer: TSchema,
    text: { summary: string; description: string },
  ) =>
    commandRoute(services, {
      ...text,
      operation: `checkout.${command}`,
      method: 'POST',
      path: `/checkout/sessions/:reference/${command}`,
      auth: 'member',
      decider: checkoutDecider,
      command,
      what: 'checkout session',
      responses: { 200: answer },
      errors: ['path.checkout.session_not_open', 'path.auth.forbidden'],
      key: ownReference(checkoutDecider),
      input: () => ({}),
    });
  return [
    move('attempt', SessionAttempted, {
      summary: 'Record an attempt to pay a checkout session',
      description:
        'Records that the calling member, the payer, is attempting to pay an open checkout ' +
        'session (the payer comes from the credential, never the body) and answers the ' +
        'attempts (SPEC I).',
    }),
    move('complete', SessionCompleted, {
      summary: 'Complete a checkout session',
      description:
        'Completes an open checkout session and answers its status completed and the success ' +
        'link to hand the payer back to (SPEC I).',
    }),
    move('revoke', SessionRevoked, {
      summary: 'Revoke a checkout session',
      description:
        'Revokes an open checkout session, as the operator, and answers its status revoked ' +
        '(SPEC I).',
    }),
  ];
}
