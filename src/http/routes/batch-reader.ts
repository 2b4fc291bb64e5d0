// The body of a batch lookup (SPEC D) read by a scanner fitted to its usual shape: one object
// with `items` (objects of `identifier_type` and one of `identifier` or `identifier_hash`, maybe
// a `nonce`) and maybe `signed`, every string plain printable ASCII without escapes. Such a body
// is read in one pass with every per-item check of the route's schema done on the way, with no
// generic parse and no schema walk. Anything else (an escape, a byte past ASCII, a number, an
// unknown or repeated member, an empty list, a value of the wrong type or length) is not
// recognised, and the caller reads the body with the strict reader and the schema as before, so
// P2 (I-JSON), depth, limits and every refusal stay exactly theirs. The scanner only accepts a
// subset of what they accept, with the same value (batch-reader.test.ts compares them).
import { IDENTIFIER_LENGTH_MAX, LOOKUP_NONCE_LENGTH_MAX } from '../../config.js';
import type { LookupKeyType } from '../../protocol/identifiers.js';

export interface BatchItem {
  identifier_type: LookupKeyType;
  identifier?: string;
  identifier_hash?: string;
  nonce?: string;
}

export interface BatchBody {
  items: BatchItem[];
  signed?: boolean;
}

/** The key types of lookup (SPEC D), each with its closing quote, to match in place. */
const KEY_TYPES: readonly LookupKeyType[] = [
  'email',
  'phone',
  'bank_account',
  'lei',
  'reg',
  'tax',
  'address',
];
const latin1 = (text: string): Uint8Array => Buffer.from(text, 'latin1');
const QUOTED_KEY_TYPES = KEY_TYPES.map((t) => latin1(`${t}"`));
/** Member names with their closing quote, as bytes to compare in place. */
const NAMES = {
  items: latin1('items"'),
  signed: latin1('signed"'),
  identifier_type: latin1('identifier_type"'),
  identifier_hash: latin1('identifier_hash"'),
  identifier: latin1('identifier"'),
  nonce: latin1('nonce"'),
};
const LITERALS: readonly [Uint8Array, boolean][] = [
  [latin1('true'), true],
  [latin1('false'), false],
];
/** The value of each byte that is a lowercase hex digit; NOT_HEX for every other byte. */
const NOT_HEX = 16;
const NIBBLE = new Uint8Array(256).fill(NOT_HEX);
latin1('0123456789abcdef').forEach((c, value) => (NIBBLE[c] = value));
/** Hex digits of a SHA-256 (P8). */
const HASH_LENGTH = 64;
/** What the index keeps of a hash (src/directory/index.ts): its first 128 bits, as words. */
export const HASH_WORDS = 4;
const DIGITS_PER_WORD = 8;
/** The fewest bytes an item with a hash takes, to size the words before the items are counted. */
const HASHED_ITEM_BYTES_MIN = HASH_LENGTH + 2;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const PRINTABLE_FIRST = 0x20;
const PRINTABLE_LAST = 0x7e;

/**
 * A body read by the scanner, with the first HASH_WORDS words of each item's `identifier_hash`
 * decoded on the way (from `HASH_WORDS * i` for item i; unset for an item without a hash).
 */
export interface UsualBatch {
  body: BatchBody;
  words: Uint32Array;
}

/** The body as the route's schema would accept it, or null when it is not of the usual shape. */
export function readUsualBatch(bytes: Buffer): BatchBody | null {
  return readUsualBatchKeys(bytes)?.body ?? null;
}

/** readUsualBatch, with the hashes' words for the index (DirectoryIndex.findWords). */
export function readUsualBatchKeys(bytes: Buffer): UsualBatch | null {
  const scanner = new Scanner(bytes);
  const body = scanner.body();
  return body === null ? null : { body, words: scanner.words };
}

/**
 * Steps through the bytes; strings are cut from the same bytes read as Latin-1, which is what
 * they are when every byte is below 0x80, as the scanner requires of every byte it accepts.
 */
class Scanner {
  private at = 0;
  private readonly text: string;
  /** The hashes' words by item index, grown when a batch holds more items than first thought. */
  words: Uint32Array;

  constructor(private readonly bytes: Buffer) {
    this.text = bytes.toString('latin1');
    this.words = new Uint32Array(
      HASH_WORDS * (1 + Math.floor(bytes.length / HASHED_ITEM_BYTES_MIN)),
    );
  }

  body(): BatchBody | null {
    let items: BatchItem[] | null = null;
    let signed: boolean | null = null;
    if (!this.take(0x7b)) return null;
    do {
      if (!this.take(QUOTE)) return null;
      if (this.name(NAMES.items)) {
        if (items !== null || (items = this.items()) === null) return null;
      } else if (this.name(NAMES.signed)) {
        if (signed !== null || (signed = this.boolean()) === null) return null;
      } else return null;
    } while (this.take(COMMA));
    if (!this.take(0x7d) || items === null) return null;
    this.space();
    if (this.at !== this.bytes.length) return null;
    return signed === null ? { items } : { items, signed };
  }

