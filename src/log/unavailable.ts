// A database that cannot be reached is a state the node lives through, not a reason to stop
// (issue 29): a restart, a switchover or a network fault ends every connection, and what needed
// the database answers 503 with Retry-After (`path.core.unavailable`, P7) until it is back.
// This module tells such failures apart from wrong statements, spaces the retries, and keeps the
// instance's view of whether its database answers (`/readyz` says `database_unreachable`).
// How long a client is told to wait is DATABASE_RETRY_AFTER_SECONDS (config.ts).
import {
  DATABASE_CONNECT_TIMEOUT_MS,
  DATABASE_KEEPALIVE_DELAY_MS,
  DATABASE_QUERY_TIMEOUT_MS,
} from '../config.js';

/**
 * What needed the database did not reach it, or got no answer in time: a write so refused may
 * or may not have committed (its retry with the same idempotency key finds out, P7).
 */
export class UnavailableError extends Error {
  override name = 'UnavailableError';
}

/**
 * The property an error carries across a thread when the database was unreachable: a copy of an
 * error loses its class, so the reader thread (postgres-reader.ts) marks it before it crosses.
 */
export const READ_UNAVAILABLE = 'unavailable';

/** Socket failures of a connection that was lost or never made. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs of a server going away or not taking sessions yet: class 08 (connection exception),
 * admin and crash shutdown, starting up, too many connections, a standby refusing writes.
 */
const SERVER_STATES = new Set(['57P01', '57P02', '57P03', '53300', '25006']);

/** node-postgres's own words for a connection it lost or could not make in time. */
const DRIVER_MESSAGES = [
  'Connection terminated',
  'connection timeout',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'is not queryable',
  'Client was closed',
];

/** Whether `error` says the database was unreachable, not that a statement was wrong. */
export function unreachable(error: unknown): boolean {
  if (error instanceof UnavailableError) return true;
  if (typeof error !== 'object' || error === null) return false;
  if ((error as Record<string, unknown>)[READ_UNAVAILABLE] === true) return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (SOCKET_CODES.has(code) || SERVER_STATES.has(code) || code.startsWith('08')) return true;
  }
  const message = (error as { message?: unknown }).message;
  if (typeof message !== 'string') return false;
  return DRIVER_MESSAGES.some((m) => message.includes(m));
}

/**
 * The wait before retry `attempt` (0 first): exponential from `baseMs` up to `maxMs`, with full
 * jitter, so that instances that lost the database together do not all come back at once.
 */
export function backoffMs(
  attempt: number,
  options: { baseMs: number; maxMs: number; random?: () => number },
): number {
  const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** Math.min(attempt, 30));
  return Math.round((options.random ?? Math.random)() * ceiling);
}

/**
 * Whether the instance's database answers, as its own connections last found: each success or
 * failure of one that says so is reported here. Only failures `unreachable` names count.
 */
export class DatabaseHealth {
  private failedAt: number | null = null;

  constructor(private readonly now: () => number = Date.now) {}

  /** A statement or connection succeeded: the database answers. */
  succeeded(): void {
    this.failedAt = null;
  }

  /** Reports a failure; whether it was one of reachability (and so counted). */
  failed(error: unknown): boolean {
    if (!unreachable(error)) return false;
    this.failedAt ??= this.now();
    return true;
  }

  get reachable(): boolean {
    return this.failedAt === null;
  }

  /** Milliseconds since the database was last found unreachable without answering since. */
  get downMs(): number {
    return this.failedAt === null ? 0 : this.now() - this.failedAt;
  }
}

/**
 * The settings of every connection the node makes to PostgreSQL (pools and single clients): a
 * connection and a statement bounded in time, and TCP keepalive, so that a lost database shows
 * as an error that `unreachable` names rather than as a wait without end.
 */
export function connectionSettings(url: string, sessionOptions?: string) {
  return {
    connectionString: currentUrl(url),
    ...(sessionOptions === undefined ? {} : { options: sessionOptions }),
    connectionTimeoutMillis: DATABASE_CONNECT_TIMEOUT_MS,
    query_timeout: DATABASE_QUERY_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: DATABASE_KEEPALIVE_DELAY_MS,
  };
}

/**
 * A database URL naming several hosts (`postgres://h1:5432,h2:5432/db`, a primary and its
 * standbys, for a switchover): node-postgres connects to one host, so each new connection is
 * made to the host last found to take writes (`pg_is_in_recovery()` false), looked for again,
 * host after host in the URL's order, when a connection is lost. With
 * `target_session_attrs=any` the first host that answers is taken. A URL of one host is used as
 * it is.
 */
class Primary {
  private url: string;
  private finding: Promise<string> | null = null;

  constructor(
    private readonly urls: readonly string[],
    private readonly anyHost: boolean,
  ) {
    this.url = urls[0]!;
  }

  /** The URL of the host a new connection goes to now. */
  get current(): string {
    return this.url;
  }

  /** Looks for the host that takes writes; calls made while one look is under way share it. */
  find(): Promise<string> {
    this.finding ??= this.look().finally(() => {
      this.finding = null;
    });
    return this.finding;
  }

  private async look(): Promise<string> {
    const { default: pg } = await import('pg');
    let last: unknown = null;
    for (const url of this.urls) {
      const client = new pg.Client(connectionSettings(url));
      client.on('error', () => undefined);
      try {
        await client.connect();
        const found = await client.query<{ standby: boolean }>(
          'select pg_is_in_recovery() as standby',
        );
        if (this.anyHost || found.rows[0]?.standby === false) {
          this.url = url;
          return url;
        }
      } catch (error) {
        last = error;
      } finally {
        void client.end().catch(() => undefined);
      }
    }
    throw new UnavailableError('no host of the database URL takes writes', { cause: last });
  }
}

/** Each multi-host URL's primary, per thread: every connection of the thread shares it. */
const primaries = new Map<string, Primary | null>();

function primaryOf(url: string): Primary | null {
  let primary = primaries.get(url);
  if (primary === undefined) {
    const parts = /^([a-z]+:\/\/(?:[^@/?#]*@)?)([^/?#]*)(.*)$/i.exec(url);
    const hosts = parts?.[2]?.split(',') ?? [];
    const anyHost = /[?&]target_session_attrs=any(&|$)/.test(parts?.[3] ?? '');
    primary =
      hosts.length < 2
        ? null
        : new Primary(
            hosts.map((host) => `${parts![1]}${host}${parts![3]}`),
            anyHost,
          );
    primaries.set(url, primary);
  }
  return primary;
}

/** The URL a new connection to `url`'s database uses now: one host, the one last found. */
export function currentUrl(url: string): string {
  return primaryOf(url)?.current ?? url;
}

/**
 * Looks again for the host of `url` that takes writes (a URL of one host has nothing to look
 * for): before a lost connection is opened again, and after a failure of reachability.
 */
export async function findPrimary(url: string): Promise<void> {
  await primaryOf(url)?.find();
}
