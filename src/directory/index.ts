// The directory index (SPEC D): hashed keys -> holder and visibility, in memory, sized for tens of
// millions of keys. Open addressing with linear probing over typed arrays: each slot holds the
// first 128 bits of the key's HMAC (ample: a chance collision among 10^8 keys is ~10^-22) and
// one 32-bit value, `holder << 5 | identifier type << 2 | visibility`. About 20 bytes a slot
// and no object per key, so the garbage collector never sees the index. A removed key keeps its
// slot with value 0. The table doubles past DIRECTORY_INDEX_LOAD_MAX (src/config.ts).
//
// Lookups of present-but-invisible keys and of absent keys do the same work: one probe
// sequence, one read of the value, and the caller treats "not visible" and "absent" alike.
import { DIRECTORY_INDEX_LOAD_MAX } from '../config.js';

export const VISIBILITY = { none: 0, network: 1, public: 2 } as const;

/** Identifier types as index codes; a key answers only a lookup of its own type. */
const TYPE_CODES: Record<string, number> = {
  phone: 0,
  email: 1,
  bank_account: 2,
  lei: 3,
  reg: 4,
  tax: 5,
  address: 6,
};
const TYPE_NAMES = Object.fromEntries(Object.entries(TYPE_CODES).map(([n, c]) => [c, n]));
const HOLDER_SHIFT = 5;
const typeCode = (identifierType: string): number => TYPE_CODES[identifierType] ?? 7;
export type IndexVisibility = keyof typeof VISIBILITY;

/** What the index keeps of a key: its hash's first 128 bits, as 32-bit words. */
export const WORDS_PER_KEY = 4;
const INITIAL_SLOTS = 1 << 16;

export interface Holder {
  member: string;
  endpoint: string;
}

/**
 * Everything the index holds, as plain parts: what src/directory/image.ts writes at an orderly
 * stop and hands back at the next start, so the index is taken whole instead of key by key.
 */
export interface IndexImage {
  slots: number;
  used: number;
  keys: Uint32Array;
  values: Uint32Array;
  occupiedBits: Uint32Array;
  /** Holder ids are positions here; 0 is "no holder". */
  holders: Holder[];
  contributions: [key: string, count: number][];
}

/** What an image's arrays must measure for `slots` slots (its checksum cannot tell a bad size). */
export function imageArrayLengths(slots: number): { keys: number; values: number; bits: number } {
  return { keys: slots * WORDS_PER_KEY, values: slots, bits: (slots + 31) >>> 5 };
}

export class DirectoryIndex {
  private keys: Uint32Array;
  private values: Uint32Array;
  private used = 0;
  private mask: number;
  private readonly holders: Holder[] = [{ member: '', endpoint: '' }];
  private readonly holderIds = new Map<string, number>();
  /**
   * Visible entries per holder and identifier type: the reciprocity budget's "contribution" (P12).
   */
  private readonly contributions = new Map<string, number>();
  private readonly probe = new Uint32Array(WORDS_PER_KEY);
  /** While a whole load runs (marking, sweep): the slots of the keys it found, a bit each. */
  private marks: Uint32Array | null = null;
  /**
   * Occupied slots (an all-zero key is a valid, if improbable, prefix, so zero cannot mean empty).
   */
  private occupiedBits: Uint32Array;
  /** A walk under way (`walk`): told of every slot that changes, and of arrays replaced. */
  private walking: IndexWalk | null = null;

  constructor(expectedKeys = 0) {
    let slots = INITIAL_SLOTS;
    while (slots * DIRECTORY_INDEX_LOAD_MAX < expectedKeys) slots *= 2;
    this.keys = new Uint32Array(slots * WORDS_PER_KEY);
    this.values = new Uint32Array(slots);
    this.occupiedBits = new Uint32Array((slots + 31) >>> 5);
    this.mask = slots - 1;
  }

  get size(): number {
    return this.used;
  }

  /** Bytes held by the table itself (for the memory-per-key figure). */
  get tableBytes(): number {
    return this.keys.byteLength + this.values.byteLength + this.occupiedBits.byteLength;
  }

