// Messages between the front end (main thread) and the shard workers. Each postMessage carries
// the messages of one turn as an array, in the order they were sent.
import type { Holding } from '../log/log.js';
import type { Transferable } from 'node:worker_threads';
import type { Limits } from '../config.js';
import type { CommandResult, RoutedCommand } from './types.js';
import type { RecoveryStats } from './shard.js';
import type { Checked, Helped } from './recovery.js';
import type { AnswerBody } from '../domain/budget/budget.js';
import type { hashKeys, KeyItem } from '../protocol/identifiers.js';

export interface WorkerData {
  index: number;
  dataDir: string;
  /** Cluster mode's database (P22), or null: the log is LMDB's in the data directory. */
  store: string | null;
  partitions: number[];
  /** Cluster mode: partitions held by other instances at start (Shard `released`). */
  released: number[];
  /** Cluster mode: the partitions the instance holds, shared with the front end (Holding). */
  holding: Holding | null;
  member: string;
  seedHex: string;
  sealingKeyHex: string;
  pepperHex: string;
  limits: Limits;
  dev: boolean;
  /** The claims of the partitions shared with helper threads at start, and their channels. */
  helped: Helped;
  operatorWebhooks: boolean;
}

export type ToWorker =
  | { t: 'command'; id: number; routed: RoutedCommand }
  | { t: 'signing-key'; seedHex: string }
  | { t: 'sign-answers'; id: number; answers: AnswerBody[]; requester: string; signedAt: string }
  | { t: 'hash-keys'; id: number; items: KeyItem[]; offset: number }
  /** How many aggregates the shard holds in memory (issue 33), for the metrics' scrape. */
  | { t: 'census'; id: number }
  /** Cluster mode (P22): a partition leaves this instance, or comes (back) to it. */
  | { t: 'release' | 'adopt'; id: number; partition: number }
  | { t: 'drain' };

/** What the workers hold in memory, and how it came and went (issue 33). */
export interface Residency {
  aggregates: number;
  /** Of those, the ones kept in memory for good: state past state_row_bytes_max. */
  pinned: number;
  activations: number;
  passivations: number;
  /** The workers' JavaScript heaps: in use, and held from the system (V8's own figures). */
  heapUsed: number;
  heapTotal: number;
  /** Their memory outside the heaps held by JavaScript objects (buffers, typed arrays). */
  external: number;
}

export type FromWorker =
  | { t: 'ready'; checked: Checked }
  | { t: 'recovered'; stats: RecoveryStats }
  | { t: 'result'; id: number; result: CommandResult }
  | { t: 'signed'; id: number; text: string }
  | { t: 'hashed'; id: number; outcome: ReturnType<typeof hashKeys> }
  | { t: 'done'; id: number }
  | ({ t: 'counted'; id: number } & Residency)
  /**
   * `moved`: the command's partition is held by another instance (cluster mode, MovedError);
   * `unavailable`: the log's database did not answer (issue 29: 503, not 500).
   */
  | { t: 'failed'; id: number; message: string; moved?: number; unavailable?: true }
  /** A failure the shard lives through (a snapshot or fold not taken, a commit in doubt). */
  | { t: 'trouble'; message: string; partition: number; unavailable: boolean }
  | { t: 'effects'; result: CommandResult }
  | { t: 'drained' }
  | { t: 'fatal'; message: string };

/**
 * One side's outgoing messages: those sent in one turn leave together in one postMessage (the
 * fixed cost of a message is paid once per turn, not once per command), in order. A message may
 * name buffers to move rather than copy: the sender gives them up (they are detached on send).
 * With `chunkMax`, a turn's messages leave as soon as that many wait, the rest at the turn's end:
 * the receiver starts on the first ones while the sender is still producing the others.
 */
export function turnBatcher<T>(
  post: (messages: T[], transfer: Transferable[]) => void,
  chunkMax = Infinity,
): {
  send(message: T, transfer?: readonly Transferable[]): void;
  flush(): void;
} {
  let outgoing: T[] = [];
  let moving: Transferable[] = [];
  const flush = () => {
    if (outgoing.length === 0) return;
    const messages = outgoing;
    const transfer = moving;
    outgoing = [];
    moving = [];
    post(messages, transfer);
  };
  const send = (message: T, transfer?: readonly Transferable[]) => {
    outgoing.push(message);
    if (transfer !== undefined) moving.push(...transfer);
    if (outgoing.length >= chunkMax) flush();
    else if (outgoing.length === 1) setImmediate(flush);
  };
  return { send, flush };
}
