// path-node/client (P18) in Node, against the node's own canonical form and verifier, the
// profile's vectors, an independent Standard Webhooks implementation and a real node: discovery,
// keys, signed calls (P5) for a member flow, error envelopes, tampering in transit, resolution
// with the commitment check (SPEC E, P3), key rotation (P1) and webhooks (P11).
import { readFileSync } from 'node:fs';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PathClient,
  PathError,
  canonicalJson,
  digestOf,
  verifySigned,
  verifyWebhook,
  type FetchLike,
  type KeysDocument,
} from 'path-node/client';
import { canonicalJson as nodeCanonicalJson } from '../src/protocol/canonical.js';
import { digestOf as nodeDigestOf } from '../src/protocol/digest.js';
import { verifyBytes as nodeVerifyBytes, verifyObject as nodeVerifyObject } from '../src/protocol/signing.js';
import * as ed from '@noble/ed25519';
import { createCredential, removeDir, runCli, startNode, tempDir, type Credential, type NodeProcess } from './support/harness.js';
import { Receiver } from './support/receiver.js';
import { signatureHeaders, signingString } from '@path-node/client/signing';
import { waitFor } from './support/wait.js';

type Json = Record<string, any>;
interface Vectors {
  key: { seed_hex: string; public_key_hex: string };
  envelope: { object_without_signature: Json; canonical_utf8: string; signature_hex: string; signed_object: Json; digest_of_signed_object: string };
  transition: { signed_object: Json; canonical_utf8: string };
  commitment: { input: Json; canonical_utf8: string; commitment: string };
  request_signature: { method: string; target: string; timestamp: string; idempotency_key: string | null; body: string; signing_string: string; signature_hex: string }[];
}
const vectors = JSON.parse(readFileSync(new URL('../../shared/vectors/protocol-vectors.json', import.meta.url), 'utf8')) as Vectors;

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };
const AMOUNT = { value: '12.50', asset_type: 'fiat', asset_code: 'EUR' };
const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;
const credentialOf = (c: Credential) => ({ keyId: c.keyId, privateKeyHex: c.seedHex });

/** The PathError a promise rejects with (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<PathError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(PathError);
    return error as PathError;
  }
  throw new Error('expected a PathError');
}

function thrown(run: () => unknown): PathError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(PathError);
    return error as PathError;
  }
  throw new Error('expected a PathError');
}

/** A fetch that rewrites the JSON answers of the URLs it matches, as a party in the middle would. */
function tampering(match: (url: string) => boolean, alter: (body: Json) => Json | void): FetchLike {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!match(input) || response.status !== 200) return response;
    const body = (await response.json()) as Json;
    const changed = alter(body) ?? body;
    return new Response(JSON.stringify(changed), { status: response.status, headers: { 'content-type': 'application/json' } });
  };
}

// ---------------------------------------------------------------------------------------------
// offline: the canonical form, digests and signatures against the node and the vectors

