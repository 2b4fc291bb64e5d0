// The directory and its lookup index in a run (SPEC B, C, D; P22): subjects register identifier
// hashes and addresses through the front end, each commit writes its keys' `directory` rows in
// the same commit (directory-rows.ts), and each instance keeps the node's own LocalDirectory over
// its connection: loaded from the table as a start loads it, told of each committed result's rows
// as the pool's afterCommit tells it (and, in cluster mode, the router's onRemote on the instance
// that forwarded the command), and in cluster mode told of every commit's keys by the database's
// notes (cluster/instance.ts, Hearing): heard late, in commit order, lost while the database is
// away, and then the index read again whole, as a gap makes the node do. Cluster mode reads the
// table across the network (never in place), so the index takes the path it takes over
// PostgreSQL. No image: the run has no orderly stop, and a start after a kill rebuilds the index
// from the table.
import { createHash } from 'node:crypto';
import type { CommandResult, RoutedCommand } from '../src/actors/types.js';
import {
  DATABASE_RETRY_BASE_MS,
  DATABASE_RETRY_MAX_MS,
  FRONT_RETRY_BASE_MS,
  FRONT_RETRY_MAX_MS,
} from '../src/config.js';
import { LocalDirectory } from '../src/directory/directory.js';
import type { IndexVisibility } from '../src/directory/index.js';
import { directoryRowOfAddress, visible } from '../src/domain/subject/addresses.js';
import { directoryRows } from '../src/domain/subject/directory-rows.js';
import { addressesOf, identifiersOf, type SubjectState } from '../src/domain/subject/state.js';
import {
  partitionOf,
  type Reads,
  type ScanRange,
  type Table,
  type TableWrite,
} from '../src/log/log.js';
import { backoffMs, unreachable } from '../src/log/unavailable.js';
import type { Violation } from './model.js';
import type { SimPart } from './part.js';
import type { Random } from './random.js';
import { MEMBER, type SimInstance, type World } from './world.js';

const SUBJECTS = 4;
/** Identifier hashes the subjects share (two subjects registering one phone number). */
const HASHES = 10;
const RANK: Record<IndexVisibility, number> = { none: 0, network: 1, public: 2 };
/** The index's local holder's base URL: one for the member, whichever instance answers. */
const ENDPOINT = 'https://node.sim';
const DISCOVERABILITY = [undefined, 'public', 'network', 'private'] as const;

/** A hash as the front end makes it (HMAC-SHA-256): the index keeps its first 128 bits. */
const digest = (text: string) => createHash('sha256').update(text).digest('hex');
const identifierHash = (n: number) => digest(`identifier ${n}`);
/** A hash's type: the front end hashes a type's normalised value, so one hash has one type. */
const typeOfIdentifier = (n: number) => (n % 2 === 0 ? 'phone' : 'email');
const reference = (prefix: string, n: number) =>
  `${prefix}_${(0xd1_0000 + n).toString(16).padStart(32, '0')}`;
const short = (hash: string) => hash.slice(0, 4);

/**
 * A connection to the cluster's database as the index reads it: across the network, so never in
 * place (LocalDirectory reads it again asynchronously, as over PostgreSQL).
 */
class AcrossNetwork implements Reads {
  constructor(private readonly log: Reads) {}
  get(table: Table, key: string) {
    return this.log.get(table, key);
  }
  peek<T>(table: Table, key: string, use: (bytes: Buffer, key: string) => T) {
    return this.log.peek(table, key, use);
  }
  peekVersion() {
    return this.log.peekVersion();
  }
  async load(table: Table, key: string) {
    await Promise.resolve();
    return this.log.get(table, key);
  }
  async loadRange(table: Table, range?: ScanRange) {
    await Promise.resolve();
    return [...this.log.scan(table, range)];
  }
  write(writes: readonly TableWrite[]) {
    return this.log.write(writes);
  }
  refresh() {}
  scan(table: Table, range?: ScanRange) {
    return this.log.scan(table, range);
  }
}

