// Routes of SPEC G (instructions), H (requests) and I (checkout sessions). Cross-aggregate
// checks (an address's terms, a request's state) read the committed internal views; each
// aggregate's own rules are decided by its single writer.
import { validateCreateSession } from '../../domain/checkout/schema.js';
import { validateCreateInstruction } from '../../domain/instruction/schema.js';
import { requestUrl } from '../../domain/request/request.js';
import { validateCreateRequest } from '../../domain/request/schema.js';
import { addressInfoKey, type AddressInfo } from '../../domain/subject/resolver.js';
import { LIVE_RAILS } from '../../domain/subject/schema.js';
import { checkWebhookUrl } from '../../events/url-policy.js';
import { findCapability } from '../../protocol/capabilities.js';
import { invalid, refusal } from '../../protocol/errors.js';
import { isReferenceShaped, newReference } from '../../protocol/ids.js';
import type { CapabilityT } from '../../protocol/schemas.js';
import { isoTime, parseTime } from '../../protocol/time.js';
import { unauthenticated } from '../auth.js';
import { failure, type HttpReply } from '../reply.js';
import type { RouteSpec } from '../router.js';
import type { Handler, RequestContext } from '../server.js';
import { notFound, runCommand, ownerOf, validBody, viewReply, type Services } from '../services.js';

export function paymentRoutes(services: Services): RouteSpec<Handler>[] {
  const { limits } = services.config;
  const addressInfo = (idOrAddress: string): AddressInfo | null => {
    const view = viewReply(services, addressInfoKey(idOrAddress));
    return view === null ? null : JSON.parse(Buffer.from(view.body).toString('utf8')) as AddressInfo;
  };
  /** The request's current signed object, or the answer that says why there is none. */
  const openRequest = (reference: string): { object: Record<string, any>; text: string } | HttpReply => {
    const view = isReferenceShaped(reference, 'req') ? viewReply(services, reference) : null;
    if (view === null) return notFound('request');
    if (view.status !== 200) return view;
    const text = Buffer.from(view.body).toString('utf8');
    const object = JSON.parse(text) as Record<string, any>;
    if (object.status !== 'created') return failure(refusal('path.request.not_open', `this request is ${object.status}`));
    return { object, text };
  };
  const by = (prefix: 'req' | 'ins' | 'chk', aggregate: string, name: string, what: string): Handler => (context) => {
    const reference = context.params.reference!;
    return isReferenceShaped(reference, prefix) ? runCommand(services, context, aggregate, reference, name, {}) : notFound(what);
  };
  const publicRead = (prefix: 'req' | 'ins', what: string): Handler => (context) => {
    const reference = context.params.reference!;
    return (isReferenceShaped(reference, prefix) ? viewReply(services, reference) : null) ?? notFound(what);
  };

  return [
    {
      operation: 'requests.create', method: 'POST', path: '/requests', auth: 'member', idempotent: true,
      handler: (context) => {
        const body = validBody(context, validateCreateRequest);
        if (!body.ok) return failure(body.refusal);
        const { address_id, ...rest } = body.value;
        let bound: { address: string; intent_version: number | null } | null = null;
        if (address_id !== undefined) {
          const info = addressInfo(address_id);
          if (info === null) return notFound('address');
          if (info.revoked) return failure(refusal('path.address.revoked', 'this address was revoked'));
          const missing = rest.accepts.findIndex((c) => findCapability(info.accepts, c) === undefined);
          if (missing >= 0) {
            return failure(refusal('path.address.capability_not_accepted', 'a capability is not in the address\'s standing terms', { field: `accepts.${missing}` }));
          }
          bound = { address: info.address, intent_version: info.intent_version };
        }
        const reference = newReference('req');
        return runCommand(services, context, 'request', reference, 'create', {
          ...rest, reference, url: requestUrl(services.config.baseUrl, reference), address: bound?.address ?? null, intent_version: bound?.intent_version ?? null,
        });
      },
    },
    { operation: 'requests.get', method: 'GET', path: '/requests/:reference', auth: 'public', handler: publicRead('req', 'request') },
    { operation: 'requests.paid', method: 'POST', path: '/requests/:reference/paid', auth: 'member', handler: by('req', 'request', 'paid', 'request') },
    { operation: 'requests.revoke', method: 'POST', path: '/requests/:reference/revoke', auth: 'member', handler: by('req', 'request', 'revoke', 'request') },
    {
      operation: 'instructions.create', method: 'POST', path: '/instructions', auth: 'optional', idempotent: true,
      handler: (context) => issueInstruction(services, context, addressInfo, openRequest, limits.instruction_lifetime_ms),
    },
    { operation: 'instructions.get', method: 'GET', path: '/instructions/:reference', auth: 'public', handler: publicRead('ins', 'instruction') },
    { operation: 'instructions.revoke', method: 'POST', path: '/instructions/:reference/revoke', auth: 'member', handler: by('ins', 'instruction', 'revoke', 'instruction') },
    {
      operation: 'checkout.create', method: 'POST', path: '/checkout/sessions', auth: 'member', idempotent: true,
      handler: (context) => {
        if (!context.caller!.local) return failure(refusal('path.auth.forbidden', 'only the issuer of the request may open a session'));
        const body = validBody(context, validateCreateSession);
        if (!body.ok) return failure(body.refusal);
        for (const field of ['success_url', 'cancel_url'] as const) {
          try { new URL(body.value[field]); } catch { return failure(invalid(field, `${field} is not a URL`)); }
        }
        if (body.value.webhook_url !== undefined) {
          const refused = checkWebhookUrl(body.value.webhook_url, 'webhook_url', { dev: services.config.dev });
          if (refused !== null) return failure(refused);
        }
        const request = openRequest(body.value.request_reference);
        if (!('object' in request)) return request;
        const { object, text } = request;
        const expiresAt = body.value.expires_at ?? isoTime(Math.min(
          context.now + limits.checkout_session_lifetime_ms, object.expires_at === null ? Infinity : parseTime(object.expires_at)!));
        const reference = newReference('chk');
        const input = {
          ...body.value, id: newReference('cs'), reference, url: `${services.config.baseUrl}/path/${reference}`, expires_at: expiresAt, request_object: text,
        };
        return runCommand(services, context, 'checkout', reference, 'open', input);
      },
    },
    {
      // SPEC I: the merchant reads a session by its id (cs_); the payer-facing moves below take
      // the reference (chk_), so the two names never share a parameter.
      operation: 'checkout.get', method: 'GET', path: '/checkout/sessions/:id', auth: 'member',
      handler: (context) => {
        const id = context.params.id!;
        const reference = isReferenceShaped(id, 'cs') ? ownerOf(services, id) : null;
        return reference === null ? notFound('checkout session') : runCommand(services, context, 'checkout', reference, 'read', {});
      },
    },
    {
      operation: 'checkout.attempt', method: 'POST', path: '/checkout/sessions/:reference/attempt',
      auth: 'member', handler: by('chk', 'checkout', 'attempt', 'checkout session'),
    },
    {
      operation: 'checkout.complete', method: 'POST',
      path: '/checkout/sessions/:reference/complete', auth: 'member',
      handler: by('chk', 'checkout', 'complete', 'checkout session'),
    },
    {
      operation: 'checkout.revoke', method: 'POST', path: '/checkout/sessions/:reference/revoke',
      auth: 'local', handler: by('chk', 'checkout', 'revoke', 'checkout session'),
    },
  ];
}

