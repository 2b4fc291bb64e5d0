// Routes of SPEC H (payment requests) and I (checkout sessions), as a table: each parses its
// body, picks its aggregate's key and makes the ids. Every rule (an address's terms, who may
// open or revoke, the request must be open, a session's default expiry, the webhook policy) is
// decided by the aggregate, with the facts it reads itself.
import type { TSchema } from '@sinclair/typebox';
import { checkoutDecider } from '../../domain/checkout/checkout.js';
import {
  CreateSession,
  SessionAttempted,
  SessionCompleted,
  SessionOpened,
  SessionRevoked,
  SessionView,
} from '../../domain/checkout/schema.js';
import { requestDecider } from '../../domain/request/request.js';
import { CreateRequest, RequestCreated, RequestMoved } from '../../domain/request/schema.js';
import type { ErrorCode } from '../../protocol/errors.js';
import { isReferenceShaped, newReference } from '../../protocol/ids.js';
import { RequestObject } from '../../protocol/responses.js';
import type { RouteSpec } from '../router.js';
import type { Handler } from '../server.js';
import { ownerOf, type Services } from '../services.js';
import { commandRoute, ownReference, publicRead } from './table.js';

export function paymentRoutes(services: Services): RouteSpec<Handler>[] {
  return [
    ...requestRoutes(services),
    ...requestMoves(services),
    ...checkoutRoutes(services),
    ...sessionMoves(services),
  ];
}

/** The payer's link to a signed object (P4), from the configured base URL. */
const linkOf = (services: Services, reference: string) =>
  `${services.config.baseUrl}/path/${reference}`;

/** A request no longer open (P7: 410 where SPEC has a code, else 409). */
const REQUEST_CLOSED = [
  'path.request.expired',
  'path.request.revoked',
  'path.request.not_open',
] as const satisfies readonly ErrorCode[];

/** Creating a request, and reading it. */
function requestRoutes(services: Services): RouteSpec<Handler>[] {
  const what = 'request';
  const decider = requestDecider;
  const path = '/requests';
  return [
    commandRoute(services, {
      operation: 'requests.create',
      summary: 'Create a payment request',
      description:
        'Creates a payment request for an amount (or one the payer chooses) payable in the ' +
        "accepted ways, optionally bound to an address's standing intent, and answers its " +
        'reference, link and status created (SPEC H).',
      method: 'POST',
      path,
      auth: 'member',
      idempotent: true,
      decider,
      command: 'create',
      what,
      body: CreateRequest,
      responses: { 201: RequestCreated },
      errors: [
        'path.core.not_found',
        'path.address.revoked',
        'path.address.capability_not_accepted',
      ],
      key: () => newReference('req'),
      input: (_context, body, reference) => ({
        ...body,
        reference,
        url: linkOf(services, reference),
      }),
    }),
    publicRead(services, {
      operation: 'requests.get',
      summary: 'Read a payment request',
      description:
        'Answers the signed payment request to anyone; an expired or revoked one answers 410 ' +
        'with its code (SPEC H).',
      path: `${path}/:reference`,
      decider,
      what,
      object: RequestObject,
      gone: ['path.request.expired', 'path.request.revoked'],
    }),
  ];
}

/** Marking a request paid, and revoking it. */
function requestMoves(services: Services): RouteSpec<Handler>[] {
  const what = 'request';
  const decider = requestDecider;
  const key = ownReference(decider);
  const path = '/requests';
  return [
    commandRoute(services, {
      operation: 'requests.paid',
      summary: 'Mark a payment request paid',
      description:
        'Marks a payment request paid and answers its status; marking a paid request again ' +
        'is not an error and changes nothing. It issues no receipt (SPEC H).',
      method: 'POST',
      path: `${path}/:reference/paid`,
      auth: 'member',
      decider,
      command: 'paid',
      what,
      responses: { 200: RequestMoved },
      errors: REQUEST_CLOSED,
      key,
      input: () => ({}),
    }),
    commandRoute(services, {
      operation: 'requests.revoke',
      summary: 'Revoke a payment request',
      description:
        'Revokes an open payment request, as its issuer only, and answers its status revoked ' +
        '(SPEC H).',
      method: 'POST',
      path: `${path}/:reference/revoke`,
      auth: 'member',
      decider,
      command: 'revoke',
      what,
      responses: { 200: RequestMoved },
      errors: ['path.auth.forbidden', ...REQUEST_CLOSED],
      key,
      input: () => ({}),
    }),
  ];
}

/** Opening a session, and reading it. */
function checkoutRoutes(services: Services): RouteSpec<Handler>[] {
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
