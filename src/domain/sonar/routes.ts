// Routes of SPEC D (lookup, batch lookup, confirm). A clear identifier is normalised and hashed
// here and goes no further; the key is answered from the in-memory index; the member's budget
// aggregate charges, journals (hash only) and signs in one durable step. A negative answer, for
// a key that does not exist or one that exists but is not visible, takes the same path: one
// index probe, the same charge, the same journal row, the same signature, the same shape.
import { Type } from '@sinclair/typebox';
import {
  budgetDecider,
  budgetKey,
  signAnswers,
  type AnswerBody,
  type ChargeLookups,
} from '../budget/budget.js';
import {
  hashKeys,
  keyShapeRefusal,
  type KeyHash,
  type KeyItem,
} from '../../protocol/identifiers.js';
import { BatchAnswer, HolderConfirmation, SonarAnswer } from './answers.js';
import { allowanceResetSeconds, lookupAllowance } from './allowance.js';
import { confirmAnswer } from './confirm.js';
import { KEY_TYPES, packJournalKeys } from '../budget/journal-keys.js';
import { OneOf } from '../../protocol/responses.js';
import { invalid, isRefusal } from '../../protocol/errors.js';
import { Sha256Hex, validator } from '../../protocol/schemas.js';
import {
  IDENTIFIER_LENGTH_MAX,
  LOOKUP_NONCE_LENGTH_MAX,
  LOOKUP_SPREAD_ITEMS_MIN,
  type Limits,
} from '../../config.js';
import type { LocalDirectory } from '../../directory/directory.js';
import { WORDS_PER_KEY } from '../../directory/index.js';
import { failure, json, type HttpReply } from '../../http/reply.js';
import type { RouteSpec } from '../../http/router.js';
import { readUsualBatch } from '../../http/routes/batch-reader.js';
import { unsignedBatchBytes } from '../../http/routes/batch-writer.js';
import type { Handler, RequestContext } from '../../http/server.js';
import { submit, validBody, type Services } from '../../http/services.js';

const KeyType = OneOf(KEY_TYPES);
const Item = Type.Object({
  identifier_type: KeyType,
  identifier: Type.Optional(Type.String({ minLength: 1, maxLength: IDENTIFIER_LENGTH_MAX })),
  identifier_hash: Type.Optional(Sha256Hex),
  nonce: Type.Optional(Type.String({ minLength: 1, maxLength: LOOKUP_NONCE_LENGTH_MAX })),
});
/** The batch body's schema (SPEC D): what the strict reader's value must match. */
export const Batch = Type.Object({
  items: Type.Array(Item),
  signed: Type.Optional(Type.Boolean()),
});
const Confirm = Type.Object({ sonar_answer: Type.Object({}) });
const validateLookup = validator(Item);
const validateBatch = validator(Batch);
const validateConfirm = validator(Confirm);

export function sonarRoutes(services: Services): RouteSpec<Handler>[] {
  const { limits } = services.config;
  const directory = services.directory!;
  const charge = budgetCharge(services);
  return [
    {
      operation: 'sonar.lookup',
      summary: 'Look up which member holds a key',
      description:
        'Answers, signed, which member holds an identifier or address and its endpoint, or ' +
        'found false, the same for a key that does not exist as for one the caller may not see. ' +
        "Charged to the caller's lookup budget and journalled by hash (SPEC D).",
      method: 'POST',
      path: '/sonar/lookup',
      auth: 'member',
      body: Item,
      responses: { 200: SonarAnswer },
      errors: ['path.finder.budget_exhausted'],
      handler: lookupHandler(services, directory, charge),
    },
    {
      operation: 'sonar.lookup_batch',
      summary: 'Look up many keys at once',
      description:
        'Looks up each key of a list as a single lookup does, charged and journalled per key, ' +
        'and answers the results, unsigned or one signed answer per key (SPEC D, P17).',
      method: 'POST',
      path: '/sonar/lookup/batch',
      auth: 'member',
      body: Batch,
      responses: { 200: BatchAnswer },
      errors: ['path.finder.budget_exhausted'],
      handler: batchHandler(services, directory, limits, charge),
    },
    {
      operation: 'sonar.confirm',
      summary: 'Confirm holding a looked-up key',
      description:
        'Checks a signed lookup answer naming this member as holder, less than five minutes ' +
        'old, and answers whether it holds the key, signed as the holder; no credential is ' +
        'needed (SPEC D).',
      method: 'POST',
      path: '/sonar/confirm',
      auth: 'public',
      body: Confirm,
      responses: { 200: HolderConfirmation },
      errors: ['path.sonar.confirmation_refused'],
      handler: (context) => {
        const body = validBody(context, validateConfirm);
        if (!body.ok) return failure(body.refusal);
        return confirm(services, body.value.sonar_answer as Record<string, unknown>, context.now);
      },
    },
  ];
}

type Charge = ReturnType<typeof budgetCharge>;

/**
 * One index probe for a hashed key: the same work whether it is found, hidden or absent. A key
 * given by its hash in a body the scanner read is probed with the words it decoded (`words` from
 * `at`), which spares parsing the hex digits a second time.
 */
