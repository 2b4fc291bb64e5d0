// The operator's metrics (P21), in one prom-client registry served on the admin listener only.
// Labels come from closed sets: operation names of the route table, HTTP status codes, delivery
// outcomes, and member names of the network (operators, never people). No identifier, hash,
// reference or personal name is ever a label or a value. Gauges read their sources when scraped,
// so a quiet node does no metrics work between scrapes.
// Answers are counted in plain numbers per operation (a public read is answered in a few
// microseconds, and prom-client's labelled observe cost a tenth of that: it hashes the labels
// and builds objects on every call); the counts are handed to prom-client only when scraped.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Residency } from './actors/messages.js';
import type { CommitFigures } from './actors/types.js';

/** Where the gauges read from when Prometheus scrapes; bound once the node's parts exist. */
export interface MetricSources {
  pendingCommands: () => number;
  replayEntries: () => number;
  directoryKeys: () => number;
  /** Embedded mode: directory changes since the image on disk was taken (0: none, or cluster). */
  directoryChangesSinceImage: () => number;
  webhookBacklog: () => { events: number; oldestCreatedAt: number | null };
  replicationLag: () => ReadonlyMap<string, number>;
  /** Partitions this node holds: all of them, but in cluster mode (its share, P22). */
  partitionsHeld: () => number;
  /** Damaged log records, snapshots and heads the scrub has found (issue 28). */
  damagedRecords: () => number;
  /**
   * Aggregates held in memory across the workers, and those brought back from their rows and
   * let go of since the start (issue 33); asked of them at each scrape.
   */
  residency: () => Promise<Residency>;
  /** The budget of aggregates held in memory (aggregates_in_memory_max). */
  aggregatesInMemoryMax: number;
}

/** Seconds, from 0.5 ms to 10 s: a request or a commit on this node spans that range. */
export const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
]; // tidy: format (histogram buckets in seconds)
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256]; // tidy: format (commands per commit)

/** The workers' residency figures shown as gauges (issue 33): name, help, figure. */
const RESIDENCY_GAUGES = [
  ['path_aggregates_in_memory', 'Aggregates whose state the workers hold in memory.', 'aggregates'],
  [
    'path_aggregates_pinned',
    'Of those, the ones kept in memory for good: their state is past state_row_bytes_max.',
    'pinned',
  ],
  ['path_workers_heap_used_bytes', "The workers' JavaScript heaps in use.", 'heapUsed'],
  ['path_workers_heap_total_bytes', "The workers' heaps, as held from the system.", 'heapTotal'],
  [
    'path_workers_external_bytes',
    "The workers' memory outside their heaps held by JavaScript objects (buffers, typed arrays).",
    'external',
  ],
] as const;

/** And those shown as counters since the start. */
const RESIDENCY_COUNTERS = [
  [
    'path_aggregate_activations_total',
    'Aggregates brought back into memory from their stored state since the start.',
    'activations',
  ],
  [
    'path_aggregate_passivations_total',
    'Aggregates let go of from memory (idle, or past the budget) since the start.',
    'passivations',
  ],
] as const;

