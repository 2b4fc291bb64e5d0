// Boot of a running node: config -> open log -> recover shards -> listen; and its orderly stop.
import type { Logger } from 'pino';
import { ShardPool, type Commands } from './actors/pool.js';
import { FRONT_COLLECT_AFTER_ANSWERS, OWN_KEYS_WAIT_MS, type Config } from './config.js';
import { exceptionFields } from './logger.js';
import { DatabaseHealth } from './log/unavailable.js';
import type { CommandResult } from './actors/types.js';
import { PARTITION_COUNT, type Log } from './log/log.js';
import { Authenticator } from './http/auth.js';
import { replayRows } from './reads/rows.js';
import { forgetReplays, housekeeping } from './reads/housekeeping.js';
import { unfinishedFollowUps } from './actors/follow-ups.js';
import { documentReply } from './http/cache.js';
import type { HttpReply } from './http/reply.js';
import { pageAssets } from './http/routes/assets.js';
import { configurationDocument, fixedRoutes, keysDocument } from './http/routes/fixed.js';
import { openApiDocument, openApiRoute } from './http/openapi.js';
import { directoryRoutes } from './domain/subject/routes.js';
import { instructionRoutes } from './domain/instruction/routes.js';
import { requestRoutes } from './domain/request/routes.js';
import { checkoutRoutes } from './domain/checkout/routes.js';
import { receiptRoutes } from './domain/receipt/routes.js';
import { sonarRoutes } from './domain/sonar/routes.js';
import { connectRoutes } from './domain/connection/routes.js';
import { payeeCheckRoutes } from './domain/subject/payee-check-routes.js';
import { LocalDirectory } from './directory/directory.js';
import { DirectoryCheckpoints } from './directory/checkpoint.js';
import {
  partitionTails,
  readDirectoryImage,
  recordsHold,
  type ImageRead,
} from './directory/image.js';
import { startExternal } from './external/listener.js';
import { Network } from './network/network.js';
import type { FeedWriting } from './network/feed.js';
import { networkRoutes } from './network/routes.js';
import type { RouteSpec } from './http/router.js';
import { HttpServer, type Answered, type Handler } from './http/server.js';
import { AdminListener } from './http/admin.js';
import { openAccessLog, type AccessLog } from './http/access-log.js';
import { Metrics } from './metrics.js';
import type { Services } from './http/services.js';
import {
  lockDataDir,
  privateDataDir,
  tightenDataDir,
  type DataDirLock,
  type NarrowedDir,
} from './log/data-dir.js';
import type { LmdbEnvironment } from './log/lmdb-log.js';
import type { Joined } from './cluster/instance.js';
import { openDeployment, type Deployment } from './deployment.js';
import { NodeStore } from './store.js';
import type { StoreTables } from './log/node-tables.js';
import { Scrub } from './actors/scrub.js';
import { boundHeapGrowth, fullCollection, IdleCollector } from './actors/collect.js';
import { systemClock } from './clock.js';
import { WebhookDelivery } from './events/delivery.js';
import { signingKeyFromSeed, type SigningKey } from './protocol/signing.js';

export interface RunningNode {
  port: number;
  baseUrl: string;
  stop(): Promise<void>;
}

