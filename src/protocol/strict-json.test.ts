// P2: the fast path of parseStrictObject skips the strict read only when the text cannot break
// I-JSON. Checked against an oracle built another way (jsonc-parser's syntax tree, every number
// judged by lossless-json) on seeded random bodies made to hit the edges: duplicate names,
// escapes of surrogates and quotes, spacing before colons, numbers of every shape.
import { parseTree, type Node } from 'jsonc-parser';
import { getUnsafeNumberReason } from 'lossless-json';
import { describe, expect, it } from 'vitest';
import { parseStrictObject } from './strict-json.js';

const DEPTH_MAX = 32; // tidy: format (the nesting limit these test bodies are read with)
const SEED = Number(process.env.STRICT_JSON_SEED ?? 20261121) >>> 0;
const BODIES = 5_000;

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMES = ['a', 'b', 'rail', 'via', '__proto__', 'x\\ud800', 'x\\ud83d\\ude00', 'q\\"', 'n:'];
const STRINGS = [
  'book',
  '12345678901234567890',
  '1e400',
  'a\\":b',
  '\\ud800',
  '\\udc00\\ud800',
  '\\ud83d\\ude00',
  '\\\\ud800',
  '\\u0041',
  'sha256:0e12',
  '\\"',
  'é',
  '\\uDBFF\\uDFFF',
  '\\uDBFF',
];
const NUMBERS = [
  '0',
  '-0',
  '1',
  '42',
  '0.1',
  '-0.5',
  '1.5e3',
  '1e2',
  '1E-7',
  '9007199254740991',
  '9007199254740992',
  '-9007199254740993',
  '123456789012345',
  '1234567890123456',
  '0.1000000000000000000001',
  '1e400',
  '1e-400',
  '1e21',
  '100.0',
  '3.141592653589793',
  '3.1415926535897932384',
  '0.0000001',
  '5e-324',
  '12345678901234567890.0',
  '999999999999999.9',
];
const SPACES = ['', '', '', ' ', '\n  ', '\t'];

/** A random JSON text of an object; names may repeat, values stress every check. */
function randomBody(rnd: () => number): string {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rnd() * items.length)]!;
  const value = (depth: number): string => {
    const roll = rnd();
    if (depth < 4 && roll < 0.15) return object(depth + 1);
    if (depth < 4 && roll < 0.25) {
      return `[${Array.from({ length: Math.floor(rnd() * 4) }, () => value(depth + 1)).join(',')}]`;
    }
    if (roll < 0.55) return `"${pick(STRINGS)}"`;
    if (roll < 0.95) return pick(NUMBERS);
    return pick(['true', 'false', 'null']);
  };
  const object = (depth: number): string => {
    const members = Array.from(
      { length: Math.floor(rnd() * 5) },
      () => `${pick(SPACES)}"${pick(NAMES)}"${pick(SPACES)}:${pick(SPACES)}${value(depth)}`,
    );
    return `{${members.join(',')}}`;
  };
  return object(0);
}

/** The oracle: whether the text breaks I-JSON, read from jsonc-parser's syntax tree. */
function breaksIJson(text: string): boolean {
  const root = parseTree(text);
  const breaks = (node: Node): boolean => {
    if (node.type === 'string') return !(node.value as string).isWellFormed();
    if (node.type === 'number') {
      const written = text.slice(node.offset, node.offset + node.length);
      return getUnsafeNumberReason(written) !== undefined;
    }
    if (node.type === 'object') {
      const names = (node.children ?? []).map((p) => p.children![0]!.value as string);
      if (new Set(names).size !== names.length) return true;
      return (node.children ?? []).some((p) => breaks(p.children![0]!) || breaks(p.children![1]!));
    }
    return (node.children ?? []).some(breaks);
  };
  return root === undefined || breaks(root);
}

describe('P2 strict JSON: the fast path never skips a problem', () => {
  it(`P2: ${BODIES} random bodies: accepted exactly when the oracle finds no problem`, () => {
    const rnd = mulberry32(SEED);
    let accepted = 0;
    let refused = 0;
    for (let i = 0; i < BODIES; i++) {
      const text = randomBody(rnd);
      if (typeof JSON.parse(text) !== 'object') continue;
      const parsed = parseStrictObject(Buffer.from(text), { depthMax: DEPTH_MAX });
      expect(parsed.ok, `seed ${SEED} body ${i}: ${text}`).toBe(!breaksIJson(text));
      if (parsed.ok) {
        accepted++;
        expect(parsed.value).toEqual(JSON.parse(text));
      } else {
        refused++;
        expect(parsed.problem.message.startsWith(`${parsed.problem.field}: `)).toBe(true);
      }
    }
    // The generator must hit both sides often for the comparison to mean anything.
    expect(accepted).toBeGreaterThan(BODIES / 10);
    expect(refused).toBeGreaterThan(BODIES / 10);
  });

  it('P2: the field names where the problem is, by dotted path and array index', () => {
    const cases: [string, string, RegExp][] = [
      ['{"via":{"rail":"book","extra":12345678901234567890}}', 'via.extra', /2\^53 - 1/],
      ['{"r":[{"a":1},{"b":[1,2,{"c":"\\udc00"}]}]}', 'r.1.b.2.c', /lone UTF-16 surrogate/],
      ['{"via":{"x\\ud800":1}}', 'via.x\\ud800', /member name holds a lone/],
      ['{"a":{"b":1,"b":1}}', 'a.b', /duplicate member name/],
      ['{"a":[0.1000000000000000000001]}', 'a.0', /more digits than a double/],
      ['{"a":{"b":1e-400}}', 'a.b', /too small for a double/],
      ['{"a":{"b":1e400}}', 'a.b', /out of range/],
    ];
    for (const [text, field, message] of cases) {
      const parsed = parseStrictObject(Buffer.from(text), { depthMax: DEPTH_MAX });
      expect(parsed.ok ? null : parsed.problem.field, text).toBe(field);
      expect(parsed.ok ? '' : parsed.problem.message, text).toMatch(message);
    }
  });

  it('P2: the checks that were there before stay: UTF-8, JSON, an object, nesting', () => {
    const refuse = (bytes: Buffer) => {
      const parsed = parseStrictObject(bytes, { depthMax: DEPTH_MAX });
      return parsed.ok ? null : parsed.problem;
    };
    const notUtf8 = Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]);
    expect(refuse(notUtf8)?.message).toMatch(/UTF-8/);
    expect(refuse(Buffer.from('{"a":')))?.toMatchObject({ field: '(body)' });
    for (const text of ['[]', '"x"', '1', 'null', '']) {
      expect(refuse(Buffer.from(text))?.message).toMatch(/JSON object/);
    }
    const deep = `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    expect(refuse(Buffer.from(deep))?.message).toMatch(/nested deeper than 32 levels/);
    const inside = `{"a":${'{"b":'.repeat(31)}1${'}'.repeat(31)}}`;
    expect(refuse(Buffer.from(inside))).toBeNull();
  });
});
