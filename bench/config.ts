// Every size, count and duration of the benchmark suite, in one place.
// BENCH_QUICK=1 shrinks each section for a smoke run; BENCH_RESTART_RECORDS sets the size of the
// log the restart figure recovers; BENCH_ONLY=micro,log,get,post,restart runs a subset.

export const SECTION_NAMES = ['micro', 'log', 'get', 'post', 'restart'] as const;
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
  /** Ceiling on any one child process (load generator, server start). */
  child_timeout_ms: number;
}

export function loadBenchConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  const quick = env.BENCH_QUICK === '1' || env.BENCH_QUICK === 'true';
  const restartRecords = positiveInteger(env.BENCH_RESTART_RECORDS, quick ? 20_000 : 1_000_000, 'BENCH_RESTART_RECORDS');
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
    restart: {
      records: restartRecords,
      batch_records: 20_000,
      templates: quick ? 64 : 512,
      touch_requests: quick ? 500 : 3_000,
      start_timeout_ms: 600_000,
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

function sectionsFrom(raw: string | undefined): ReadonlySet<SectionName> {
  if (raw === undefined || raw.trim() === '') return new Set(SECTION_NAMES);
  const chosen = raw.split(',').map((s) => s.trim());
  for (const name of chosen) {
    if (!(SECTION_NAMES as readonly string[]).includes(name)) throw new RangeError(`BENCH_ONLY: unknown section '${name}' (known: ${SECTION_NAMES.join(', ')})`);
  }
  return new Set(chosen as SectionName[]);
}