  /** The index's parts, shared, not copied: read them before the index changes again. */
  image(): IndexImage {
    return {
      slots: this.mask + 1,
      used: this.used,
      keys: this.keys,
      values: this.values,
      occupiedBits: this.occupiedBits,
      holders: [...this.holders],
      contributions: [...this.contributions],
    };
  }

  /**
   * Begins a walk of the index a part at a time (IndexWalk), while it goes on changing; a walk
   * begun earlier is given up.
   */
  walk(): IndexWalk {
    this.walking?.abandon();
    const walk = new IndexWalk(
      { keys: this.keys, values: this.values, occupiedBits: this.occupiedBits },
      () => {
        if (this.walking === walk) this.walking = null;
        return this.image();
      },
    );
    this.walking = walk;
    return walk;
  }

  /**
   * Takes an image's parts as this index's own, in place (whoever holds this index keeps it).
   * Holders given in `live` replace the image's at the same id: the local holder's endpoint is
   * this run's, not the one the image was written with.
   */
  adopt(image: IndexImage, live: ReadonlyMap<number, Holder>): void {
    const lengths = imageArrayLengths(image.slots);
    if (
      (image.slots & (image.slots - 1)) !== 0 ||
      image.keys.length !== lengths.keys ||
      image.values.length !== lengths.values ||
      image.occupiedBits.length !== lengths.bits ||
      image.used > image.slots
    )
      throw new RangeError('directory image arrays do not match its slot count');
    this.walking?.abandon();
    this.keys = image.keys;
    this.values = image.values;
    this.occupiedBits = image.occupiedBits;
    this.mask = image.slots - 1;
    this.used = image.used;
    this.holders.length = 0;
    this.holderIds.clear();
    image.holders.forEach((h, id) => {
      const holder = live.get(id) ?? h;
      this.holders.push(holder);
      if (id > 0) this.holderIds.set(`${holder.member}\n${holder.endpoint}`, id);
    });
    this.contributions.clear();
    for (const [key, count] of image.contributions) this.contributions.set(key, count);
  }

  holderId(holder: Holder): number {
    const key = `${holder.member}\n${holder.endpoint}`;
    let id = this.holderIds.get(key);
    if (id === undefined) {
      id = this.holders.length;
      this.holders.push(holder);
      this.holderIds.set(key, id);
    }
    return id;
  }

  /**
   * Sets a key's holder and visibility. Visibility 'none' removes the key from every answer, but
   * only the holder's own removal does: one member withdrawing a key another holds changes nothing.
   */
  set(hashHex: string, identifierType: string, holder: number, visibility: IndexVisibility): void {
    if (this.used + 1 > (this.mask + 1) * DIRECTORY_INDEX_LOAD_MAX) this.grow();
    const slot = this.slotOf(hashHex, true);
    const previous = this.values[slot]!;
    if (visibility === 'none' && previous !== 0 && previous >>> HOLDER_SHIFT !== holder) return;
    const next =
      visibility === 'none'
        ? 0
        : ((holder << HOLDER_SHIFT) | (typeCode(identifierType) << 2) | VISIBILITY[visibility]) >>>
          0;
    if ((previous & 3) !== 0) this.count(previous >>> HOLDER_SHIFT, identifierType, -1);
    if ((next & 3) !== 0) this.count(holder, identifierType, +1);
    this.values[slot] = next;
    this.walking?.touch(slot);
  }

  /** How visible the index holds a key ('none': not at all), whatever its type and holder. */
  visibilityOf(hashHex: string): IndexVisibility {
    const value = this.values[this.slotOf(hashHex, false)]!;
    return (value & 3) === 2 ? 'public' : (value & 3) === 1 ? 'network' : 'none';
  }

  /** The type of a key the index holds visible, or null (cluster mode's removals, P22). */
  typeOf(hashHex: string): string | null {
    const value = this.values[this.slotOf(hashHex, false)]!;
    return (value & 3) === 0 ? null : (TYPE_NAMES[(value >>> 2) & 7] ?? null);
  }

  /** The holder of a visible key, whatever its type, or null. */
  holderOf(hashHex: string): Holder | null {
    const value = this.values[this.slotOf(hashHex, false)]!;
    return (value & 3) === 0 ? null : this.holders[value >>> HOLDER_SHIFT]!;
  }

