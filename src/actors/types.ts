// What the runtime passes between the front end and the shards. The aggregates' side of the
// contract (deciders, decisions, commands) is in domain/decider.ts; this is the runtime's side:
// commands as routed to a shard, the HTTP answer a shard makes of a decision, and what a commit
// changed that the front end must know.
import type { Caller, DirectoryRow } from '../domain/decider.js';

export type { Caller, DirectoryRow };

/** What an HTTP answer needs: status, JSON text, and whether it carries a signed object (P10). */
export interface Reply {
  status: number;
  body: string;
  signed: boolean;
  /** Public answers only: from `at` (ms) the answer becomes 410 with `code` (exact expiry). */
  expiry?: { at: number; code: string };
  /** Facts for the front end beside the body (never stored, never sent to the client). */
  meta?: Record<string, unknown>;
}

/**
 * A command on its way to its aggregate: the name and
 * input are checked against the decider's schemas.
 */
export interface RoutedCommand {
  aggregate: string;
  key: string;
  command: { name: string; input: unknown; caller: Caller | null };
  idempotency?: { scope: string; requestHash: string };
  /** The request that carried the command, remembered in the same commit (P5, see auth.ts). */
  replay?: ReplayMark;
  /** Set when the command carries out a follow-up: its row is removed once it is decided. */
  followUp?: string;
}

/** A row of the `replay` table: key `<until hex>/<digest>`, for the credential `keyId`. */
export interface ReplayMark {
  key: string;
  keyId: string;
  /** When the request can be fresh nowhere any more (ms): the mark may be forgotten then. */
  until: number;
}

/** What a request claims in the commit of its command (issue 29): its replay mark, its answer. */
export type ClaimKind = 'replay' | 'idempotency';

/** One durable commit, as the operator's metrics count it (P21). */
export interface CommitFigures {
  seconds: number;
  commands: number;
  /** How long the batch's first command waited to be decided. */
  waited: number;
}

/** A follow-up written by a commit, to be carried out on its aggregate (domain/decider.ts). */
export interface PendingFollowUp {
  id: string;
  routed: RoutedCommand;
}

export interface CommandResult {
  reply: Reply;
  /** The command committed something (the front end then refreshes its reads). */
  committed: boolean;
  /** Ids of outbox events written with this command, for prompt delivery. */
  outbox: string[];
  /** Directory index rows this command changed, for the front end's index. */
  directory: DirectoryRow[];
  /**
   * With directory rows: the record they were committed with, its seq and checksum (the
   * directory image's position is the last such record the index applied, issue 34).
   */
  directoryAt?: { partition: number; seq: number; check: number };
  /** Follow-ups this command's commit wrote: the pool carries them out before it answers. */
  followUps: PendingFollowUp[];
  /**
   * The command was not run: the request's replay mark or idempotency answer was claimed by
   * another commit (cluster mode; the front end answers the replay, or the stored answer).
   */
  taken?: ClaimKind;
  /**
   * On the last command of a committed batch: how long its durable commit took (P21), and how
   * long its first command waited to be decided (behind the aggregate's commits before it).
   */
  commit?: CommitFigures;
}
