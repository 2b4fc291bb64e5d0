// The answer of an unsigned batch lookup (SPEC D, P17) written straight into one buffer from
// pre-encoded fragments: the bytes are exactly those of JSON.stringify of
// `{count, signed: false, results}` with each result `{identifier_type, identifier_hash, found,
// member, endpoint}` or, for a key that did not normalise, `{identifier_type, error}`, without
// an object per result or a generic serialiser (batch-writer.test.ts compares them).
import type { AnswerBody } from '../../domain/budget/budget.js';
import { IDENTIFIER_TYPES, type KeyHash, type KeyItem } from '../../protocol/identifiers.js';

const ascii = (text: string): Uint8Array => Buffer.from(text, 'latin1');
const utf8 = (text: string): Uint8Array => Buffer.from(text, 'utf8');

const opening = (type: string) =>
  utf8(`{"identifier_type":${JSON.stringify(type)},"identifier_hash":"`);
/** `{"identifier_type":<type>,"identifier_hash":"` of each lookup key type, made once. */
const OPENINGS = new Map<string, Uint8Array>(
  [...IDENTIFIER_TYPES, 'address'].map((type) => [type, opening(type)]),
);
const openingOf = (type: string): Uint8Array => OPENINGS.get(type) ?? opening(type);
const NEGATIVE = ascii('","found":false,"member":null,"endpoint":null}');
const COMMA = ascii(',');
const CLOSING = ascii(']}');

/**
 * The rest of an answer after its hash. Answers of one holder share the same strings, so the
 * last one made is kept for the next answer of the same call.
 */
class Closings {
  private member: string | null = null;
  private endpoint: string | null = null;
  private found = false;
  private last: Uint8Array = NEGATIVE;

  of(answer: AnswerBody): Uint8Array {
    const { found, member, endpoint } = answer;
    if (!found && member === null && endpoint === null) return NEGATIVE;
    if (found !== this.found || member !== this.member || endpoint !== this.endpoint) {
      const rest = `,"member":${JSON.stringify(member)},"endpoint":${JSON.stringify(endpoint)}}`;
      this.last = utf8(`","found":${found}${rest}`);
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
 */
export function unsignedBatchBytes(
  items: readonly KeyItem[],
  hashed: readonly KeyHash[],
  answers: readonly AnswerBody[],
): Buffer {
  const parts: (Uint8Array | string)[] = [
    ascii(`{"count":${items.length},"signed":false,"results":[`),
  ];
  const closings = new Closings();
  let next = 0;
  let length = parts[0]!.length + CLOSING.length + Math.max(0, items.length - 1);
  for (let i = 0; i < items.length; i++) {
    if (i > 0) parts.push(COMMA);
    const hash = hashed[i]!;
    if (typeof hash === 'string') {
      const answer = answers[next++]!;
      const opening = openingOf(answer.identifier_type);
      const closing = closings.of(answer);
      parts.push(opening, answer.identifier_hash, closing);
      length += opening.length + answer.identifier_hash.length + closing.length;
    } else {
      const error = utf8(
        JSON.stringify({ identifier_type: items[i]!.identifier_type, error: hash }),
      );
      parts.push(error);
      length += error.length;
    }
  }
  parts.push(CLOSING);
  return gather(parts, length);
}

/** The parts one after the other in one buffer; a string part is a hash (hex digits only). */
function gather(parts: readonly (Uint8Array | string)[], length: number): Buffer {
  const out = Buffer.allocUnsafe(length);
  let at = 0;
  for (const part of parts) {
    if (typeof part === 'string') {
      for (let i = 0; i < part.length; i++) out[at + i] = part.charCodeAt(i);
    } else out.set(part, at);
    at += part.length;
  }
  if (at !== length) throw new RangeError('unsignedBatchBytes: parts do not fill the answer');
  return out;
}