export async function startNode(
  config: Config,
  logger: Logger,
  onFatal: (message: string) => void,
): Promise<RunningNode> {
  const started = Date.now();
  const accessLog = openAccessLog(config.accessLog, config.accessLogSample);
  const claimed = claim(config);
  announceDataDir(config, logger, claimed.narrowed);
  // The operator's listener opens first: a long recovery shows as not ready, not as down (P21).
  const watch = await startWatch(config, logger);
  const deployment = await openDeployment(config, logger);
  const { log, tables, env, health: database } = deployment;
  const identity = await openIdentity(tables, config);
  const signer: SignerCell = { current: signingKeyFromSeed(identity.signingKey.seed_hex) };
  const image = directoryImageOf(config, env);
  const runtime = await startPool(config, logger, onFatal, {
    log,
    identity,
    signer,
    metrics: watch.metrics,
    deployment,
  });
  deployment.hear(runtime.directory, runtime.events);
  const access = await startNetwork(config, logger, {
    log,
    feedWriting: deployment.feedWriting,
    store: identity.store,
    signer,
    directory: runtime.directory,
    image,
  });
  const joined = await deployment.join(logger, { ...runtime, identity, ...feedOf(access) });
  // What earlier runs committed must follow is carried out before anyone is answered (STYLE 12).
  const followedUp = await runtime.pool.resumeFollowUps(unfinishedFollowUps(log));
  const commands = joined?.commands ?? runtime.pool;
  const services = nodeServices(config, { log, identity, signer, runtime, access, commands });
  const listeners = await startListeners(config, logger, {
    services:
      database === null ? services : { ...services, database, refreshes: deployment.refreshes! },
    deployment,
    access,
    localHolder: runtime.localHolder,
    onAnswered: answeredTo(accessLog, watch.metrics),
    onInternalError: () => watch.metrics.internalError(),
  });
  const { metrics } = watch;
  const parts = { log, identity, signer, runtime, access, listeners, database, metrics };
  const followers = startFollowers(config, logger, { ...parts, changes: deployment.changes });
  await startDeliveries(runtime.events);
  becomeReady(config, logger, { log, watch, runtime, access, joined, database });
  logger.info(
    {
      ...listeningFields({ config, watch, runtime, access, listeners }),
      follow_ups: followedUp,
      recovery_ms: Date.now() - started,
      ...dataFileRead(env),
      ...(joined === null ? {} : joined.fields()),
    },
    'listening',
  );
  announceRecovered(logger, runtime.pool, started);
  const { lock } = claimed;
  const held = { lock, env, log, runtime, access, listeners, followers, watch, joined };
  return {
    port: listeners.port,
    baseUrl: services.config.baseUrl,
    stop: () => stopNode(config, logger, held),
  };
}

/** Cluster mode: the feed's writer moved here, and brings the feed level with the directory. */
const feedOf = (access: Access) => ({ onFeed: () => access.network.republish() });

/** What the `listening` line says of the parts just started. */
/** The start's read of every page in use of the data file, when it made one (checkDataFile). */
function dataFileRead(env: LmdbEnvironment | null) {
  const ms = env?.everyPageReadMs ?? null;
  return ms === null ? {} : { data_file_every_page_read_ms: Math.round(ms) };
}

function listeningFields(parts: {
  config: Config;
  watch: Watch;
  runtime: Runtime;
  access: Access;
  listeners: Listeners;
}) {
  const { config, watch, runtime, access, listeners } = parts;
  return {
    port: listeners.port,
    external_port: listeners.external.port,
    admin_port: watch.port,
    base_url: listeners.baseUrl,
    member: config.member,
    workers: config.workers,
    recovery: runtime.checked,
    directory_rows: access.directoryRows,
    directory_image: access.directoryImage,
    directory_changed_keys: access.changedKeys,
    replica_rows: access.replicaRows,
    replay_rows: access.replayed,
    directory_keys: runtime.directory.index.size,
  };
}

/**
 * The data directory, made private and this process's before anything in it is opened (P16). In
 * cluster mode (P22) the database takes several instances: each holds a share of the partitions.
 */
function claim(config: Config) {
  const narrowed = privateDataDir(config.dataDir);
  return { narrowed, lock: lockDataDir(config.dataDir) };
}

/**
 * Embedded mode: the LMDB environment an image's position is checked against, each partition's
 * tail before any worker could commit, and the image, read meanwhile.
 */
type DirectoryImage = ReturnType<typeof directoryImageOf>;

/**
 * The directory image, read while the workers check their partitions, and the partitions'
 * tails before any worker can commit. Cluster mode keeps none: other instances change the
 * directory while this one is down.
 */
function directoryImageOf(config: Config, env: LmdbEnvironment | null) {
  return env === null
    ? { env, tails: [], read: Promise.resolve<ImageRead>({ kind: 'absent' }) }
    : { env, tails: partitionTails(env), read: readImage(config.dataDir) };
}