function answerFor(
  directory: LocalDirectory,
  item: KeyItem & { nonce?: string },
  hash: string,
  words: Uint32Array | null = null,
  at = 0,
): AnswerBody {
  const holder =
    words !== null && item.identifier_hash !== undefined
      ? directory.index.findWords(words, at, item.identifier_type)
      : directory.index.find(hash, item.identifier_type);
  return {
    identifier_type: item.identifier_type,
    identifier_hash: hash,
    found: holder !== null,
    member: holder?.member ?? null,
    endpoint: holder?.endpoint ?? null,
    nonce: item.nonce ?? null,
  };
}

/** One key: its answer, charged, journalled and signed. */
function lookupHandler(services: Services, directory: LocalDirectory, charge: Charge): Handler {
  return async (context) => {
    const body = validBody(context, validateLookup);
    if (!body.ok) return failure(body.refusal);
    const shape = keyShapeRefusal([body.value], false);
    if (shape !== null) return failure(shape);
    const [hash] = hashKeys(services.pepper, [body.value], 0, false);
    if (typeof hash !== 'string') return failure(hash!);
    const answer = answerFor(directory, body.value, hash);
    const { result, headers, signedText } = await charge(context, [answer], true);
    if (result.reply.status !== 200) return { ...fromReply(result.reply), headers };
    // A one-element array of the signed answer.
    return { status: 200, body: signedText.slice(1, -1), signed: true, headers };
  };
}

/**
 * Up to `lookup_batch_max` keys, charged all or nothing; the answers signed when asked. P17: a
 * key that does not normalise is answered at its index with its refusal, and is neither looked
 * up, journalled nor charged. A body that is not a batch is still refused whole.
 */
function batchHandler(
  services: Services,
  directory: LocalDirectory,
  limits: Limits,
  charge: Charge,
): Handler {
  return async (context) => {
    const { body, words } = batchBody(context);
    if (!body.ok) return failure(body.refusal);
    const { items, signed = false } = body.value;
    if (items.length === 0 || items.length > limits.lookup_batch_max) {
      return failure(invalid('items', `items holds 1 to ${limits.lookup_batch_max} entries`));
    }
    const shape = keyShapeRefusal(items, true);
    if (shape !== null) return failure(shape);
    const hashed = await hashSpread(services, items);
    const answers: AnswerBody[] = [];
    items.forEach((item, i) => {
      const hash = hashed[i]!;
      if (typeof hash === 'string')
        answers.push(answerFor(directory, item, hash, words, i * WORDS_PER_KEY));
    });
    let headers: Record<string, string> | undefined;
    let signedText = '[]';
    if (answers.length > 0) {
      const charged = await charge(context, answers, signed);
      headers = charged.headers;
      if (charged.result.reply.status !== 200)
        return { ...fromReply(charged.result.reply), headers };
      signedText = charged.signedText;
    }
    const text = signed
      ? signedBatchText(items, hashed, signedText, answers.length)
      : unsignedBatchBytes(items, hashed, answers);
    return { status: 200, body: text, signed, ...(headers === undefined ? {} : { headers }) };
  };
}

/**
 * The body of a batch: read by the scanner fitted to the usual shape when it has that shape, with
 * the words of its hashes (see answerFor), otherwise by the strict reader and the schema, whose
 * refusals are the route's (P2, P7).
 */
export function batchBody(context: Pick<RequestContext, 'body'>): {
  body: ReturnType<typeof validateBatch>;
  words: Uint32Array | null;
} {
  const usual = readUsualBatch(context.body);
  if (usual === null) return { body: validBody(context, validateBatch), words: null };
  return { body: { ok: true, value: usual.body }, words: usual.words };
}

/**
 * The answer of a signed batch. Signed answers are spliced between the errors as parsed objects:
 * the signature covers the canonical form, so writing them out again keeps them verifiable.
 */
function signedBatchText(
  items: readonly KeyItem[],
  hashed: readonly KeyHash[],
  signedText: string,
  answered: number,
): string {
  const results =
    answered === items.length
      ? signedText
      : batchResults(items, hashed, JSON.parse(signedText) as object[]);
  return `{"count":${items.length},"signed":true,"results":${results}}`;
}

/**
 * Charges the member's budget for a call's answers (all or nothing) and journals them, signing
 * them meanwhile when asked. The allowance of each type is the front end's to know (its formula,
 * P12, in allowance.ts, from the member's contributions to the in-memory directory index); the
 * charge is the budget decider's.
 */
