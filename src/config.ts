// Every setting and limit of the node, with its unit last, validated in one place (P12, P15).
// Flags win over environment variables (PATH_<FLAG>), which win over defaults.
import { availableParallelism } from 'node:os';

export interface Limits {
  body_bytes_max: number;
  /** Bytes of a refused (413) body read and dropped, so that its client can read the answer. */
  body_drain_bytes_max: number;
  /** Silence after which a refused body is no longer waited for and the connection is closed. */
  body_linger_ms: number;
  timestamp_skew_ms: number;
  idempotency_key_length_max: number;
  idempotency_retention_ms: number;
  idempotency_sweep_interval_ms: number;
  replay_entries_per_credential_max: number;
  replay_sweep_interval_ms: number;
  mailbox_depth_max: number;
  /** Commands of one aggregate decided together and made durable in one write. */
  batch_commands_max: number;
  /** A follow-up that could not be routed is tried again after this, doubling up to the max. */
  follow_up_retry_ms: number;
  follow_up_retry_max_ms: number;
  snapshot_every_records: number;
  shutdown_drain_ms: number;
  credentials_poll_interval_ms: number;
  pending_commands_max: number;
  worker_heap_mb: number;
  instruction_lifetime_ms: number;
  checkout_session_lifetime_ms: number;
  webhook_timeout_ms: number;
  webhook_retry_window_ms: number;
  webhook_first_retry_ms: number;
  webhook_retry_max_delay_ms: number;
  webhook_in_flight_max: number;
  /** How long a rotated webhook secret still signs beside the new one (P11). */
  webhook_secret_overlap_ms: number;
  /** How long a delivered (or abandoned) event is kept for `path-node events` (P11). */
  events_retention_ms: number;
  lookup_batch_max: number;
  lookup_confirm_freshness_ms: number;
  lookup_journal_retention_days: number;
  payee_check_daily_max: number;
  payee_check_context_max: number;
  payee_check_names_per_day_max: number;
  /** Rows of a connection's or delegation's usage log in one page (SPEC K, P12). */
  usage_page_default: number;
  usage_page_max: number;
  replication_poll_interval_ms: number;
  replication_page_size: number;
  /** Most entries of this node's change feed in one page a member asks for (the `limit`). */
  feed_page_max: number;
  /** Feed entries waiting to be written before a loading directory pauses for them. */
  feed_pending_max: number;
  /**
   * Issue 34: how often the directory image is taken while the node runs, when keys changed
   * since the last one (directory/checkpoint.ts). A start after a crash reads again the keys
   * changed after the last image: this bounds how many.
   */
  directory_image_interval_ms: number;
  member_keys_refresh_interval_ms: number;
  peer_request_timeout_ms: number;
  /**
   * The scrub's pace (issue 28): log records it checks a second in the background, every record
   * of every partition (those behind a snapshot too), so that a failing disk is heard of before
   * a start needs what it damaged.
   */
  scrub_records_per_second: number;
  /** The pause between the end of one scrub pass over the whole log and the next. */
  scrub_pass_pause_ms: number;
  /**
   * Issue 33: an aggregate that may leave memory (its state kept as a `states` row) leaves it
   * once no command has come for it this long; the next one brings it back from its row.
   */
  aggregate_idle_ms: number;
  /**
   * Aggregates held in memory by the whole node (shared among its workers as their partitions
   * are): past it, those that may leave memory and were used least recently leave it first.
   */
  aggregates_in_memory_max: number;
  /**
   * How far past the live memory the last full garbage collection left a JavaScript heap may
   * grow before the next, in percent (V8's own choice for a large heap is up to 300).
   */
  heap_growing_percent: number;
  /** How often each worker looks for aggregates to let go of (idle, or over the budget). */
  passivation_sweep_interval_ms: number;
  /**
   * The largest `states` row an aggregate is kept as (its state encoded). A subject or a
   * connection whose children grow past it stays in memory for good instead, so that no command
   * writes more than this for the state of what it changed (issue 15's cost kept).
   */
  state_row_bytes_max: number;
}

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /**
   * Cluster mode (P22): the PostgreSQL database every instance of the operator shares, as a
   * `postgres://` URL; null for the embedded node (LMDB in the data directory).
   */
  store: string | null;
  /**
   * Cluster mode: where this instance takes the commands other instances send it (P22), the
   * address they reach it at (empty: `http://internalHost:port`), and how long a partition's
   * lease lasts unrenewed (a dead instance's partitions wait this long for a new owner).
   */
  internalHost: string;
  internalPort: number;
  internalUrl: string;
  leaseMs: number;
  member: string;
  baseUrl: string;
  externalPort: number;
  /** The operator's own listener (P21): metrics, health, readiness; loopback by default. */
  adminPort: number;
  adminHost: string;
  /**
   * Where the access log goes (P21): standard output (beside the node's log), a file appended
   * to, or nowhere (`off`; the metrics still count every answer).
   */
  accessLog: AccessLogTarget;
  /** The share of successful answers the access log writes (errors are always written). */
  accessLogSample: number;
  workers: number;
  dev: boolean;
  lookupBudgetBase: number;
  lookupBudgetFactor: number;
  /**
   * The network pepper given in the configuration (P8); absent: generated in the data directory.
   */
  pepper?: { version: string; hex: string };
  /**
   * The key that seals names and account references, kept apart
   * from the data; absent: generated in the data directory.
   */
  sealingKeyHex?: string;
  /** The operator's webhook endpoints, sent every event (P11). */
  webhookUrls: string[];
  /** The operator's connector definitions, laid over the shipped ones (SPEC L). */
  connectorsFile?: string;
  logLevel: string;
  limits: Limits;
}