type InfoOf = (idOrAddress: string) => AddressInfo | null;
type OpenRequest = (reference: string) => { object: Record<string, any>; text: string } | HttpReply;

function issueInstruction(services: Services, context: RequestContext, addressInfo: InfoOf, openRequest: OpenRequest, lifetimeMs: number): HttpReply | Promise<HttpReply> {
  const body = validBody(context, validateCreateInstruction);
  if (!body.ok) return failure(body.refusal);
  const { request, address, via, amount } = body.value;
  if ((request === undefined) === (address === undefined)) return failure(invalid('request', 'give exactly one of request or address'));
  const notAccepted = (message: string) => failure(refusal('path.address.capability_not_accepted', message, { field: 'via' }));
  let info: AddressInfo | null;
  let inForce: CapabilityT | undefined;
  let instructionAmount = amount ?? null;
  if (request !== undefined) {
    const open = openRequest(request);
    if (!('object' in open)) return open;
    if (open.object.payee.address === null) return notAccepted('this request is not bound to an address');
    info = addressInfo(open.object.payee.address);
    inForce = findCapability(open.object.accepts as CapabilityT[], via);
    instructionAmount = open.object.amount ?? instructionAmount;
  } else {
    // For an address alone the caller must be a member; issuance records who obtained it.
    if (context.caller === null) return failure(unauthenticated('missing'));
    info = addressInfo(address!);
    if (info !== null) inForce = findCapability(info.accepts, via);
  }
  if (info === null) return notFound('address');
  if (info.revoked) return failure(refusal('path.address.revoked', 'this address was revoked'));
  if (inForce === undefined) return notAccepted('via is not one of the capabilities in force');
  if (!(LIVE_RAILS as readonly string[]).includes(inForce.rail)) return notAccepted('no instruction is issued on a reserved rail');
  const candidates = info.targets.filter((t) => t.rail === inForce!.rail && t.asset_type === inForce!.asset_type && t.asset_code === inForce!.asset_code);
  const target = candidates.find((t) => t.is_default) ?? candidates[0];
  if (target === undefined) return notAccepted('the address has no live target for this capability');
  const beneficiary = target.beneficiary_format === null
    ? { format: 'path_address', value: info.address }
    : { format: target.beneficiary_format, value: target.beneficiary };
  const reference = newReference('ins');
  return runCommand(services, context, 'instruction', reference, 'issue', {
    reference, address: info.address, request: request ?? null, intent_version: info.intent_version, via: inForce,
    beneficiary, amount: instructionAmount, lifetime_ms: lifetimeMs,
  });
}
