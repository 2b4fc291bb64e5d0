// POST /payee-check (SPEC F). The route parses the body, seals the proposed name and keeps of it
// only a keyed digest of its words (P8: the clear name never enters a command), finds the
// subject that holds the address (the address's info, then the route index: routing, not a
// rule) and sends the commands of the check in the order payee-check-steps.ts gives (the
// member's daily allowance, then the check). Who may ask (a member, or an open payment context
// for the address), the address's state and the per-context and per-name allowances are the
// subject decider's.
import { createHmac } from 'node:crypto';
import type { Static } from '@sinclair/typebox';
import { nameIdentity } from '../payee/names.js';
import type { Input } from './decision.js';
import { addressInfoKey, type AddressInfo } from './resolver.js';
import { PayeeCheckAnswer } from './answers.js';
import { payeeCheckSteps, type PayeeCheckSend } from './payee-check-steps.js';
import { PayeeCheck } from './schema.js';
import { subjectDecider } from './subject.js';
import { invalid, isRefusal, type Refusal } from '../../protocol/errors.js';
import { validator } from '../../protocol/schemas.js';
import { seal } from '../../protocol/sealing.js';
import { failure, type HttpReply } from '../../http/reply.js';
import type { RouteSpec } from '../../http/router.js';
import type { Handler, RequestContext } from '../../http/server.js';
import {
  notFound,
  ownerOf,
  publicView,
  submit,
  validBody,
  type Services,
} from '../../http/services.js';
import { sendCommand } from '../../http/routes/table.js';

type Check = Input<'payee-check'>;

const validatePayeeCheck = validator(PayeeCheck);

export function payeeCheckRoutes(services: Services): RouteSpec<Handler>[] {
  return [
    {
      operation: 'payee_check',
      summary: 'Check the name of a payee',
      description:
        'Checks a name against the registered name behind an address (verify) or shows it ' +
        'masked (display), for a member or within an open request or instruction for it, and ' +
        'answers the result signed; the network never sees the name (SPEC F).',
      method: 'POST',
      path: '/payee-check',
      auth: 'optional',
      body: PayeeCheck,
      responses: { 200: PayeeCheckAnswer },
      errors: [
        'path.core.not_found',
        'path.auth.context_refused',
        'path.address.revoked',
        'path.finder.budget_exhausted',
      ],
      handler: (context) => payeeCheck(services, context),
    },
  ];
}

async function payeeCheck(services: Services, context: RequestContext): Promise<HttpReply> {
  const body = validBody(context, validatePayeeCheck);
  if (!body.ok) return failure(body.refusal);
  const check = checkOf(services, body.value);
  if (isRefusal(check)) return failure(check);
  const holder = await holderOf(services, body.value.key);
  if (holder === null) return notFound('address');
  const send: PayeeCheckSend<HttpReply> = {
    step: async (routed) => {
      const { status, body: text } = (await submit(services, routed, context)).reply;
      return { status, body: text, signed: false };
    },
    // The command's caller is the request's, as sendCommand gives it.
    answer: ({ key, command }) =>
      sendCommand(services, context, subjectDecider, key, command.name, command.input),
  };
  const { caller } = context;
  return payeeCheckSteps(send, { caller, subject: holder.subject, input: check(holder.id) });
}

/** The check's input, once the address is known; or a 400 for what the body cannot say. */
function checkOf(
  services: Services,
  body: Static<typeof PayeeCheck>,
): ((addressId: string) => Check) | Refusal {
  const { mode, name, nonce } = body;
  if (mode === 'verify' && name === undefined) {
    return invalid('name', 'name is required with mode verify');
  }
  const given = body.context;
  if (given !== undefined && (given.request === undefined) === (given.instruction === undefined)) {
    return invalid('context', 'a context names one request or one instruction');
  }
  let context: Check['context'] = null;
  if (given?.request !== undefined) context = { request: given.request };
  else if (given?.instruction !== undefined) context = { instruction: given.instruction };
  if (mode === 'display' || name === undefined) {
    return (address_id) => ({ address_id, nonce, context, mode: 'display' });
  }
  // Distinct names are counted by a keyed digest of their words: a name asked again is the same.
  const words = nameIdentity(name);
  const name_key = createHmac('sha256', services.sealingKey).update(words).digest('hex');
  const name_sealed = seal(services.sealingKey, name);
  return (address_id) => ({ address_id, nonce, context, mode, name_sealed, name_key });
}

/** The subject that holds an address, and the address's id; null: the node has no such address. */
async function holderOf(
  services: Services,
  address: string,
): Promise<{ subject: string; id: string } | null> {
  const view = await publicView(services, addressInfoKey(address));
  if (view === null || view.status !== 200) return null;
  const info = JSON.parse(Buffer.from(view.body).toString('utf8')) as AddressInfo;
  const subject = await ownerOf(services, info.id);
  return subject === null ? null : { subject, id: info.id };
}
