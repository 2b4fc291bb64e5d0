// Confirm (SPEC D): a holder's signed word that a lookup answer naming it still holds. Stateless:
// no aggregate keeps anything, so this is a pure rule over the answer and facts the front end
// holds (the published keys, its index). P7: failures are 403 with `detail.reason`.
import type { Limits } from '../../config.js';
import { refusal, type Refusal } from '../../protocol/errors.js';
import {
  envelopeFields,
  signObject,
  verifyObject,
  type SigningKey,
} from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';

export type ConfirmFailure =
  'malformed' | 'unknown_key' | 'invalid_signature' | 'stale' | 'wrong_holder';

export interface ConfirmFacts {
  now: number;
  member: string;
  limits: Pick<Limits, 'lookup_confirm_freshness_ms' | 'timestamp_skew_ms'>;
  signer: SigningKey;
  /** The public key of `kid`: this node's or any member's, retired keys included. */
  keyFor(kid: string): string | undefined;
  /** Whether this node holds the hashed key of that type now. */
  holds(identifierHash: string, identifierType: string): boolean;
}

export function confirmAnswer(
  answer: Record<string, unknown>,
  facts: ConfirmFacts,
): Refusal | Record<string, unknown> {
  const refuse = (reason: ConfirmFailure) =>
    refusal('path.sonar.confirmation_refused', 'the lookup answer cannot be confirmed', { reason });
  if (
    answer.kind !== 'sonar_answer' ||
    typeof answer.identifier_hash !== 'string' ||
    typeof answer.identifier_type !== 'string' ||
    typeof answer.kid !== 'string' ||
    typeof answer.signed_at !== 'string'
  )
    return refuse('malformed');
  const publicKey = facts.keyFor(answer.kid);
  if (publicKey === undefined) return refuse('unknown_key');
  if (!verifyObject(answer, publicKey).valid) return refuse('invalid_signature');
  const signedAt = parseTime(answer.signed_at);
  const { lookup_confirm_freshness_ms: freshness, timestamp_skew_ms: skew } = facts.limits;
  if (signedAt === null || facts.now - signedAt >= freshness || signedAt - facts.now > skew)
    return refuse('stale');
  if (answer.member !== facts.member || answer.found !== true) return refuse('wrong_holder');
  return signObject(
    {
      kind: 'holder_confirmation',
      identifier_type: answer.identifier_type,
      identifier_hash: answer.identifier_hash,
      member: facts.member,
      requester: answer.requester ?? null,
      nonce: answer.nonce ?? null,
      held: facts.holds(answer.identifier_hash, answer.identifier_type),
      ...envelopeFields(facts.signer, isoTime(facts.now)),
    },
    facts.signer,
  );
}
