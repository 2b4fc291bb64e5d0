// The operator's metrics (P21), in one prom-client registry served on the admin listener only.
// Labels come from closed sets: operation names of the route table, HTTP status codes, delivery
// outcomes, and member names of the network (operators, never people). No identifier, hash,
// reference or personal name is ever a label or a value. Gauges read their sources when scraped,
// so a quiet node does no metrics work between scrapes.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Where the gauges read from when Prometheus scrapes; bound once the node's parts exist. */
export interface MetricSources {
  pendingCommands: () => number;
  replayEntries: () => number;
  directoryKeys: () => number;
  webhookBacklog: () => { events: number; oldestCreatedAt: number | null };
  replicationLag: () => ReadonlyMap<string, number>;
}

/** Seconds, from 0.5 ms to 10 s: a request or a commit on this node spans that range. */
const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
]; // tidy: format (histogram buckets in seconds)
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256]; // tidy: format (commands per commit)

export class Metrics {
  readonly registry = new Registry();
  private sources: MetricSources | null = null;
  private readonly counters = new Map<string, { inc(): void }>();
  private readonly histograms = new Map<string, { observe(value: number): void }>();
  private readonly requests = new Counter({
    name: 'path_http_requests_total',
    help: 'Answers by operation and HTTP status (503: overloaded or draining; 429: budget).',
    labelNames: ['operation', 'status'] as const,
    registers: [this.registry],
  });
  private readonly latency = new Histogram({
    name: 'path_http_request_duration_seconds',
    help: 'From the request line to the answer, by operation.',
    labelNames: ['operation'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
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
  private readonly budgetRefusals = new Counter({
    name: 'path_lookup_budget_refusals_total',
    help: 'Lookups refused because the member spent its monthly budget (P12).',
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
    this.gauge('path_directory_keys', 'Hashed keys in the lookup index.', (s) => s.directoryKeys());
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

  bind(sources: MetricSources): void {
    this.sources = sources;
  }

  answered(operation: string, status: number, seconds: number): void {
    // The children per label set are kept: prom-client would otherwise hash the labels on
    // every request. Both sets are closed (operations of the route table, HTTP statuses).
    const key = `${operation} ${status}`;
    let counter = this.counters.get(key);
    if (counter === undefined) {
      counter = this.requests.labels(operation, String(status));
      this.counters.set(key, counter);
    }
    counter.inc();
    let histogram = this.histograms.get(operation);
    if (histogram === undefined) {
      histogram = this.latency.labels(operation);
      this.histograms.set(operation, histogram);
    }
    histogram.observe(seconds);
    if (status === 429 && operation.startsWith('sonar.')) this.budgetRefusals.inc();
  }

  committed(seconds: number, commands: number): void {
    this.commits.observe(seconds);
    this.batch.observe(commands);
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