/**
 * The line that says every partition is folded (the node answers from the check on: each
 * partition is folded when a command first needs it, the rest in the background). A warm-up that
 * fails is fatal, and reported so (onFatal); one cut short by a stop says nothing.
 */
function announceRecovered(logger: Logger, pool: ShardPool, started: number): void {
  pool.recovered.then(
    (stats) => logger.info({ recovery: stats, recovery_ms: Date.now() - started }, 'recovered'),
    () => undefined,
  );
}

/**
 * The webhook deliveries started and the resends asked for from the command line while the node
 * was down taken up, before it is ready. What passed its retention meanwhile goes in the sweeps'
 * first rounds, which the timers start at once (startFollowers).
 */
async function startDeliveries(events: WebhookDelivery): Promise<void> {
  events.start();
  await events.takeResends();
}

/** The signing key in force: the command line may rotate it while the node runs. */
interface SignerCell {
  current: SigningKey;
}

type Identity = Awaited<ReturnType<typeof openIdentity>>;
type Watch = Awaited<ReturnType<typeof startWatch>>;
type Runtime = Awaited<ReturnType<typeof startPool>>;
type Access = Awaited<ReturnType<typeof startNetwork>>;
type Listeners = Awaited<ReturnType<typeof startListeners>>;
/** The parts a start has opened once the network runs. */
interface Started {
  log: Log;
  identity: Identity;
  signer: SignerCell;
  runtime: Runtime;
  access: Access;
}

/** Webhook delivery, the local directory and the shard pool (recovered from the log). */
async function startPool(
  config: Config,
  logger: Logger,
  onFatal: (message: string) => void,
  opened: {
    log: Log;
    identity: Identity;
    signer: SignerCell;
    metrics: Metrics;
    deployment: Deployment;
  },
) {
  const { log, identity, signer, metrics, deployment } = opened;
  const events = new WebhookDelivery({
    onOutcome: (outcome) => metrics.delivered(outcome),
    log,
    clock: systemClock,
    signer: () => signer.current,
    secrets: () => identity.webhookSecrets.current,
    operatorUrls: config.webhookUrls,
    dev: config.dev,
    limits: config.limits,
    logger,
    ...(deployment.delivers === null ? {} : { mine: deployment.delivers }),
  });
  // The local holder's endpoint is the base URL, known once the listener has its port.
  const localHolder = { member: config.member, endpoint: config.baseUrl };
  const directory = new LocalDirectory(log, localHolder);
  /**
   * The one fan-out after every commit, here or (cluster mode) on the instance that ran a command
   * this one forwarded: reads refreshed, outbox events delivered, index rows applied. Cluster
   * mode: the answer waits for the index rows, read without holding the thread, OWN_KEYS_WAIT_MS
   * at most (a lookup through this instance then finds the keys its answer registered).
   */
  const afterCommit = (result: CommandResult) => {
    log.refresh();
    // Cluster mode: events are heard from the commit's note, by the instance that delivers them.
    if (result.outbox.length > 0 && deployment.delivers === null) events.notify(result.outbox);
    if (result.directory.length === 0) return undefined;
    const read = directory.apply(result.directory, result.directoryAt);
    return read === undefined ? undefined : within(read, OWN_KEYS_WAIT_MS);
  };
  const { pool, checked } = await ShardPool.start({
    workers: config.workers,
    dataDir: config.dataDir,
    store: config.store,
    ...(deployment.holding === null
      ? {}
      : { holding: deployment.holding, released: deployment.startsWithout }),
    member: config.member,
    seedHex: identity.signingKey.seed_hex,
    sealingKeyHex: identity.sealingKey.toString('hex'),
    pepperHex: identity.pepper.hex,
    limits: config.limits,
    dev: config.dev,
    operatorWebhooks: config.webhookUrls.length > 0,
    onFatal,
    // A failure a worker lives through (issue 29): partition and cause, never a key.
    onTrouble: ({ partition, message, unavailable }) =>
      logger.warn({ partition, unavailable, cause: message }, 'a shard lived through a failure'),
    onCommit: (commit) => metrics.committed(commit),
    afterCommit,
  });
  return { events, localHolder, directory, pool, checked, afterCommit };
}