/** An IEEE 754 double from its big-endian hex bit pattern, as RFC 8785 Appendix B lists them. */
function double(bits: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${bits}`));
  return view.getFloat64(0);
}

describe('canonicalJson and digestOf (P2, P3): byte-identical to the node', () => {
  const appendixB: [string, string][] = [
    ['0000000000000000', '0'], ['8000000000000000', '0'], ['0000000000000001', '5e-324'], ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'], ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'], ['c340000000000000', '-9007199254740992'], ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'], ['44b52d02c7e14af6', '1e+23'], ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'], ['444b1ae4d6e2ef4f', '999999999999999900000'], ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'], ['3eb0c6f7a0b5ed8d', '0.000001'], ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'], ['41b3de4355555555', '333333333.3333333'], ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'], ['becbf647612f3696', '-0.0000033333333333333333'], ['43143ff3c1cb0959', '1424953923781206.2'],
  ];
  it.each(appendixB)('RFC 8785 Appendix B: 0x%s serialises as %s', (bits, expected) => {
    expect(canonicalJson(double(bits))).toBe(expected);
    expect(canonicalJson({ n: double(bits) })).toBe(nodeCanonicalJson({ n: double(bits) }));
  });

  const samples: [string, string, string][] = [
    ['arrays.json', '[\n  56,\n  {\n    "d": true,\n    "10": null,\n    "1": [ ]\n  }\n]', '[56,{"1":[],"10":null,"d":true}]'],
    ['structures.json', String.raw`{"1": {"f": {"f": "hi","F": 5} ,"\n": 56.0}, "10": { }, "": "empty", "a": { }, "111": [ { } ], "A": { }}`,
      String.raw`{"":"empty","1":{"\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{}],"A":{},"a":{}}`],
    ['values.json', String.raw`{"numbers": [1E30, 4.50, 333333333.33333329, 2e-3, 0.000000000000000000000000001], "escaping": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
      String.raw`{"escaping":"€$\u000f\nA'B\"\\\\\"/","literals":[null,true,false],"numbers":[1e+30,4.5,333333333.3333333,0.002,1e-27]}`],
    ['weird.json', String.raw`{"\u20ac": "Euro Sign", "1": "One", "\u0080": "Control\u007f", "\ud83d\ude02": "Smiley", "\u00f6": "Latin Small Letter O With Diaeresis", "\ufb33": "Hebrew Letter Dalet With Dagesh", "</script>": "Browser Challenge"}`,
      '{"1":"One","</script>":"Browser Challenge","\u0080":"Control\u007f","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude02":"Smiley","\ufb33":"Hebrew Letter Dalet With Dagesh"}'],
    ['french.json', '{"peach": "This sorting order", "p\u00e9ch\u00e9": "is wrong according to French", "p\u00eache": "but canonicalization MUST", "sin": "ingnore locale"}',
      '{"peach":"This sorting order","p\u00e9ch\u00e9":"is wrong according to French","p\u00eache":"but canonicalization MUST","sin":"ingnore locale"}'],
    ['unicode.json', String.raw`{"Unnormalized Unicode":"\u1e0d\u0307"}`, '{"Unnormalized Unicode":"\u1e0d\u0307"}'],
    ['3.2.3 sorting', String.raw`{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}`,
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'],
    ['controls', JSON.stringify('\b\t\n\f\r\u0000\u001f"\\/\u007f'), '"\\b\\t\\n\\f\\r\\u0000\\u001f\\"\\\\/\u007f"'],
  ];
  it.each(samples)('RFC 8785 test data %s: the expected text, and the node\'s', (_name, input, expected) => {
    const value = JSON.parse(input);
    expect(canonicalJson(value)).toBe(expected);
    expect(canonicalJson(value)).toBe(nodeCanonicalJson(value));
  });

  it('refuses what has no JSON form, as the node does', () => {
    for (const bad of [undefined, Number.NaN, Number.POSITIVE_INFINITY, { big: 10n }]) {
      expect(() => canonicalJson(bad)).toThrow();
      expect(() => nodeCanonicalJson(bad)).toThrow();
    }
  });

  it('the client\'s own RFC 8785 gives the node\'s bytes for 2,000 seeded random JSON values', () => {
    let seed = 31;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const pick = <T>(items: T[]): T => items[Math.floor(next() * items.length)]!;
    const text = () => Array.from({ length: Math.floor(next() * 6) }, () => pick(['a', 'Z', '1', '\u20ac', '\ud83d\ude00', '\u0000', '\n', '"', '\\', '\u0080', '\ufb33', '\u00e9'])).join('');
    const number = () => pick([0, -0, 1e21, 1e-7, 5e-324, 0.1 + 0.2, -123.456, 2 ** 53, (next() - 0.5) * 10 ** Math.floor(next() * 40 - 20)]);
    const value = (depth: number): unknown => {
      const kind = Math.floor(next() * (depth > 3 ? 4 : 6));
      if (kind === 0) return pick([null, true, false]);
      if (kind === 1) return number();
      if (kind === 2) return text();
      if (kind === 3) return pick([undefined, text()]);
      if (kind === 4) return Array.from({ length: Math.floor(next() * 4) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(next() * 5) }, () => [text(), value(depth + 1)]));
    };
    for (let i = 0; i < 2000; i++) {
      const inner = value(2) ?? null; // a toJSON giving undefined: canonicalize writes `undefined`
      const sample = { v: value(0), [text()]: [value(1), { toJSON: () => inner }] };
      expect(canonicalJson(sample)).toBe(nodeCanonicalJson(sample));
    }
    // What JSON.stringify does with what JSON leaves out, where the package the node uses writes text
    // that is not JSON (canonicalize, the node's): the client follows JSON.
    const left = { a: [undefined, () => 1, { toJSON: () => undefined }], b: () => 1, c: { toJSON: () => undefined } };
    expect(canonicalJson(left)).toBe(JSON.stringify(left));
    expect(canonicalJson({ at: new Date(0) })).toBe('{"at":"1970-01-01T00:00:00.000Z"}');
  });

  it('every canonical and digest vector of protocol-vectors.json, byte for byte', () => {
    const { signature: _s, ...transitionRest } = vectors.transition.signed_object;
    expect(canonicalJson(vectors.envelope.object_without_signature)).toBe(vectors.envelope.canonical_utf8);
    expect(canonicalJson(transitionRest)).toBe(vectors.transition.canonical_utf8);
    expect(canonicalJson(vectors.commitment.input)).toBe(vectors.commitment.canonical_utf8);
    expect(digestOf(vectors.envelope.signed_object)).toBe(vectors.envelope.digest_of_signed_object);
    expect(digestOf(vectors.envelope.signed_object)).toBe(nodeDigestOf(vectors.envelope.signed_object));
    expect(vectors.transition.signed_object.supersedes).toBe(digestOf(vectors.envelope.signed_object));
    const { grammar, address, accepts, limits } = vectors.commitment.input;
    expect(digestOf({ limits, accepts, address, grammar })).toBe(vectors.commitment.commitment);
    expect(digestOf({ a: 1 })).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

describe('verifySigned (P1, P2): agrees with the node on the vectors, good and bad', () => {
  const publicKey = vectors.key.public_key_hex;
  const keysWith = (public_key: string, status = 'active'): KeysDocument =>
    ({ member: 'vectors', keys: [{ kid: 'test-key-1', alg: 'Ed25519', public_key, status }] });
  const keys = keysWith(publicKey);
  const envelope = vectors.envelope.signed_object;
  const L = 2n ** 252n + 27742317777372353535851937790883648493n;
  const malleated = (() => {
    const bytes = Buffer.from(envelope.signature, 'hex');
    let s = 0n;
    for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(bytes[i]!);
    let t = s + L;
    for (let i = 32; i < 64; i++) { bytes[i] = Number(t & 0xffn); t >>= 8n; }
    return bytes.toString('hex');
  })();

  it('the vectors\' envelope and transition verify, under an active or a retired key, in any member order', () => {
    for (const object of [envelope, vectors.transition.signed_object]) {
      expect(verifySigned(object, keys)).toEqual({ valid: true });
      expect(verifySigned(object, keysWith(publicKey, 'retired'))).toEqual({ valid: true });
      expect(verifySigned(Object.fromEntries(Object.entries(object).reverse()), keys)).toEqual({ valid: true });
    }
  });

  const objectCases: [string, unknown, string][] = [
    ['an altered amount', { ...envelope, received: { ...envelope.received, value: '10.5' } }, 'signature_invalid'],
    ['an added member', { ...envelope, x_extra: 1 }, 'signature_invalid'],
    ['the transition\'s signature on the envelope', { ...envelope, signature: vectors.transition.signed_object.signature }, 'signature_invalid'],
    ['S + L (non-canonical S)', { ...envelope, signature: malleated }, 'signature_non_canonical'],
    ['an uppercase signature', { ...envelope, signature: envelope.signature.toUpperCase() }, 'signature_malformed'],
    ['a short signature', { ...envelope, signature: envelope.signature.slice(2) }, 'signature_malformed'],
    ['a signature that is not a string', { ...envelope, signature: 7 }, 'signature_malformed'],
    ['no signature', vectors.envelope.object_without_signature, 'signature_missing'],
    ['an array', [envelope], 'not_an_object'],
    ['null', null, 'not_an_object'],
  ];
  it.each(objectCases)('refuses %s with the node\'s reason', (_name, object, reason) => {
    expect(verifySigned(object, keys)).toEqual({ valid: false, reason });
    expect(nodeVerifyObject(object, publicKey)).toEqual({ valid: false, reason });
  });

  const keyCases: [string, string, string][] = [
    ['the identity (small order)', `01${'00'.repeat(31)}`, 'public_key_weak'],
    ['a point of order 8', '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05', 'public_key_weak'],
    ['y = p (non-canonical encoding)', `ed${'ff'.repeat(30)}7f`, 'public_key_weak'],
    ['y = p + 3 (non-canonical, large order)', `f0${'ff'.repeat(30)}7f`, 'public_key_weak'],
    ['uppercase hex', publicKey.toUpperCase(), 'public_key_malformed'],
    ['31 bytes', publicKey.slice(2), 'public_key_malformed'],
  ];
  it.each(keyCases)('refuses a published key that is %s with the node\'s reason', (_name, bad, reason) => {
    expect(verifySigned(envelope, keysWith(bad))).toEqual({ valid: false, reason });
    expect(nodeVerifyObject(envelope, bad)).toEqual({ valid: false, reason });
  });

  it('kid_unknown when no key of the document has the object\'s kid (or it has none)', () => {
    expect(verifySigned({ ...envelope, kid: 'test-key-2' }, keys)).toEqual({ valid: false, reason: 'kid_unknown' });
    const { kid: _kid, ...noKid } = envelope;
    expect(verifySigned(noKid, keys)).toEqual({ valid: false, reason: 'kid_unknown' });
    expect(verifySigned(envelope, { member: 'x', keys: [] })).toEqual({ valid: false, reason: 'kid_unknown' });
    expect(verifySigned(envelope, {} as KeysDocument)).toEqual({ valid: false, reason: 'kid_unknown' });
  });
});

describe('request signing (P5): the vectors\' signing strings and signatures', () => {
  it.each(vectors.request_signature.map((v) => [`${v.method} ${v.target}`, v] as const))('%s', (_name, v) => {
    const request = { method: v.method, target: v.target, timestamp: v.timestamp, idempotencyKey: v.idempotency_key ?? undefined, body: new TextEncoder().encode(v.body) };
    expect(signingString(request)).toBe(v.signing_string);
  });

  it('signs with the credential: the vectors\' signatures, millisecond timestamps strictly increasing', () => {
    const signer = { keyId: `vectors-${Date.now()}`, seed: Buffer.from(vectors.key.seed_hex, 'hex') };
    const v = vectors.request_signature[0]!;
    const stamps: string[] = [];
    for (let i = 0; i < 5; i++) {
      const headers = signatureHeaders(signer, { method: v.method, target: v.target, idempotencyKey: v.idempotency_key ?? undefined, body: new TextEncoder().encode(v.body) });
      expect(headers['path-key-id']).toBe(signer.keyId);
      expect(headers['path-timestamp']).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      const text = signingString({ method: v.method, target: v.target, timestamp: headers['path-timestamp']!, idempotencyKey: v.idempotency_key ?? undefined, body: new TextEncoder().encode(v.body) });
      expect(nodeVerifyBytes(new TextEncoder().encode(text), headers['path-signature']!, vectors.key.public_key_hex)).toEqual({ valid: true });
      stamps.push(headers['path-timestamp']!);
    }
    expect([...stamps].sort()).toEqual(stamps);
    expect(new Set(stamps).size).toBe(stamps.length);
    // At the vector's own time the signature is the vector's (Ed25519 is deterministic).
    const text = signingString({ method: v.method, target: v.target, timestamp: v.timestamp, idempotencyKey: v.idempotency_key ?? undefined, body: new TextEncoder().encode(v.body) });
    expect(Buffer.from(ed.sign(new TextEncoder().encode(text), signer.seed)).toString('hex')).toBe(v.signature_hex);
  });
});

// ---------------------------------------------------------------------------------------------
// against a real node

let node: NodeProcess;
let dataDir: string;
let local: Credential;
let beta: Credential;
let member: PathClient;
let anon: PathClient;
const receiver = new Receiver();
const deliveries = receiver.deliveries;
interface Payee { subjectId: string; addressId: string; address: string }
let payee: Payee;

async function newPayee(client: PathClient, intent: boolean): Promise<Payee> {
  const subject = await client.call('subjects.create', { body: { subject_type: 'legal_entity' } });
  const address = await client.call('addresses.create', { body: { subject_id: subject.body.id, profile: 'directory', discoverability: 'network' } });
  await client.call('targets.create', { params: { id: address.body.id }, body: { ...EUR, account_kind: 'own_ledger', account_ref: 'acct-eur-1', is_default: true } });
  if (intent) await client.call('addresses.standing_intent', { params: { id: address.body.id }, body: { accepts: [EUR] } });
  return { subjectId: subject.body.id, addressId: address.body.id, address: address.body.address };
}

async function newRequest(client: PathClient = member): Promise<string> {
  const created = await client.call('requests.create', { body: { accepts: [EUR], address_id: payee.addressId, amount: AMOUNT } });
  return created.body.reference;
}

beforeAll(async () => {
  await receiver.open();
  const hooks = `http://127.0.0.1:${receiver.port}/ops`;
  dataDir = tempDir('path-client');
  local = createCredential(dataDir, 'local', { local: true });
  beta = createCredential(dataDir, 'beta', { local: false });
  node = await startNode({ dataDir, args: ['--dev', '--webhook-urls', hooks] });
  member = new PathClient({ baseUrl: node.baseUrl, credential: credentialOf(local) });
  anon = new PathClient({ baseUrl: `${node.baseUrl}/` });
  payee = await newPayee(member, true);
});

afterAll(async () => {
  await node?.stop();
  await receiver.close();
  if (dataDir) removeDir(dataDir);
});

describe('discover() and keys() (P4)', () => {
  it('read the configuration and keys documents at the node\'s fixed routes', async () => {
    const configuration = await anon.discover();
    expect(configuration).toEqual(await (await fetch(`${node.baseUrl}/.well-known/path-configuration`)).json());
    expect(configuration.endpoints['requests.get']).toEqual({ method: 'GET', url: `${node.baseUrl}/api/path/v1/requests/{reference}` });
    const keys = await anon.keys();
    expect(keys).toEqual(await (await fetch(`${node.baseUrl}/.well-known/path-keys`)).json());
    expect(keys.keys.some((k) => k.status === 'active')).toBe(true);
  });
});

describe('call(): a member flow, signed per P5', () => {
  it('creates a request, reads it publicly (verified), marks it paid and issues a verified receipt', async () => {
    const created = await member.call('requests.create', { body: { accepts: [EUR], address_id: payee.addressId, amount: AMOUNT, order_reference: 'order-1' } });
    expect(created.status).toBe(201);
    expect(created.headers.get('path-request-id')).toBeTruthy();
    const reference = created.body.reference as string;

    const read = await anon.call('requests.get', { params: { reference } });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ type: 'path.request', reference, status: 'created', payee: { member: 'local', address: payee.address } });
    expect(verifySigned(read.body, await anon.keys())).toEqual({ valid: true });

    const paid = await new PathClient({ baseUrl: node.baseUrl, credential: credentialOf(beta) }).call('requests.paid', { params: { reference } });
    expect(paid.body).toEqual({ reference, status: 'paid' });

    const receipt = await member.call('receipts.create', {
      body: { issued_by: 'payee', request: reference, via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-1' }] },
    });
    expect(receipt.status).toBe(201);
    expect(receipt.body).toMatchObject({ type: 'path.receipt', request: reference, status: 'settled', issuer: 'local' });
    const chain = await anon.call('receipts.transitions', { params: { reference: receipt.body.reference } });
    expect(chain.body.transitions[0].envelope).toEqual(receipt.body);
    const link = await anon.call('links.get', { params: { reference: receipt.body.reference } });
    expect(link.body).toEqual(receipt.body);
  });

  it('two identical calls in a row, or at once, are not refused as replays (strictly increasing timestamps)', async () => {
    const reference = await newRequest();
    const query = { subject_id: payee.subjectId };
    const first = await member.call('addresses.list', { query });
    const second = await member.call('addresses.list', { query });
    expect([first.status, second.status]).toEqual([200, 200]);
    const together = await Promise.all([1, 2, 3].map(() => member.call('requests.paid', { params: { reference } })));
    expect(together.map((r) => r.status)).toEqual([200, 200, 200]);
    // A second client with the same credential in the same process: still distinct.
    const twin = new PathClient({ baseUrl: node.baseUrl, credential: credentialOf(local) });
    const both = await Promise.all([member.call('addresses.list', { query }), twin.call('addresses.list', { query })]);
    expect(both.map((r) => r.status)).toEqual([200, 200]);
  });

  it('sends Path-Idempotency-Key: a replay answers the stored request', async () => {
    const body = { accepts: [EUR], address_id: payee.addressId, amount: AMOUNT };
    const idempotencyKey = `idem-${Date.now()}`;
    const first = await member.call('requests.create', { body, idempotencyKey });
    const again = await member.call('requests.create', { body, idempotencyKey });
    expect(again.body.reference).toBe(first.body.reference);
    expect(again.headers.get('path-idempotent-replayed')).toBe('true');
  });

  it('an instruction for a request is a public call; its answer is verified', async () => {
    const reference = await newRequest();
    const instruction = await anon.call('instructions.create', { body: { request: reference, via: EUR } });
    expect(instruction.status).toBe(201);
    expect(instruction.body).toMatchObject({ type: 'path.instruction', request: reference, status: 'open', via: EUR });
  });
});

describe('call(): errors', () => {
  it('an error envelope becomes PathError with status, code, message and detail', async () => {
    const invalid = await rejection(member.call('requests.create', { body: { accepts: 'EUR' } }));
    expect(invalid.status).toBe(400);
    expect(invalid.code).toBe('path.core.invalid_request');
    expect(typeof invalid.message).toBe('string');
    expect(invalid.detail?.field).toBe('accepts');
    const missing = await rejection(anon.call('requests.get', { params: { reference: 'req_0123456789abcdef0123456789abcdef' } }));
    expect([missing.status, missing.code]).toEqual([404, 'path.core.not_found']);
    const unauthenticated = await rejection(anon.call('requests.create', { body: { accepts: [EUR] } }));
    expect([unauthenticated.status, unauthenticated.code]).toEqual([401, 'path.auth.unauthenticated']);
    expect(unauthenticated.detail).toEqual({ reason: 'missing' });
  });

  it('a missing URL parameter or an unknown operation is refused before any request', async () => {
    const seen: string[] = [];
    const counting = new PathClient({ baseUrl: node.baseUrl, fetch: (input, init) => { seen.push(input); return fetch(input, init); } });
    await counting.discover();
    seen.length = 0;
    const missing = await rejection(counting.call('requests.get', { params: { ref: 'x' } }));
    expect([missing.status, missing.code, missing.detail]).toEqual([0, 'path.client.param_missing', { operation: 'requests.get', param: 'reference' }]);
    expect(seen).toEqual([]);
    const unknown = await rejection(counting.call('requests.teleport'));
    expect(unknown.code).toBe('path.client.operation_unknown');
    // The discovery document is asked again once, in case the node learned the operation.
    expect(seen).toEqual([`${node.baseUrl}/.well-known/path-configuration`]);
  });

  it('URL parameters are URL-encoded into the template', async () => {
    const seen: string[] = [];
    const counting = new PathClient({ baseUrl: node.baseUrl, fetch: (input, init) => { seen.push(input); return fetch(input, init); } });
    await rejection(counting.call('requests.get', { params: { reference: 'a/b c?d' } }));
    expect(seen.at(-1)).toBe(`${node.baseUrl}/api/path/v1/requests/a%2Fb%20c%3Fd`);
  });
});

describe('call(): what arrives altered does not verify', () => {
  const requestUrl = (url: string) => url.includes('/requests/req_');

  it('one field changed in transit throws path.client.signature_invalid', async () => {
    const reference = await newRequest();
    const altered = new PathClient({ baseUrl: node.baseUrl, fetch: tampering(requestUrl, (b) => { b.amount.value = '1.00'; }) });
    const error = await rejection(altered.call('requests.get', { params: { reference } }));
    expect(error.code).toBe('path.client.signature_invalid');
    expect(error.status).toBe(200);
    expect(error.detail).toMatchObject({ at: 'body', reason: 'signature_invalid' });
  });

  it('a signature stripped in transit is refused too, where the answer must be signed', async () => {
    const reference = await newRequest();
    const stripped = new PathClient({ baseUrl: node.baseUrl, fetch: tampering(requestUrl, (b) => { delete b.signature; }) });
    const error = await rejection(stripped.call('requests.get', { params: { reference } }));
    expect(error.code).toBe('path.client.signature_invalid');
    expect(error.detail).toMatchObject({ at: 'body', reason: 'signature_missing' });
  });

  it('a nested envelope (a receipt transition\'s) changed in transit is refused', async () => {
    const receipt = await member.call('receipts.create', { body: { issued_by: 'payee', via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-2' }] } });
    const altered = new PathClient({ baseUrl: node.baseUrl, fetch: tampering((u) => u.endsWith('/transitions'), (b) => { b.transitions[0].envelope.received.value = '99.00'; }) });
    const error = await rejection(altered.call('receipts.transitions', { params: { reference: receipt.body.reference } }));
    expect(error.detail).toMatchObject({ at: 'body.transitions[0].envelope', reason: 'signature_invalid' });
  });

  it('a kid the keys document does not have: the document is read again once, then refused', async () => {
    const reference = await newRequest();
    const seen: string[] = [];
    const inner = tampering(requestUrl, (b) => { b.kid = 'ed25519-00000000000000000000000000000000'; });
    const client = new PathClient({ baseUrl: node.baseUrl, fetch: (input, init) => { seen.push(input); return inner(input, init); } });
    await client.keys();
    const error = await rejection(client.call('requests.get', { params: { reference } }));
    expect(error.detail).toMatchObject({ reason: 'kid_unknown', kid: 'ed25519-00000000000000000000000000000000' });
    expect(seen.filter((u) => u.endsWith('/.well-known/path-keys'))).toHaveLength(2);
  });
});

describe('resolve() (SPEC E, P3)', () => {
  it('an address with a standing intent: both statements verified, the commitment recomputed', async () => {
    const { answer, commitment } = await anon.resolve(payee.address);
    expect(answer).toMatchObject({ kind: 'resolver_answer', address: payee.address, standing: 'holder', valid: true, accepts: [EUR] });
    expect(answer.commitment).toBe(digestOf({ grammar: answer.grammar, address: payee.address, accepts: answer.accepts, limits: answer.limits }));
    expect(commitment).toMatchObject({ type: 'path.address.commitment', address: payee.address, commitment: answer.commitment });
    const keys = await anon.keys();
    expect(verifySigned(answer, keys)).toEqual({ valid: true });
    expect(verifySigned(commitment, keys)).toEqual({ valid: true });
  });

  it('an address without a standing intent: commitment null is valid and returned as is', async () => {
    const bare = await newPayee(member, false);
    const { answer, commitment } = await anon.resolve(bare.address);
    expect(answer.commitment).toBeNull();
    expect(answer.accepts).toEqual([EUR]);
    expect(commitment).toBeNull();
  });

  it('terms altered in transit throw path.address.commitment_mismatch', async () => {
    const USD = { rail: 'book', asset_type: 'fiat', asset_code: 'USD' };
    const altered = new PathClient({ baseUrl: node.baseUrl, fetch: tampering((u) => u.includes('/resolver/'), (b) => { b.accepts = [USD]; }) });
    const error = await rejection(altered.resolve(payee.address));
    expect(error.code).toBe('path.address.commitment_mismatch');
    expect(error.detail).toMatchObject({ address: payee.address, reason: 'terms_differ' });
  });

  it('a stale but validly signed answer (the terms before a change) throws commitment_mismatch', async () => {
    const own = await newPayee(member, true);
    const stale = (await anon.resolve(own.address)).answer;
    await member.call('addresses.standing_intent', { params: { id: own.addressId }, body: { accepts: [EUR, { rail: 'book', asset_type: 'fiat', asset_code: 'GBP' }] } });
    const replaying = new PathClient({ baseUrl: node.baseUrl, fetch: tampering((u) => u.includes('/resolver/'), () => clone(stale)) });
    const error = await rejection(replaying.resolve(own.address));
    expect(error.code).toBe('path.address.commitment_mismatch');
    expect(error.detail).toMatchObject({ reason: 'pledges_differ' });
    // The same stale answer also cannot stand in for another address.
    const elsewhere = new PathClient({ baseUrl: node.baseUrl, fetch: tampering((u) => u.includes('/resolver/'), () => clone(stale)) });
    expect((await rejection(elsewhere.resolve(payee.address))).detail).toMatchObject({ reason: 'answer_for_another_address' });
  });

  it('a commitment dropped from the answer is refused while the node publishes one', async () => {
    const dropping = new PathClient({ baseUrl: node.baseUrl, fetch: tampering((u) => u.includes('/resolver/'), (b) => { b.commitment = null; }) });
    expect((await rejection(dropping.resolve(payee.address))).detail).toMatchObject({ reason: 'answer_drops_the_commitment' });
  });

  it('a commitment object whose signature does not verify throws signature_invalid', async () => {
    const forged = new PathClient({ baseUrl: node.baseUrl, fetch: tampering((u) => u.includes('/commitments/'), (b) => { b.committed_at = '2020-01-01T00:00:00Z'; }) });
    const error = await rejection(forged.resolve(payee.address));
    expect(error.code).toBe('path.client.signature_invalid');
    expect(error.detail).toMatchObject({ at: 'commitment object', reason: 'signature_invalid' });
  });
});

describe('verifyWebhook (P11)', () => {
  const secret = `whsec_${Buffer.from('a 32-byte secret for the tests!!').toString('base64')}`;
  const payload = JSON.stringify({ type: 'path.event', id: 'evt_1', event: 'receipt.issued', data: { reference: 'rct_1' } });
  const headersFor = (signature: string, at: Date, id = 'msg_1') =>
    ({ 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature });

  it('v1: a payload signed by the standardwebhooks package verifies with the whsec_ secret', () => {
    const now = new Date();
    const signature = new Webhook(secret).sign('msg_1', now, payload);
    expect(signature).toMatch(/^v1,/);
    const headers = headersFor(signature, now);
    expect(verifyWebhook(payload, headers, { secret })).toEqual(JSON.parse(payload));
    // A Headers object, upper-case names in a record, several signatures, a secret being rotated.
    expect(verifyWebhook(payload, new Headers(headers), { secret }).id).toBe('evt_1');
    const upper = { 'Webhook-Id': headers['webhook-id'], 'WEBHOOK-TIMESTAMP': headers['webhook-timestamp'], 'Webhook-Signature': `v1,${Buffer.alloc(32).toString('base64')} ${signature}` };
    expect(verifyWebhook(new TextEncoder().encode(payload), upper, { secret: [`whsec_${Buffer.alloc(32, 1).toString('base64')}`, secret] }).id).toBe('evt_1');
    const repeated = new Headers(headers);
    repeated.set('webhook-signature', `v1,${Buffer.alloc(32).toString('base64')}`);
    repeated.append('webhook-signature', signature);
    expect(verifyWebhook(payload, repeated, { secret }).id).toBe('evt_1');
  });

  it('v1: a wrong secret, a stale or future timestamp, a changed body or id are refused', () => {
    const now = new Date();
    const signature = new Webhook(secret).sign('msg_1', now, payload);
    const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    expect(thrown(() => verifyWebhook(payload, headersFor(signature, now), { secret: other })).detail).toEqual({ reason: 'signature_invalid' });
    expect(thrown(() => verifyWebhook(payload.replace('rct_1', 'rct_2'), headersFor(signature, now), { secret })).detail).toEqual({ reason: 'signature_invalid' });
    expect(thrown(() => verifyWebhook(payload, headersFor(signature, now, 'msg_2'), { secret })).code).toBe('path.client.webhook_invalid');
    for (const offset of [-6 * 60_000, 6 * 60_000]) {
      const at = new Date(now.getTime() + offset);
      const stale = thrown(() => verifyWebhook(payload, headersFor(new Webhook(secret).sign('msg_1', at, payload), at), { secret }));
      expect(stale.code).toBe('path.client.webhook_invalid');
      expect(stale.detail).toEqual({ reason: 'timestamp_stale', tolerance_seconds: 300 });
    }
    const { 'webhook-signature': _s, ...unsigned } = headersFor(signature, now);
    expect(thrown(() => verifyWebhook(payload, unsigned, { secret })).detail).toEqual({ reason: 'headers_missing' });
  });

  it('v1a: a real delivery from the node verifies with its keys document; an altered body does not', async () => {
    const receipt = await member.call('receipts.create', { body: { issued_by: 'payee', via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-3' }] } });
    const delivery = await waitFor('receipt.issued at the operator endpoint', () => deliveries.find((d) => d.body?.data?.reference === receipt.body.reference));
    expect(String(delivery.headers['webhook-signature'])).toMatch(/^v1,\S+ v1a,\S+$/);
    const keys = await anon.keys();
    const event = verifyWebhook(delivery.raw, delivery.headers, { keys });
    expect(event).toMatchObject({ type: 'path.event', event: 'receipt.issued', data: { reference: receipt.body.reference } });
    expect(event.data).toEqual(receipt.body);
    const headers = new Headers(Object.entries(delivery.headers).map(([k, v]) => [k, String(v)]));
    expect(verifyWebhook(delivery.raw, headers, { keys }).id).toBe(event.id);
    const altered = thrown(() => verifyWebhook(delivery.raw.replace('"BE-3"', '"BE-4"'), delivery.headers, { keys }));
    expect([altered.code, altered.detail]).toEqual(['path.client.webhook_invalid', { reason: 'signature_invalid' }]);
    // v1 with the node's own secret verifies the same delivery; another secret does not.
    const nodeSecret = JSON.parse(runCli(['webhooks', 'secret', '--data-dir', dataDir])).secret as string;
    expect(verifyWebhook(delivery.raw, delivery.headers, { secret: nodeSecret }).id).toBe(event.id);
    expect(thrown(() => verifyWebhook(delivery.raw, delivery.headers, { secret })).detail).toEqual({ reason: 'signature_invalid' });
    // With keys of another operator, it does not verify either.
    const foreign: KeysDocument = { member: 'x', keys: [{ kid: 'k', alg: 'Ed25519', public_key: vectors.key.public_key_hex, status: 'active' }] };
    expect(thrown(() => verifyWebhook(delivery.raw, delivery.headers, { keys: foreign })).detail).toEqual({ reason: 'signature_invalid' });
  });
});

describe('key rotation (P1): retired keys still verify what they signed', () => {
  it('an object signed before `keys rotate` verifies with the new document; a new kid is fetched once', async () => {
    const before = await member.call('receipts.create', { body: { issued_by: 'payee', via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-5' }] } });
    const oldKid = before.body.kid as string;
    const seen: string[] = [];
    const watching = new PathClient({ baseUrl: node.baseUrl, credential: credentialOf(local), fetch: (input, init) => { seen.push(input); return fetch(input, init); } });
    await watching.keys();

    const newKid = JSON.parse(runCli(['keys', 'rotate', '--data-dir', dataDir]).trim().split('\n').at(-1)!).kid as string;
    const keys = await waitFor('the rotated key to be published', async () => {
      const doc = await anon.keys();
      return doc.keys.find((k) => k.kid === newKid)?.status === 'active' ? doc : undefined;
    }, 5000, 100);
    expect(keys.keys.find((k) => k.kid === oldKid)?.status).toBe('retired');
    expect(verifySigned(before.body, keys)).toEqual({ valid: true });
    expect((await anon.call('receipts.get', { params: { reference: before.body.reference } })).body).toEqual(before.body);

    seen.length = 0;
    const after = await watching.call('receipts.create', { body: { issued_by: 'payee', via: EUR, received: AMOUNT, rail_references: [{ type: 'book_entry', value: 'BE-6' }] } });
    expect(after.body.kid).toBe(newKid);
    expect(seen.filter((u) => u.endsWith('/.well-known/path-keys'))).toHaveLength(1);
    // Without the retired key the old receipt no longer verifies: the document is what counts.
    const activeOnly = { ...keys, keys: keys.keys.filter((k) => k.status === 'active') };
    expect(verifySigned(before.body, activeOnly)).toEqual({ valid: false, reason: 'kid_unknown' });
  });
});