/**
 * P16: what the node creates is readable by its user alone. The command line sets this umask
 * before it creates anything, so no file ever exists with a wider mode, even for a moment.
 */
export const PRIVATE_UMASK = 0o077;
export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

export const API_VERSION = '2026-11-21.genesis';
export const SERVED_API_VERSIONS = [API_VERSION] as const;
export const API_PREFIXES = ['/api/path/v1', '/api/path/genesis/v1'] as const;

/**
 * Deepest nesting of objects and arrays a body may have: ample for every schema, far below any
 * stack limit (the strict JSON reader of P2 recurses once per level).
 */
export const BODY_DEPTH_MAX = 32;

// Limits the code needs where no configuration reaches (schemas built when a module loads, pure
// protocol functions, module-wide caches) or that only the code's authors should change. They
// are fixed per build, not read from PATH_LIMIT_<NAME>.

/** Longest string accepted in any free-form field of a body (the shared `Text` schema). */
export const TEXT_LENGTH_MAX = 1024;

/**
 * Most fractional digits a token amount may carry (P23: 18, the finest unit of the common token
 * standards); also the bound of an amount whose asset has no known minor unit.
 */
export const TOKEN_FRACTION_DIGITS_MAX = 18;

/** Longest raw identifier (P8) a lookup or an identifier record may carry, in characters. */
export const IDENTIFIER_LENGTH_MAX = 320;

/** Longest `nonce` a lookup may bind into its signed answer (SPEC D), in characters. */
export const LOOKUP_NONCE_LENGTH_MAX = 128;

/** Public keys kept decoded and checked (P1) between calls; when full, the oldest is dropped. */
export const PUBLIC_KEY_CACHE_MAX = 4096;

/** Rounds of `reads` one decision may take (each may name views found in the last). */
export const DECISION_READ_ROUNDS_MAX = 4;

/**
 * How full the in-memory directory index may get before it doubles: open addressing with linear
 * probing stays short below this load. A slot is about 20 bytes, so a key costs 20 / load bytes.
 */
export const DIRECTORY_INDEX_LOAD_MAX = 0.6;

/**
 * A snapshot is encoded this many values at a time (aggregates, or children of a large one),
 * the worker's event loop free between pieces: a partition holding an aggregate of 100,000
 * children goes on taking commands while its snapshot is written.
 */
export const SNAPSHOT_SLICE_VALUES = 2_000;

/**
 * How often a worker that has folded its own partitions looks for those its recovery helpers
 * hand over (it reads each as it comes between its own, and waits only for the last ones).
 */
export const RECOVERY_HANDOFF_POLL_MS = 2;

/**
 * The longest a worker folds in one event turn while it already answers (Shard.warm): commands
 * and their commits go on between the turns of a partition's fold.
 */
export const WARM_TURN_MS = 4;

/**
 * How often the scrub takes its next few records (scrub_records_per_second spread over the
 * second): each turn checks a few hundred records at the default pace, well under a millisecond
 * of the front end's thread.
 */
export const SCRUB_TURN_MS = 20;

/**
 * Records (or rows) `path-node verify` takes from one read transaction: it walks as fast as it
 * can, with no pace to keep, but lets the transaction go now and then.
 */
export const VERIFY_STEP_RECORDS = 65_536;

/** Recovery helper threads one worker may start to fold its partitions (src/actors/recovery.ts). */
export const RECOVERY_HELPERS_PER_WORKER_MAX = 3;

/**
 * The young generation of a shard worker and of a recovery helper: a start folds millions of
 * records into states that stay, and with V8's default one a tenth of the start went to copying
 * them between its small semi-spaces.
 */
export const WORKER_YOUNG_GENERATION_MB = 96;

