// The answer of an unsigned batch lookup (SPEC D, P17) made from fragments encoded once, into one
// buffer: the bytes are exactly those of JSON.stringify of
// `{count, signed: false, results}` with each result `{identifier_type, identifier_hash, found,
// member, endpoint}` or, for a key that did not normalise, `{identifier_type, error}`, without
// an object per result or a generic serialiser (batch-writer.test.ts compares them).
import type { AnswerBody } from '../../domain/budget/budget.js';
import { IDENTIFIER_TYPES, type KeyHash, type KeyItem } from '../../protocol/identifiers.js';

const opening = (type: string) => `{"identifier_type":${JSON.stringify(type)},"identifier_hash":"`;
/** `{"identifier_type":<type>,"identifier_hash":"` of each lookup key type, made once. */
const OPENINGS = new Map<string, string>(
  [...IDENTIFIER_TYPES, 'address'].map((type) => [type, opening(type)]),
);
const openingOf = (type: string): string => OPENINGS.get(type) ?? opening(type);
const NEGATIVE = '","found":false,"member":null,"endpoint":null}';
const ASCII = /^[\x00-\x7f]*$/;

/**
 * The rest of an answer after its hash. Answers of one holder share the same strings, so the
 * last one made is kept for the next answer of the same call.
 */
class Closings {
  private member: string | null = null;
  private endpoint: string | null = null;
  private found = false;
  private last = NEGATIVE;

  /** Every closing made so far is ASCII (member ids and endpoints are the holders' own). */
  ascii = true;

  of(answer: AnswerBody): string {
    const { found, member, endpoint } = answer;
    if (!found && member === null && endpoint === null) return NEGATIVE;
    if (found !== this.found || member !== this.member || endpoint !== this.endpoint) {
      const rest = `,"member":${JSON.stringify(member)},"endpoint":${JSON.stringify(endpoint)}}`;
      this.last = `","found":${found}${rest}`;
      this.ascii &&= ASCII.test(this.last);
      this.found = found;
      this.member = member;
      this.endpoint = endpoint;
    }
    return this.last;
  }
}

/**
 * The answer bytes of an unsigned batch: `answers` holds, in order, the answer of each item
 * whose `hashed` entry is a hash; each other item is answered with its refusal at its index.
 * The fragments are JSON text already (a hash is hex digits), joined and encoded once.
 */
export function unsignedBatchBytes(
  items: readonly KeyItem[],
  hashed: readonly KeyHash[],
  answers: readonly AnswerBody[],
): Buffer {
  const closings = new Closings();
  let text = `{"count":${items.length},"signed":false,"results":[`;
  let next = 0;
  let errorsAscii = true;
  for (let i = 0; i < items.length; i++) {
    if (i > 0) text += ',';
    const hash = hashed[i]!;
    if (typeof hash === 'string') {
      const answer = answers[next++]!;
      text += openingOf(answer.identifier_type) + answer.identifier_hash + closings.of(answer);
    } else {
      const error = JSON.stringify({ identifier_type: items[i]!.identifier_type, error: hash });
      errorsAscii &&= ASCII.test(error);
      text += error;
    }
  }
  // ASCII text is its own UTF-8: written byte for byte, without an encoder's look at each one.
  return Buffer.from(`${text}]}`, closings.ascii && errorsAscii ? 'latin1' : 'utf8');
}
