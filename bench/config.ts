// Every size, count and duration of the benchmark suite, in one place.
// BENCH_QUICK=1 shrinks each section for a smoke run; BENCH_RESTART_RECORDS sets the size of the
// log the restart figure recovers; BENCH_INDEX_KEYS the size of the lookup figure's directory;
// BENCH_ONLY=micro,log,get,post,restart,resolver,requests,lookup,latency,consume,replication,
// growth,snapshot,hashbatch,cluster,start,client,nodes,memory,passivated runs a subset;
// BENCH_HASH_INDEX_KEYS the size of the hash batch figure's directory; BENCH_NODES the Node.js
// majors the `nodes` section runs this build under beside the running one (default 24);
// BENCH_MEMORY_COUNTS the receipts the `memory` section writes to each fresh node (default
// 100000,1000000) and BENCH_MEMORY_IDLE_MS how long each node then idles before its memory is
// read (default 780000: past the 360 s a signed request is remembered against replays, the
// sweep that forgets it, 60 s, and the front end's collection a quiet minute after that, and past
// aggregate_idle_ms, 60 s, after which an aggregate leaves memory); BENCH_PASSIVATED_IDLE_MS the aggregate_idle_ms the `passivated` section's node runs
// with (default 5000); BENCH_SOAK_MINUTES how long the `soak` section's mixed load runs (default
// 10), in minutes each measured on its own.

export const SECTION_NAMES = ['micro', 'log', 'get', 'post', 'restart', 'resolver', 'requests', 'lookup', 'latency', 'consume', 'replication', 'growth', 'snapshot', 'hashbatch', 'cluster', 'start', 'client', 'nodes', 'memory', 'passivated', 'soak', 'versus'] as const;
/** Sections a plain `npm run bench` runs: `versus` needs a baseline build and is asked for by name. */
const DEFAULT_SECTIONS = SECTION_NAMES.filter((name) => name !== 'versus');
export type SectionName = (typeof SECTION_NAMES)[number];

export interface LoadShape {
  connections: number;
  pipelining: number;
}

