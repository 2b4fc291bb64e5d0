// The scanner fitted to the usual batch body (batch-reader.ts) against the strict reader (P2) and
// the route's schema, body by body: valid bodies of the usual shape, the same bodies mutated at
// random (near-valid), and hostile ones (duplicate names, escapes, big numbers, wrong types,
// extra members, white space). The route's reading must give the same value or the same refusal
// as the strict reading of every one, and the scanner must recognise the usual bodies itself.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IDENTIFIER_LENGTH_MAX, LOOKUP_NONCE_LENGTH_MAX } from '../../config.js';
import { validator } from '../../protocol/schemas.js';
import { validBody } from '../services.js';
import { hexQuad, readUsualBatch } from './batch-reader.js';
import { Batch, batchBody } from '../../domain/sonar/routes.js';
import { mulberry32 } from '../../../bench/request-plans.js';

const validateBatch = validator(Batch);
const TYPES = ['email', 'phone', 'bank_account', 'lei', 'reg', 'tax', 'address'];
const SPACES = ['', ' ', '  ', '\n', '\t', '\r\n', ' \n\t '];

/** Seeded, so that a failing body can be found again. */
const seeded = mulberry32;

const hashOf = (n: number) => createHash('sha256').update(String(n)).digest('hex');

/** A batch body of the usual shape, written with random white space and member order. */
function usualBody(random: () => number, n: number): string {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const ws = () => pick(SPACES);
  const member = (name: string, value: string) => `${ws()}"${name}"${ws()}:${ws()}${value}${ws()}`;
  const items = Array.from({ length: n }, (_, i) => {
    const members = [member('identifier_type', `"${pick(TYPES)}"`)];
    if (random() < 0.7) members.push(member('identifier_hash', `"${hashOf(i)}"`));
    else members.push(member('identifier', `"user${i}@example.com"`));
    if (random() < 0.2) members.push(member('nonce', `"n-${i} x"`));
    if (random() < 0.5) members.reverse();
    return `${ws()}{${members.join(',')}}${ws()}`;
  });
  const top = [member('items', `[${items.join(',')}]`)];
  if (random() < 0.5) top.push(member('signed', pick(['true', 'false'])));
  if (random() < 0.5) top.reverse();
  return `${ws()}{${top.join(',')}}${ws()}`;
}

const MUTATIONS = [
  '"',
  '\\',
  '{',
  '}',
  '[',
  ']',
  ',',
  ':',
  ' ',
  '0',
  'a',
  'g',
  'A',
  '/',
  '`',
  '\u00e9',
  '\u0000',
  '\\u0065',
  '1e400',
  '9007199254740993',
  'null',
  'true',
  '"x":1,',
  '""',
];

/** The body with one random edit: a character removed, replaced, or something inserted. */
function mutated(random: () => number, body: string): string {
  const at = Math.floor(random() * body.length);
  const piece = MUTATIONS[Math.floor(random() * MUTATIONS.length)]!;
  const edit = random();
  if (edit < 0.3) return body.slice(0, at) + body.slice(at + 1);
  if (edit < 0.6) return body.slice(0, at) + piece + body.slice(at + 1);
  return body.slice(0, at) + piece + body.slice(at);
}