/** One incarnation of an instance's index, and what it has yet to hear. */
interface Index {
  instance: SimInstance;
  incarnation: number;
  directory: LocalDirectory;
  /** Cluster mode: the database's notes not heard yet (each a commit's keys), in commit order. */
  notes: string[][];
  /** Cluster mode: the notes' connection was lost with the database; the index is read again. */
  lost: boolean;
  /** Loads under way (a start's, or a reading again after a gap). */
  reading: number;
}

/** A key of the table: its type and its most visible row. */
interface Row {
  type: string;
  visibility: IndexVisibility;
}

export class SimDirectory implements SimPart {
  readonly name = 'directory';
  private readonly indexes = new Map<SimInstance, Index>();
  /** Every hash a command named (those the table must answer for, and those it must not). */
  private readonly hashes = new Map<string, string>();
  private readonly addresses: { id: string; subject: string }[] = [];
  /** Subjects a client saw created (a 201, or an id already in use). */
  private readonly created = new Set<string>();
  private made = 0;
  private sent = 0;
  private databaseDown = false;
  /** Once the run heals, notes are heard as they are sent. */
  private healed = false;
  private readonly errors: Violation[] = [];
  /** The operator's own member (world.ts's MEMBER, read once the modules are loaded). */
  private readonly operator = { member: MEMBER, local: true };
  private readonly holder = { member: MEMBER, endpoint: ENDPOINT };

  constructor(
    private readonly world: World,
    private readonly random: Random,
  ) {
    for (let n = 0; n < HASHES; n++) this.hashes.set(identifierHash(n), typeOfIdentifier(n));
    if (world.cluster) world.disk.commits.push((writes) => this.noted(writes));
  }

  /** A started instance loads its index from the table, then hears what commits change. */
  started(instance: SimInstance): void {
    const log = this.world.cluster ? new AcrossNetwork(instance.log) : instance.log;
    const retry = (attempt: number) =>
      instance.sleep(
        backoffMs(attempt, {
          baseMs: FRONT_RETRY_BASE_MS,
          maxMs: FRONT_RETRY_MAX_MS,
          random: this.fraction,
        }),
      );
    const directory = new LocalDirectory(log, this.holder, 0, retry);
    const index = {
      instance,
      incarnation: instance.incarnation,
      directory,
      notes: [],
      lost: false,
      reading: 0,
    };
    this.indexes.set(instance, index);
    void this.load(index, true);
  }

  /** A seeded fraction in [0, 1), for the node's backoffs. */
  private readonly fraction = () => this.random.int(0, 999) / 1000;

  /** The index of an instance's running incarnation, or null. */
  private current(instance: SimInstance): Index | null {
    const index = this.indexes.get(instance);
    if (index === undefined || !instance.alive || instance.incarnation !== index.incarnation)
      return null;
    return index;
  }

  private live(): Index[] {
    return this.world.instances.flatMap((i) => this.current(i) ?? []);
  }

  /**
   * Builds the index from the table (a start, then `ready`), or reads it again whole (a gap,
   * Hearing.reread): a read the database did not answer is tried again after a backoff.
   */
  private async load(index: Index, start: boolean): Promise<void> {
    index.reading++;
    for (let attempt = 0; ; attempt++) {
      if (this.current(index.instance) !== index) return;
      try {
        await index.directory.load();
        break;
      } catch (error) {
        if (this.current(index.instance) !== index) return;
        if (!unreachable(error)) {
          this.errors.push({
            invariant: 'no-internal-error',
            detail: `${index.instance.name} load: ${String(error)}`,
          });
          return;
        }
        const ms = backoffMs(attempt, {
          baseMs: DATABASE_RETRY_BASE_MS,
          maxMs: DATABASE_RETRY_MAX_MS,
          random: this.fraction,
        });
        await index.instance.sleep(ms);
      }
    }
    if (start) index.directory.ready();
    index.reading--;
  }

