// The contract between the runtime and the aggregates, and the messages that cross threads.
// Aggregates are deciders: `decide(command, state, context) -> events + reply | refusal` and
// `evolve(state, event) -> state`, both pure. The runtime does the I/O.
import type { ErrorCode, Refusal } from '../protocol/errors.js';
import type { SigningKey } from '../protocol/signing.js';
import type { ReferencePrefix } from '../protocol/ids.js';
import type { TableWrite } from '../log/log.js';

export interface Caller {
  member: string;
  /** The operator's own member (P5: credentials flagged local). */
  local: boolean;
}

/** What an HTTP answer needs: status, JSON text, and whether it carries a signed object (P10). */
export interface Reply {
  status: number;
  body: string;
  signed: boolean;
  /** Public answers only: from `at` (ms) the answer becomes 410 with `code` (exact expiry). */
  expiry?: { at: number; code: ErrorCode };
  /** Facts for the front end beside the body (never stored, never sent to the client). */
  meta?: Record<string, unknown>;
}

export interface Command {
  name: string;
  input: unknown;
  caller: Caller | null;
}

/** An event for the outbox (P11); signed at delivery. */
export interface OutboxEvent {
  id: string;
  event: string;
  created_at: string;
  /** The object concerned; or, as `data_json`, its JSON text when that is already at hand (a signed envelope). */
  data?: unknown;
  data_json?: string;
  /** Delivery targets named by the object itself (a session's webhook_url); the operator's are added at delivery. */
  targets?: string[];
}

export interface DecideContext {
  now: number;
  /** The operator's member name: the issuer of everything this node signs. */
  member: string;
  signer: SigningKey;
  /** A fresh reference with the given prefix (randomness as an input, P9). */
  newId: (prefix: ReferencePrefix) => string;
  /** Opens a sealed value (a registered name) where a rule must compare it. */
  unseal?: (sealed: string) => string;
  /** The committed public answers this decision asked for (`Decider.reads`), by key. */
  views?: ReadonlyMap<string, string>;
}

/** A decision: events to append, the answer, and what else lands in the same commit. */
export type Decision<E> = {
  events: E[];
  reply: Reply;
  outbox?: OutboxEvent[];
  /** Public answers this command changes (beside those `publications(state)` derives). */
  publications?: Publication[];
  /** Directory index rows this command changes (SPEC D): hashes only. */
  directory?: DirectoryRow[];
  /** Other rows written in the same commit (the lookup journal). */
  tables?: TableWrite[];
} | Refusal;

/** One entry of the directory index: `visibility: null` removes it. */
export interface DirectoryRow {
  key: string;
  identifierType: string;
  identifierHash: string;
  visibility: 'public' | 'network' | null;
}

/** A public answer served by the front end from committed bytes; `reply: null` withdraws it. */
export interface Publication {
  key: string;
  reply: Reply | null;
}

export interface Decider<S, E> {
  type: string;
  decide(command: Command, state: S | null, context: DecideContext): Decision<E>;
  evolve(state: S | null, event: E): S;
  /** The public answers this state makes available (when they derive from the state alone). */
  publications?(state: S): Publication[];
  /**
   * Committed views a command needs to decide (read by the runtime before `decide`), so that
   * large signed texts live in the views, not in the state held in memory.
   */
  reads?(command: Command, state: S | null): string[];
  /** When the aggregate next needs a `tick` command, if ever. */
  deadline?(state: S): number | null;
}

/** A stored answer for an idempotency key (P7), scoped to the calling member. */
export interface IdempotencyEntry {
  scope: string;
  requestHash: string;
  status: number;
  body: string;
  signed: boolean;
  at: number;
}

export interface RoutedCommand {
  aggregate: string;
  key: string;
  command: Command;
  idempotency?: { scope: string; requestHash: string };
  /** The request that carried the command, remembered in the same commit (P5, see auth.ts). */
  replay?: ReplayMark;
}

/** A row of the `replay` table: key `<until hex>/<digest>`, for the credential `keyId`. */
export interface ReplayMark {
  key: string;
  keyId: string;
}

export interface CommandResult {
  reply: Reply;
  /** The command committed something (the front end then refreshes its reads). */
  committed: boolean;
  /** Ids of outbox events written with this command, for prompt delivery. */
  outbox: string[];
  /** Directory index rows this command changed, for the front end's index. */
  directory: DirectoryRow[];
}

export function isDecisionRefusal<E>(d: Decision<E>): d is Refusal {
  return (d as Refusal).code !== undefined;
}
