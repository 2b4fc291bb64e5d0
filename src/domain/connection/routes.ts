// Routes of SPEC K (connections, mandates, delegations). A delegation lives in its parent
// connection's aggregate and is found through the route index. Who may do what, and whether the
// subject of a new connection exists, is the decider's to say; what a usage page holds, and that
// it is read only once the aggregate has said the caller is a party, is usage.ts's.
import { Type } from '@sinclair/typebox';
import {
  ConnectionCreated,
  ConnectionObject,
  Consumed,
  DelegationConsumed,
  DelegationCreated,
  DelegationObject,
  Revoked,
  UsagePage,
} from './answers.js';
import { connectionDecider } from './connection.js';
import { usagePage } from './usage.js';
import type { InputOf } from '../decider.js';
import {
  connectionCommands,
  Consume,
  CreateConnection,
  CreateDelegation,
  DelegationConsume,
  Revoke,
} from './schema.js';
import { invalid, type ErrorCode, type Refusal } from '../../protocol/errors.js';
import { isReferenceShaped, newReference } from '../../protocol/ids.js';
import { failure, json } from '../../http/reply.js';
import type { RouteSpec } from '../../http/router.js';
import type { Handler, RequestContext } from '../../http/server.js';
import {
  notFound,
  ownerOf,
  queryParams,
  submit,
  type Later,
  type Services,
} from '../../http/services.js';
import { commandRoute, ownReference } from '../../http/routes/table.js';

const decider = connectionDecider;

/** The delegation named by the path, as its commands take it. */
const delegation = (context: RequestContext) => ({ delegation: context.params.reference! });

/** A revocation's body is optional: an empty one reads as `{}`. */
const revokeBody = { body: Revoke, bodyOptional: true, responses: { 200: Revoked } };

/** Refusals of a consume (P7): out of scope, over a ceiling, or no longer active. */
const CONSUME_ERRORS: readonly ErrorCode[] = [
  'path.auth.forbidden',
  'path.connect.delegation_out_of_scope',
  'path.connect.delegation_limit_reached',
  'path.connect.revoked',
  'path.connect.expired',
];

/** Refusals of a new delegation: beyond its parent's scope, or a parent no longer active. */
const CREATE_DELEGATION_ERRORS: readonly ErrorCode[] = [
  'path.auth.forbidden',
  'path.connect.delegation_out_of_scope',
  'path.connect.revoked',
  'path.connect.expired',
];

const member = { decider, auth: 'member' as const };
const connections = '/connect/connections';
const delegations = '/connect/delegations';

export function connectRoutes(services: Services): RouteSpec<Handler>[] {
  return [
    ...connectionRoutes(services),
    ...underConnection(services),
    ...delegationRoutes(services),
  ];
}

/** Routes on a connection, found by its own reference. */
function connectionRoutes(services: Services): RouteSpec<Handler>[] {
  const onConnection = { ...member, what: 'connection', key: ownReference(decider) };
  return [
    commandRoute(services, {
      ...onConnection,
      operation: 'connections.create',
      summary: 'Grant a connection to another member',
      description:
        'Grants another member (the grantee) a connection to act for a subject within ' +
        'capabilities, ceilings, a currency and an expiry, as the operator whose product ' +
        'collected the consent, and answers its reference and consent digest (SPEC K).',
      method: 'POST',
      path: connections,
      idempotent: true,
      command: 'create',
      body: CreateConnection,
      responses: { 201: ConnectionCreated },
      errors: ['path.core.not_found', 'path.auth.forbidden'],
      key: () => newReference('con'),
      input: (_context, body, reference) => ({ ...body, reference }),
    }),
    commandRoute(services, {
      ...onConnection,
      operation: 'connections.get',
      summary: 'Read a connection',
      description:
        'Answers a connection to either party, signed at read with its status and counters; ' +
        'its terms are in consent (SPEC K).',
      method: 'GET',
      path: `${connections}/:reference`,
      command: 'read',
      responses: { 200: ConnectionObject },
      errors: ['path.auth.forbidden'],
      input: () => ({}),
    }),
    commandRoute(services, {
      ...onConnection,
      operation: 'connections.consume',
      summary: 'Consume a connection',
      description:
        'Spends an amount under a connection as its grantee: scope, currency and both ' +
        'ceilings are checked and the counters move at once. Answers the totals consumed and ' +
        'remaining (SPEC K).',
      method: 'POST',
      path: `${connections}/:reference/consume`,
      idempotent: true,
      command: 'consume',
      body: Consume,
      responses: { 200: Consumed },
      errors: CONSUME_ERRORS,
      input: (_context, body) => body,
    }),
    commandRoute(services, {
      ...onConnection,
      operation: 'connections.revoke',
      summary: 'Revoke a connection',
      description:
        'Ends a connection, withdrawn by the grantor or renounced by the grantee, from the ' +
        'next operation on; answers who revoked it and when (SPEC K).',
      method: 'POST',
      path: `${connections}/:reference/revoke`,
      command: 'revoke',
      ...revokeBody,
      errors: ['path.auth.forbidden'],
      input: (_context, body) => body,
    }),
  ];
}