  /** A committed result's rows, applied as the node's afterCommit applies them. */
  committed(instance: SimInstance, result: CommandResult): void {
    if (result.directory.length === 0) return;
    const index = this.current(instance);
    if (index !== null) void index.directory.apply(result.directory);
  }

  /** Cluster mode: a commit's note of the directory keys it changed, sent to every listener. */
  private noted(writes: readonly TableWrite[]): void {
    const hashes = [
      ...new Set(
        writes
          .filter((w) => w.table === 'directory')
          .map((w) => w.key.slice(0, w.key.indexOf('/'))),
      ),
    ];
    if (hashes.length === 0) return;
    for (const index of this.live())
      if (this.healed && !index.instance.paused) index.directory.applyHashes(hashes);
      else index.notes.push(hashes);
  }

  steps() {
    return [
      [8, () => this.send()],
      [this.world.cluster ? 5 : 0, () => this.hear()],
    ] as const;
  }

  /** A subject command through the front end of a live instance (its answer is not awaited). */
  private send(): string | null {
    const live = this.world.instances.filter((i) => i.alive);
    if (live.length === 0) return null;
    const instance = this.random.pick(live);
    const { routed, what } = this.command();
    const creating = routed.command.name === 'create';
    const n = ++this.sent;
    const { incarnation } = instance;
    const mine = () => instance.alive && instance.incarnation === incarnation;
    instance.request(routed).then(
      (answer) => {
        if (creating && (answer?.status === 201 || answer?.status === 400))
          this.created.add(routed.key);
        if (answer !== null && answer.status >= 500 && answer.status !== 503 && mine())
          this.errors.push({
            invariant: 'no-internal-error',
            detail: `subject #${n} answered ${answer.status} ${answer.body.slice(0, 120)}`,
          });
      },
      (error: unknown) => {
        if (mine())
          this.errors.push({
            invariant: 'no-internal-error',
            detail: `subject #${n} threw ${String(error)}`,
          });
      },
    );
    return `subject #${n} ${what} via ${instance.name}`;
  }

  /** A subject command as a route builds it: hashes only, fresh ids from the front end. */
  private command(): { routed: RoutedCommand; what: string } {
    const r = this.random;
    const s = r.int(0, SUBJECTS - 1);
    const subject = reference('sub', s);
    const on = (name: string, input: unknown): RoutedCommand => ({
      aggregate: 'subject',
      key: subject,
      command: { name, input, caller: this.operator },
    });
    const kind = r.weighted([
      [this.created.has(subject) ? 1 : 30, 'create'],
      [8, 'add-identifier'],
      [2, 'withdraw'],
      [3, 'create-address'],
      [this.addresses.length > 0 ? 3 : 0, 'revoke-address'],
      [this.addresses.length > 0 ? 1 : 0, 'rotate-address'],
    ] as const);
    const discoverability = r.pick(DISCOVERABILITY);
    const choice = discoverability === undefined ? {} : { discoverability };
    const tag = `s${s} ${discoverability ?? 'default'}`;
    switch (kind) {
      case 'create': {
        const input = { id: subject, subject_type: 'natural_person', external_ref_sealed: null };
        return { routed: on('create', input), what: `create s${s}` };
      }
      case 'add-identifier': {
        const n = r.int(0, HASHES - 1);
        const input = {
          id: reference('idn', ++this.made),
          identifier_type: typeOfIdentifier(n),
          hash: identifierHash(n),
          ...choice,
        };
        return {
          routed: on('add-identifier', input),
          what: `identifier ${short(input.hash)} ${tag}`,
        };
      }
      case 'withdraw':
        return { routed: on('withdraw', {}), what: `withdraw s${s}` };
      case 'create-address': {
        const profile = r.pick(['directory', 'directory', 'relationship'] as const);
        const input = { ...this.newAddress(subject), profile, ...choice };
        return {
          routed: on('create-address', input),
          what: `address ${short(input.hash)} ${profile} ${tag}`,
        };
      }
      case 'revoke-address':
      case 'rotate-address': {
        const a = r.pick(this.addresses);
        const routed = on(kind, { address_id: a.id });
        routed.key = a.subject;
        if (kind === 'revoke-address') return { routed, what: `revoke ${a.id.slice(-3)}` };
        routed.command.input = { address_id: a.id, replacement: this.newAddress(a.subject) };
        return { routed, what: `rotate ${a.id.slice(-3)}` };
      }
    }
  }