const H = hashOf(1);
const NONCE_LONGEST = 'n'.repeat(LOOKUP_NONCE_LENGTH_MAX);
const item = `{"identifier_type":"email","identifier_hash":"${H}"}`;
const HOSTILE: string[] = [
  `{"items":[${item}],"items":[${item}]}`,
  `{"items":[${item}],"signed":true,"signed":false}`,
  `{"items":[{"identifier_type":"email","identifier_type":"phone","identifier_hash":"${H}"}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}","identifier_hash":"${H}"}]}`,
  `{"items":[{"identifier_type":"email","nonce":"a","nonce":"b","identifier_hash":"${H}"}]}`,
  `{"\\u0069tems":[${item}]}`,
  `{"items":[{"identifier_type":"\\u0065mail","identifier_hash":"${H}"}]}`,
  `{"items":[{"identifier_type":"email","identifier":"a\\"b@example.com"}]}`,
  `{"items":[{"identifier_type":"email","identifier":"\\ud800@example.com"}]}`,
  `{"items":[{"identifier_type":"email","identifier":"caf\u00e9@example.com"}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}","nonce":"\u{1F600}"}]}`,
  `{"items":[${item}],"n":9007199254740993}`,
  `{"items":[${item}],"n":1e400}`,
  `{"items":[${item}],"signed":1}`,
  `{"items":[${item}],"signed":"true"}`,
  `{"items":[${item}],"signed":null}`,
  `{"items":{}}`,
  `{"items":[]}`,
  `{"items":[[]]}`,
  `{"items":[null]}`,
  '{"items":[{"identifier_type":1,"identifier_hash":"x"}]}',
  `{"items":[{"identifier_type":"Email","identifier_hash":"${H}"}]}`,
  `{"items":[{"identifier_type":"emailx","identifier_hash":"${H}"}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H.toUpperCase()}"}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H.slice(1)}"}]}`,
  ...['g', '/', ':', '`', 'G', ' '].map(
    (c) => `{"items":[{"identifier_type":"email","identifier_hash":"${c}${H.slice(1)}"}]}`,
  ),
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}0"}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}"},]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}",}]}`,
  `{"items":[${item}],}`,
  `{"items":[{"identifier_hash":"${H}"}]}`,
  '{"items":[{"identifier_type":"email"}]}',
  '{"items":[{"identifier_type":"email","identifier":""}]}',
  '{"items":[{"identifier_type":"email","identifier_hash":""}]}',
  `{"items":[{"identifier_type":"email","identifier":"${'a'.repeat(IDENTIFIER_LENGTH_MAX)}"}]}`,
  `{"items":[{"identifier_type":"email","identifier":"${'a'.repeat(IDENTIFIER_LENGTH_MAX + 1)}"}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}","nonce":""}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}","nonce":"${NONCE_LONGEST}"}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}","nonce":"${NONCE_LONGEST}n"}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}","nonce":7}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}","x":null}]}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}","identifier":"a@b.c"}]}`,
  `{"items":[${item}],"extra":{"deep":[1,2,3]}}`,
  `{"signed":true}`,
  '{}',
  '[]',
  'null',
  '',
  ' ',
  `\ufeff{"items":[${item}]}`,
  `{"items":[${item}]} {}`,
  `{"items":[${item}]}x`,
  `{"items":[${item}]`,
  `{"items":[${item}`,
  `{"items":[{"identifier_type":"email","identifier_hash":"${H}`,
  `{"items"[${item}]}`,
  `{"items":[${item}]"signed":true}`,
  `{items:[${item}]}`,
  `{'items':[${item}]}`,
  ` \t\r\n{ \t\r\n"items" \t\r\n: \t\r\n[ \t\r\n${item} \t\r\n] \t\r\n} \t\r\n`,
  `{"items":[${item}],"signed":true}`,
  `{"signed":false,"items":[${item},${item}]}`,
  `{"items":[${item}],"signed":tru}`,
  `{"items":[${item}],"signed":truee}`,
  `{"items":[{"identifier_type":"email","identifier":"a\tb@example.com"}]}`,
  `{"items":[${'['.repeat(40)}${']'.repeat(40)}]}`,
  `{"items":[${item}],"\\ud800":1}`,
  `{"a":1,"a":2,"items":[${item}]}`,
  `{"items":[{"identifier_type":"phone","identifier":"+44 20 7946 0000","nonce":"n-1"}]}`,
];

/** The route's reading and the strict one agree: the same value, or the same refusal. */
function expectAgreement(text: string | Buffer): void {
  const body = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  const route = batchBody({ body }).body;
  const strict = validBody({ body }, validateBatch);
  expect(route, body.toString('utf8').slice(0, 200)).toStrictEqual(strict);
}