/**
 * Who may call, and the network: the credentials added with the command line and the active
 * signing keys of member nodes; the stored answers checked and the replays earlier runs remembered;
 * the members, the change feed and the replicas, loaded and followed.
 */
async function startNetwork(
  config: Config,
  logger: Logger,
  opened: {
    log: Log;
    store: NodeStore;
    signer: SignerCell;
    directory: LocalDirectory;
    image: DirectoryImage;
    feedWriting: FeedWriting | null;
  },
) {
  const { log, store, signer, directory, feedWriting } = opened;
  const authenticator = new Authenticator({
    skewMs: config.limits.timestamp_skew_ms,
    replayEntriesPerCredentialMax: config.limits.replay_entries_per_credential_max,
  });
  const replayed = authenticator.restore(rememberedReplays(log), Date.now());
  const network = new Network({
    store,
    log,
    directory,
    member: config.member,
    signer: () => signer.current,
    limits: config.limits,
    logger,
    onKeys: () => loadCredentials(),
    ...(feedWriting === null ? {} : { feedWriting }),
    listChanges: opened.image.env !== null,
  });
  const loadCredentials = () =>
    authenticator.load([...store.allCredentials(), ...network.credentials()]);
  const { started, checkpoints } = await startDirectory(config, logger, {
    ...opened,
    network,
  });
  // Only now: the start loaded the member registry, with the keys earlier runs cached. Loaded
  // before it, the authenticator knew no member until the periodic key refresh, and a restarted
  // node refused its members' signed feed reads (P5 unknown_key) meanwhile. No listener is open
  // yet, so the first request is checked against every key the node knew before it stopped.
  loadCredentials();
  return {
    authenticator,
    replayed,
    network,
    loadCredentials,
    directoryRows: started.directoryRows,
    replicaRows: started.replicaRows,
    directoryImage: started.image,
    /** Keys read again after the image (changed after its position). */
    changedKeys: started.changedKeys,
    /** Embedded mode: the directory image taken while the node runs and at its stop. */
    checkpoints,
  };
}

/**
 * The index taken from the directory image (or rebuilt), and embedded mode's checkpoints, which
 * take the image again while the node runs (issue 34).
 */
async function startDirectory(
  config: Config,
  logger: Logger,
  parts: {
    log: Log;
    directory: LocalDirectory;
    network: Network;
    image: DirectoryImage;
  },
) {
  const { log, directory, network, image } = parts;
  const { env } = image;
  const read = await image.read;
  // Before a start takes the image (catchUp), the index holds at least the tails' commits.
  directory.startAt(image.tails);
  const started = await network.start({
    image: read,
    holds: (partitions) => env !== null && recordsHold(env, partitions),
  });
  const checkpoints =
    env === null
      ? null
      : new DirectoryCheckpoints({
          dataDir: config.dataDir,
          log,
          directory,
          network,
          logger,
          intervalMs: config.limits.directory_image_interval_ms,
          current: started.image === 'used' && read.kind === 'read' ? read.position : null,
        });
  checkpoints?.start();
  return { started, checkpoints };
}

/** What the route handlers reach. */
function nodeServices(config: Config, parts: Started & { commands: Commands }): Services {
  const { log, identity, signer, runtime, access } = parts;
  return {
    config: { ...config },
    pool: parts.commands,
    log,
    store: identity.store,
    pepper: Buffer.from(identity.pepper.hex, 'hex'),
    pepperVersion: identity.pepper.version,
    sealingKey: identity.sealingKey,
    events: runtime.events,
    directory: runtime.directory,
    signer: () => signer.current,
    members: access.network.registry,
  };
}

/**
 * The main listener, then the external one. The base URL is known once the main listener has its
 * port (unless configured): the local holder and the configuration document take it then.
 */