/** What hangs off a connection: its usage log, and the delegations made under it. */
function underConnection(services: Services): RouteSpec<Handler>[] {
  const onConnection = { ...member, what: 'connection', key: ownReference(decider) };
  return [
    usageRoute(services, {
      ...onConnection,
      operation: 'connections.usage',
      summary: 'List the usage of a connection',
      description:
        'Answers the most recent consumptions of a connection to either party, oldest first, ' +
        'up to the query limit; the log outlives revocation (SPEC K, P12).',
      path: `${connections}/:reference/usage`,
      command: 'usage',
      input: () => ({}),
    }),
    commandRoute(services, {
      ...onConnection,
      operation: 'delegations.create',
      summary: 'Delegate one payment under a connection',
      description:
        'Delegates one operation (capability, amount, currency, destination) under a ' +
        "connection to a named delegate, as the grantor, within the connection's scope, and " +
        'answers its reference and binds digest (SPEC K).',
      method: 'POST',
      path: `${connections}/:reference/delegations`,
      idempotent: true,
      command: 'create-delegation',
      body: CreateDelegation,
      responses: { 201: DelegationCreated },
      errors: CREATE_DELEGATION_ERRORS,
      input: (_context, body) => ({ ...body, reference: newReference('dlg') }),
    }),
  ];
}

/** Routes on a delegation, found in its parent connection's aggregate (the route index). */
function delegationRoutes(services: Services): RouteSpec<Handler>[] {
  /** A delegation's parent connection, from the route index. */
  const parent = (context: RequestContext): Later<string | null> => {
    const reference = context.params.reference ?? '';
    return isReferenceShaped(reference, 'dlg') ? ownerOf(services, reference) : null;
  };
  const onDelegation = { ...member, what: 'delegation', key: parent };
  return [
    commandRoute(services, {
      ...onDelegation,
      operation: 'delegations.get',
      summary: 'Read a delegation',
      description:
        'Answers a delegation to its grantor, parent grantee or delegate, signed at read; its ' +
        'terms are in binds (SPEC K).',
      method: 'GET',
      path: `${delegations}/:reference`,
      command: 'read-delegation',
      responses: { 200: DelegationObject },
      errors: ['path.auth.forbidden'],
      input: delegation,
    }),
    commandRoute(services, {
      ...onDelegation,
      operation: 'delegations.consume',
      summary: 'Consume a delegation',
      description:
        'Carries out the delegated operation as the named delegate, with a body matching its ' +
        "terms exactly; the parent connection's ceilings apply too. Answers the totals of both " +
        '(SPEC K).',
      method: 'POST',
      path: `${delegations}/:reference/consume`,
      idempotent: true,
      command: 'consume-delegation',
      body: DelegationConsume,
      responses: { 200: DelegationConsumed },
      errors: CONSUME_ERRORS,
      input: (context, body) => ({ ...body, ...delegation(context) }),
    }),
    commandRoute(services, {
      ...onDelegation,
      operation: 'delegations.revoke',
      summary: 'Revoke a delegation',
      description:
        'Ends a delegation, by its grantor, delegate or parent grantee, recording who acted ' +
        '(SPEC K).',
      method: 'POST',
      path: `${delegations}/:reference/revoke`,
      command: 'revoke-delegation',
      ...revokeBody,
      errors: ['path.auth.forbidden'],
      input: (context, body) => ({ ...body, ...delegation(context) }),
    }),
    usageRoute(services, {
      ...onDelegation,
      operation: 'delegations.usage',
      summary: 'List the usage of a delegation',
      description:
        'Answers the most recent consumptions of a delegation, oldest first, each with its ' +
        'destination commitment, up to the query limit (SPEC K, P12).',
      path: `${delegations}/:reference/usage`,
      command: 'usage-delegation',
      input: delegation,
    }),
  ];
}

/** A usage page (SPEC K, P12): the route parses `limit` and finds the aggregate (usage.ts). */
function usageRoute<K extends 'usage' | 'usage-delegation'>(
  services: Services,
  route: {
    operation: string;
    summary: string;
    description: string;
    path: string;
    what: string;
    key: (context: RequestContext) => Later<string | null>;
    command: K;
    input: (context: RequestContext) => InputOf<typeof connectionCommands, K>;
  },
): RouteSpec<Handler> {
  const handler: Handler = async (context) => {
    const limit = pageLimit(context, services.config.limits);
    if (typeof limit !== 'number') return failure(limit);
    const key = await route.key(context);
    if (key === null) return notFound(route.what);
    const command = { name: route.command, input: route.input(context), caller: context.caller };
    const ask = async () =>
      (await submit(services, { aggregate: decider.type, key, command }, context)).reply;
    const query = { reference: context.params.reference!, limit };
    const outcome = await usagePage(services, query, ask);
    if ('refused' in outcome) {
      const { status, body } = outcome.refused;
      return { status, body, signed: false };
    }
    return json(200, outcome.page);
  };
  const { operation, summary, description, path } = route;
  const pageMax = services.config.limits.usage_page_max;
  const limit = {
    schema: Type.Integer({ minimum: 1, maximum: pageMax }),
    description: `rows at most on the page (default ${services.config.limits.usage_page_default})`,
  };
  return {
    operation,
    summary,
    description,
    method: 'GET',
    path,
    auth: 'member',
    query: { limit },
    responses: { 200: UsagePage },
    errors: ['path.auth.forbidden'],
    handler,
  };
}

/** The `limit` query parameter: a whole number of rows up to the page limit (P12). */
function pageLimit(
  context: RequestContext,
  limits: { usage_page_default: number; usage_page_max: number },
): number | Refusal {
  const raw = queryParams(context).get('limit');
  const limit = raw === null ? limits.usage_page_default : Number(raw);
  if (!Number.isInteger(limit) || limit < 1 || limit > limits.usage_page_max) {
    return invalid('limit', `limit is a whole number from 1 to ${limits.usage_page_max}`);
  }
  return limit;
}
