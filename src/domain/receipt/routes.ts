// Routes of SPEC J: settlement receipts. Who may move a receipt and where is the decider's;
// what makes an envelope a valid receipt under a key is verify.ts's.
import { firstTransitions, receiptDecider, transitionsViewKey } from './receipt.js';
import { IssueReceipt, TransitionReceipt, VerifyAnswer, VerifyReceipt } from './schema.js';
import { verifyReceipt } from './verify.js';
import { newReference, isReferenceShaped } from '../../protocol/ids.js';
import { ReceiptObject, ReceiptTransitions } from '../../protocol/responses.js';
import { validator } from '../../protocol/schemas.js';
import { failure, json, type HttpReply } from '../../http/reply.js';
import type { RouteSpec } from '../../http/router.js';
import type { Handler } from '../../http/server.js';
import { after, notFound, publicView, validBody, type Services } from '../../http/services.js';
import { commandRoute, ownReference } from '../../http/routes/table.js';

const validateVerify = validator(VerifyReceipt);

export function receiptRoutes(services: Services): RouteSpec<Handler>[] {
  return [...memberRoutes(services), ...publicRoutes(services)];
}

/** Issuing and moving a receipt: commands of a member, signed. */
function memberRoutes(services: Services): RouteSpec<Handler>[] {
  return [
    commandRoute(services, {
      operation: 'receipts.create',
      summary: 'Issue a settlement receipt',
      description:
        'Issues a settlement receipt as payer or payee of a payment over a rail, filling in ' +
        'payer, payee and issuer, and answers it signed (SPEC J). A receipt that names ' +
        'an instruction uses the instruction (it reads 410 from then on).',
      method: 'POST',
      path: '/receipts',
      auth: 'member',
      idempotent: true,
      decider: receiptDecider,
      command: 'issue',
      what: 'receipt',
      body: IssueReceipt,
      responses: { 201: ReceiptObject },
      key: () => newReference('rcp'),
      input: (_context, body, reference) => ({ ...body, reference }),
    }),
    commandRoute(services, {
      operation: 'receipts.transition',
      summary: 'Move a receipt to a new status',
      description:
        'Moves an issued receipt from pending to settled or failed, or from settled to ' +
        'reversed, as its issuer, and answers the new signed envelope that supersedes the ' +
        'last (SPEC J); re-stating the status it holds answers the current one.',
      method: 'POST',
      path: '/receipts/:reference/transitions',
      auth: 'member',
      idempotent: true,
      decider: receiptDecider,
      command: 'transition',
      what: 'receipt',
      body: TransitionReceipt,
      // 201: a move appends a step; 200: re-stating the status held answers the current envelope.
      responses: { 201: ReceiptObject, 200: ReceiptObject },
      errors: ['path.auth.forbidden', 'path.settlement.transition_invalid'],
      key: ownReference(receiptDecider),
      input: (_context, body) => body,
    }),
  ];
}

/** A receipt that never moved: its list is its one step, read off its envelope. */
const firstOnly = (issued: HttpReply | null): HttpReply =>
  issued === null
    ? notFound('receipt')
    : {
        status: 200,
        body: firstTransitions(Buffer.from(issued.body).toString('utf8')),
        signed: true,
      };

/** Reading a receipt and its transitions, and checking an envelope: open to anyone. */
function publicRoutes(services: Services): RouteSpec<Handler>[] {
  const read = (key: string, reference: string) =>
    isReferenceShaped(reference, 'rcp')
      ? after(publicView(services, key), (reply) => reply ?? notFound('receipt'))
      : notFound('receipt');
  return [
    {
      operation: 'receipts.get',
      summary: 'Read a settlement receipt',
      description:
        "Answers a receipt's current signed envelope, the latest statement of its chain, to " +
        'anyone (SPEC J).',
      method: 'GET',
      path: '/receipts/:reference',
      auth: 'public',
      responses: { 200: ReceiptObject },
      handler: (context) => read(context.params.reference!, context.params.reference!),
    },
    {
      operation: 'receipts.transitions',
      summary: 'List the transitions of a receipt',
      description:
        "Answers a receipt's reference, status and transitions, oldest first, the first " +
        'from null, to anyone (SPEC J).',
      method: 'GET',
      path: '/receipts/:reference/transitions',
      auth: 'public',
      responses: { 200: ReceiptTransitions },
      handler: (context) => {
        const reference = context.params.reference!;
        if (!isReferenceShaped(reference, 'rcp')) return notFound('receipt');
        return after(publicView(services, transitionsViewKey(reference)), (listed) =>
          listed !== null ? listed : after(publicView(services, reference), firstOnly),
        );
      },
    },
    {
      operation: 'receipts.verify',
      summary: 'Verify a receipt envelope with a key',
      description:
        "Checks a signed receipt envelope against the issuer's public key given in the body " +
        '(the node fetches no key) and answers whether it is valid, and why not (SPEC J).',
      method: 'POST',
      path: '/receipts/verify',
      auth: 'public',
      body: VerifyReceipt,
      responses: { 200: VerifyAnswer },
      handler: (context) => {
        const input = validBody(context, validateVerify);
        if (!input.ok) return failure(input.refusal);
        const envelope = input.value.envelope as Record<string, unknown>;
        return json(200, verifyReceipt(envelope, input.value.issuer_public_key));
      },
    },
  ];
}