async function startListeners(
  config: Config,
  logger: Logger,
  parts: {
    services: Services;
    deployment: Deployment;
    access: Access;
    localHolder: { member: string; endpoint: string };
    onAnswered: (answered: Answered) => void;
    onInternalError: () => void;
  },
) {
  const { services, deployment, access } = parts;
  // Each made cacheable and compressed once, here and where it is rebuilt (cache.ts).
  const documents = {
    keys: documentReply(keysDocument(config.member, services.store.signingKeys())),
    configuration: documentReply(''),
    openapi: documentReply(''),
  };
  const routes = allRoutes(services, access.network, documents);
  const server = new HttpServer({
    routes,
    authenticator: access.authenticator,
    claims: deployment.claims,
    limits: config.limits,
    logger,
    now: Date.now,
    onAnswered: parts.onAnswered,
    onInternalError: parts.onInternalError,
    health: services.database ?? new DatabaseHealth(),
    assets: pageAssets(logger),
  });
  const port = await server.listen(config.host, config.port);
  deployment.serving();
  const external = await startExternal(config, services.store, logger, parts.onInternalError);
  services.config.baseUrl =
    config.baseUrl !== '' ? config.baseUrl : `http://${config.host}:${port}`;
  parts.localHolder.endpoint = services.config.baseUrl;
  const externalUrl = `http://${config.host}:${external.port}`;
  // Rebuilt when the signing key rotates: it names the webhook public key (P11).
  const configure = () => documentReply(configurationDocument(services, routes, externalUrl));
  documents.configuration = configure();
  documents.openapi = documentReply(
    openApiDocument(routes, { baseUrl: services.config.baseUrl, limits: config.limits }),
  );
  return { server, external, port, documents, configure, baseUrl: services.config.baseUrl };
}

/**
 * The timers of a running node: it follows what the command line changes in the same environment
 * (credentials, keys, clients and members) and sweeps what is past its retention.
 */
function startFollowers(
  config: Config,
  logger: Logger,
  parts: Started & {
    listeners: Listeners;
    database: DatabaseHealth | null;
    changes: Deployment['changes'];
    metrics: Metrics;
  },
): NodeJS.Timeout[] {
  const { log, identity, signer, runtime, access, listeners, database } = parts;
  const store = identity.store;
  const task = (what: string) => backgroundTask(logger, what, database);
  const resends = task('webhook resends');
  let activeKid = identity.signingKey.kid;
  const { changes } = parts;
  const poll = followChanges(
    changes,
    config.limits.credentials_poll_interval_ms,
    task('changes'),
    async () => {
      await access.network.membersChanged();
      access.loadCredentials();
      listeners.external.reload();
      const keys = store.signingKeys();
      listeners.documents.keys = documentReply(keysDocument(config.member, keys));
      identity.webhookSecrets.current = store.webhookSecrets();
      resends(() => runtime.events.takeResends());
      const active = keys.find((k) => k.status === 'active');
      if (active !== undefined && active.kid !== activeKid) {
        activeKid = active.kid;
        signer.current = signingKeyFromSeed(active.seed_hex);
        runtime.pool.setSigningKey(active.seed_hex);
        listeners.documents.configuration = listeners.configure();
        logger.info({ kid: active.kid }, 'signing key rotated');
      }
    },
  );
  // Each round's failure is logged once per outage and tried again the next round (issue 29).
  // Each sweep's first round runs at once, beside the first requests: a round forgets all that
  // is past its retention, however much a long stop (and the hour before it) left, and the start
  // does not wait for it (P7 keeps an answer at least 24 hours, this node 48).
  const housekept = task('housekeeping');
  const sweep = nowAndEvery(
    () => housekept(() => housekeeping(log, config.limits)),
    config.limits.idempotency_sweep_interval_ms,
  );
  const replaysForgotten = task('replay sweep');
  const eventsSwept = task('event sweep');
  const replaySweep = nowAndEvery(() => {
    access.authenticator.forget(Date.now());
    replaysForgotten(() => forgetReplays(log, Date.now()));
    eventsSwept(() => runtime.events.sweep());
  }, config.limits.replay_sweep_interval_ms);
  return [poll, sweep, replaySweep, collectWhenQuiet(config, parts.metrics, access)];
}

/** A round run at once, then every `intervalMs`: the timer of the rounds after the first. */
function nowAndEvery(round: () => void, intervalMs: number): NodeJS.Timeout {
  round();
  return setInterval(round, intervalMs);
}

