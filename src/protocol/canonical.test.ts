// RFC 8785 (JCS) canonicalisation (P2, P3): the RFC's own samples, the cyberphone reference test
// data (github.com/cyberphone/json-canonicalization, testdata/), and the profile's vectors.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { canonicalBytes, canonicalJson } from './canonical.js';

interface Vectors {
  envelope: { object_without_signature: Record<string, unknown>; canonical_utf8: string };
  transition: { signed_object: Record<string, unknown>; canonical_utf8: string };
  commitment: { input: Record<string, unknown>; canonical_utf8: string };
}
const vectors = JSON.parse(
  readFileSync(new URL('../../../shared/vectors/protocol-vectors.json', import.meta.url), 'utf8'),
) as Vectors;

/** An IEEE 754 double from its big-endian hex bit pattern, as RFC 8785 Appendix B lists them. */
function double(bits: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${bits}`));
  return view.getFloat64(0);
}

describe('RFC 8785 Appendix B number serialisation (P2)', () => {
  const table: [string, string][] = [
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ];
  it.each(table)('0x%s serialises as %s', (bits, expected) => {
    expect(canonicalJson(double(bits))).toBe(expected);
    expect(canonicalJson({ n: double(bits) })).toBe(`{"n":${expected}}`);
  });

  it.each([
    ['0', 0, '0'],
    ['-0', -0, '0'],
    ['1e21', 1e21, '1e+21'],
    ['1000000000000000000000', 1000000000000000000000, '1e+21'],
    ['1e20', 1e20, '100000000000000000000'],
    ['333333333.33333329', 333333333.33333329, '333333333.3333333'],
    ['1e-7', 1e-7, '1e-7'],
    ['1e-6', 1e-6, '0.000001'],
    ['5e-324', 5e-324, '5e-324'],
    ['1.7976931348623157e308', 1.7976931348623157e308, '1.7976931348623157e+308'],
    ['9007199254740992', 9007199254740992, '9007199254740992'],
    ['4.50', 4.5, '4.5'],
    ['2e-3', 2e-3, '0.002'],
    ['1E30', 1e30, '1e+30'],
  ] as [string, number, string][])(
    'the literal %s serialises canonically',
    (_literal, value, expected) => {
      expect(canonicalJson(value)).toBe(expected);
    },
  );

  it('refuses NaN and the infinities, which have no JSON form (RFC 8785 3.2.2.2)', () => {
    expect(() => canonicalJson(double('7fffffffffffffff'))).toThrow();
    expect(() => canonicalJson(double('7ff0000000000000'))).toThrow();
    expect(() => canonicalJson({ amount: Number.NEGATIVE_INFINITY })).toThrow();
    expect(() => canonicalJson([Number.NaN])).toThrow();
  });

  it('refuses values with no JSON form at all', () => {
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
    expect(() => canonicalJson({ big: 10n })).toThrow();
  });
});

describe('RFC 8785 reference test data (cyberphone testdata/)', () => {
  it('arrays.json: array order is kept, object members inside are sorted', () => {
    const input = '[\n  56,\n  {\n    "d": true,\n    "10": null,\n    "1": [ ]\n  }\n]';
    expect(canonicalJson(JSON.parse(input))).toBe('[56,{"1":[],"10":null,"d":true}]');
  });

  it('structures.json: nested sorting, 56.0 -> 56, no whitespace', () => {
    const input = String.raw`{
  "1": {"f": {"f": "hi","F": 5} ,"\n": 56.0},
  "10": { },
  "": "empty",
  "a": { },
  "111": [ { } ],
  "A": { }
}`;
    expect(canonicalJson(JSON.parse(input))).toBe(
      String.raw`{"":"empty","1":{"\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{}],"A":{},"a":{}}`,
    );
  });

  it('values.json: numbers, string escaping and literals', () => {
    const input = String.raw`{
  "numbers": [1E30, 4.50, 333333333.33333329, 2e-3, 0.000000000000000000000000001],
  "escaping": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`;
    expect(canonicalJson(JSON.parse(input))).toBe(
      String.raw`{"escaping":"€$\u000f\nA'B\"\\\\\"/","literals":[null,true,false],` +
        String.raw`"numbers":[1e+30,4.5,333333333.3333333,0.002,1e-27]}`,
    );
  });

  it('weird.json: keys sorted by UTF-16 code units; U+0080 and U+007F are written raw', () => {
    const input = String.raw`{
  "\u20ac": "Euro Sign",
  "1": "One",
  "\u0080": "Control\u007f",
  "\ud83d\ude02": "Smiley",
  "\u00f6": "Latin Small Letter O With Diaeresis",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "</script>": "Browser Challenge"
}`;
    expect(canonicalJson(JSON.parse(input))).toBe(
      '{"1":"One","</script>":"Browser Challenge","\u0080":"Control\u007f",' +
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",' +
        '"\ud83d\ude02":"Smiley","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it('french.json: sorting ignores the locale', () => {
    const input =
      '{\n  "peach": "This sorting order",\n' +
      '  "p\u00e9ch\u00e9": "is wrong according to French",\n' +
      '  "p\u00eache": "but canonicalization MUST",\n  "sin":   "ingnore locale"\n}\n';
    expect(canonicalJson(JSON.parse(input))).toBe(
      '{"peach":"This sorting order","p\u00e9ch\u00e9":"is wrong according to French",' +
        '"p\u00eache":"but canonicalization MUST","sin":"ingnore locale"}',
    );
  });

  it('unicode.json: strings are not Unicode-normalised', () => {
    const input = String.raw`{"Unnormalized Unicode":"\u1e0d\u0307"}`;
    expect(canonicalJson(JSON.parse(input))).toBe('{"Unnormalized Unicode":"\u1e0d\u0307"}');
  });
});

