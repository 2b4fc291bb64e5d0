// The unsigned batch answer written from fragments (batch-writer.ts) against JSON.stringify of
// the answer's shape (SPEC D, P17), byte for byte: found and negative answers, holders whose
// names need escaping, several holders in one call, and refusals at their index.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AnswerBody } from '../../domain/budget/budget.js';
import { invalid } from '../../protocol/errors.js';
import type { KeyHash, KeyItem, LookupKeyType } from '../../protocol/identifiers.js';
import { unsignedBatchBytes } from './batch-writer.js';

const hashOf = (n: number) => createHash('sha256').update(String(n)).digest('hex');
const HOLDERS = [
  null,
  { member: 'local', endpoint: 'http://127.0.0.1:8080/api/path/v1' },
  { member: 'beta "quoted" \\ member', endpoint: 'https://b.example/\u00e9t\u00e9\n' },
  { member: 'gamma \u{1F600}', endpoint: '' },
];
const TYPES: LookupKeyType[] = ['email', 'phone', 'bank_account', 'address'];

/** The answer as the route wrote it before: JSON.stringify of the result objects. */
function expected(items: KeyItem[], hashed: KeyHash[], answers: AnswerBody[]): string {
  let next = 0;
  const results = items.map((item, i) => {
    const hash = hashed[i]!;
    if (typeof hash !== 'string') return { identifier_type: item.identifier_type, error: hash };
    const { identifier_type, identifier_hash, found, member, endpoint } = answers[next++]!;
    return { identifier_type, identifier_hash, found, member, endpoint };
  });
  return JSON.stringify({ count: items.length, signed: false, results });
}

function call(n: number, pick: (i: number) => number) {
  const items: KeyItem[] = [];
  const hashed: KeyHash[] = [];
  const answers: AnswerBody[] = [];
  for (let i = 0; i < n; i++) {
    const type = TYPES[pick(i) % TYPES.length]!;
    items.push({ identifier_type: type, identifier: `x${i}` });
    if (pick(i) % 7 === 3) {
      hashed.push(invalid(`items.${i}.identifier`, 'not an email address'));
      continue;
    }
    const holder = HOLDERS[pick(i) % HOLDERS.length]!;
    hashed.push(hashOf(i));
    answers.push({
      identifier_type: type,
      identifier_hash: hashOf(i),
      found: holder !== null,
      member: holder?.member ?? null,
      endpoint: holder?.endpoint ?? null,
      nonce: null,
    });
  }
  return { items, hashed, answers };
}

describe('the unsigned batch answer (SPEC D, P17)', () => {
  it('is byte for byte JSON.stringify of {count, signed: false, results}', () => {
    for (const [n, pick] of [
      [1, () => 0],
      [1, () => 1],
      [1, () => 3],
      [3, (i: number) => i],
      [500, (i: number) => (i * 2654435761) >>> 7],
      [40, (i: number) => (i < 20 ? 1 : 2)],
      [9, () => 3 + 7],
    ] as [number, (i: number) => number][]) {
      const { items, hashed, answers } = call(n, pick);
      const bytes = unsignedBatchBytes(items, hashed, answers);
      expect(bytes.toString('utf8')).toBe(expected(items, hashed, answers));
      expect(bytes.equals(Buffer.from(expected(items, hashed, answers), 'utf8'))).toBe(true);
    }
  });

  it('answers a call of refusals alone (P17: no key normalised)', () => {
    const { items, hashed, answers } = call(4, () => 3);
    expect(answers).toHaveLength(0);
    expect(unsignedBatchBytes(items, hashed, answers).toString('utf8')).toBe(
      expected(items, hashed, answers),
    );
  });

  it('writes UTF-8 when a refusal says more than ASCII among ASCII answers', () => {
    const { items, hashed, answers } = call(3, () => 1);
    items.push({ identifier_type: 'email', identifier: 'x3' });
    hashed.push(
      invalid('items.3.identifier', 'pas une adresse \u00e9lectronique \u2013 \u{1F600}'),
    );
    const bytes = unsignedBatchBytes(items, hashed, answers);
    expect(bytes.equals(Buffer.from(expected(items, hashed, answers), 'utf8'))).toBe(true);
  });
});