  private items(): BatchItem[] | null {
    if (!this.take(0x5b)) return null;
    const items: BatchItem[] = [];
    do {
      const item = this.item(items.length);
      if (item === null) return null;
      items.push(item);
    } while (this.take(COMMA));
    return this.take(0x5d) ? items : null;
  }

  /** One key; null unless it has a known type and each member at most once. */
  private item(index: number): BatchItem | null {
    if (!this.take(0x7b)) return null;
    let type: LookupKeyType | null = null;
    let identifier: string | null = null;
    let hash: string | null = null;
    let nonce: string | null = null;
    do {
      if (!this.take(QUOTE)) return null;
      if (this.name(NAMES.identifier_type)) {
        if (type !== null || (type = this.keyType()) === null) return null;
      } else if (this.name(NAMES.identifier_hash)) {
        if (hash !== null || (hash = this.hash(index)) === null) return null;
      } else if (this.name(NAMES.identifier)) {
        if (identifier !== null || (identifier = this.string(IDENTIFIER_LENGTH_MAX)) === null)
          return null;
      } else if (this.name(NAMES.nonce)) {
        if (nonce !== null || (nonce = this.string(LOOKUP_NONCE_LENGTH_MAX)) === null) return null;
      } else return null;
    } while (this.take(COMMA));
    if (!this.take(0x7d) || type === null) return null;
    const item: BatchItem = { identifier_type: type };
    if (identifier !== null) item.identifier = identifier;
    if (hash !== null) item.identifier_hash = hash;
    if (nonce !== null) item.nonce = nonce;
    return item;
  }

  /**
   * A member name already opened by its quote, its closing quote and the colon after it; the
   * position moves only when all three are there.
   */
  private name(quoted: Uint8Array): boolean {
    if (!this.matches(quoted)) return false;
    const start = this.at;
    this.at += quoted.length;
    if (this.take(COLON)) return true;
    this.at = start;
    return false;
  }

  private keyType(): LookupKeyType | null {
    if (!this.take(QUOTE)) return null;
    for (let t = 0; t < QUOTED_KEY_TYPES.length; t++) {
      if (this.matches(QUOTED_KEY_TYPES[t]!)) {
        this.at += QUOTED_KEY_TYPES[t]!.length;
        return KEY_TYPES[t]!;
      }
    }
    return null;
  }

  /**
   * 64 lowercase hex digits (the schema's Sha256Hex); the first HASH_WORDS words of their value
   * go to the words of item `index` as each digit is checked.
   */
  private hash(index: number): string | null {
    if (!this.take(QUOTE)) return null;
    const start = this.at;
    const end = start + HASH_LENGTH;
    const bytes = this.bytes;
    if (end >= bytes.length) return null;
    const words = this.wordsFor(index);
    let i = start;
    for (let w = 0; w < HASH_WORDS; w++) {
      let word = 0;
      for (const last = i + DIGITS_PER_WORD; i < last; i++) {
        const nibble = NIBBLE[bytes[i]!]!;
        if (nibble === NOT_HEX) return null;
        word = (word << 4) | nibble;
      }
      words[index * HASH_WORDS + w] = word;
    }
    for (; i < end; i++) if (NIBBLE[bytes[i]!] === NOT_HEX) return null;
    if (bytes[end] !== QUOTE) return null;
    this.at = end + 1;
    return this.text.slice(start, end);
  }

  /** A string of 1 to `lengthMax` printable ASCII characters, no quote, no escape. */
  private string(lengthMax: number): string | null {
    if (!this.take(QUOTE)) return null;
    const start = this.at;
    const bytes = this.bytes;
    let i = start;
    for (let c = bytes[i]; c !== QUOTE; c = bytes[++i]) {
      // A byte past the end reads undefined, which no comparison accepts.
      if (!(c! >= PRINTABLE_FIRST && c! <= PRINTABLE_LAST) || c === BACKSLASH) return null;
    }
    if (i === start || i - start > lengthMax) return null;
    this.at = i + 1;
    return this.text.slice(start, i);
  }

  /** The words, with room for item `index`. */
  private wordsFor(index: number): Uint32Array {
    if ((index + 1) * HASH_WORDS > this.words.length) {
      const grown = new Uint32Array(Math.max(this.words.length * 2, (index + 1) * HASH_WORDS));
      grown.set(this.words);
      this.words = grown;
    }
    return this.words;
  }

  private boolean(): boolean | null {
    this.space();
    for (const [written, value] of LITERALS) {
      if (this.matches(written)) {
        this.at += written.length;
        return value;
      }
    }
    return null;
  }

  /** Whether `expected` is written at the position. */
  private matches(expected: Uint8Array): boolean {
    const bytes = this.bytes;
    const at = this.at;
    if (at + expected.length > bytes.length) return false;
    for (let i = 0; i < expected.length; i++) if (bytes[at + i] !== expected[i]) return false;
    return true;
  }

  /** Skips JSON white space, then steps over `code` if it comes next. */
  private take(code: number): boolean {
    this.space();
    if (this.bytes[this.at] !== code) return false;
    this.at++;
    return true;
  }

  private space(): void {
    const bytes = this.bytes;
    let c = bytes[this.at];
    while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = bytes[++this.at];
  }
}
