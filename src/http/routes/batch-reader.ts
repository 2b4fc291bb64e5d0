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
const QUOTED_KEY_TYPES = KEY_TYPES.map((t) => `${t}"`);
/** Hex digits of a SHA-256 (P8). */
const HASH_LENGTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const PRINTABLE_FIRST = 0x20;
const PRINTABLE_LAST = 0x7e;

/** The body as the route's schema would accept it, or null when it is not of the usual shape. */
export function readUsualBatch(bytes: Buffer): BatchBody | null {
  const scanner = new Scanner(bytes.toString('latin1'));
  return scanner.body();
}

class Scanner {
  private at = 0;

  constructor(private readonly text: string) {}

  body(): BatchBody | null {
    let items: BatchItem[] | null = null;
    let signed: boolean | null = null;
    if (!this.take(0x7b)) return null;
    do {
      if (!this.take(QUOTE)) return null;
      if (this.name('items"')) {
        if (items !== null || (items = this.items()) === null) return null;
      } else if (this.name('signed"')) {
        if (signed !== null || (signed = this.boolean()) === null) return null;
      } else return null;
    } while (this.take(COMMA));
    if (!this.take(0x7d) || items === null) return null;
    this.space();
    if (this.at !== this.text.length) return null;
    return signed === null ? { items } : { items, signed };
  }

  private items(): BatchItem[] | null {
    if (!this.take(0x5b)) return null;
    const items: BatchItem[] = [];
    do {
      const item = this.item();
      if (item === null) return null;
      items.push(item);
    } while (this.take(COMMA));
    return this.take(0x5d) ? items : null;
  }

  /** One key; null unless it has a known type and each member at most once. */
  private item(): BatchItem | null {
    if (!this.take(0x7b)) return null;
    let type: LookupKeyType | null = null;
    let identifier: string | null = null;
    let hash: string | null = null;
    let nonce: string | null = null;
    do {
      if (!this.take(QUOTE)) return null;
      if (this.name('identifier_type"')) {
        if (type !== null || (type = this.keyType()) === null) return null;
      } else if (this.name('identifier_hash"')) {
        if (hash !== null || (hash = this.hash()) === null) return null;
      } else if (this.name('identifier"')) {
        if (identifier !== null || (identifier = this.string(IDENTIFIER_LENGTH_MAX)) === null)
          return null;
      } else if (this.name('nonce"')) {
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
  private name(quoted: string): boolean {
    if (!this.text.startsWith(quoted, this.at)) return false;
    const start = this.at;
    this.at += quoted.length;
    if (this.take(COLON)) return true;
    this.at = start;
    return false;
  }

  private keyType(): LookupKeyType | null {
    if (!this.take(QUOTE)) return null;
    for (let t = 0; t < QUOTED_KEY_TYPES.length; t++) {
      if (this.text.startsWith(QUOTED_KEY_TYPES[t]!, this.at)) {
        this.at += QUOTED_KEY_TYPES[t]!.length;
        return KEY_TYPES[t]!;
      }
    }
    return null;
  }

  /** 64 lowercase hex digits (the schema's Sha256Hex). */
  private hash(): string | null {
    if (!this.take(QUOTE)) return null;
    const start = this.at;
    const end = start + HASH_LENGTH;
    const text = this.text;
    for (let i = start; i < end; i++) {
      const c = text.charCodeAt(i);
      if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return null;
    }
    if (text.charCodeAt(end) !== QUOTE) return null;
    this.at = end + 1;
    return text.slice(start, end);
  }

  /** A string of 1 to `lengthMax` printable ASCII characters, no quote, no escape. */
  private string(lengthMax: number): string | null {
    if (!this.take(QUOTE)) return null;
    const start = this.at;
    const text = this.text;
    let i = start;
    for (let c = text.charCodeAt(i); c !== QUOTE; c = text.charCodeAt(++i)) {
      // A character past the end reads NaN, which no comparison accepts.
      if (!(c >= PRINTABLE_FIRST && c <= PRINTABLE_LAST) || c === BACKSLASH) return null;
    }
    if (i === start || i - start > lengthMax) return null;
    this.at = i + 1;
    return text.slice(start, i);
  }

  private boolean(): boolean | null {
    this.space();
    for (const value of [true, false]) {
      const written = String(value);
      if (this.text.startsWith(written, this.at)) {
        this.at += written.length;
        return value;
      }
    }
    return null;
  }

  /** Skips JSON white space, then steps over `code` if it comes next. */
  private take(code: number): boolean {
    this.space();
    if (this.text.charCodeAt(this.at) !== code) return false;
    this.at++;
    return true;
  }

  private space(): void {
    const text = this.text;
    let c = text.charCodeAt(this.at);
    while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = text.charCodeAt(++this.at);
  }
}
