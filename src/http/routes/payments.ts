// Routes of SPEC H (payment requests) and I (checkout sessions), as a table: each parses its
// body, picks its aggregate's key and makes the ids. Every rule (an address's terms, who may
// open or revoke, the request must be open, a session's default expiry, the webhook policy) is
// decided by the aggregate, with the facts it reads itself.
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
  return [...requestRoutes(services), ...checkoutRoutes(services)];
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

function requestRoutes(services: Services): RouteSpec<Handler>[] {
  const what = 'request';
  const decider = requestDecider;
  const key = ownReference(decider);
  const path = '/requests';
  return [
    commandRoute(services, {
      operation: 'requests.create',
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
      path: `${path}/:reference`,
      decider,
      what,
      object: RequestObject,
      gone: ['path.request.expired', 'path.request.revoked'],
    }),
    commandRoute(services, {
      operation: 'requests.paid',
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

function checkoutRoutes(services: Services): RouteSpec<Handler>[] {
  const what = 'checkout session';
  const decider = checkoutDecider;
  const key = ownReference(decider);
  const path = '/checkout/sessions';
  return [
    commandRoute(services, {
      operation: 'checkout.create',
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
    // The payer-facing calls take the reference (chk_), never the id (SPEC I).
    ...(
      [
        ['attempt', SessionAttempted],
        ['complete', SessionCompleted],
        ['revoke', SessionRevoked],
      ] as const
    ).map(([command, answer]) =>
      commandRoute(services, {
        operation: `checkout.${command}`,
        method: 'POST',
        path: `${path}/:reference/${command}`,
        auth: 'member',
        decider,
        command,
        what,
        responses: { 200: answer },
        errors: ['path.checkout.session_not_open', 'path.auth.forbidden'],
        key,
        input: () => ({}),
      }),
    ),
  ];
}