/**
 * Messages the front end gathers for a shard worker before it posts them, without waiting for the
 * end of its turn: the worker decides, signs and commits the first ones while the front end still
 * authenticates the others, instead of the two threads taking turns on whole batches.
 */
export const WORKER_MESSAGE_CHUNK_MAX = 32;

/**
 * Signed calls the front end checks in one turn before it lets the event loop write the answers
 * that came in meanwhile (src/http/server.ts verifyLater); the same size as a worker message.
 */
export const VERIFY_CHUNK_MAX = WORKER_MESSAGE_CHUNK_MAX;

/** The directory image is read and written in pieces of this size (a read takes at most 2 GiB). */
export const DIRECTORY_IMAGE_CHUNK_BYTES = 64 * 1024 * 1024;
/** Bytes of the directory image checksummed and written at a time (a few ms of the thread). */
export const DIRECTORY_IMAGE_WRITE_BYTES = 4 * 1024 * 1024;
/**
 * Slots of the directory index a checkpoint writes in one part (directory/checkpoint.ts):
 * 262,144 slots are 5 MB of the live arrays, written by the file system's threads.
 */
export const DIRECTORY_IMAGE_PART_SLOTS = 1 << 18;

/**
 * Lookup batches of at least this many keys are hashed and signed on two threads (a worker and
 * the front end); smaller ones on one thread alone.
 */
export const LOOKUP_SPREAD_ITEMS_MIN = 64;

/** `path-node lookup`: batches in flight by default, and how often a plain progress line. */
export const LOOKUP_FILE_CONCURRENCY_DEFAULT = 2;
export const LOOKUP_FILE_PROGRESS_INTERVAL_MS = 5_000;
/**
 * The first buffer of a request body (src/http/body.ts): a batch lookup of 500 keys (about 45 KB)
 * fits; a larger declared body grows as its bytes arrive instead of being held before them.
 */
export const BODY_FIRST_BUFFER_BYTES = 64 * 1024;
/** Public views kept decoded beside the bytes they came from (services.ts); about 1 KiB each. */
export const VIEW_CACHE_ENTRIES_MAX = 4_096;
/**
 * Longest a thread holds the read transaction it answers public reads through (lmdb-log.ts). It
 * is renewed on every commit the thread learns of; on a quiet node this bounds how long LMDB
 * keeps the pages it pins from being reused.
 */
export const READ_SNAPSHOT_HOLD_MS = 1_000;

/**
 * How far past its last page a writing node keeps the LMDB data file (lmdb-log.ts, growDataFile),
 * so that the file a crash leaves ends past its last page and the start after it need not read
 * every page in use to show that none is missing (checkDataFile). A sparse tail: no disk is
 * taken until LMDB writes pages there. Grown again once less than half of it is left, checked at
 * most once a DATA_FILE_AHEAD_CHECK_MS by each thread that writes: 32 MiB last 8 s at 4 MB of
 * new pages a second, about a node's most (1,500 receipts a second, 2.5 KB each with their row).
 */
export const DATA_FILE_AHEAD_BYTES = 64 * 1024 * 1024;
export const DATA_FILE_AHEAD_CHECK_MS = 1_000;

/** Stack frames a log line gives of an exception met while handling a request. */
export const LOGGED_STACK_FRAMES_MAX = 8;
/**
 * The access log is written in chunks of this size, or at this interval when quieter (P21).
 * Larger chunks make fewer writes, but 128 KiB measured slower than 32 KiB side by side (server
 * CPU per public GET, node / bare, 1.91 and 1.94 against 1.61 and 1.80; requests per second
 * 0.97). The likely cause, not measured: a write larger than a pipe's 64 KiB waits for the
 * reader to drain it.
 */
export const ACCESS_LOG_BUFFER_BYTES = 32 * 1024;
export const ACCESS_LOG_FLUSH_MS = 1_000;

/** How long `path-node listen` waits for the handler it forwards a delivery to. */
export const LISTEN_FORWARD_TIMEOUT_MS = 10_000;
/** How long `path-node lookup` waits for one batch's answer. */
export const LOOKUP_FILE_TIMEOUT_MS = 60_000;

// Cluster mode (P22).
/** How far an internal channel call's time may be from the receiver's clock (a replay bound). */
export const CHANNEL_SKEW_MS = 30_000;
/** An internal channel call's body at most: a command with its packed inputs. */
export const CHANNEL_BODY_BYTES_MAX = 16 * 1024 * 1024; // tidy: format (16 MiB)
/** The partitions' owners are read again at most this often when a command finds one moved. */
export const OWNERS_READ_EVERY_MS = 50;
/**
 * A partition's lease, unrenewed (--lease-ms): the longest a dead instance's partitions wait for
 * a new owner. Renewed three times a lease; shorter ones cost the database more renewals.
 */