export class Metrics {
  readonly registry = new Registry();
  private sources: MetricSources | null = null;
  /** Answers counted per operation, in the order operations were first answered. */
  private readonly operations = new Map<string, OperationCounts>();
  /** Every (operation, status) count, in the order each was first answered. */
  private readonly statusCounts: StatusCount[] = [];
  /** Registered before the others, so the families come out in the order they always had. */
  readonly requests = requestCounter(this.registry, this.statusCounts);
  readonly latency = new CountedHistogram(this.registry, this.operations);
  private readonly commits = new Histogram({
    name: 'path_commit_duration_seconds',
    help: 'Durable commit of one aggregate batch: from append to synced (P14).',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly batch = new Histogram({
    name: 'path_commit_commands',
    help: 'Commands decided together in one aggregate commit.',
    buckets: BATCH_BUCKETS,
    registers: [this.registry],
  });
  private readonly waits = new Histogram({
    name: 'path_commit_wait_seconds',
    help:
      'How long the first command of an aggregate commit waited to be decided: behind the ' +
      "aggregate's commits before it (or its partition's fold).",
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly budgetRefusals = new Counter({
    name: 'path_lookup_budget_refusals_total',
    help: 'Lookups refused because the member spent its monthly budget (P12).',
    registers: [this.registry],
  });
  private readonly internalErrors = new Counter({
    name: 'path_internal_errors_total',
    help: 'Exceptions met while handling a request, on any listener: each answered 500.',
    registers: [this.registry],
  });
  private readonly deliveries = new Counter({
    name: 'path_webhook_deliveries_total',
    help: 'Webhook delivery attempts by outcome: delivered, failed (retried later), abandoned.',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.gauge(
      'path_pending_commands',
      'Commands waiting for their aggregate (the mailboxes).',
      (s) => s.pendingCommands(),
    );
    this.gauge('path_replay_entries', 'Signed requests remembered against replays (P5).', (s) =>
      s.replayEntries(),
    );
    this.gauge(
      'path_partitions_held',
      'Partitions this node holds (cluster mode: held by this instance).',
      (s) => s.partitionsHeld(),
    );
    this.gauge(
      'path_log_damaged_records',
      'Damaged log records, snapshots and partition heads the scrub found (restore from a backup).',
      (s) => s.damagedRecords(),
    );
    this.gauge('path_directory_keys', 'Hashed keys in the lookup index.', (s) => s.directoryKeys());
    this.gauge(
      'path_directory_changes_since_image',
      'Directory changes since the directory image on disk was taken (issue 34): what a start ' +
        'after a crash reads again.',
      (s) => s.directoryChangesSinceImage(),
    );
    this.residencyMetrics();
    this.gauge(
      'path_webhook_backlog_events',
      'Events not yet delivered to every target.',
      (s) => s.webhookBacklog().events,
    );
    this.gauge(
      'path_webhook_oldest_undelivered_seconds',
      'Age of the oldest event not yet delivered to every target (0: none).',
      (s) => {
        const oldest = s.webhookBacklog().oldestCreatedAt;
        return oldest === null ? 0 : Math.max(0, (Date.now() - oldest) / 1000);
      },
    );
    const registry = this.registry;
    const self = this;
    new Gauge({
      name: 'path_replication_lag_entries',
      help: "Entries of each member's change feed not yet applied to this node's index.",
      labelNames: ['member'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [member, lag] of self.sources?.replicationLag() ?? []) this.set({ member }, lag);
      },
    });
  }

  /** The aggregates held in memory, their budget, and how they came and went (issue 33). */
  private residencyMetrics(): void {
    const self = this;
    // Asked of the workers once a scrape for all these figures (its collects run together); a
    // scrape while they refuse new calls (too many in flight) keeps the last figures rather than
    // failing the whole scrape.
    let asking: Promise<Residency | null> | null = null;
    const residency = (): Promise<Residency | null> => {
      if (self.sources === null) return Promise.resolve(null);
      asking ??= self.sources
        .residency()
        .catch(() => null)
        .finally(() => {
          asking = null;
        });
      return asking;
    };
    this.gauge(
      'path_aggregates_in_memory_max',
      'The budget of aggregates held in memory (aggregates_in_memory_max): past it, ' +
        'the least recently used that may leave memory do.',
      (s) => s.aggregatesInMemoryMax,
    );
    for (const [name, help, figure] of RESIDENCY_GAUGES)
      new Gauge({
        name,
        help,
        registers: [this.registry],
        async collect() {
          const now = await residency();
          if (now !== null) this.set(now[figure]);
        },
      });
    for (const [name, help, figure] of RESIDENCY_COUNTERS)
      new Counter({
        name,
        help,
        registers: [this.registry],
        async collect() {
          const now = await residency();
          if (now === null) return;
          this.reset();
          this.inc(now[figure]);
        },
      });
  }

  bind(sources: MetricSources): void {
    this.sources = sources;
  }

  /** Every answer counted, whatever its operation and status. */
  answers = 0;

  /** One answer. Both label sets are closed (operations of the route table, HTTP statuses). */
  answered(operation: string, status: number, seconds: number): void {
    this.answers++;
    let counts = this.operations.get(operation);
    if (counts === undefined) {
      counts = new OperationCounts(operation);
      this.operations.set(operation, counts);
    }
    let byStatus = counts.byStatus.get(status);
    if (byStatus === undefined) {
      byStatus = { operation, status, count: 0 };
      counts.byStatus.set(status, byStatus);
      this.statusCounts.push(byStatus);
    }
    byStatus.count++;
    counts.observe(seconds);
    if (status === 429 && operation.startsWith('sonar.')) this.budgetRefusals.inc();
  }

  /** An exception while handling one request (answered 500; the node serves on). */
  internalError(): void {
    this.internalErrors.inc();
  }

  committed(commit: CommitFigures): void {
    this.commits.observe(commit.seconds);
    this.batch.observe(commit.commands);
    this.waits.observe(commit.waited);
  }

  delivered(outcome: 'delivered' | 'failed' | 'abandoned'): void {
    this.deliveries.inc({ outcome });
  }

  private gauge(name: string, help: string, read: (sources: MetricSources) => number): void {
    const self = this;
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        if (self.sources !== null) this.set(read(self.sources));
      },
    });
  }
}

/** `path_http_requests_total`, set from the plain counts when scraped. */
function requestCounter(registry: Registry, counts: readonly StatusCount[]): Counter {
  return new Counter({
    name: 'path_http_requests_total',
    help: 'Answers by operation and HTTP status (503: overloaded or draining; 429: budget).',
    labelNames: ['operation', 'status'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const c of counts)
        this.inc({ operation: c.operation, status: String(c.status) }, c.count);
    },
  });
}

