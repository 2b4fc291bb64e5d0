// POST /payee-check (SPEC F): authorised by a member credential or by a payment context (an open
// request or instruction issued for `key`). The front end checks the context and the member's
// daily allowance; the subject's single writer checks the name and the per-context and
// per-name allowances, and signs the answer.
import { createHmac } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { budgetKey } from '../../domain/budget/budget.js';
import { untitledWords } from '../../domain/payee/names.js';
import { addressInfoKey, type AddressInfo } from '../../domain/subject/resolver.js';
import { invalid, refusal } from '../../protocol/errors.js';
import { isReferenceShaped } from '../../protocol/ids.js';
import { PathAddress, Reference, validator } from '../../protocol/schemas.js';
import { unauthenticated } from '../auth.js';
import { failure } from '../reply.js';
import type { RouteSpec } from '../router.js';
import type { Handler } from '../server.js';
import { notFound, runCommand, ownerOf, submit, validBody, viewReply, type Services } from '../services.js';

const validatePayeeCheck = validator(Type.Object({
  key: PathAddress,
  mode: Type.Union([Type.Literal('verify'), Type.Literal('display')]),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  context: Type.Optional(Type.Object({
    request: Type.Optional(Reference('req', 'a request reference')),
    instruction: Type.Optional(Reference('ins', 'an instruction reference')),
  })),
  nonce: Type.String({ minLength: 1, maxLength: 128 }),
}));

export function payeeCheckRoutes(services: Services): RouteSpec<Handler>[] {
  const { limits } = services.config;
  /** Is the context an open request or instruction issued for this address? */
  const contextOpen = (reference: string, key: string): boolean => {
    const view = isReferenceShaped(reference) ? viewReply(services, reference) : null;
    if (view === null || view.status !== 200) return false;
    const object = JSON.parse(Buffer.from(view.body).toString('utf8')) as { status?: string; payee?: { address?: string } };
    const open = reference.startsWith('req_') ? object.status === 'created' : object.status === 'open';
    return open && object.payee?.address === key;
  };

  return [{
    operation: 'payee_check', method: 'POST', path: '/payee-check', auth: 'optional',
    handler: async (context) => {
      const body = validBody(context, validatePayeeCheck);
      if (!body.ok) return failure(body.refusal);
      const { key, mode, name, nonce } = body.value;
      if (mode === 'verify' && name === undefined) return failure(invalid('name', 'name is required with mode verify'));
      const given = body.value.context;
      let contextRef: string | null = null;
      if (given !== undefined) {
        if ((given.request === undefined) === (given.instruction === undefined)) return failure(invalid('context', 'a context names one request or one instruction'));
        contextRef = given.request ?? given.instruction!;
        if (!contextOpen(contextRef, key)) return failure(refusal('path.auth.context_refused', 'the context is not an open payment context for this key'));
      } else if (context.caller === null) {
        return failure(unauthenticated('missing'));
      }
      const view = viewReply(services, addressInfoKey(key));
      if (view === null) return notFound('address');
      const info = JSON.parse(Buffer.from(view.body).toString('utf8')) as AddressInfo;
      if (info.revoked) return failure(refusal('path.address.revoked', 'this address was revoked'));
      const subject = ownerOf(services, info.id);
      if (subject === null) return notFound('address');
      if (context.caller !== null) {
        const charged = await submit(services, {
          aggregate: 'budget', key: budgetKey(context.caller.member),
          command: { name: 'charge-payee-check', input: { allowance: limits.payee_check_daily_max }, caller: context.caller },
        }, context);
        if (charged.reply.status !== 200) return { status: charged.reply.status, body: charged.reply.body, signed: false };
      }
      const requester = context.caller?.member ?? (given!.request !== undefined ? `request:${contextRef}` : `instruction:${contextRef}`);
      // Distinct names are counted by a keyed digest of their words: a resubmitted name is the same name.
      const nameKey = name === undefined ? null : createHmac('sha256', services.sealingKey).update([...untitledWords(name)].sort().join(' ')).digest('hex');
      return runCommand(services, context, 'subject', subject, 'payee-check', {
        address_id: info.id, mode, name: name ?? null, name_key: nameKey, nonce, requester, context_ref: contextRef,
        limits: { context_max: limits.payee_check_context_max, names_per_day_max: limits.payee_check_names_per_day_max },
      });
    },
  }];
}