export const LEASE_MS_DEFAULT = 10_000;
export const LEASE_MS_MIN = 300;
/** A commit's note at most (postgres-log.ts): well under PostgreSQL's 8,000-byte payload. */
export const NOTE_BYTES_MAX = 7_000;
/** After another instance's lease would lapse, the wait before its partitions are taken. */
export const LEASE_EXPIRY_MARGIN_MS = 20;
/** Between two looks for a moving partition's new owner. */
export const MOVE_RETRY_MS = 25;
/**
 * How many times one command is decided again after its batch's append was refused with nothing
 * written (a claim of another command of the batch taken, an append before it not landed):
 * beyond it, the command answers 503 (issue 29).
 */
export const COMMIT_REDO_MAX = 3;

/** Seconds a client is told to wait (Retry-After) while the database does not answer (issue 29). */
export const DATABASE_RETRY_AFTER_SECONDS = 2;
/**
 * Every connection of the node to PostgreSQL is bounded in time (issue 29), so that a database
 * that stopped answering (a blackholed network, a server gone without a word) ends in an error,
 * a 503 and a retry, not a wait without end. A connection is given up after
 * DATABASE_CONNECT_TIMEOUT_MS and a statement after DATABASE_QUERY_TIMEOUT_MS: both leave room
 * for a link that adds half a second each way (a connection is two or three round trips, an
 * append or read one), and both end a blackhole within seconds.
 */
export const DATABASE_CONNECT_TIMEOUT_MS = 5_000;
export const DATABASE_QUERY_TIMEOUT_MS = 3_000;
/**
 * The slowest a database that still answers is taken to accept a commit's bytes: 1 MiB a second.
 * A commit is given a millisecond past DATABASE_QUERY_TIMEOUT_MS for every this many of its bytes.
 */
export const DATABASE_SLOWEST_BYTES_PER_MS = 1_024;
/** Idle time after which a connection's socket sends TCP keepalive probes. */
export const DATABASE_KEEPALIVE_DELAY_MS = 1_000;
/**
 * The longest a synchronous read (postgres-reader.ts) waits for its thread: a connection and a
 * statement, each at its own bound, and a second of slack; past it the read fails as unavailable.
 */
export const DATABASE_READER_WAIT_MS =
  DATABASE_CONNECT_TIMEOUT_MS + DATABASE_QUERY_TIMEOUT_MS + 1_000;
/**
 * A lost connection (leases, the notes' listener) is opened again after a wait drawn at random
 * below DATABASE_RETRY_BASE_MS, doubling each failed attempt up to DATABASE_RETRY_MAX_MS (full
 * jitter: the instances that lost the database together do not all come back at once).
 */
export const DATABASE_RETRY_BASE_MS = 100;
export const DATABASE_RETRY_MAX_MS = 2_000;
/**
 * The notes' listener only waits for notifications: it asks `select 1` this often, so that a
 * connection lost without a word (a blackhole) is noticed, and opened again, within seconds.
 */
export const DATABASE_LISTENER_PING_MS = 2_000;
/**
 * The front end's retries of a background write the database refused while unreachable (the
 * feed's rounds): the first wait at most, and the longest (backoffMs, full jitter).
 */
export const FRONT_RETRY_BASE_MS = 100;
export const FRONT_RETRY_MAX_MS = 5_000;
/**
 * Cluster mode: the longest a public read waits for a view's fresh bytes when this instance has
 * read the view before; past it, or with the database unreachable, those bytes answer (issue 29).
 */
export const VIEW_FRESH_WAIT_MS = 25;
/**
 * Cluster mode: the longest a command's answer waits for its own directory keys to be read into
 * this instance's index (node.ts), so that a lookup through it finds them; past it, with the
 * database slow or away, the answer goes and the keys follow once read (issue 29).
 */
export const OWN_KEYS_WAIT_MS = 1_000;
/** Directory rows the index's load reads at a time (directory/directory.ts). */
export const DIRECTORY_READ_PAGE_ROWS = 10_000;
/**
 * The feed's state rows its publisher reads at a time while it compares them with the directory
 * (network/feed.ts, at a start and when it becomes the cluster's feed writer).
 */
export const FEED_STATE_READ_PAGE_ROWS = 10_000;
/**
 * Rows housekeeping reads at a time where it only reads (reads/housekeeping.ts `pages`: the
 * stored answers of a data directory from before their order rows, the directory image's
 * `directory_changes`).
 */