describe('RFC 8785 section 3.2 worked examples', () => {
  it('3.2.3 sorting example: UTF-16 code unit order, so U+1F600 sorts before U+FB33', () => {
    const input = String.raw`{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`;
    expect(canonicalJson(JSON.parse(input))).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control",' +
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",' +
        '"\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it('3.2.4 the UTF-8 bytes of the 3.2.2 sample, byte for byte', () => {
    const input = String.raw`{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`;
    const hex =
      '7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72 75 65 2c 66 61 6c 73 65' +
      ' 5d 2c 22 6e 75 6d 62 65 72 73 22 3a 5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33' +
      ' 33 33 2c 31 65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37 5d 2c 22 73' +
      ' 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30 30 66 5c 6e 41 27 42 5c 22 5c 5c 5c' +
      ' 5c 5c 22 2f 22 7d';
    const bytes = canonicalBytes(JSON.parse(input));
    expect(bytes.toString('hex')).toBe(hex.replaceAll(' ', ''));
  });

  it(
    'escapes controls other than the short forms as ' +
      'lowercase \\u00xx and leaves "/" and DEL alone',
    () => {
      expect(canonicalJson('\b\t\n\f\r\u0000\u001f"\\/\u007f')).toBe(
        '"\\b\\t\\n\\f\\r\\u0000\\u001f\\"\\\\/\u007f"',
      );
    },
  );

  it('sorts by code units, not code points: a surrogate pair (D83D) sorts before U+FB33', () => {
    expect(canonicalJson({ '\ufb33': 1, '\ud83d\ude00': 2 })).toBe('{"\ud83d\ude00":2,"\ufb33":1}');
  });
});

describe('canonical form properties (P2)', () => {
  it('does not depend on member insertion order, at any depth', () => {
    const a = { b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } };
    const b = { a: { c: null, d: [3, { y: 2, z: 1 }] }, b: 1 };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe('{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}');
  });

  it('is a fixed point: canonicalising the parsed canonical form gives the same text', () => {
    const text = canonicalJson(vectors.envelope.object_without_signature);
    expect(canonicalJson(JSON.parse(text))).toBe(text);
  });

  it('omits undefined members, so an object and its JSON round trip give the same bytes', () => {
    const value = { a: 1, gone: undefined, nested: { also: undefined, kept: 'x' } };
    expect(canonicalJson(value)).toBe('{"a":1,"nested":{"kept":"x"}}');
    expect(canonicalJson(value)).toBe(canonicalJson(JSON.parse(JSON.stringify(value))));
  });

  it('canonicalBytes is the UTF-8 encoding of canonicalJson', () => {
    const value = { 'caf\u00e9': '\u20ac\ud83d\ude02' };
    const bytes = canonicalBytes(value);
    expect(Buffer.isBuffer(bytes)).toBe(true);
    // { " c a f é " : " € 😂 " }: é is 2 bytes, € 3,
    // the emoji 4 (one code point, not two surrogates)
    expect(bytes.toString('hex')).toBe('7b22636166c3a9223a22e282acf09f9882227d');
    expect(bytes.toString('utf8')).toBe(canonicalJson(value));
  });
});

describe('profile vectors, byte for byte (P2, P3)', () => {
  it('envelope: the object without its signature', () => {
    const expected = Buffer.from(vectors.envelope.canonical_utf8, 'utf8');
    expect(canonicalJson(vectors.envelope.object_without_signature)).toBe(
      vectors.envelope.canonical_utf8,
    );
    expect(canonicalBytes(vectors.envelope.object_without_signature).equals(expected)).toBe(true);
  });

  it('transition: the signed object with its top-level signature removed', () => {
    const { signature, ...rest } = vectors.transition.signed_object;
    expect(typeof signature).toBe('string');
    const expected = Buffer.from(vectors.transition.canonical_utf8, 'utf8');
    expect(canonicalJson(rest)).toBe(vectors.transition.canonical_utf8);
    expect(canonicalBytes(rest).equals(expected)).toBe(true);
  });

  it('commitment input {grammar, address, accepts, limits}', () => {
    const expected = Buffer.from(vectors.commitment.canonical_utf8, 'utf8');
    expect(canonicalJson(vectors.commitment.input)).toBe(vectors.commitment.canonical_utf8);
    expect(canonicalBytes(vectors.commitment.input).equals(expected)).toBe(true);
  });
});
