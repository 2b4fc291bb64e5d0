// Where a command runs in cluster mode (P22): on this instance when it holds the command's
// partition, else on the instance that does, over the internal channel. A command whose
// partition is moving (given back, taken over) waits for the new owner, bounded, then is refused
// with 503 and Retry-After. A command that may have reached its owner is never sent twice: only a
// refusal the owner made before deciding (moved) or a connection never made is tried again; a
// call lost after it was sent is answered 503, and the client's retry with its idempotency key
// finds the stored answer if the command ran.
import { MovedError } from '../actors/moved.js';
import type { SubmitOptions } from '../actors/pool.js';
import type { CommandResult, RoutedCommand } from '../actors/types.js';
import { MOVE_RETRY_MS } from '../config.js';
import { partitionOf } from '../log/log.js';
import { refusal } from '../protocol/errors.js';
import { ChannelError, type Channel } from './channel.js';
import type { Owner } from './leases.js';

export interface RouterOptions {
  /** This instance's id. */
  self: string;
  /** This instance's shard pool. */
  local: { submit(routed: RoutedCommand, options?: SubmitOptions): Promise<CommandResult> };
  leases: {
    holds(p: number): boolean;
    ownerOf(p: number): Owner | null;
    refreshOwners(): Promise<void>;
  };
  client: Channel;
  /** How long a command waits for its partition's new owner before it is refused. */
  moveWaitMs: number;
  /** How long an owner has to answer a command sent to it. */
  callTimeoutMs: number;
  /** Told of each result another instance answered: this one's reads and index catch up. */
  onRemote?: (result: CommandResult) => Promise<void> | undefined;
  /** The time a move's wait is measured on, and the wait between tries (the simulator's). */
  now?: () => number;
  wait?: (ms: number) => Promise<void>;
}

/** A connection to the owner that was never made: the command surely did not reach it. */
const notDelivered = (error: unknown) =>
  error instanceof ChannelError && /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH/.test(error.message);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class ClusterRouter {
  constructor(private readonly options: RouterOptions) {}

  async submit(routed: RoutedCommand, options?: SubmitOptions): Promise<CommandResult> {
    const { self, local, leases, client } = this.options;
    const now = this.options.now ?? (() => performance.now());
    const p = partitionOf(routed.key);
    const deadline = now() + this.options.moveWaitMs;
    for (;;) {
      try {
        if (leases.holds(p)) return await local.submit(routed, options);
        const owner = leases.ownerOf(p);
        if (owner !== null && owner.instance !== self) {
          const result = await client.send(owner.address, routed, this.options.callTimeoutMs);
          const after = result.committed ? this.options.onRemote?.(result) : undefined;
          if (after !== undefined) await after;
          return result;
        }
      } catch (error) {
        if (error instanceof ChannelError && !notDelivered(error))
          throw refusal(
            'path.core.unavailable',
            'the instance holding this object did not answer',
            {
              retry_after_seconds: 1,
            },
          );
        if (!(error instanceof MovedError) && !notDelivered(error)) throw error;
      }
      if (now() >= deadline)
        throw refusal('path.core.unavailable', 'this object is moving between instances', {
          retry_after_seconds: 1,
        });
      await (this.options.wait ?? sleep)(MOVE_RETRY_MS);
      await leases.refreshOwners().catch(() => undefined);
    }
  }
}