export const HOUSEKEEPING_READ_PAGE_ROWS = 10_000;
/** A member's replica rows its follower reads at a time into the index (network/follower.ts). */
export const REPLICA_READ_PAGE_ROWS = 10_000;
/** Outbox and resend rows the webhook deliverer reads at a time (events/delivery.ts). */
export const OUTBOX_READ_PAGE_ROWS = 1_000;
/**
 * Rows a sweep forgets a write (reads/housekeeping.ts `forgetRange`: replay marks, idempotent
 * answers, journal rows and finished events past their retention): a round reads and writes a
 * page at a time until none is left, so the thread that serves HTTP is held a page at a time.
 */
export const SWEEP_PAGE_ROWS = 1_000;

/**
 * How long a browser may keep a preflight answer of a public route (P20) before asking again.
 * Ten minutes: Chromium caps it at two hours, and the routes change only with a new build.
 */
export const CORS_MAX_AGE_SECONDS = 600;

/**
 * A public document (keys, discovery, OpenAPI) at least this long is also kept compressed, made
 * once with the document (http/cache.ts); a shorter one saves less than a packet's worth.
 */
export const COMPRESSED_DOCUMENT_BYTES_MIN = 1024;
/**
 * Brotli quality (0-11) of the documents compressed once. 6 makes the 295 KB OpenAPI document
 * 10.0 KB in about 2 ms; 11 makes it 9.1 KB in about 300 ms, paid at every start.
 */
export const BROTLI_QUALITY = 6;
/** gzip level (1-9) of the documents compressed once: 13.4 KB for OpenAPI in about 2 ms. */
export const GZIP_LEVEL = 9;

/**
 * How far the node's clock may step back without a forgotten request becoming fresh again (P5).
 * Keeping each request for the skew past its own timestamp, and this, instead of for twice the
 * skew past its arrival, holds 360 s of a synchronised client's requests instead of 600 s.
 */
export const REPLAY_CLOCK_STEP_MS = 60_000;

/** The smallest ring of a credential's replay window (http/replay-window.ts): 400 bytes. */
export const REPLAY_WINDOW_ENTRIES_MIN = 16;

/**
 * Aggregates a worker lets go of, idle since its last sweep, before it asks for a full garbage
 * collection (issue 33, actors/collect.ts): a few hundred KB of states at least, for a pause of a
 * few ms a heap of that size costs.
 */
export const COLLECT_AFTER_PASSIVATIONS = 1_000;
/**
 * Answers the front end gives, then quiet for aggregate_idle_ms, before it asks for a full
 * garbage collection (issue 33, actors/collect.ts): some tens of MB of garbage, for a pause of
 * a few tens of ms on a quiet node.
 */
export const FRONT_COLLECT_AFTER_ANSWERS = 10_000;