  /** A fresh address of `subject`: its id, its opaque form and that form's hash. */
  private newAddress(subject: string): { id: string; address: string; hash: string } {
    const n = ++this.made;
    const id = reference('adr', n);
    const hash = digest(`address ${n}`);
    this.hashes.set(hash, 'address');
    this.addresses.push({ id, subject });
    return { id, address: `path:sim${n}`, hash };
  }

  /**
   * Cluster mode: one instance hears some of the notes sent to it, in order; or, its connection
   * lost with the database and the database back, reads its index again whole (a gap).
   */
  private hear(): string | null {
    const waiting = this.live().filter(
      (i) => !i.instance.paused && (i.notes.length > 0 || (i.lost && !this.world.disk.down)),
    );
    if (waiting.length === 0) return null;
    const index = this.random.pick(waiting);
    if (index.lost) {
      this.reread(index);
      return `hear ${index.instance.name} gap: the index read again`;
    }
    const notes = index.notes.splice(0, this.random.int(1, index.notes.length));
    for (const hashes of notes) index.directory.applyHashes(hashes);
    return `hear ${index.instance.name} ${notes.map((n) => n.map(short).join(',')).join(' ')}`;
  }

  /** Hearing.reread: the notes' connection is back, the index read again whole. */
  private reread(index: Index): void {
    index.lost = false;
    void this.load(index, false);
  }

  /**
   * The database going away takes the notes' connections with it: the notes in flight are lost,
   * and each listener reads again once it is back. (Seen here, after every step, so that no
   * outage between two hearings goes unnoticed.)
   */
  watch(): Violation[] {
    const down = this.world.disk.down;
    if (down && !this.databaseDown)
      for (const index of this.live()) {
        index.notes = [];
        index.lost = true;
      }
    this.databaseDown = down;
    return this.errors.splice(0);
  }

  /** Every note heard, every lost connection read again; from now on notes are heard at once. */
  async heal(): Promise<void> {
    this.databaseDown = this.world.disk.down;
    this.healed = true;
    for (const index of this.live()) {
      for (const hashes of index.notes.splice(0)) index.directory.applyHashes(hashes);
      if (index.lost) this.reread(index);
    }
  }

  /** Whether some index is still loading, or has not yet heard what the table says. */
  busy(): boolean {
    const table = this.table();
    return this.live().some(
      (i) => i.reading > 0 || i.notes.length > 0 || i.lost || this.differences(i, table).length > 0,
    );
  }

  check(): Violation[] {
    const table = this.table();
    const out: Violation[] = [...this.errors.splice(0), ...this.rowsEqualSubjects()];
    for (const index of this.live()) {
      if (index.reading > 0)
        out.push({
          invariant: 'index-equals-rows',
          detail: `${index.instance.name}'s index never finished loading`,
        });
      out.push(...this.differences(index, table));
    }
    return out;
  }

  /** The `directory` table as the index must hold it: per hash, its type and most visible row. */
  private table(): Map<string, Row> {
    const keys = new Map<string, Row>();
    for (const { key, bytes } of this.world.disk.store.scan('directory')) {
      const hash = key.slice(0, key.indexOf('/'));
      const row = directoryRows.read(key, bytes);
      const best = keys.get(hash)?.visibility ?? 'none';
      keys.set(hash, { type: row.t, visibility: RANK[row.v] > RANK[best] ? row.v : best });
    }
    return keys;
  }