export interface BenchConfig {
  quick: boolean;
  sections: ReadonlySet<SectionName>;
  micro: { task_time_ms: number };
  log: { concurrent_in_flight: number; concurrent_records: number; single_records: number };
  get: { duration_seconds: number; warmup_seconds: number; rounds: number; shapes: readonly LoadShape[] };
  post: { requests: number; warmup_requests: number; connections: number; floor_time_ms: number };
  /** Figure 15: `npm start` on a built tree, timed to its listening line, `runs` times. */
  start: { runs: number };
  /** Figure 14: the cluster store beside the embedded one, each measured `rounds` times in turns. */
  cluster: {
    rounds: number;
    post: SignedLoad;
    /** 14c: the numbers of instances on one database that the same POST load is spread over. */
    instances: readonly number[];
    /** 14c: that load (smaller than `post`: the counts of instances take six turns in all). */
    spread: SignedLoad;
    /** Longest wait for the partitions to be shared out among the instances; between two looks. */
    share_timeout_ms: number;
    share_poll_ms: number;
    /**
     * 14d: kill -9 of one of three instances leased for `lease_ms`, `rounds` times: a write
     * through a survivor is sent every `retry_ms` until one lands on the dead instance's
     * partitions, for at most `timeout_ms`.
     */
    takeover: { rounds: number; lease_ms: number; retry_ms: number; timeout_ms: number };
  };
  /**
   * Figure 17: this build under the running Node.js beside each of `majors` (BENCH_NODES), both
   * nodes at once, `rounds` rounds in turns: signed POSTs, public GETs, then hash batches of
   * `batch_items` keys against a directory of `index_keys` built in each node's data directory.
   */
  nodes: {
    majors: readonly number[];
    rounds: number;
    post: SignedLoad;
    get_seconds: number;
    get_shape: LoadShape;
    index_keys: number;
    batch_items: number;
    present_share: number;
    hash: SignedLoad;
  };
  /**
   * Figure 18 (issue 33): a fresh node for each of `counts` (and an empty one), that many signed
   * durable `POST /receipts` over `connections` connections, sent in loads of at most
   * `batch_requests` (the load generator signs a load's requests 1 ms apart before it starts, and
   * the node refuses a timestamp more than 300 s from its clock); then `idle_ms` of idle before
   * the node's memory is read.
   */
  memory: { counts: readonly number[]; idle_ms: number; connections: number; batch_requests: number };
  /**
   * Figure 19 (issue 33): `count` receipts and checkout sessions made `parallel` at a time on a
   * node whose aggregates leave memory after `idle_ms`, then timed against as many made again in
   * rounds of `round_size` (each round ends well inside `idle_ms`, so those stay in memory).
   */
  passivated: { count: number; round_size: number; idle_ms: number; parallel: number };
  /**
   * The soak (issues 33 and 34): each kind of request's saturation alone (closed loop), then a mix
   * of them at `share` of it, on an even schedule, for `minutes` minutes measured one by one.
   */
  soak: {
    minutes: number;
    share: number;
    index_keys: number;
    /** Each kind's saturation: its closed-loop load (public reads: `get_seconds` of it). */
    saturation: SignedLoad;
    get_seconds: number;
    /** Keys in each batch lookup. */
    batch_keys: number;
    /** Each paced generator's keep-alive connections. */
    connections: number;
  };
  /** This build against another (BENCH_BASELINE: that build's dist/src/cli/main.js), in turns. */
  versus: { baseline_cli: string | null; current_cli: string | null; rounds: number; post: SignedLoad; get_seconds: number; get_shape: LoadShape };
  restart: {
    records: number;
    /** Records per LMDB transaction while the data directory is built. */
    batch_records: number;
    /** Distinct real signed envelopes the generated records are made from. */
    templates: number;
    /** Signed POSTs after the first start, so that the SIGTERM has partitions to snapshot. */
    touch_requests: number;
    start_timeout_ms: number;
  };
  /** Figure 6: the resolver read against bare uWS, and identifier registration. */
  resolver: {
    shapes: readonly LoadShape[];
    register: SignedLoad;
    subjects: number;
    /** The contrast: registrations on a single subject, in two consecutive loads of this size. */
    one_subject: SignedLoad;
  };
  /** Figure 7: request creation, and the public request read against bare uWS. */
  requests: { shapes: readonly LoadShape[]; create: SignedLoad };
  /** Figure 8: lookups against a directory of `index_keys` keys. */
  lookup: {
    index_keys: number;
    /** Directory rows per LMDB write while the data directory is built. */
    build_batch_rows: number;
    /** Idle time after "listening" before resident memory is read (lets the start's garbage go). */
    settle_ms: number;
    batch_items: number;
    /** Share of looked-up keys that are in the directory. */
    present_share: number;
    unsigned: SignedLoad;
    signed: SignedLoad;
    single: SignedLoad;
    /** Member credentials the contrast run of single lookups is spread across. */
    single_members: number;
    floor_time_ms: number;
    start_timeout_ms: number;
    /**
     * Figure 8f (issue 34, target 6): the start after a kill -9 under write load. The node takes
     * its directory image every `image_interval_ms` while it runs; identifier registrations
     * from `writers` concurrent signed callers run until `images` images were written during
     * them, then for `after_image_ms` more, and the node is killed while they go on.
     */
    crash: { image_interval_ms: number; writers: number; subjects: number; images: number; after_image_ms: number };
  };
  /**
   * Figure 8e: single signed lookups on a small directory, first at saturation (closed loop,
   * autocannon), then on an even schedule at `paced_share` of that rate (paced-load.ts).
   */
  latency: {
    index_keys: number;
    saturation: SignedLoad;
    paced_share: number;
    paced_seconds: number;
    paced_warmup_seconds: number;
    paced_connections: number;
    /** The target: p99 of the paced run under this many milliseconds. */
    p99_target_ms: number;
    /** The disk's floor measured after the paced run: commits of one record, each alone. */
    floor_commits: number;
    floor_gap_ms: number;
  };
  /** Figure 9: consume on one hot connection and across many. */
  consume: { hot: SignedLoad; spread: SignedLoad; spread_connections: number };
  /** Figure 10: registrations on one subject in bands of `band` held identifiers. */
  growth: { band: number; connections: number };
  /** Figure 11: the stall of a snapshot of one large aggregate, before and now. */
  snapshot: { children: readonly number[]; rounds: number };
  /** Figure 10: replication of directory entries from one node to another. */
  replication: {
    /** Identifiers registered at B for the catch-up figure and again for the live figure. */
    entries: number;
    register: Omit<SignedLoad, 'count' | 'warmup'>;
    subjects: number;
    /** The steady load of the lag figure: registrations per second, for how long, every how many sampled. */
    lag_rate_per_second: number;
    lag_duration_seconds: number;
    lag_sample_every: number;
    poll_interval_ms: number;
    /** Longest wait for one entry to arrive at A before the run fails. */
    arrival_timeout_ms: number;
  };
  /** Figure 12: batches of `batch_items` identifier_hash keys against a directory of `index_keys`. */
  hashbatch: { index_keys: number; batch_items: number; present_share: number; load: SignedLoad; floor_time_ms: number };
  /** Ceiling on any one child process (load generator, server start). */
  child_timeout_ms: number;
}