export const DEFAULT_LIMITS: Limits = {
  body_bytes_max: 1024 * 1024,
  body_drain_bytes_max: 16 * 1024 * 1024,
  body_linger_ms: 2_000,
  timestamp_skew_ms: 300_000,
  idempotency_key_length_max: 255,
  idempotency_retention_ms: 48 * 3600_000,
  idempotency_sweep_interval_ms: 3600_000,
  replay_entries_per_credential_max: 2_000_000,
  replay_sweep_interval_ms: 60_000,
  mailbox_depth_max: 1024,
  batch_commands_max: 256,
  follow_up_retry_ms: 100,
  follow_up_retry_max_ms: 10_000,
  snapshot_every_records: 2_048,
  shutdown_drain_ms: 10_000,
  credentials_poll_interval_ms: 500,
  pending_commands_max: 100_000,
  worker_heap_mb: 8192,
  instruction_lifetime_ms: 5 * 60_000,
  checkout_session_lifetime_ms: 3600_000,
  webhook_timeout_ms: 10_000,
  webhook_retry_window_ms: 3 * 24 * 3600_000,
  webhook_first_retry_ms: 10_000,
  webhook_retry_max_delay_ms: 6 * 3600_000,
  webhook_in_flight_max: 32,
  webhook_secret_overlap_ms: 24 * 3600_000,
  events_retention_ms: 7 * 24 * 3600_000,
  lookup_batch_max: 500,
  lookup_confirm_freshness_ms: 5 * 60_000,
  lookup_journal_retention_days: 90,
  payee_check_daily_max: 10_000,
  payee_check_context_max: 10,
  payee_check_names_per_day_max: 3,
  usage_page_default: 100,
  usage_page_max: 500,
  replication_poll_interval_ms: 250,
  replication_page_size: 1000,
  feed_page_max: 5000,
  feed_pending_max: 20_000,
  directory_image_interval_ms: 60_000,
  member_keys_refresh_interval_ms: 60_000,
  peer_request_timeout_ms: 10_000,
  scrub_records_per_second: 20_000,
  scrub_pass_pause_ms: 3600_000,
  aggregate_idle_ms: 60_000,
  aggregates_in_memory_max: 1_000_000,
  heap_growing_percent: 50,
  passivation_sweep_interval_ms: 1_000,
  state_row_bytes_max: 16_384,
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Flags = Record<string, string | true>;

/**
 * A flag of the command line and what help says of it (issue 31). The command line's table of
 * commands (src/cli/commands.ts) is made of these, and it is what the command line accepts, so
 * help cannot drift from the parser.
 */
export interface FlagSpec {
  /** The flag without its dashes: `data-dir`. */
  readonly name: string;
  /** The value's placeholder (`PORT`); absent for a yes-or-no flag (`--dev`, `--dev true`). */
  readonly argument?: string;
  /** Never takes a value, so that a word after it is read as a command or an operand. */
  readonly switch?: true;
  readonly required?: true;
  /** One sentence on what it does, for people. */
  readonly sentence: string;
  /** The value taken when neither the flag nor its environment variable is given. */
  readonly default?: string;
  /** The default as help says it, where that is not a value (`cores - 1, at least 1`). */
  readonly defaultShown?: string;
  /** The environment variable read when the flag is not given (flags win). */
  readonly env?: string;
  /** A value to show in help (`--port 9000`); empty for a yes-or-no flag. */
  readonly example: string;
}

/** The environment variable of a `serve` flag: `--data-dir` is PATH_DATA_DIR. */
export const envOf = (flag: string): string => `PATH_${flag.toUpperCase().replaceAll('-', '_')}`;

/** A yes-or-no setting such as `--dev`: given bare, or as `true` or `1`. */
export const switchedOn = (raw: string | true | undefined): boolean =>
  raw === true || raw === 'true' || raw === '1';

/** `--webhook-urls`: the endpoints, comma-separated, blanks dropped. */
export const webhookUrlsOf = (raw: string): string[] =>
  raw
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');

/** `serve`'s flags, in the order help gives them; each is read from PATH_<FLAG> too. */
export const SERVE_FLAGS = [
  {
    name: 'port',
    argument: 'PORT',
    sentence: 'The port of the HTTP API; 0 picks a free one.',
    default: '8080',
    example: '9000',
  },
  {
    name: 'host',
    argument: 'HOST',
    sentence: 'The address of the HTTP API and of the external discovery listener.',
    default: '127.0.0.1',
    example: '0.0.0.0',
  },
  {
    name: 'data-dir',
    argument: 'DIR',
    sentence: 'The data directory: the LMDB store, the keys and the pepper, private to its user.',
    default: './data',
    example: '/var/lib/path-node',
  },
  {
    name: 'store',
    argument: 'URL',
    sentence:
      'Cluster mode (P22): the PostgreSQL database every instance shares, holding the log, ' +
      'views, keys and secrets instead of the data directory.',
    defaultShown: 'none, the embedded store in --data-dir',
    example: 'postgres://path@db.internal/path',
  },
  {
    name: 'internal-host',
    argument: 'HOST',
    sentence: "Cluster mode: the address instances' commands to this one come in on.",
    default: '127.0.0.1',
    example: '10.0.0.5',
  },
  {
    name: 'internal-port',
    argument: 'PORT',
    sentence: "Cluster mode: the port instances' commands to this one come in on.",
    default: '8083',
    example: '9083',
  },
  {
    name: 'internal-url',
    argument: 'URL',
    sentence: 'Cluster mode: the address other instances reach this one at.',
    defaultShown: 'http://INTERNAL_HOST:INTERNAL_PORT',
    example: 'http://10.0.0.5:8083',
  },
  {
    name: 'lease-ms',
    argument: 'MS',
    sentence:
      'Cluster mode: how long a partition stays with an instance that stopped renewing it, ' +
      'in milliseconds.',
    default: String(LEASE_MS_DEFAULT),
    example: '5000',
  },
  {
    name: 'member',
    argument: 'NAME',
    sentence: "The operator's member name, the issuer of every object the node signs.",
    default: 'local',
    example: 'acme',
  },
  {
    name: 'base-url',
    argument: 'URL',
    sentence: 'The public origin given in discovery documents and links.',
    defaultShown: 'http://HOST:PORT',
    example: 'https://pay.example.com',
  },
  {
    name: 'external-port',
    argument: 'PORT',
    sentence: "The external discovery listener's port (SPEC L); 0 picks a free one.",
    default: '8081',
    example: '9081',
  },
  {
    name: 'admin-port',
    argument: 'PORT',
    sentence: "The port of the operator's listener: metrics, health, readiness (P21).",
    default: '8082',
    example: '9082',
  },
  {
    name: 'admin-host',
    argument: 'HOST',
    sentence: "The address the operator's listener listens on.",
    default: '127.0.0.1',
    example: '10.0.0.5',
  },
  {
    name: 'access-log',
    argument: 'WHERE',
    sentence:
      'Where the access log goes: stdout (beside the application log), a file path (appended ' +
      'to, created 0600), or off (answers are still counted in the metrics).',
    default: 'stdout',
    example: 'off',
  },
  {
    name: 'access-log-sample',
    argument: 'SHARE',
    sentence:
      'The share of successful requests written to the access log, from 0 to 1 ' +
      '(refusals always are).',
    default: '1',
    example: '0.01',
  },
  {
    name: 'workers',
    argument: 'N',
    sentence: 'Shard worker threads, from 1 to 64.',
    default: String(Math.max(1, availableParallelism() - 1)),
    defaultShown: 'cores - 1, at least 1',
    example: '4',
  },
  {
    name: 'dev',
    sentence: 'Development only: allows http and loopback webhook targets (P11).',
    defaultShown: 'off',
    example: '',
  },
  {
    name: 'lookup-budget-base',
    argument: 'N',
    sentence:
      'Lookups each member may make a month per identifier type, whatever it contributes (P12).',
    default: '1000',
    example: '100000',
  },
  {
    name: 'lookup-budget-factor',
    argument: 'F',
    sentence:
      'Further lookups a month a member earns per directory entry of that type it contributes.',
    default: '10',
    example: '20',
  },
  {
    name: 'webhook-urls',
    argument: 'URLS',
    sentence: "The operator's webhook endpoints, comma-separated, sent every event.",
    defaultShown: 'none',
    example: 'https://hooks.example.com/path',
  },
  {
    name: 'connectors-file',
    argument: 'FILE',
    sentence: 'Connector definitions laid over the shipped ones (SPEC L).',
    defaultShown: 'none, the shipped connectors only',
    example: '/etc/path-node/connectors.json',
  },
  {
    name: 'log-level',
    argument: 'LEVEL',
    sentence: 'The least level logged: fatal, error, warn, info, debug or trace.',
    default: 'info',
    example: 'debug',
  },
] as const satisfies readonly FlagSpec[];

type ServeFlag = (typeof SERVE_FLAGS)[number]['name'];

/** Splits the words of a command line into its words and its flags. */
export function parseFlags(
  argv: readonly string[],
  options: { switches: ReadonlySet<string> },
): { positional: string[]; flags: Flags } {
  const positional: string[] = [];
  const flags: Flags = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const name = arg === '-h' ? 'help' : arg.slice(2);
    if (arg === '-h' || (arg.startsWith('--') && options.switches.has(name))) {
      flags[name] = true;
      continue;
    }
    if (!arg.startsWith('--')) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    if (eq > 0) flags[arg.slice(2, eq)] = arg.slice(eq + 1);
    else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--'))
      flags[arg.slice(2)] = argv[++i]!;
    else flags[arg.slice(2)] = true;
  }
  return { positional, flags };
}

