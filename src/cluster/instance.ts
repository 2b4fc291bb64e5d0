// One instance of a cluster (P22), joined: it takes the commands other instances send it on the
// internal channel, holds its share of the partitions by lease (its workers fold a partition when
// it comes, snapshot it when it goes), sends each command to the holder of its partition, and
// hears every commit's notes (postgres-log.ts): read caches dropped, the lookup index kept
// current, and the events of its partitions delivered.
//
// The order matters at both ends. Joining: the channel listens before the leases name its
// address. Leaving (an orderly stop, once the front end has answered what it took): renewals
// stop, every partition is released (its commands answered, its snapshot written), then the
// leases are given back so the others take them at once rather than after the lease time.
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Commands, ShardPool } from '../actors/pool.js';
import type { CommandResult } from '../actors/types.js';
import type { Config } from '../config.js';
import type { LocalDirectory } from '../directory/directory.js';
import type { WebhookDelivery } from '../events/delivery.js';
import { partitionOf } from '../log/log.js';
import {
  holds,
  listenToNotes,
  type Fence,
  type Note,
  type NoteListener,
  type PostgresLog,
} from '../log/postgres-log.js';
import { ChannelClient, ChannelListener, channelKey } from './channel.js';
import { Leases, sharedEpochs } from './leases.js';
import { ClusterRouter } from './router.js';
import { FEED_PARTITION } from '../network/feed.js';
import type { DatabaseHealth } from '../log/unavailable.js';

/** An instance's name in the leases table: new at every start, so a restart is a new owner. */
export function newInstance(): Fence {
  return { holder: `i_${randomBytes(8).toString('hex')}`, epochs: sharedEpochs() };
}

/**
 * Every commit's notes, heard from before the directory loads (a change made meanwhile waits in
 * the directory's early rows) until the instance leaves. The directory and the events are the
 * node's once started; notes before then only drop read caches.
 */
export class Hearing {
  private parts: { directory: LocalDirectory; events: WebhookDelivery } | null = null;

  private constructor(
    private readonly log: PostgresLog,
    readonly notes: NoteListener,
  ) {}

  static async start(config: Config, logger: Logger, log: PostgresLog): Promise<Hearing> {
    let hearing: Hearing | null = null;
    const notes = await listenToNotes(config.store!, {
      note: (note) => hearing?.heard(note),
      // Notes sent while the connection was down are lost: what they keep current is read again.
      gap: () => {
        logger.warn('the connection hearing other instances was lost; reading their changes again');
        hearing?.reread();
      },
      retryMs: config.leaseMs / RETRIES_PER_LEASE,
    });
    hearing = new Hearing(log, notes);
    return hearing;
  }

  /** Whether the database answers, as the log and the leases last found (issue 29, /readyz). */
  get health(): DatabaseHealth {
    return this.log.health;
  }

  attach(directory: LocalDirectory, events: WebhookDelivery): void {
    this.parts = { directory, events };
  }

  private heard(note: Note): void {
    if (note.kind === 'changed') this.log.refresh();
    else if (note.kind === 'directory') this.parts?.directory.applyHashes(note.hashes);
    else this.parts?.events.notify(note.ids);
  }

  private reread(): void {
    this.log.refresh();
    if (this.parts === null) return;
    void this.parts.directory.load().catch(() => undefined);
    this.parts.events.start();
  }
}

/** How often a lost connection to the database's notes is tried again, per lease. */
const RETRIES_PER_LEASE = 3;

export interface Joined {
  /** What the routes submit commands to: the holder of each command's partition. */
  commands: Commands;
  leases: Leases;
  /** Where the other instances reach this one. */
  address: string;
  /** What the `listening` line says of the instance. */
  fields(): { instance: string; internal_address: string; partitions_held: number };
  /** The orderly leave: partitions released and given back, the channel closed. */
  leave(): Promise<void>;
}

export async function joinCluster(
  config: Config,
  logger: Logger,
  parts: {
    fence: Fence;
    pool: ShardPool;
    /** The operator's sealing key (the channel's key is derived from it) and pepper. */
    identity: { sealingKey: Buffer; pepper: { hex: string } };
    events: WebhookDelivery;
    hearing: Hearing;
    /** The pool's fan-out after a commit, run too for the commits this instance forwarded. */
    afterCommit: (result: CommandResult) => void;
    /** This instance now holds the partition whose holder writes the network feed. */
    onFeed: () => Promise<void>;
  },
): Promise<Joined> {
  const { fence, pool } = parts;
  const key = channelKey(parts.identity.sealingKey);
  const listener = await ChannelListener.start({
    host: config.internalHost,
    port: config.internalPort,
    key,
    submit: (routed) => pool.submit(routed),
  });
  const address = config.internalUrl || `http://${config.internalHost}:${listener.port}`;
  const moves = new Moves(logger, pool);
  const leases = await leasesOf(config, logger, { ...parts, address, moves }).catch(
    async (error: unknown) => {
      await listener.close();
      throw error;
    },
  );
  const client = new ChannelClient(key);
  const submit = routed(config, { ...parts, leases, client });
  pool.routeFollowUps(submit);
  return {
    commands: {
      submit,
      hashKeys: (items, offset) => pool.hashKeys(items, offset),
      signAnswers: (answers, requester, signedAt) => pool.signAnswers(answers, requester, signedAt),
    },
    leases,
    address,
    fields: () => ({
      instance: fence.holder,
      internal_address: address,
      partitions_held: leases.partitions().length,
    }),
    async leave() {
      leases.halt();
      await moves.release(leases.partitions()).catch(() => undefined);
      await leases.stop();
      await moves.end();
      await parts.hearing.notes.close();
      client.close();
      await listener.close();
    },
  };
}

