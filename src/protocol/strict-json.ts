// Request bodies as I-JSON (RFC 7493), because the node signs what it receives (P2): RFC 8785
// is defined on I-JSON only, and a value JSON.parse silently changed (a duplicate member dropped,
// a lone surrogate, a rounded number) would be signed as if the client had sent it.
//
// Fast path: JSON.parse, one walk of the result, and a scan of the text that can only err
// towards suspicion. Only a suspicious body is read again by a maintained tokenizer
// (jsonc-parser), with the numbers judged by lossless-json; bench/README.md has the costs.
/// <reference lib="es2024.string" />
import { visit } from 'jsonc-parser';
import { getUnsafeNumberReason } from 'lossless-json';

export interface JsonProblem {
  /** Dotted path of the offending value (`via.extra`, `rail_references.0.value`), or `(body)`. */
  field: string;
  message: string;
}

export type ParsedObject =
  { ok: true; value: Record<string, unknown> } | { ok: false; problem: JsonProblem };

type Segment = string | number;

/** The field named when the problem is the body as a whole. */
const BODY = '(body)';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The body as a JSON object, or the first problem: not UTF-8, not JSON, not an object, nested
 * deeper than `depthMax`, or not I-JSON (duplicate member name, lone surrogate, a number a
 * double cannot hold exactly as written, or an integer beyond 2^53 - 1).
 */
export function parseStrictObject(bytes: Uint8Array, options: { depthMax: number }): ParsedObject {
  const bad = (message: string): ParsedObject => ({ ok: false, problem: { field: BODY, message } });
  if (bytes.length === 0) return bad('request body must be a JSON object');
  let text: string;
  let value: unknown;
  try {
    text = utf8.decode(bytes);
    value = JSON.parse(text);
  } catch {
    return bad('request body is not valid UTF-8 JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return bad('request body must be a JSON object');
  }
  const object = value as Record<string, unknown>;
  const shape = walk(object, options.depthMax);
  if ('problem' in shape) return { ok: false, problem: shape.problem };
  if (!mayBreakIJson(text, shape)) return { ok: true, value: object };
  const problem = iJsonProblem(text);
  return problem === null ? { ok: true, value: object } : { ok: false, problem };
}

/** What the walk of the parsed body counts on the way: the cheap half of the I-JSON check. */
interface Shape {
  /** Members of every object, added up. */
  members: number;
  /** Number values, anywhere. */
  numbers: number;
  /** Some member name or string is not well-formed UTF-16 (it holds a lone surrogate). */
  illFormed: boolean;
}

/**
 * False only when the text cannot hold a duplicate member, a lone surrogate or a number that
 * parsing changed; then the strict read is skipped. Cheap checks that can only err towards
 * suspicion (src/protocol/strict-json.test.ts compares them with a full read), so that a valid
 * body almost never pays for the strict read; bench/README.md has the costs.
 */
function mayBreakIJson(text: string, shape: Shape): boolean {
  if (shape.illFormed) return true;
  if (shape.numbers > 0 && hasUnsafeNumber(text)) return true;
  // More member names written than the parsed objects hold: a name was written twice.
  return namesWritten(text) !== shape.members;
}

const QUOTE = 0x22;
const MINUS = 0x2d;
const DOT = 0x2e;

function isJsonSpace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
}

/**
 * Colons with a quote before them (white space aside). Every member name is one, so this never
 * counts fewer than the names written; a `\":` inside a string counts one more, which only
 * costs a strict read.
 */
function namesWritten(text: string): number {
  let names = 0;
  for (let at = text.indexOf(':'); at !== -1; at = text.indexOf(':', at + 1)) {
    let before = at - 1;
    while (isJsonSpace(text.charCodeAt(before))) before--;
    if (text.charCodeAt(before) === QUOTE) names++;
  }
  return names;
}

/**
 * Whether some number may not be what JSON.parse made of it. Only a number written with 16 or
 * more digits (a double holds every decimal of up to 15 significant digits exactly, and every
 * integer of 15 digits is below 2^53) or with an exponent can be; each such one is judged by
 * lossless-json. A number follows `:`, `,` or `[` and white space; the same shape inside a
 * string only costs a strict read that finds nothing.
 */
function hasUnsafeNumber(text: string): boolean {
  for (const opener of [':', ',', '[']) {
    for (let at = text.indexOf(opener); at !== -1; at = text.indexOf(opener, at + 1)) {
      const written = longOrExponentNumberAt(text, at + 1);
      if (written !== null && getUnsafeNumberReason(written) !== undefined) return true;
    }
  }
  return false;
}

/** The number written at `start` (after white space) if it has 16+ digits or an exponent. */
function longOrExponentNumberAt(text: string, start: number): string | null {
  let at = start;
  while (isJsonSpace(text.charCodeAt(at))) at++;
  const begin = at;
  if (text.charCodeAt(at) === MINUS) at++;
  let digits = 0;
  let code = text.charCodeAt(at);
  for (; (code >= 0x30 && code <= 0x39) || code === DOT; code = text.charCodeAt(++at)) {
    if (code !== DOT) digits++;
  }
  if (digits === 0) return null;
  if (code !== 0x65 && code !== 0x45) return digits >= 16 ? text.slice(begin, at) : null;
  at++;
  code = text.charCodeAt(at);
  if (code === 0x2b || code === MINUS) code = text.charCodeAt(++at);
  while (code >= 0x30 && code <= 0x39) code = text.charCodeAt(++at);
  return text.slice(begin, at);
}