describe('the usual batch body (SPEC D) read by the scanner and by the strict reader (P2)', () => {
  it("reads every body of the usual shape itself, with the strict reading's value", () => {
    const random = seeded(0x5eed);
    for (let b = 0; b < 300; b++) {
      const text = usualBody(random, 1 + Math.floor(random() * 20));
      const bytes = Buffer.from(text, 'utf8');
      const usual = readUsualBatch(bytes)?.body ?? null;
      expect(usual, text).not.toBeNull();
      expect({ ok: true, value: usual }).toStrictEqual(validBody({ body: bytes }, validateBatch));
    }
  });

  it('agrees with the strict reading on bodies one random edit away from the usual shape', () => {
    const random = seeded(0xbad);
    for (let b = 0; b < 3000; b++) expectAgreement(mutated(random, usualBody(random, 3)));
  });

  it('agrees on hostile bodies: duplicates, escapes, numbers, wrong types, extra members', () => {
    for (const text of HOSTILE) expectAgreement(text);
    // Bytes that are not UTF-8 at all.
    expectAgreement(
      Buffer.concat([
        Buffer.from('{"items":[{"identifier_type":"email","identifier":"'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('@example.com"}]}'),
      ]),
    );
  });

  it('leaves every refused body to the strict reader, and recognises the plain ones', () => {
    const refused = HOSTILE.filter((t) => !validBody({ body: Buffer.from(t) }, validateBatch).ok);
    expect(refused.length).toBeGreaterThan(40);
    for (const text of refused) expect(readUsualBatch(Buffer.from(text)), text).toBeNull();
    expect(readUsualBatch(Buffer.from(`{"items":[${item}],"signed":true}`))?.body).toStrictEqual({
      items: [{ identifier_type: 'email', identifier_hash: H }],
      signed: true,
    });
  });
});

/** hexQuad's answer by a byte at a time: the digits' value, or -1 when one is not a digit. */
function quadByBytes(x: number): number {
  let value = 0;
  for (let lane = 0; lane < 4; lane++) {
    const digit = '0123456789abcdef'.indexOf(String.fromCharCode((x >>> (lane * 8)) & 0xff));
    if (digit < 0) return -1;
    value = (value << 4) | digit;
  }
  return value;
}

describe('the hashes read four digits at a time (hexQuad) and decoded as words', () => {
  it('tests every byte value in every position of four, and random words', () => {
    for (let lane = 0; lane < 4; lane++) {
      for (let b = 0; b < 256; b++) {
        // The other three bytes are digits ('7'), so the answer turns on this byte alone.
        const x = ((0x37373737 & ~(0xff << (lane * 8))) | (b << (lane * 8))) >>> 0;
        expect(hexQuad(x), `byte ${b} at ${lane}`).toBe(quadByBytes(x));
      }
    }
    const random = seeded(0x4e4);
    for (let n = 0; n < 20_000; n++) {
      const x = Math.floor(random() * 2 ** 32);
      expect(hexQuad(x)).toBe(quadByBytes(x));
    }
    const digits = '0123456789abcdef';
    for (let n = 0; n < 20_000; n++) {
      const text = Array.from({ length: 4 }, () => digits[Math.floor(random() * 16)]).join('');
      expect(hexQuad(Buffer.from(text, 'latin1').readUInt32LE(0))).toBe(parseInt(text, 16));
    }
  });

  it("gives each hashed item's first 128 bits at its index, however many items", () => {
    const random = seeded(0x3017);
    for (const n of [1, 7, 500, 2000]) {
      // Short clear identifiers between the hashes: more items than the words were first sized for.
      const items = Array.from({ length: n }, (_, i) =>
        i % 4 === 0
          ? `{"identifier_hash":"${hashOf(Math.floor(random() * 1e6))}","identifier_type":"lei"}`
          : `{"identifier_type":"email","identifier":"u${i}"}`,
      );
      const read = readUsualBatch(Buffer.from(`{"items":[${items.join(',')}]}`));
      expect(read).not.toBeNull();
      read!.body.items.forEach((item, i) => {
        const hex = item.identifier_hash;
        if (hex === undefined) return;
        const words = Array.from({ length: 4 }, (_, w) =>
          parseInt(hex.slice(w * 8, w * 8 + 8), 16),
        );
        expect(Array.from(read!.words.subarray(i * 4, i * 4 + 4)), `item ${i}`).toStrictEqual(
          words,
        );
      });
    }
  });
});
