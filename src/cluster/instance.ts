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
//
// The database may be away at any moment (issue 29): every callback here (a note heard, a gap
// read again, a partition adopted) catches what fails, logs it without naming any object, and
// tries again later, with backoff and jitter, rather than throwing into the connection that
// called it or leaving a promise rejected without a handler.
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
import { DATABASE_RETRY_BASE_MS, DATABASE_RETRY_MAX_MS } from '../config.js';
import { backoffMs, unreachable, type DatabaseHealth } from '../log/unavailable.js';

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
  /** A reading again that failed waits here for its next attempt. */
  private retry: NodeJS.Timeout | null = null;
  private attempts = 0;
  private closed = false;

  private constructor(
    private readonly log: PostgresLog,
    private readonly logger: Logger,
    private readonly notes: NoteListener,
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
      health: log.health,
      retryMaxMs: config.leaseMs / RETRIES_PER_LEASE,
    });
    hearing = new Hearing(log, logger, notes);
    return hearing;
  }

  /** Stops hearing: the notes' connection closed, no reading again from now on. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
    await this.notes.close();
  }

  /** Whether the database answers, as the log and the leases last found (issue 29, /readyz). */
  get health(): DatabaseHealth {
    return this.log.health;
  }

  attach(directory: LocalDirectory, events: WebhookDelivery): void {
    this.parts = { directory, events };
  }

  /** A note applied; one that cannot be (its reads failed) is made up for by reading again. */
  private heard(note: Note): void {
    try {
      if (note.kind === 'changed') this.log.refresh();
      else if (note.kind === 'directory') this.parts?.directory.applyHashes(note.hashes);
      else this.parts?.events.notify(note.ids);
    } catch (error) {
      this.logger.warn({ err: faultOf(error) }, 'a change of another instance was not applied');
      this.reread();
    }
  }

  /**
   * Reads again what the notes keep current: read caches, the lookup index, the outbox. One that
   * fails (the database away again) is tried later, until one succeeds or the instance leaves.
   */
  private reread(): void {
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
    if (this.closed) return;
    this.log.refresh();
    const parts = this.parts;
    if (parts === null) return;
    const reading = (async () => {
      parts.events.start();
      await parts.directory.load();
    })();
    reading.then(
      () => {
        this.attempts = 0;
      },
      (error: unknown) => {
        this.logger.warn({ err: faultOf(error) }, 'changes of other instances not read again yet');
        if (this.closed) return;
        const waitMs = backoffMs(this.attempts++, RETRY);
        this.retry = setTimeout(() => this.reread(), waitMs);
        this.retry.unref();
      },
    );
  }
}

/** How a failed callback is retried: from DATABASE_RETRY_BASE_MS up to DATABASE_RETRY_MAX_MS. */
const RETRY = { baseMs: DATABASE_RETRY_BASE_MS, maxMs: DATABASE_RETRY_MAX_MS };

/**
 * What a log line says of a failure: its kind and code, and whether the database was away. Not
 * its message, which may quote a key or a value (an object's reference).
 */
function faultOf(error: unknown): { name: string; code?: string; unreachable: boolean } {
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
  return {
    name: typeof name === 'string' ? name : typeof error,
    ...(typeof code === 'string' ? { code } : {}),
    unreachable: unreachable(error),
  };
}

/** How often a lost connection to the database's notes is tried again, per lease. */
const RETRIES_PER_LEASE = 3;

export interface Joined {
  /** What the routes submit commands to: the holder of each command's partition. */
  commands: Commands;
  leases: Leases;
  /** Where the other instances reach this one. */
  address: string;
  /** The partitions this instance holds now. */
  held(): readonly number[];
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
    afterCommit: (result: CommandResult) => Promise<void> | undefined;
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
    held: () => leases.partitions(),
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
      await parts.hearing.close();
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
    afterCommit: (result: CommandResult) => Promise<void> | undefined;
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
  const { fence, moves } = parts;
  const taken = takeUp(logger, parts);
  return Leases.start({
    url: config.store!,
    instance: fence.holder,
    address: parts.address,
    fingerprint: fingerprintOf(config.member, parts.identity),
    leaseMs: config.leaseMs,
    epochs: fence.epochs,
    health: parts.hearing.health,
    onGained: (ps) => {
      logger.info({ partitions: ps.length }, 'partitions taken');
      taken(ps);
    },
    onGiving: (ps) => moves.release(ps),
    onLost: (ps) => {
      moves.release(ps).catch(() => undefined);
      logger.warn({ partitions: ps.length }, 'partitions lost');
    },
  });
}

/**
 * Partitions that came to this instance taken up: each folded, then its undelivered events
 * scheduled and, for the feed's partition, the feed republished. What fails (the database away)
 * is tried again later for the partitions still held, until it succeeds or they leave.
 */
function takeUp(
  logger: Logger,
  parts: { fence: Fence; events: WebhookDelivery; moves: Moves; onFeed: () => Promise<void> },
): (partitions: number[]) => void {
  const attempt = (ps: number[], attempts: number): void => {
    const still = ps.filter((p) => holds(parts.fence, p));
    if (still.length === 0 || parts.moves.ended) return;
    parts.moves
      .adopt(still)
      .then(() => {
        parts.events.adopt(still);
        if (still.includes(FEED_PARTITION)) return parts.onFeed();
      })
      .catch((error: unknown) => {
        logger.warn(
          { partitions: still.length, err: faultOf(error) },
          'partitions not taken up yet; trying again',
        );
        const retry = setTimeout(() => attempt(still, attempts + 1), backoffMs(attempts, RETRY));
        retry.unref();
      });
  };
  return (ps) => attempt(ps, 0);
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
  private stopped = false;

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
    if (this.stopped) return Promise.resolve();
    // A move that throws before it starts fails as one that rejects.
    const all = Promise.all(ps.map(async (p) => move(p))).then(() => undefined);
    const tracked = all
      .catch((error: unknown) =>
        this.logger.error({ partitions: ps, err: faultOf(error) }, 'move failed'),
      )
      .finally(() => this.running.delete(tracked));
    this.running.add(tracked);
    return all;
  }

  /** No move starts from now on; resolves once those under way are over. */
  /** Whether moves have ended (the instance leaves). */
  get ended(): boolean {
    return this.stopped;
  }

  async end(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
  }
}

/** Whether this instance delivers an event now: it holds the event's partition. */
export const holdsEvent =
  (fence: Fence) =>
  (id: string): boolean =>
    holds(fence, partitionOf(id));