/** The value `serve` takes for a flag given neither on the command line nor in the environment. */
const defaultOf = (name: ServeFlag): string | undefined => {
  const spec: FlagSpec = SERVE_FLAGS.find((f) => f.name === name)!;
  return spec.default;
};

export function loadConfig(flags: Flags, env: NodeJS.ProcessEnv = process.env): Config {
  for (const name of Object.keys(flags)) {
    if (!SERVE_FLAGS.some((f) => f.name === name)) throw new ConfigError(`unknown flag --${name}`);
  }
  const read = (name: ServeFlag): string | true | undefined => flags[name] ?? env[envOf(name)];
  const text = (name: ServeFlag): string => {
    const v = read(name);
    if (v === true) throw new ConfigError(`--${name} needs a value`);
    return v ?? defaultOf(name) ?? '';
  };
  const integer = (name: ServeFlag, min: number, max: number): number => {
    const n = Number(text(name));
    if (!Number.isInteger(n) || n < min || n > max)
      throw new ConfigError(`--${name} must be an integer from ${min} to ${max}`);
    return n;
  };
  const port = integer('port', 0, 65535);
  const host = text('host');
  const member = text('member');
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(member))
    throw new ConfigError('--member must be 1-63 letters, digits, dot, dash or underscore');
  const devRaw = read('dev');
  const factor = Number(text('lookup-budget-factor'));
  if (!Number.isFinite(factor) || factor < 0)
    throw new ConfigError('--lookup-budget-factor must be a number of at least 0');
  // Empty: the node derives it from the address it listens on (port 0 picks a free one).
  const baseUrl = text('base-url').replace(/\/+$/, '');
  if (baseUrl !== '' && !/^https?:\/\/[^/]+$/.test(baseUrl))
    throw new ConfigError('--base-url must be an absolute http(s) origin');
  return {
    port,
    host,
    dataDir: text('data-dir'),
    store: storeOf(text('store')),
    internalHost: text('internal-host'),
    internalPort: integer('internal-port', 0, 65535),
    internalUrl: internalUrlOf(text('internal-url')),
    leaseMs: integer('lease-ms', LEASE_MS_MIN, 600_000),
    member,
    baseUrl,
    externalPort: integer('external-port', 0, 65535),
    adminPort: integer('admin-port', 0, 65535),
    adminHost: text('admin-host'),
    accessLog: accessLogOf(text('access-log')),
    accessLogSample: share('access-log-sample', text('access-log-sample')),
    workers: integer('workers', 1, 64),
    dev: switchedOn(devRaw),
    lookupBudgetBase: integer('lookup-budget-base', 0, 1_000_000_000),
    lookupBudgetFactor: factor,
    ...secrets(env),
    ...(read('connectors-file') === undefined ? {} : { connectorsFile: text('connectors-file') }),
    webhookUrls: webhookUrlsOf(text('webhook-urls')),
    logLevel: text('log-level'),
    limits: loadLimits(env),
  };
}