  /** The holder of a visible key of this type, or null: one probe sequence whatever the answer. */
  find(hashHex: string, identifierType: string): Holder | null {
    return this.holderAt(this.slotOf(hashHex, false), identifierType);
  }

  /**
   * `find` of a key given as the four 32-bit words of its hash's first 128 bits, from `at` in
   * `words` (a reader that decoded the hex digits as it checked them): the same probe sequence.
   */
  findWords(words: Uint32Array, at: number, identifierType: string): Holder | null {
    const p = this.probe;
    for (let w = 0; w < WORDS_PER_KEY; w++) p[w] = words[at + w]!;
    return this.holderAt(this.probedSlot(false), identifierType);
  }

  private holderAt(slot: number, identifierType: string): Holder | null {
    const value = this.values[slot]!;
    const visible = (value & 3) !== 0 && ((value >>> 2) & 7) === typeCode(identifierType);
    return visible ? this.holders[value >>> HOLDER_SHIFT]! : null;
  }

  /** A whole load begins: the keys it finds are marked (mark), the others swept after (sweep). */
  marking(): void {
    this.marks = new Uint32Array(this.occupiedBits.length);
  }

  /** The load under way found the key (after `set`). */
  mark(hashHex: string): void {
    if (this.marks === null) return;
    const slot = this.slotOf(hashHex, false);
    if (this.occupied(slot)) this.marks[slot >>> 5]! |= 1 << (slot & 31);
  }

  /**
   * The load is over: every key `holder` held visible that it did not find is removed (its rows
   * went while the index was not told, a lost notes connection); how many.
   */
  sweep(holder: number): number {
    const marks = this.marks;
    this.marks = null;
    if (marks === null) return 0;
    let removed = 0;
    for (let s = 0; s < this.values.length; s++) {
      const value = this.values[s]!;
      if ((value & 3) === 0 || value >>> HOLDER_SHIFT !== holder) continue;
      if ((marks[s >>> 5]! & (1 << (s & 31))) !== 0) continue;
      const type = TYPE_NAMES[(value >>> 2) & 7];
      if (type !== undefined) this.count(holder, type, -1);
      this.values[s] = 0;
      this.walking?.touch(s);
      removed++;
    }
    return removed;
  }

  contribution(member: string, identifierType: string): number {
    return this.contributions.get(`${member}\n${identifierType}`) ?? 0;
  }

  private count(holder: number, identifierType: string, delta: number): void {
    const key = `${this.holders[holder]!.member}\n${identifierType}`;
    this.contributions.set(key, (this.contributions.get(key) ?? 0) + delta);
  }

  /** The slot holding the key, or the empty slot where it would go (claimed when `claim`). */
  private slotOf(hashHex: string, claim: boolean): number {
    const p = this.probe;
    for (let w = 0; w < WORDS_PER_KEY; w++)
      p[w] = parseInt(hashHex.slice(w * 8, w * 8 + 8), 16) >>> 0;
    return this.probedSlot(claim);
  }

  /** `slotOf` of the key already in `probe`. */
  private probedSlot(claim: boolean): number {
    const p = this.probe;
    let slot = (p[0]! ^ p[3]!) & this.mask;
    for (;;) {
      const base = slot * WORDS_PER_KEY;
      const k = this.keys;
      if (!this.occupied(slot)) {
        if (claim) {
          k.set(p, base);
          this.markOccupied(slot);
          this.used++;
        }
        return slot;
      }
      if (k[base] === p[0] && k[base + 1] === p[1] && k[base + 2] === p[2] && k[base + 3] === p[3])
        return slot;
      slot = (slot + 1) & this.mask;
    }
  }

  private occupied(slot: number): boolean {
    return (this.occupiedBits[slot >>> 5]! & (1 << (slot & 31))) !== 0;
  }
  private markOccupied(slot: number): void {
    this.occupiedBits[slot >>> 5]! |= 1 << (slot & 31);
  }