/**
 * The front end's full collection once quiet after many answers (actors/collect.ts), or after
 * many requests were forgotten as their replay window passed: the replay memory a burst filled
 * empties six minutes after it, long after the collection that followed the burst.
 */
function collectWhenQuiet(config: Config, metrics: Metrics, access: Access): NodeJS.Timeout {
  const collector = new IdleCollector(
    {
      work: () => metrics.answers + access.authenticator.forgotten,
      idleMs: config.limits.aggregate_idle_ms,
      after: FRONT_COLLECT_AFTER_ANSWERS,
      collect: fullCollection(),
    },
    Date.now(),
  );
  const timer = setInterval(
    () => collector.check(Date.now()),
    config.limits.passivation_sweep_interval_ms,
  );
  timer.unref();
  return timer;
}

/**
 * A task the timers start, one run at a time: a failure is logged once (its kind and code, never
 * its message) until a run succeeds again, never thrown, and the next round tries again. In
 * cluster mode its outcome tells the instance whether its database answers.
 */
function backgroundTask(
  logger: Logger,
  what: string,
  database: DatabaseHealth | null,
): (run: () => Promise<unknown>) => void {
  let failing = false;
  let running = false;
  return (run) => {
    if (running) return;
    running = true;
    let started: Promise<unknown>;
    try {
      started = run();
    } catch (error) {
      started = Promise.reject(error);
    }
    started
      .then(
        () => {
          database?.succeeded();
          if (!failing) return;
          failing = false;
          logger.info({ task: what }, 'background task succeeded again');
        },
        (error: unknown) => {
          database?.failed(error);
          if (failing) return;
          failing = true;
          const exception = exceptionFields(error);
          logger.warn({ task: what, exception }, 'background task failed; retried next round');
        },
      )
      .finally(() => {
        running = false;
      });
  };
}

/** The orderly stop: no new requests, those in flight answered, then each part closed in turn. */
async function stopNode(
  config: Config,
  logger: Logger,
  parts: {
    lock: DataDirLock;
    joined: Joined | null;
    env: LmdbEnvironment | null;
    log: Log;
    runtime: Runtime;
    access: Access;
    listeners: Listeners;
    followers: NodeJS.Timeout[];
    watch: Watch;
  },
): Promise<void> {
  const { lock, log, runtime, access, listeners, watch } = parts;
  watch.admin.state = 'draining';
  watch.scrub.current?.stop();
  for (const timer of parts.followers) clearInterval(timer);
  await Promise.all([
    listeners.server.close(config.limits.shutdown_drain_ms),
    listeners.external.close(config.limits.shutdown_drain_ms),
  ]);
  // What memory holds beyond the marks already durable (reads; a call answered 5xx is not
  // settled, server.ts) is remembered too, once no new request can arrive.
  await log.write([...access.authenticator.remembered()].map(replayRows.mark));
  // Cluster mode: each partition's commands answered and its snapshot written, then given back.
  await parts.joined?.leave();
  await runtime.events.stop();
  await access.network.stop();
  await runtime.pool.drain();
  if (parts.env !== null) await saveDirectoryImage(logger, { ...parts, env: parts.env });
  await log.close();
  watch.admin.close();
  lock.release();
  logger.info('stopped');
}

/**
 * Writes the directory image for the next start, once nothing can change the index: the commits
 * drained and applied, and the feed entries they caused written. A failure costs only the next
 * start's speed (it reads more keys again, or rebuilds the index), so it is logged and the stop
 * goes on.
 */
async function saveDirectoryImage(
  logger: Logger,
  parts: { env: LmdbEnvironment; log: Log; access: Access },
): Promise<void> {
  const { env, log, access } = parts;
  try {
    log.refresh();
    await access.checkpoints?.stop(partitionTails(env));
  } catch (error) {
    logger.warn({ err: { message: (error as Error).message } }, 'directory image not written');
  }
}

