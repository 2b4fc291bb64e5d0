// Routes of SPEC K (connections, mandates, delegations). A delegation lives in its parent
// connection's aggregate and is found through the route index. Usage logs are read from the
// `usage` table after the aggregate has said the caller is a party.
import { validateConsume, validateCreateConnection, validateCreateDelegation, validateDelegationConsume, validateRevoke } from '../../domain/connection/schema.js';
import { unframeRow } from '../../log/record.js';
import { invalid } from '../../protocol/errors.js';
import { isReferenceShaped, newReference } from '../../protocol/ids.js';
import { failure, isReply, json, type HttpReply } from '../reply.js';
import type { RouteSpec } from '../router.js';
import type { Handler, RequestContext } from '../server.js';
import { notFound, queryParams, runCommand, ownerOf, submit, validBody, type Services } from '../services.js';

const USAGE_PAGE_DEFAULT = 100;

export function connectRoutes(services: Services): RouteSpec<Handler>[] {
  const usagePageMax = 500;
  /** The connection holding a connection or delegation reference, or null. */
  const connectionOf = (reference: string): string | null => {
    if (isReferenceShaped(reference, 'con')) return reference;
    return isReferenceShaped(reference, 'dlg') ? ownerOf(services, reference) : null;
  };
  const onConnection = (name: string, input: (context: RequestContext) => Record<string, unknown> | HttpReply): Handler => (context) => {
    const reference = context.params.reference!;
    const connection = connectionOf(reference);
    const what = reference.startsWith('dlg_') ? 'delegation' : 'connection';
    if (connection === null) return notFound(what);
    const built = input(context);
    if (isReply(built)) return built;
    return runCommand(services, context, 'connection', connection, name, { ...built, what, ...(what === 'delegation' ? { delegation: reference } : {}) });
  };
  const body = <T>(validate: Parameters<typeof validBody<T>>[1], allowEmpty = false) => (context: RequestContext): Record<string, unknown> | HttpReply => {
    if (allowEmpty && context.body.length === 0) return {};
    const parsed = validBody(context, validate);
    return parsed.ok ? parsed.value as Record<string, unknown> : failure(parsed.refusal);
  };
  const usage = (name: string): Handler => async (context) => {
    const raw = queryParams(context).get('limit');
    const limit = raw === null ? USAGE_PAGE_DEFAULT : Number(raw);
    if (!Number.isInteger(limit) || limit < 1 || limit > usagePageMax) return failure(invalid('limit', `limit is a whole number from 1 to ${usagePageMax}`));
    const reference = context.params.reference!;
    const connection = connectionOf(reference);
    if (connection === null) return notFound('connection');
    const result = await submit(services, {
      aggregate: 'connection', key: connection,
      command: { name, input: reference.startsWith('dlg_') ? { delegation: reference } : {}, caller: context.caller },
    }, context);
    if (result.reply.status !== 200) return { status: result.reply.status, body: result.reply.body, signed: false };
    // The most recent rows, given oldest first.
    const rows = [...services.log.scan('usage', { start: `${reference}/`, end: `${reference}0`, reverse: true, limit })].reverse();
    return json(200, { reference, count: rows.length, total: JSON.parse(result.reply.body).count, usage: rows.map((r) => unframeRow('usage', r.key, r.bytes)) });
  };

  return [
    {
      operation: 'connections.create', method: 'POST', path: '/connect/connections', auth: 'local', idempotent: true,
      handler: async (context) => {
        const parsed = validBody(context, validateCreateConnection);
        if (!parsed.ok) return failure(parsed.refusal);
        const exists = await submit(services, { aggregate: 'subject', key: parsed.value.subject_id, command: { name: 'exists', input: {}, caller: context.caller } });
        if (exists.reply.status !== 200) return notFound('subject');
        const reference = newReference('con');
        return runCommand(services, context, 'connection', reference, 'create', { ...parsed.value, reference });
      },
    },
    { operation: 'connections.get', method: 'GET', path: '/connect/connections/:reference', auth: 'member', handler: onConnection('read', () => ({})) },
    { operation: 'connections.consume', method: 'POST', path: '/connect/connections/:reference/consume', auth: 'member', idempotent: true, handler: onConnection('consume', body(validateConsume)) },
    { operation: 'connections.revoke', method: 'POST', path: '/connect/connections/:reference/revoke', auth: 'member', handler: onConnection('revoke', body(validateRevoke, true)) },
    { operation: 'connections.usage', method: 'GET', path: '/connect/connections/:reference/usage', auth: 'member', handler: usage('usage') },
    {
      operation: 'delegations.create', method: 'POST', path: '/connect/connections/:reference/delegations', auth: 'local', idempotent: true,
      handler: onConnection('create-delegation', (context) => {
        const parsed = body(validateCreateDelegation)(context);
        return isReply(parsed) ? parsed : { ...parsed, reference: newReference('dlg') };
      }),
    },
    { operation: 'delegations.get', method: 'GET', path: '/connect/delegations/:reference', auth: 'member', handler: onConnection('read-delegation', () => ({})) },
    { operation: 'delegations.consume', method: 'POST', path: '/connect/delegations/:reference/consume', auth: 'member', idempotent: true, handler: onConnection('consume-delegation', body(validateDelegationConsume)) },
    { operation: 'delegations.revoke', method: 'POST', path: '/connect/delegations/:reference/revoke', auth: 'member', handler: onConnection('revoke-delegation', body(validateRevoke, true)) },
    { operation: 'delegations.usage', method: 'GET', path: '/connect/delegations/:reference/usage', auth: 'member', handler: usage('usage-delegation') },
  ];
}