  private grow(): void {
    this.walking?.abandon();
    const oldKeys = this.keys;
    const oldValues = this.values;
    const oldBits = this.occupiedBits;
    const oldMarks = this.marks;
    const slots = (this.mask + 1) * 2;
    this.keys = new Uint32Array(slots * WORDS_PER_KEY);
    this.values = new Uint32Array(slots);
    this.occupiedBits = new Uint32Array((slots + 31) >>> 5);
    this.marks = oldMarks === null ? null : new Uint32Array(this.occupiedBits.length);
    this.mask = slots - 1;
    for (let s = 0; s < oldValues.length; s++) {
      if ((oldBits[s >>> 5]! & (1 << (s & 31))) === 0) continue;
      let slot = (oldKeys[s * 4]! ^ oldKeys[s * 4 + 3]!) & this.mask;
      while (this.occupied(slot)) slot = (slot + 1) & this.mask;
      this.keys.set(oldKeys.subarray(s * 4, s * 4 + 4), slot * 4);
      this.values[slot] = oldValues[s]!;
      this.markOccupied(slot);
      if (oldMarks !== null && (oldMarks[s >>> 5]! & (1 << (s & 31))) !== 0)
        this.marks![slot >>> 5]! |= 1 << (slot & 31);
    }
  }
}

type IndexArrays = Pick<IndexImage, 'keys' | 'values' | 'occupiedBits'>;

/** A part of the live index: views of its arrays from slot `from` (a multiple of 32) on. */
export interface IndexPart {
  from: number;
  keys: Uint32Array;
  values: Uint32Array;
  bits: Uint32Array;
}

/** A walk's end: the slots changed since their part was given, copied, and the rest. */
export interface IndexWalkEnd extends Pick<IndexImage, 'used' | 'holders' | 'contributions'> {
  patches: { slot: number; key: Uint32Array; value: number; bits: number }[];
}

/**
 * A walk of the index a part at a time while it serves and changes (the directory image taken
 * while the node runs, issue 34), so that no turn of the thread handles it whole and no copy of
 * it is made: each part is handed out as views of the live arrays, to be written as they are.
 * Slots only ever change in place (a key claims an empty slot, a value is set; none moves but
 * when the table grows), so a slot changed after its part was handed out is given again, copied,
 * at the end (`finish`): what was written, patched with those, is the index as it is at the turn
 * `finish` is called in. A table that grows (or an index taken whole from an image) meanwhile
 * replaces the arrays: the walk is given up.
 */
export class IndexWalk {
  private next = 0;
  private readonly touched = new Set<number>();
  /** Given up, or finished: told of no more changes. */
  private over = false;

  constructor(
    private readonly source: IndexArrays,
    private readonly current: () => IndexImage,
  ) {}

  get slots(): number {
    return this.source.values.length;
  }

  /** The index replaced its arrays (or the walk is over): it can no longer be finished. */
  get abandoned(): boolean {
    return this.over;
  }

  abandon(): void {
    this.over = true;
  }

  /** A slot changed: given again at the end if its part was handed out already. */
  touch(slot: number): void {
    if (!this.over && slot < this.next) this.touched.add(slot);
  }

  /** The next `slots` slots (rounded up to a word of bits), or null once every slot was given. */
  part(slots: number): IndexPart | null {
    const { source } = this;
    const from = this.next;
    if (from >= source.values.length) return null;
    const to = Math.min(source.values.length, from + Math.ceil(slots / 32) * 32);
    this.next = to;
    return {
      from,
      keys: source.keys.subarray(from * WORDS_PER_KEY, to * WORDS_PER_KEY),
      values: source.values.subarray(from, to),
      bits: source.occupiedBits.subarray(from >>> 5, (to + 31) >>> 5),
    };
  }

  /**
   * The walk's end, in this turn: the slots that changed since their part was handed out,
   * copied, and the count, holders and contributions as they are now.
   */
  finish(): IndexWalkEnd {
    if (this.over || this.next < this.source.values.length)
      throw new Error('the walk of the index is not complete');
    const { source } = this;
    const patches = [...this.touched].map((slot) => ({
      slot,
      key: source.keys.slice(slot * WORDS_PER_KEY, (slot + 1) * WORDS_PER_KEY),
      value: source.values[slot]!,
      bits: source.occupiedBits[slot >>> 5]!,
    }));
    this.over = true;
    const { used, holders, contributions } = this.current();
    return { patches, used, holders, contributions };
  }
}
