// Routes of SPEC H (payment requests), as a table: each parses its body, picks the request's
// key and makes the ids. Every rule (an address's terms, who may open or revoke, the request
// must be open) is decided by the aggregate, with the facts it reads itself.
import { requestDecider } from './request.js';
import { CreateRequest, RequestCreated, RequestMoved } from './schema.js';
import type { ErrorCode } from '../../protocol/errors.js';
import { newReference } from '../../protocol/ids.js';
import { RequestObject } from '../../protocol/responses.js';
import type { RouteSpec } from '../../http/router.js';
import type { Handler } from '../../http/server.js';
import type { Services } from '../../http/services.js';
import { commandRoute, ownReference, publicRead } from '../../http/routes/table.js';

export function requestRoutes(services: Services): RouteSpec<Handler>[] {
  return [...requestOpening(services), ...requestMoves(services)];
}

/** The payer's link to a signed object (P4), from the configured base URL. */
export const linkOf = (services: Services, reference: string) =>
  `${services.config.baseUrl}/path/${reference}`;

/** A request no longer open (P7: 410 where SPEC has a code, else 409). */
export const REQUEST_CLOSED = [
  'path.request.expired',
  'path.request.revoked',
  'path.request.not_open',
] as const satisfies readonly ErrorCode[];

/** Creating a request, and reading it. */
function requestOpening(services: Services): RouteSpec<Handler>[] {
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