/** The directory image, or why there is none to use: reading it never stops a start. */
function readImage(dataDir: string): Promise<ImageRead> {
  return readDirectoryImage(dataDir).catch((error: unknown): ImageRead => ({
    kind: 'damaged',
    reason: (error as Error).message,
  }));
}

/** The gauges read the parts now running, `/readyz` says ready (P21), and the scrub starts. */
function becomeReady(
  config: Config,
  logger: Logger,
  parts: {
    log: Log;
    watch: Watch;
    runtime: Runtime;
    access: Access;
    joined: Joined | null;
    database: DatabaseHealth | null;
  },
): void {
  const { watch, runtime, access, joined } = parts;
  watch.admin.database = parts.database;
  const scrub = newScrub(config, logger, parts);
  watch.scrub.current = scrub;
  watch.metrics.bind({
    pendingCommands: () => runtime.pool.pendingCount,
    residency: () => runtime.pool.residency(),
    aggregatesInMemoryMax: config.limits.aggregates_in_memory_max,
    replayEntries: () => access.authenticator.size(),
    directoryKeys: () => runtime.directory.index.size,
    directoryChangesSinceImage: () => (access.checkpoints === null ? 0 : runtime.directory.changes),
    webhookBacklog: () => runtime.events.backlog(),
    replicationLag: () => access.network.lags(),
    partitionsHeld: () => joined?.held().length ?? PARTITION_COUNT,
    damagedRecords: () => scrub.damagedCount,
  });
  watch.admin.state = 'ready';
  scrub.start();
}

/**
 * The scrub of the log (issue 28), on this thread at its bounded pace: each damaged item is one
 * error line (partition and seq, never an identifier), counted in `path_log_damaged_records`,
 * and `/readyz` says `degraded`. In cluster mode each instance scrubs the partitions it holds.
 */
function newScrub(
  config: Config,
  logger: Logger,
  parts: { log: Log; watch: Watch; joined: Joined | null },
): Scrub {
  const { log, watch, joined } = parts;
  const all = Array.from({ length: PARTITION_COUNT }, (_, p) => p);
  return new Scrub({
    log,
    partitions: () => joined?.held() ?? all,
    rows: joined === null,
    recordsPerSecond: config.limits.scrub_records_per_second,
    passPauseMs: config.limits.scrub_pass_pause_ms,
    onDamage: (fault) => {
      watch.admin.degraded = true;
      // Partition and seq, and a row's table: never its key, which may name an object.
      const { item, partition, seq, message } = fault;
      const table = fault.item === 'row' ? { table: fault.table } : {};
      logger.error(
        { item, ...table, partition, seq, detail: message },
        'the scrub found damage in the log',
      );
    },
    onPass: (pass) => logger.info({ scrub: pass }, 'scrub pass done'),
    onError: (error) =>
      logger.error({ err: error }, 'the scrub stopped: the log could not be read'),
  });
}

/**
 * The operator's metrics and their listener (P21), not yet ready; the scrub's cell; and the
 * process's heaps' growth bounded (actors/collect.ts) before any worker starts.
 */
async function startWatch(config: Config, logger: Logger) {
  boundHeapGrowth(config.limits.heap_growing_percent);
  const metrics = new Metrics();
  const admin = new AdminListener(metrics, logger);
  const port = await admin.listen(config.adminHost, config.adminPort);
  // The scrub of the log, once the node is ready (becomeReady); stopped first by a stop.
  const scrub: { current: Scrub | null } = { current: null };
  return { metrics, admin, port, scrub };
}

/**
 * Every answer: counted in the metrics, and written to the access log (P21). Successes are
 * sampled by `--access-log-sample` for high volume; refusals and errors are always written.
 * A line names the request, its operation, status, duration and member: never a body, an
 * identifier or a signature.
 */
function answeredTo(access: AccessLog | null, metrics: Metrics): (answered: Answered) => void {
  if (access === null)
    return (a) => metrics.answered(a.operation ?? 'unrouted', a.status, a.seconds);
  accessLogs.push(access);
  return (a) => {
    metrics.answered(a.operation ?? 'unrouted', a.status, a.seconds);
    access.record(a);
  };
}

const accessLogs: AccessLog[] = [];