/** The address other instances reach this one at, if given: an http origin. */
function internalUrlOf(raw: string): string {
  const url = raw.replace(/\/+$/, '');
  if (url !== '' && !/^http:\/\/[^/]+$/.test(url))
    throw new ConfigError('--internal-url must be an http origin (http://host:port)');
  return url;
}

/** The cluster's database URL (P22), or null for the embedded node. */
export function storeOf(raw: string): string | null {
  if (raw === '') return null;
  // One host, or several for a switchover (`postgres://h1:5432,h2:5432/db`, issue 29): each host
  // must make a URL of its own. The URL is never repeated in a message: it may carry a password.
  const parts = /^(postgres(?:ql)?:\/\/(?:[^@/?#]*@)?)([^/?#]*)(.*)$/i.exec(raw);
  const hosts = parts?.[2]?.split(',') ?? [];
  const readable = (host: string) => {
    try {
      new URL(`${parts![1]}${host}${parts![3]}`);
      return host !== '' || hosts.length === 1;
    } catch {
      return false;
    }
  };
  if (parts === null || !hosts.every(readable))
    throw new ConfigError('--store must be a postgres:// URL (hosts separated by commas)');
  return raw;
}

export type AccessLogTarget = 'stdout' | 'off' | { file: string };

/** `stdout`, `off`, or a file's path (a file named `off` is written `./off`). */
function accessLogOf(raw: string): AccessLogTarget {
  if (raw === 'stdout' || raw === 'off') return raw;
  if (raw.trim() === '') throw new ConfigError('--access-log must be stdout, off or a file path');
  return { file: raw };
}

/** A fraction from 0 to 1 (`--access-log-sample 0.01` writes one success in a hundred). */
function share(name: string, raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1)
    throw new ConfigError(`--${name} must be a number from 0 to 1`);
  return n;
}

/**
 * Secrets come from the environment only (PATH_PEPPER,
 * PATH_PEPPER_VERSION, PATH_SEALING_KEY), never from flags.
 */
function secrets(env: NodeJS.ProcessEnv): Pick<Config, 'pepper' | 'sealingKeyHex'> {
  const hex32 = /^[0-9a-f]{64}$/;
  const out: Pick<Config, 'pepper' | 'sealingKeyHex'> = {};
  if (env.PATH_PEPPER !== undefined) {
    if (!hex32.test(env.PATH_PEPPER) || !env.PATH_PEPPER_VERSION)
      throw new ConfigError(
        'PATH_PEPPER must be 32 bytes of lowercase hex, with PATH_PEPPER_VERSION naming it',
      );
    out.pepper = { version: env.PATH_PEPPER_VERSION, hex: env.PATH_PEPPER };
  }
  if (env.PATH_SEALING_KEY !== undefined) {
    if (!hex32.test(env.PATH_SEALING_KEY))
      throw new ConfigError('PATH_SEALING_KEY must be 32 bytes of lowercase hex');
    out.sealingKeyHex = env.PATH_SEALING_KEY;
  }
  return out;
}

/** Every limit can be overridden by PATH_LIMIT_<NAME> (for example PATH_LIMIT_BODY_BYTES_MAX). */
export function loadLimits(env: NodeJS.ProcessEnv): Limits {
  const limits = { ...DEFAULT_LIMITS };
  for (const name of Object.keys(limits) as (keyof Limits)[]) {
    const raw = env[`PATH_LIMIT_${name.toUpperCase()}`];
    if (raw === undefined) continue;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1)
      throw new ConfigError(`PATH_LIMIT_${name.toUpperCase()} must be a positive integer`);
    limits[name] = n;
  }
  return limits;
}