/**
 * Commands sent to the holder of their partition. An answer another instance gave reaches this
 * instance's caller after the same fan-out as a local commit: its own next reads and lookups
 * show the change.
 */
function routed(
  config: Config,
  parts: {
    fence: Fence;
    pool: ShardPool;
    leases: Leases;
    client: ChannelClient;
    afterCommit: (result: CommandResult) => void;
  },
): Commands['submit'] {
  const router = new ClusterRouter({
    self: parts.fence.holder,
    local: parts.pool,
    leases: parts.leases,
    client: parts.client,
    moveWaitMs: config.leaseMs * 2,
    callTimeoutMs: config.leaseMs,
    onRemote: parts.afterCommit,
  });
  return (command, options) => router.submit(command, options);
}

/**
 * This instance's leases: a partition that comes is folded, then its undelivered events taken
 * up (their earlier holder may be gone); one given back is drained first; one lost is dropped.
 */
function leasesOf(
  config: Config,
  logger: Logger,
  parts: {
    fence: Fence;
    address: string;
    events: WebhookDelivery;
    moves: Moves;
    hearing: Hearing;
    onFeed: () => Promise<void>;
    identity: { sealingKey: Buffer; pepper: { hex: string } };
  },
): Promise<Leases> {
  const { fence, events, moves } = parts;
  return Leases.start({
    url: config.store!,
    instance: fence.holder,
    address: parts.address,
    fingerprint: fingerprintOf(config.member, parts.identity),
    leaseMs: config.leaseMs,
    epochs: fence.epochs,
    health: parts.hearing.health,
    onGained: (ps) => {
      moves.adopt(ps).then(
        () => {
          events.adopt(ps);
          if (ps.includes(FEED_PARTITION))
            parts
              .onFeed()
              .catch((error: unknown) =>
                logger.error(
                  { err: { message: (error as Error).message } },
                  'feed not republished',
                ),
              );
        },
        () => undefined,
      );
      logger.info({ partitions: ps.length }, 'partitions taken');
    },
    onGiving: (ps) => moves.release(ps),
    onLost: (ps) => {
      moves.release(ps).catch(() => undefined);
      logger.warn({ partitions: ps.length }, 'partitions lost');
    },
  });
}

/** A digest of what every instance of one cluster must share; it shows none of it. */
function fingerprintOf(member: string, identity: { sealingKey: Buffer; pepper: { hex: string } }) {
  return createHash('sha256')
    .update(`path-node cluster v1\n${member}\n${identity.pepper.hex}\n`)
    .update(identity.sealingKey)
    .digest('hex');
}

/** Partitions moving in or out of this instance, awaited by a leave: none may outlive the log. */
class Moves {
  private readonly running = new Set<Promise<unknown>>();
  private ended = false;

  constructor(
    private readonly logger: Logger,
    private readonly pool: ShardPool,
  ) {}

  /** The partitions come here: each folded from its snapshot and records. */
  adopt(ps: number[]): Promise<void> {
    return this.start(ps, (p) => this.pool.adopt(p));
  }

  /** The partitions leave: each one's commands answered and its snapshot written. */
  release(ps: number[]): Promise<void> {
    return this.start(ps, (p) => this.pool.release(p));
  }

  /** Moves the partitions; a failure is logged, and rejects. */
  private start(ps: number[], move: (p: number) => Promise<void>): Promise<void> {
    if (this.ended) return Promise.resolve();
    const all = Promise.all(ps.map(move)).then(() => undefined);
    const tracked = all
      .catch((error: unknown) =>
        this.logger.error(
          { partitions: ps, err: { message: (error as Error).message } },
          'move failed',
        ),
      )
      .finally(() => this.running.delete(tracked));
    this.running.add(tracked);
    return all;
  }

  /** No move starts from now on; resolves once those under way are over. */
  async end(): Promise<void> {
    this.ended = true;
    await Promise.all(this.running);
  }
}

/** Whether this instance delivers an event now: it holds the event's partition. */
export const holdsEvent =
  (fence: Fence) =>
  (id: string): boolean =>
    holds(fence, partitionOf(id));