/** Writes what the access logs still hold; the command line calls it before the process exits. */
export function flushAccessLogs(): void {
  for (const log of accessLogs) log.flushSync();
}

/**
 * Says that the data directory was narrowed (`directory`, from claim), narrows the node's files
 * left open by a data directory made before P16, and tells once at start which secrets live in
 * the data directory: whoever can copy it holds them. The signing key has no variable yet; it
 * always lives there.
 */
function announceDataDir(config: Config, logger: Logger, directory: NarrowedDir | null): void {
  if (directory !== null) {
    logger.warn(
      directory,
      `the data directory was open to other users (${directory.mode_before}); ` +
        `narrowed to ${directory.mode_after}`,
    );
  }
  const narrowed = tightenDataDir(config.dataDir);
  if (narrowed.length > 0) {
    logger.warn(
      { data_dir: config.dataDir, files: narrowed },
      'files in the data directory were open to other users; narrowed to 0600',
    );
  }
  const secrets = ['the signing key (no variable moves it out yet)'];
  if (config.pepper === undefined) {
    secrets.push('the pepper (set PATH_PEPPER and PATH_PEPPER_VERSION)');
  }
  if (config.sealingKeyHex === undefined) secrets.push('the sealing key (set PATH_SEALING_KEY)');
  if (config.store === null) {
    logger.warn(
      { data_dir: config.dataDir },
      `secrets stored in the data directory: ${secrets.join(', ')}`,
    );
  } else logger.warn(`secrets stored in the cluster's database: ${secrets.join(', ')}`);
}

/**
 * The node's own records: its signing key, the network
 * pepper and the sealing key (made on first start).
 */
async function openIdentity(tables: StoreTables, config: Config) {
  const store = new NodeStore(tables);
  const secrets = await store.ensureSecrets({
    pepper: config.pepper,
    sealingKeyHex: config.sealingKeyHex,
    now: Date.now(),
  });
  // The command line may rotate the webhook secret while the node runs (P11).
  const webhookSecrets = { current: store.webhookSecrets() };
  return { store, ...secrets, webhookSecrets };
}

/**
 * Every route of the main listener; the fixed documents
 * are read at request time, so they can change.
 */
function allRoutes(
  services: Services,
  network: Network,
  documents: { keys: HttpReply; configuration: HttpReply; openapi: HttpReply },
): RouteSpec<Handler>[] {
  return [
    ...fixedRoutes(services, {
      keys: () => documents.keys,
      configuration: () => documents.configuration,
    }),
    openApiRoute(() => documents.openapi),
    ...receiptRoutes(services),
    ...directoryRoutes(services),
    ...requestRoutes(services),
    ...checkoutRoutes(services),
    ...instructionRoutes(services),
    ...sonarRoutes(services),
    ...payeeCheckRoutes(services),
    ...connectRoutes(services),
    ...networkRoutes(services, network.feed),
  ];
}

/**
 * Calls `changed` whenever the command line has changed the store (its change counter moved),
 * reading the counter one read at a time through `task`: a failed read or reload is logged once
 * and tried again the next round (the counter is taken as seen only once `changed` went through).
 */
function followChanges(
  changes: Deployment['changes'],
  intervalMs: number,
  task: (run: () => Promise<unknown>) => void,
  changed: () => Promise<void>,
): NodeJS.Timeout {
  let seen = changes.now();
  return setInterval(
    () =>
      task(async () => {
        const now = await changes.load();
        if (now === seen) return;
        // Loaded first, applied after: `changed` reads the store without a round trip.
        await changes.reload();
        await changed();
        seen = now;
      }),
    intervalMs,
  );
}

/** Resolves once `done` does, or once `ms` have passed. */
function within(done: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const passed = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([done, passed]).finally(() => clearTimeout(timer));
}

/** The requests earlier runs accepted and still remember (P5). */
function* rememberedReplays(log: Log): Iterable<{ key: string; keyId: string }> {
  for (const { key, bytes } of log.scan('replay', { start: replayRows.cutoff(Date.now()) })) {
    yield { key, keyId: replayRows.read(key, bytes).c };
  }
}