  /**
   * index-equals-rows: every key of the table is held at the visibility of its most visible row,
   * and the index holds no key the table does not; the index's contribution per type (P12's
   * budget) counts exactly the table's visible keys. lookup-answers (SPEC D): a lookup of a key,
   * of its own type, finds the local holder exactly when the key has a row (network or public
   * visible, both answered to a member); a lookup of it under another type finds nothing.
   */
  private differences(index: Index, table: Map<string, Row>): Violation[] {
    const out: Violation[] = [];
    const name = index.instance.name;
    const counts = new Map<string, number>();
    for (const [hash, type] of new Map([
      ...this.hashes,
      ...[...table].map(([h, row]) => [h, row.type] as const),
    ])) {
      const row = table.get(hash);
      const expected = row?.visibility ?? 'none';
      const held = index.directory.index.visibilityOf(hash);
      if (held !== expected)
        out.push({
          invariant: 'index-equals-rows',
          detail: `${name} holds ${short(hash)} ${held}, its rows say ${expected}`,
        });
      if (row !== undefined) counts.set(type, (counts.get(type) ?? 0) + 1);
      const found = index.directory.index.find(hash, type);
      const other = index.directory.index.find(hash, type === 'phone' ? 'email' : 'phone');
      const right =
        found === null
          ? row === undefined
          : row !== undefined && found.member === MEMBER && found.endpoint === ENDPOINT;
      if (!right || other !== null)
        out.push({
          invariant: 'lookup-answers',
          detail: `${name}: a lookup of ${type} ${short(hash)} finds ${found?.member ?? 'nothing'}${other === null ? '' : ' (and under another type)'}, its rows say ${expected}`,
        });
    }
    for (const type of new Set([...counts.keys(), ...this.hashes.values()])) {
      const contributed = index.directory.index.contribution(MEMBER, type);
      if (contributed !== (counts.get(type) ?? 0))
        out.push({
          invariant: 'index-equals-rows',
          detail: `${name} counts ${contributed} ${type} keys, the table ${counts.get(type) ?? 0}`,
        });
    }
    return out;
  }

  /**
   * rows-equal-subjects: the table holds exactly the rows the subjects' states say (each
   * commit writes its rows with its records, or neither): a visible identifier's row, a live
   * directory address's row, at their visibility; nothing else.
   */
  private rowsEqualSubjects(): Violation[] {
    const expected = new Map<string, string>();
    for (let s = 0; s < SUBJECTS; s++) {
      const key = reference('sub', s);
      const holder = this.world.holderOf(key);
      if (holder === null || !holder.alive || !holder.shard.holdsFolded(partitionOf(key)))
        return [];
      const state = holder.shard.stateOf(key) as SubjectState | null;
      if (state === null) continue;
      for (const i of identifiersOf(state).values()) {
        const v = visible(i.discoverability);
        if (v !== null) expected.set(`${i.hash}/idn/${i.id}`, `${i.identifier_type} ${v}`);
      }
      for (const a of addressesOf(state).values()) {
        const row = directoryRowOfAddress(a);
        if (row.visibility !== null)
          expected.set(`${a.hash}/${row.key}`, `address ${row.visibility}`);
      }
    }
    const out: Violation[] = [];
    const found = new Map<string, string>();
    for (const { key, bytes } of this.world.disk.store.scan('directory')) {
      const row = directoryRows.read(key, bytes);
      found.set(key, `${row.t} ${row.v}`);
    }
    for (const key of new Set([...expected.keys(), ...found.keys()]))
      if (expected.get(key) !== found.get(key))
        out.push({
          invariant: 'rows-equal-subjects',
          detail: `${short(key)}…${key.slice(-3)}: the subject says ${expected.get(key) ?? 'no row'}, the table ${found.get(key) ?? 'no row'}`,
        });
    return out;
  }
}