/** A load of pre-signed requests: how many are measured, after how many warm-up ones, over how many connections. */
export interface SignedLoad {
  count: number;
  warmup: number;
  connections: number;
}

export function loadBenchConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  const quick = env.BENCH_QUICK === '1' || env.BENCH_QUICK === 'true';
  const restartRecords = positiveInteger(env.BENCH_RESTART_RECORDS, quick ? 20_000 : 1_000_000, 'BENCH_RESTART_RECORDS');
  const indexKeys = positiveInteger(env.BENCH_INDEX_KEYS, quick ? 200_000 : 10_000_000, 'BENCH_INDEX_KEYS');
  const publicGetShapes: readonly LoadShape[] = quick ? [{ connections: 32, pipelining: 1 }] : [{ connections: 32, pipelining: 1 }, { connections: 32, pipelining: 8 }];
  const signedLoad = (count: number, warmup: number, connections: number): SignedLoad =>
    (quick ? { count: Math.max(100, Math.round(count / 10)), warmup: Math.max(50, Math.round(warmup / 10)), connections } : { count, warmup, connections });
  return {
    quick,
    sections: sectionsFrom(env.BENCH_ONLY),
    micro: { task_time_ms: quick ? 200 : 1500 },
    log: {
      concurrent_in_flight: 256,
      concurrent_records: quick ? 4_000 : 40_000,
      single_records: quick ? 50 : 300,
    },
    get: {
      duration_seconds: quick ? 1 : 5,
      warmup_seconds: 1,
      rounds: quick ? 1 : 3,
      shapes: quick ? [{ connections: 32, pipelining: 1 }] : [{ connections: 32, pipelining: 1 }, { connections: 32, pipelining: 8 }],
    },
    post: { requests: quick ? 2_000 : 20_000, warmup_requests: quick ? 300 : 2_000, connections: Number(process.env.BENCH_POST_CONNECTIONS ?? 256), floor_time_ms: quick ? 200 : 1500 },
    start: { runs: quick ? 1 : 5 },
    cluster: {
      rounds: quick ? 1 : 2,
      post: { count: quick ? 1_000 : 10_000, warmup: quick ? 256 : 1_000, connections: 256 },
      instances: [1, 2, 3],
      spread: { count: quick ? 1_000 : 6_000, warmup: quick ? 256 : 1_000, connections: 256 },
      share_timeout_ms: 60_000,
      share_poll_ms: 100,
      takeover: { rounds: quick ? 1 : 3, lease_ms: 2_000, retry_ms: 5, timeout_ms: 30_000 },
    },
    restart: {
      records: restartRecords,
      batch_records: 20_000,
      templates: quick ? 64 : 512,
      touch_requests: quick ? 500 : 3_000,
      start_timeout_ms: 600_000,
    },
    resolver: { shapes: publicGetShapes, register: signedLoad(20_000, 2_000, 64), subjects: 256, one_subject: { ...signedLoad(2_500, 0, 64), warmup: 0 } },
    requests: { shapes: publicGetShapes, create: signedLoad(20_000, 2_000, 64) },
    lookup: {
      index_keys: indexKeys,
      build_batch_rows: 100_000,
      settle_ms: quick ? 2_000 : 8_000,
      batch_items: 500,
      present_share: 0.5,
      unsigned: signedLoad(2_000, 200, 8),
      signed: signedLoad(300, 30, 8),
      single: signedLoad(5_000, 500, 64),
      single_members: 8,
      floor_time_ms: quick ? 200 : 1500,
      start_timeout_ms: 900_000,
      crash: { image_interval_ms: quick ? 3_000 : 15_000, writers: 32, subjects: 64, images: 1, after_image_ms: quick ? 2_000 : 12_000 },
    },
    hashbatch: {
      index_keys: positiveInteger(env.BENCH_HASH_INDEX_KEYS, quick ? 100_000 : 1_000_000, 'BENCH_HASH_INDEX_KEYS'),
      batch_items: 500,
      present_share: 0.5,
      load: signedLoad(2_000, 200, 8),
      floor_time_ms: quick ? 200 : 1500,
    },
    latency: {
      index_keys: quick ? 10_000 : 100_000,
      saturation: signedLoad(5_000, 500, 64),
      paced_share: 0.5,
      paced_seconds: quick ? 2 : 10,
      paced_warmup_seconds: quick ? 0.5 : 2,
      paced_connections: 64,
      p99_target_ms: 10,
      floor_commits: quick ? 200 : 2_000,
      floor_gap_ms: 1,
    },
    growth: { band: quick ? 200 : 1_000, connections: 16 },
    snapshot: { children: quick ? [20_000] : [60_000, 100_000], rounds: quick ? 2 : 5 },
    consume: { hot: signedLoad(10_000, 1_000, 64), spread: signedLoad(10_000, 1_000, 64), spread_connections: quick ? 20 : 200 },
    replication: {
      entries: quick ? 1_000 : 20_000,
      register: { connections: 64 },
      subjects: 64,
      lag_rate_per_second: 200,
      lag_duration_seconds: quick ? 2 : 10,
      lag_sample_every: 10,
      poll_interval_ms: 20,
      arrival_timeout_ms: 120_000,
    },
    versus: {
      baseline_cli: env.BENCH_BASELINE ?? null,
      current_cli: env.BENCH_CURRENT ?? null,
      rounds: quick ? 2 : positiveInteger(env.BENCH_VERSUS_ROUNDS, 5, 'BENCH_VERSUS_ROUNDS'),
      post: { count: quick ? 1_000 : 10_000, warmup: quick ? 256 : 1_000, connections: 256 },
      get_seconds: quick ? 1 : 4,
      get_shape: { connections: 32, pipelining: 1 },
    },
    nodes: {
      majors: majorsFrom(env.BENCH_NODES),
      rounds: quick ? 2 : 4,
      post: { count: quick ? 1_000 : 5_000, warmup: quick ? 256 : 500, connections: 256 },
      get_seconds: quick ? 1 : 3,
      get_shape: { connections: 32, pipelining: 1 },
      index_keys: quick ? 20_000 : 200_000,
      batch_items: 500,
      present_share: 0.5,
      hash: { count: quick ? 100 : 600, warmup: quick ? 20 : 60, connections: 8 },
    },
    memory: {
      counts: countsFrom(env.BENCH_MEMORY_COUNTS, quick ? [2_000, 10_000] : [100_000, 1_000_000]),
      idle_ms: positiveInteger(env.BENCH_MEMORY_IDLE_MS, quick ? 2_000 : 780_000, 'BENCH_MEMORY_IDLE_MS'),
      connections: 256,
      batch_requests: 50_000,
    },
    passivated: {
      count: quick ? 200 : 2_000,
      round_size: 20,
      idle_ms: positiveInteger(env.BENCH_PASSIVATED_IDLE_MS, 5_000, 'BENCH_PASSIVATED_IDLE_MS'),
      parallel: 8,
    },
    soak: {
      minutes: positiveInteger(env.BENCH_SOAK_MINUTES, quick ? 1 : 10, 'BENCH_SOAK_MINUTES'),
      share: 0.5,
      index_keys: quick ? 10_000 : 100_000,
      saturation: signedLoad(4_000, 400, 64),
      get_seconds: quick ? 2 : 5,
      batch_keys: 100,
      connections: 32,
    },
    child_timeout_ms: 600_000,
  };
}

