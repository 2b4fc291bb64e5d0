// The body of a batch lookup (SPEC D) read by a scanner fitted to its usual shape: one object
// with `items` (objects of `identifier_type` and one of `identifier` or `identifier_hash`, maybe
// a `nonce`) and maybe `signed`, every string plain printable ASCII without escapes. Such a body
// is read in one pass with every per-item check of the route's schema done on the way, with no
// generic parse and no schema walk. Anything else (an escape, a byte past ASCII, a number, an
// unknown or repeated member, an empty list, a value of the wrong type or length) is not
// recognised, and the caller reads the body with the strict reader and the schema as before, so
// P2 (I-JSON), depth, limits and every refusal stay exactly theirs. The scanner only accepts a
// subset of what they accept, with the same value (batch-reader.test.ts compares them). Bytes
// are compared and hex digits checked four at a time, and each hash's first 128 bits are decoded
// as they are checked, so the index is probed without parsing the hex again (findWords).
import { IDENTIFIER_LENGTH_MAX, LOOKUP_NONCE_LENGTH_MAX } from '../../config.js';
import { WORDS_PER_KEY } from '../../directory/index.js';
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

/** Bytes the scanner reads at once (a 32-bit word). */
const BYTES_PER_QUAD = 4;
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
/** Text to find in place: its bytes four at a time (little-endian words), then the rest. */
interface Written {
  length: number;
  quads: Uint32Array;
  tail: Uint8Array;
}
const latin1 = (text: string): Written => {
  const bytes = Buffer.from(text, 'latin1');
  const whole = bytes.length - (bytes.length % BYTES_PER_QUAD);
  const quads = new Uint32Array(whole / BYTES_PER_QUAD);
  quads.forEach((_, q) => (quads[q] = bytes.readUInt32LE(q * BYTES_PER_QUAD)));
  return { length: bytes.length, quads, tail: bytes.subarray(whole) };
};
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
const LITERALS: readonly [Written, boolean][] = [
  [latin1('true'), true],
  [latin1('false'), false],
];
/**
 * The value of four lowercase hex digits read as one little-endian 32-bit word (the first digit
 * in the low byte), or -1 if any of the four is not one: each byte is tested for '0'-'9' and
 * 'a'-'f' by adding to it the distance to a bound and reading bit 7, four bytes at a time (no
 * carry crosses a byte, every byte being below 0x80 when the answer counts).
 */
export function hexQuad(x: number): number {
  // tidy: format (per-byte distances to '0', past '9', 'a' and past 'f', and masks)
  const digit = (x + 0x50505050) & ~(x + 0x46464646);
  const letter = (x + 0x1f1f1f1f) & ~(x + 0x19191919);
  const high = 0x80808080 | 0;
  if ((x & high) !== 0 || ((digit | letter) & high) !== high) return -1;
  // Low nibble, plus 9 for a letter (bit 6 set).
  const v = (x & 0x0f0f0f0f) + ((x >>> 6) & 0x01010101) * 9;
  return ((v & 0xf) << 12) | (((v >>> 8) & 0xf) << 8) | (((v >>> 16) & 0xf) << 4) | (v >>> 24);
}
/** Hex digits of a SHA-256 (P8). */
const HASH_LENGTH = 64;
const DIGITS_PER_WORD = 8;
const QUAD_BITS = 16;
/** The fewest bytes an item with a hash takes, to size the words before the items are counted. */
const HASHED_ITEM_BYTES_MIN = HASH_LENGTH + 2;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const PRINTABLE_FIRST = 0x20;
const PRINTABLE_LAST = 0x7e;

/**
 * A body read by the scanner, with the first WORDS_PER_KEY words of each item's `identifier_hash`
 * decoded on the way (from `WORDS_PER_KEY * i` for item i; unset for an item without a hash).
 */
export interface UsualBatch {
  body: BatchBody;
  words: Uint32Array;
}

/**
 * The body as the route's schema would accept it, with the hashes' words for the index
 * (DirectoryIndex.findWords), or null when it is not of the usual shape.
 */
export function readUsualBatch(bytes: Buffer): UsualBatch | null {
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
  /** The bytes four at a time (hex digits, see hexQuad). */
  private readonly view: DataView;
  /** The hashes' words by item index, grown when a batch holds more items than first thought. */
  words: Uint32Array;

  constructor(private readonly bytes: Buffer) {
    this.text = bytes.toString('latin1');
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    this.words = new Uint32Array(
      WORDS_PER_KEY * (1 + Math.floor(bytes.length / HASHED_ITEM_BYTES_MIN)),
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
  private name(quoted: Written): boolean {
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
   * 64 lowercase hex digits (the schema's Sha256Hex); the first WORDS_PER_KEY words of their value
   * go to the words of item `index` as each digit is checked.
   */
  private hash(index: number): string | null {
    if (!this.take(QUOTE)) return null;
    const start = this.at;
    const end = start + HASH_LENGTH;
    const bytes = this.bytes;
    if (end >= bytes.length) return null;
    const words = this.wordsFor(index);
    const view = this.view;
    let i = start;
    for (let w = 0; w < WORDS_PER_KEY; w++, i += DIGITS_PER_WORD) {
      const high = hexQuad(view.getUint32(i, true));
      const low = hexQuad(view.getUint32(i + BYTES_PER_QUAD, true));
      if ((high | low) < 0) return null;
      words[index * WORDS_PER_KEY + w] = (high << QUAD_BITS) | low;
    }
    for (; i < end; i += BYTES_PER_QUAD) if (hexQuad(view.getUint32(i, true)) < 0) return null;
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
    if ((index + 1) * WORDS_PER_KEY > this.words.length) {
      const grown = new Uint32Array(Math.max(this.words.length * 2, (index + 1) * WORDS_PER_KEY));
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

  /** Whether `expected` is written at the position (compared four bytes at a time). */
  private matches(expected: Written): boolean {
    const bytes = this.bytes;
    const view = this.view;
    const { quads, tail } = expected;
    let at = this.at;
    if (at + expected.length > bytes.length) return false;
    for (let q = 0; q < quads.length; q++, at += BYTES_PER_QUAD)
      if (view.getUint32(at, true) !== quads[q]) return false;
    for (let i = 0; i < tail.length; i++) if (bytes[at + i] !== tail[i]) return false;
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
