// One credential's recent signing-string digests (P5), each kept until its time, in the order
// they expire (issue 33): in typed arrays, 30 bytes a slot and no object per entry (a Map of
// base64url strings took about 100 bytes), found through an open-addressing index on the
// digest's first word. A node taking a thousand signed requests a second holds six minutes of
// them, so the arrays grow by a quarter at a time, not by doubling: the memory follows the window
// as it fills, at most a quarter past it.
import { REPLAY_WINDOW_ENTRIES_MIN } from '../config.js';

/** A 16-byte digest as four 32-bit words. */
const WORDS = 4; // tidy: format (128 bits)
const EMPTY = -1;
/** A full ring grows by a quarter (in entries); the index has half again as many slots. */
const GROWTH = 1.25; // tidy: format (a ratio)
const INDEX_SLOTS_PER_ENTRY = 1.5; // tidy: format (a ratio: probes stay short at two thirds full)

export class DigestWindow {
  private capacity = REPLAY_WINDOW_ENTRIES_MIN;
  private digests = new Uint32Array(WORDS * REPLAY_WINDOW_ENTRIES_MIN);
  private untils = new Float64Array(REPLAY_WINDOW_ENTRIES_MIN);
  /** Ring slots by the digest's first word, at most two thirds of its slots in use. */
  private index = indexFor(REPLAY_WINDOW_ENTRIES_MIN);
  private head = 0;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** The bytes its arrays hold. */
  get bytes(): number {
    return this.digests.byteLength + this.untils.byteLength + this.index.byteLength;
  }

  has(digest: Buffer): boolean {
    return this.find(digest) !== EMPTY;
  }

  /**
   * Keeps `digest` until `until`. Digests are forgotten in the order they were kept, each once
   * its time and those of all kept before it have passed (the times of a credential's requests
   * come nearly in order: one out of order is kept longer, never less).
   */
  add(digest: Buffer, until: number): void {
    if (this.count === this.capacity) this.resize(Math.ceil(this.capacity * GROWTH));
    const slot = (this.head + this.count) % this.capacity;
    for (let w = 0; w < WORDS; w++) this.digests[slot * WORDS + w] = digest.readUInt32LE(w * 4);
    this.untils[slot] = until;
    this.count++;
    this.place(slot);
  }

  /** Drops every digest whose time is at or before `now`, the oldest first; answers how many. */
  forgetExpired(now: number): number {
    const before = this.count;
    while (this.count > 0 && this.untils[this.head]! <= now) {
      this.unindex(this.head);
      this.head = (this.head + 1) % this.capacity;
      this.count--;
    }
    // Memory goes back as the window empties: the ring halves while a quarter full or less.
    let capacity = this.capacity;
    while (capacity > REPLAY_WINDOW_ENTRIES_MIN && this.count < capacity / 4)
      capacity = Math.max(REPLAY_WINDOW_ENTRIES_MIN, Math.ceil(capacity / 2));
    if (capacity < this.capacity) this.resize(capacity);
    return before - this.count;
  }

  /** The digests kept, oldest first. */
  *entries(): Iterable<{ digest: Buffer; until: number }> {
    for (let n = 0; n < this.count; n++) {
      const slot = (this.head + n) % this.capacity;
      const digest = Buffer.alloc(WORDS * 4);
      for (let w = 0; w < WORDS; w++) digest.writeUInt32LE(this.digests[slot * WORDS + w]!, w * 4);
      yield { digest, until: this.untils[slot]! };
    }
  }

  /** The index position of `digest`, or EMPTY. */
  private find(digest: Buffer): number {
    const w0 = digest.readUInt32LE(0);
    for (let i = this.home(w0); this.index[i] !== EMPTY; i = this.next(i)) {
      const at = this.index[i]! * WORDS;
      if (
        this.digests[at] === w0 &&
        this.digests[at + 1] === digest.readUInt32LE(4) &&
        this.digests[at + 2] === digest.readUInt32LE(8) &&
        this.digests[at + 3] === digest.readUInt32LE(12)
      )
        return i;
    }
    return EMPTY;
  }

  /** Takes ring slot `slot` out of the index, shifting back the entries probed past it. */
  private unindex(slot: number): void {
    let i = this.home(this.digests[slot * WORDS]!);
    while (this.index[i] !== slot) i = this.next(i);
    for (let j = this.next(i); this.index[j] !== EMPTY; j = this.next(j)) {
      const home = this.home(this.digests[this.index[j]! * WORDS]!);
      // The entry at j stays unless its home lies outside (i, j], going round.
      const stays = i <= j ? home > i && home <= j : home > i || home <= j;
      if (stays) continue;
      this.index[i] = this.index[j]!;
      i = j;
    }
    this.index[i] = EMPTY;
  }

  /** A ring of `capacity`, the entries first in their order, and its index built again. */
  private resize(capacity: number): void {
    const digests = new Uint32Array(WORDS * capacity);
    const untils = new Float64Array(capacity);
    for (let n = 0; n < this.count; n++) {
      const slot = (this.head + n) % this.capacity;
      digests.set(this.digests.subarray(slot * WORDS, slot * WORDS + WORDS), n * WORDS);
      untils[n] = this.untils[slot]!;
    }
    this.capacity = capacity;
    this.digests = digests;
    this.untils = untils;
    this.head = 0;
    this.index = indexFor(capacity);
    for (let slot = 0; slot < this.count; slot++) this.place(slot);
  }

  /** Enters ring slot `slot` in the index, at the first free position from its home. */
  private place(slot: number): void {
    let i = this.home(this.digests[slot * WORDS]!);
    while (this.index[i] !== EMPTY) i = this.next(i);
    this.index[i] = slot;
  }

  /** Where a digest whose first word is `word` is looked for first (the words are uniform). */
  private home(word: number): number {
    return word % this.index.length;
  }

  private next(i: number): number {
    return i + 1 === this.index.length ? 0 : i + 1;
  }
}

function indexFor(capacity: number): Int32Array {
  return new Int32Array(Math.ceil(capacity * INDEX_SLOTS_PER_ENTRY)).fill(EMPTY);
}