function budgetCharge(services: Services) {
  return async (context: RequestContext, answers: AnswerBody[], signed: boolean) => {
    const member = context.caller!.member;
    const counts: Record<string, number> = {};
    const allowances: Record<string, number> = {};
    for (const a of answers) {
      counts[a.identifier_type] = (counts[a.identifier_type] ?? 0) + 1;
      allowances[a.identifier_type] ??= lookupAllowance(
        services.config,
        services.directory!.index.contribution(member, a.identifier_type),
      );
    }
    const keys = packJournalKeys(answers);
    const input: ChargeLookups = { counts, allowances, keys };
    const command = { name: 'charge-lookups', input, caller: context.caller };
    const routed = { aggregate: budgetDecider.type, key: budgetKey(member), command };
    const signedAt = new Date(context.now).toISOString();
    const [result, signedText] = await Promise.all([
      // The packed keys are the buffer's only user: moved to the worker, not copied.
      submit(services, routed, context, { transfer: [keys.buffer] }),
      signed ? signSpread(services, answers, member, signedAt) : Promise.resolve('[]'),
    ]);
    const remaining =
      result.reply.status === 200 ? (result.reply.meta!.remaining as Record<string, number>) : null;
    const headers = rateLimitHeaders(allowances, remaining, context.now);
    return { result, headers, signedText };
  };
}

/**
 * The results array of a batch, as JSON text: the answers of the keys that normalised, in order,
 * with each key that did not at its own index as `{ identifier_type, error }` (P17). The error
 * comes from normalisation, whose messages never quote the value.
 */
function batchResults(
  items: readonly KeyItem[],
  hashed: readonly KeyHash[],
  answers: readonly object[],
): string {
  let next = 0;
  const results = items.map((item, i) => {
    const hash = hashed[i]!;
    if (typeof hash === 'string') return answers[next++];
    return { identifier_type: item.identifier_type, error: hash };
  });
  return JSON.stringify(results);
}

/**
 * Normalises and hashes a batch's keys with every core at hand: a worker takes the first part
 * while the front end does the rest. Batches of few clear identifiers stay on the front end.
 */
async function hashSpread(services: Services, items: KeyItem[]): Promise<KeyHash[]> {
  // Keys given by their hash cost nothing to hash: only clear identifiers are worth a worker.
  let clear = 0;
  for (const item of items) if (item.identifier !== undefined) clear++;
  if (clear < LOOKUP_SPREAD_ITEMS_MIN) return hashKeys(services.pepper, items, 0, true);
  const cut = Math.floor(items.length * (1 - FRONT_END_HASHING_SHARE));
  const remote = services.pool.hashKeys(items.slice(0, cut), 0);
  const local = hashKeys(services.pepper, items.slice(cut), cut, true);
  return [...(await remote), ...local];
}

/**
 * The share of a large batch's keys the front end
 * hashes itself (the worker also charges and journals).
 */
const FRONT_END_HASHING_SHARE = 0.65;
/** The share of a large batch the front end signs itself while a worker signs the rest. */
const FRONT_END_SIGNING_SHARE = 0.4;

/**
 * Signs lookup answers with every core at hand: a worker signs most of a large batch while the
 * front end, otherwise idle during signed batches, signs the rest. Small batches go to a worker.
 */
async function signSpread(
  services: Services,
  answers: AnswerBody[],
  requester: string,
  signedAt: string,
): Promise<string> {
  if (answers.length < LOOKUP_SPREAD_ITEMS_MIN)
    return services.pool.signAnswers(answers, requester, signedAt);
  const cut = Math.floor(answers.length * (1 - FRONT_END_SIGNING_SHARE));
  const remote = services.pool.signAnswers(answers.slice(0, cut), requester, signedAt);
  const local = signAnswers(answers.slice(cut), requester, signedAt, services.signer!());
  const first = await remote;
  return `${first.slice(0, -1)},${local.slice(1)}`;
}

function fromReply(reply: { status: number; body: string; signed: boolean }): HttpReply {
  return { status: reply.status, body: reply.body, signed: reply.signed };
}

/** RateLimit headers (IETF httpapi draft) for the most constrained type of the call. */
function rateLimitHeaders(
  allowances: Record<string, number>,
  remaining: Record<string, number> | null,
  now: number,
): Record<string, string> {
  const types = Object.keys(allowances);
  const tightest = types.reduce((a, b) => ((remaining?.[a] ?? 0) <= (remaining?.[b] ?? 0) ? a : b));
  const reset = allowanceResetSeconds(now);
  const left = remaining?.[tightest] ?? 0;
  return {
    'ratelimit-policy': `"lookup-${tightest}";q=${allowances[tightest]};w=${reset}`,
    ratelimit: `"lookup-${tightest}";r=${left};t=${reset}`,
    'ratelimit-limit': String(allowances[tightest]),
    'ratelimit-remaining': String(left),
    'ratelimit-reset': String(reset),
  };
}

/** Facts the front end holds for a confirmation; the rule is in src/domain/sonar/confirm.ts. */
function confirm(services: Services, answer: Record<string, unknown>, now: number): HttpReply {
  const { member, limits } = services.config;
  const confirmed = confirmAnswer(answer, {
    now,
    member,
    limits,
    signer: services.signer!(),
    keyFor: (kid) =>
      (services.store.signingKeys().find((k) => k.kid === kid) ?? services.members?.keyFor(kid))
        ?.public_key,
    holds: (hash, type) => services.directory!.index.find(hash, type)?.member === member,
  });
  return isRefusal(confirmed) ? failure(confirmed) : json(200, confirmed, true);
}