interface StatusCount {
  operation: string;
  status: number;
  count: number;
}

/** The answers of one operation: counts by status, and the latency histogram's numbers. */
class OperationCounts {
  readonly byStatus = new Map<number, StatusCount>();
  /** Answers at or under each of LATENCY_BUCKETS, not cumulative. */
  readonly buckets = new Float64Array(LATENCY_BUCKETS.length);
  sum = 0;
  count = 0;

  constructor(readonly operation: string) {}

  observe(seconds: number): void {
    this.sum += seconds;
    this.count++;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      if (seconds <= LATENCY_BUCKETS[i]!) {
        this.buckets[i]!++;
        return;
      }
    }
  }
}

const LATENCY_NAME = 'path_http_request_duration_seconds';
const LATENCY_HELP = 'From the request line to the answer, by operation.';
type HistogramData = Awaited<ReturnType<Histogram<'operation' | 'le'>['get']>>;

/**
 * `path_http_request_duration_seconds`, read from the plain counts when scraped: the values and
 * their order are those prom-client's own histogram gives for the same observations (cumulative
 * buckets, `+Inf`, sum, count per operation).
 */
class CountedHistogram extends Histogram<'operation' | 'le'> {
  constructor(
    registry: Registry,
    private readonly operations: ReadonlyMap<string, OperationCounts>,
  ) {
    super({
      name: LATENCY_NAME,
      help: LATENCY_HELP,
      labelNames: ['operation'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    });
  }

  override async get(): Promise<HistogramData> {
    const name = LATENCY_NAME;
    const values: HistogramData['values'] = [];
    for (const [operation, counts] of this.operations) {
      let below = 0;
      LATENCY_BUCKETS.forEach((le, i) => {
        below += counts.buckets[i]!;
        values.push({ labels: { le, operation }, value: below, metricName: `${name}_bucket` });
      });
      const total = counts.count;
      values.push({
        labels: { le: '+Inf', operation },
        value: total,
        metricName: `${name}_bucket`,
      });
      values.push({ labels: { operation }, value: counts.sum, metricName: `${name}_sum` });
      values.push({ labels: { operation }, value: total, metricName: `${name}_count` });
    }
    // prom-client's typings declare `type` an enum the package does not export at run time, and
    // put `collect` on the object; the registry reads neither from here but the type's name.
    const type = 'histogram' as unknown as HistogramData['type'];
    return { name, help: LATENCY_HELP, type, values, aggregator: 'sum', collect: () => undefined };
  }

  /** What the registry reads for the text format; the same values. */
  getForPromString(): Promise<HistogramData> {
    return this.get();
  }
}