function positiveInteger(raw: string | undefined, fallback: number, name: string): number {
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`${name} must be a positive integer`);
  return n;
}

/** BENCH_MEMORY_COUNTS: receipt counts, comma-separated, each measured on its own node, ascending. */
function countsFrom(raw: string | undefined, fallback: readonly number[]): readonly number[] {
  if (raw === undefined || raw.trim() === '') return fallback;
  const counts = raw.split(',').map((word) => {
    const count = Number(word.trim());
    if (word.trim() === '' || !Number.isInteger(count) || count < 1) throw new RangeError(`BENCH_MEMORY_COUNTS: '${word.trim()}' is not a positive integer`);
    return count;
  });
  return [...new Set(counts)].sort((a, b) => a - b);
}

/** BENCH_NODES: Node.js majors, comma-separated (default 24). */
function majorsFrom(raw: string | undefined): readonly number[] {
  if (raw === undefined || raw.trim() === '') return [24];
  return raw.split(',').map((word) => {
    const major = Number(word.trim());
    if (!Number.isInteger(major) || major < 20) throw new RangeError(`BENCH_NODES: '${word.trim()}' is not a Node.js major (20 or above)`);
    return major;
  });
}

function sectionsFrom(raw: string | undefined): ReadonlySet<SectionName> {
  if (raw === undefined || raw.trim() === '') return new Set(DEFAULT_SECTIONS);
  const chosen = raw.split(',').map((s) => s.trim());
  for (const name of chosen) {
    if (!(SECTION_NAMES as readonly string[]).includes(name)) throw new RangeError(`BENCH_ONLY: unknown section '${name}' (known: ${SECTION_NAMES.join(', ')})`);
  }
  return new Set(chosen as SectionName[]);
}