interface Frame {
  node: object;
  /** Member names of an object; null for an array. */
  keys: string[] | null;
  next: number;
}

/**
 * Refuses nesting deeper than `depthMax` and a number out of range, and counts the Shape.
 * Without recursion (a body may nest 100,000 deep); a path is built only for an answer.
 */
function walk(root: object, depthMax: number): Shape | { problem: JsonProblem } {
  const rootKeys = Object.keys(root);
  const frames: Frame[] = [{ node: root, keys: rootKeys, next: 0 }];
  const path: Segment[] = [];
  const shape: Shape = { members: rootKeys.length, numbers: 0, illFormed: false };
  while (frames.length > 0) {
    const frame = frames[frames.length - 1]!;
    const count = frame.keys === null ? (frame.node as unknown[]).length : frame.keys.length;
    if (frame.next === count) {
      frames.pop();
      path.pop();
      continue;
    }
    const key: Segment = frame.keys === null ? frame.next : frame.keys[frame.next]!;
    frame.next++;
    if (typeof key === 'string' && !key.isWellFormed()) shape.illFormed = true;
    const child = (frame.node as Record<Segment, unknown>)[key];
    if (typeof child === 'string') {
      if (!child.isWellFormed()) shape.illFormed = true;
      continue;
    }
    if (typeof child === 'number') {
      shape.numbers++;
      if (Number.isFinite(child)) continue;
      const field = fieldOf([...path, key]);
      return { problem: { field, message: `${field}: number out of range` } };
    }
    if (child === null || typeof child !== 'object') continue;
    if (frames.length >= depthMax) {
      const field = fieldOf([...path, key]);
      return { problem: { field, message: `${field}: nested deeper than ${depthMax} levels` } };
    }
    const keys = Array.isArray(child) ? null : Object.keys(child);
    if (keys !== null) shape.members += keys.length;
    path.push(key);
    frames.push({ node: child, keys, next: 0 });
  }
  return shape;
}

const FOUND = new Error('strict JSON problem found');

/**
 * The first I-JSON problem of a text JSON.parse accepted, read token by token. The text is
 * already known to nest at most `depthMax` deep, so the tokenizer's recursion is bounded.
 */
function iJsonProblem(text: string): JsonProblem | null {
  const names: Set<string>[] = [];
  let found: JsonProblem | null = null;
  const stop = (path: Segment[], what: string): never => {
    const field = fieldOf(path);
    found = { field, message: `${field}: ${what}` };
    throw FOUND;
  };
  try {
    visit(text, {
      onObjectBegin: () => {
        names.push(new Set());
      },
      onObjectEnd: () => {
        names.pop();
      },
      onObjectProperty: (name, _offset, _length, _line, _column, pathOf) => {
        const seen = names[names.length - 1]!;
        if (!name.isWellFormed()) stop([...pathOf(), name], LONE_SURROGATE_NAME);
        if (seen.has(name)) stop([...pathOf(), name], DUPLICATE);
        seen.add(name);
      },
      onLiteralValue: (value, offset, length, _line, _column, pathOf) => {
        if (typeof value === 'string' && !value.isWellFormed()) stop(pathOf(), LONE_SURROGATE);
        if (typeof value !== 'number') return;
        const reason = getUnsafeNumberReason(text.slice(offset, offset + length));
        if (reason === undefined) return;
        // lossless-json calls 1e21 a truncated float; to the client it is an integer too large.
        const integer = reason === 'truncate_float' && Number.isInteger(value);
        stop(pathOf(), NUMBER_PROBLEMS[integer ? 'truncate_integer' : reason]!);
      },
      onError: () => stop([], 'request body is not valid JSON'),
    });
  } catch (error) {
    if (error !== FOUND) throw error;
  }
  return found;
}

const DUPLICATE = 'duplicate member name (I-JSON, RFC 7493: member names must be unique)';
const LONE_SURROGATE =
  'string holds a lone UTF-16 surrogate escape (\\ud800-\\udfff unpaired); ' +
  'it has no Unicode character to sign';
const LONE_SURROGATE_NAME =
  'member name holds a lone UTF-16 surrogate escape (\\ud800-\\udfff ' + 'unpaired)';
const NUMBER_PROBLEMS: Record<string, string> = {
  overflow: 'number out of range (beyond what a double holds); send it as a string',
  underflow: 'number too small for a double (it would become 0); send it as a string',
  truncate_integer: 'integer beyond 2^53 - 1 cannot be held exactly (I-JSON); send it as a string',
  truncate_float: 'number has more digits than a double holds exactly; send it as a string',
};

/** A dotted path; a lone surrogate in a member name is shown as its escape. */
function fieldOf(path: readonly Segment[]): string {
  if (path.length === 0) return BODY;
  return path.map((s) => (typeof s === 'number' ? String(s) : escapeLoneSurrogates(s))).join('.');
}

function escapeLoneSurrogates(name: string): string {
  if (name.isWellFormed()) return name;
  const escape = (s: string) => `\\u${s.charCodeAt(0).toString(16).padStart(4, '0')}`;
  return name.replace(/\p{Surrogate}/gu, escape);
}
