// The contract between the aggregates and the runtime. An aggregate is a decider:
//   decide(command, state, context) -> decision | refusal     (pure: the clock and ids come in)
//   evolve(state, event) -> state                             (pure, also used for replay)
// Each aggregate declares its commands beside its rules: a typebox schema per command name,
// from which the command union is derived, so a route can only build a command the aggregate
// takes, with the input it expects, and the runtime checks every input against its schema
// before `decide` sees it (STYLE 4). A decision says what happened (events) and what to answer
// (a value, or a signed text); the runtime frames rows, names tables, writes views and turns
// refusals into HTTP through the one error table (protocol/errors.ts). No status codes here.
import type { Static, TSchema } from '@sinclair/typebox';
import type { Limits } from '../config.js';
import type { ErrorCode, Refusal } from '../protocol/errors.js';
import type { ReferencePrefix } from '../protocol/ids.js';
import type { SigningKey } from '../protocol/signing.js';

export interface Caller {
  member: string;
  /** The operator's own member (P5: credentials flagged local). */
  local: boolean;
}

/** An aggregate's commands: name -> the schema of its input. */
export type CommandSchemas = Record<string, TSchema>;

/** The union of an aggregate's commands, each with its typed input. */
export type CommandOf<S extends CommandSchemas> = {
  [K in keyof S & string]: { name: K; input: Static<S[K]>; caller: Caller | null };
}[keyof S & string];

/** The input of one command of an aggregate. */
export type InputOf<S extends CommandSchemas, K extends keyof S> = Static<S[K]>;

export interface DecideContext {
  now: number;
  /** The operator's member name: the issuer of everything this node signs. */
  member: string;
  signer: SigningKey;
  /** A fresh reference with the given prefix (randomness as an input, P9). */
  newId: (prefix: ReferencePrefix) => string;
  /** Every limit of the node (config.ts): a new limit is one line there and one in the rule. */
  limits: Limits;
  /** The node runs with `--dev` (config.ts): plain-http and loopback webhook targets (P11). */
  dev: boolean;
  /** Opens a sealed value (a registered name) where a rule must compare it. */
  unseal?: (sealed: string) => string;
  /** The committed answers this decision asked for (`Decider.reads`), by key; absent: none. */
  views: ReadonlyMap<string, ReadView>;
}

/**
 * A committed answer as a decision sees it: its text, or, for an object that is gone (revoked,
 * used, expired: exact to the millisecond, like the public read), the refusal its read answers.
 */
export type ReadView = { text: string; gone: null } | { text: null; gone: Refusal };

/**
 * What a command answers: a value the runtime serialises, or a JSON text already made (a
 * signed envelope, whose bytes must not change). `created`: the command created a resource
 * (answered 201, P7).
 */
export type Answer =
  { value: unknown; created?: boolean } | { text: string; signed: boolean; created?: boolean };

/**
 * A public answer served by the front end from committed bytes (SPEC: reads serve what was signed).
 */
export type View =
  | { text: string; signed: boolean; expiry?: { at: number; code: ErrorCode } }
  /** The object is gone: its reads answer this refusal (410 codes of SPEC). */
  | { gone: Refusal };

/** A view to write, or `view: null` to withdraw it. */
export interface Publication {
  key: string;
  view: View | null;
}

/** An event for the outbox (P11); signed at delivery. */
export interface OutboxEvent {
  id: string;
  event: string;
  created_at: string;
  /** The object concerned; or, as `data_json`, its JSON text when that is already at hand. */
  data?: unknown;
  data_json?: string;
  /** Delivery targets named by the object itself (a session's webhook_url). */
  targets?: string[];
}

/** One entry of the directory index: `visibility: null` removes it. */
export interface DirectoryRow {
  key: string;
  identifierType: string;
  identifierHash: string;
  visibility: 'public' | 'network' | null;
}

/** One lookup call, as the journal keeps it (hashes only, P8). */
export interface JournalEntry {
  requester: string;
  at: string;
  keys: [identifierType: string, identifierHash: string, found: boolean][];
}

/**
 * One lookup call as a decision gives it: its keys still packed (budget/journal-keys.ts). Its
 * journal row is the JournalEntry of the call, byte for byte (reads/rows.ts).
 */
export interface JournalCall {
  requester: string;
  at: string;
  keys: Uint8Array;
}

/** One consumption, as the usage log of a connection or delegation keeps it (SPEC K). */
export interface UsageEntry {
  /** The connection or delegation whose log this is. */
  owner: string;
  /** Its position in that log (1, 2, ...). */
  index: number;
  row: Record<string, unknown>;
}

/**
 * A command that must follow this decision (STYLE 12): written in the same commit, carried out
 * after it and again after a crash until its aggregate has decided it, so it must be idempotent.
 */
export interface FollowUp {
  aggregate: string;
  key: string;
  name: string;
  input: unknown;
}

export interface Decision<E> {
  events: E[];
  answer: Answer;
  outbox?: OutboxEvent[];
  /** Public answers this command changes (beside those `publications(state)` derives). */
  publications?: Publication[];
  /** Directory index rows this command changes (SPEC D): hashes only. */
  directory?: DirectoryRow[];
  journal?: JournalCall[];
  usage?: UsageEntry[];
  followUps?: FollowUp[];
  /** Facts for the front end beside the answer (never stored, never sent to the client). */
  meta?: Record<string, unknown>;
}

export interface Decider<S, C extends CommandSchemas, E> {
  type: string;
  /** The prefix of the references that name this aggregate's instances (P9). */
  prefix: ReferencePrefix | null;
  commands: C;
  decide(command: CommandOf<C>, state: S | null, context: DecideContext): Decision<E> | Refusal;
  evolve(state: S | null, event: E): S;
  /** The public answers this state makes available (when they derive from the state alone). */
  publications?(state: S): Publication[];
  /**
   * Committed views a command needs to decide: the runtime reads them before `decide`. Called
   * again with what it read so far while it names new keys, so a fact found in one view can
   * name the next (a request names its address).
   */
  reads?(command: CommandOf<C>, state: S | null, views: ReadonlyMap<string, ReadView>): string[];
  /** When the aggregate next needs a `tick` command, if ever. */
  deadline?(state: S): number | null;
  /**
   * Each commit writes its state whole as the aggregate's `states` row, so that it may leave
   * memory when idle and come back from that row (issue 33). One whose children grow (a
   * subject's, a connection's) past `state_row_bytes_max` stops writing it and stays in memory,
   * so that a command never writes more than that for its state. Absent: the aggregate stays in
   * memory while its partition is held.
   */
  passivates?: true;
}

/** Any decider, as the runtime holds them (it checks each command against the schemas itself). */
export type AnyDecider = Decider<any, any, any>;

export function isRefusal<E>(d: Decision<E> | Refusal): d is Refusal {
  return (d as Refusal).code !== undefined;
}

/** A decision that changes nothing and answers `value`. */
export function answer<E>(value: unknown, options: { created?: boolean } = {}): Decision<E> {
  return { events: [], answer: { value, ...options } };
}
