// Boot of a running node: config -> open log -> recover shards -> listen; and its orderly stop.
import type { Logger } from 'pino';
import { ShardPool } from './actors/pool.js';
import type { Config, Limits } from './config.js';
import type { Log, TableWrite } from './log/log.js';
import { Authenticator, replayCutoff } from './http/auth.js';
import { idempotencyRows, replayRows } from './log/rows.js';
import { unfinishedFollowUps } from './actors/follow-ups.js';
import { configurationDocument, fixedRoutes, keysDocument } from './http/routes/fixed.js';
import { directoryRoutes } from './http/routes/directory.js';
import { instructionRoutes } from './http/routes/instructions.js';
import { paymentRoutes } from './http/routes/payments.js';
import { receiptRoutes } from './http/routes/receipts.js';
import { sonarRoutes } from './http/routes/sonar.js';
import { connectRoutes } from './http/routes/connect.js';
import { payeeCheckRoutes } from './http/routes/payee-check.js';
import { LocalDirectory } from './directory/directory.js';
import { startExternal } from './external/listener.js';
import { Network } from './network/network.js';
import { networkRoutes } from './network/routes.js';
import type { RouteSpec } from './http/router.js';
import { HttpServer, type Handler, type IdempotencyStore } from './http/server.js';
import type { Services } from './http/services.js';
import { lockDataDir, tightenDataDir } from './log/data-dir.js';
import { LmdbLog, openEnvironment, type LmdbEnvironment } from './log/lmdb-log.js';
import { NodeStore } from './store.js';
import { systemClock } from './clock.js';
import { WebhookDelivery } from './events/delivery.js';
import { signingKeyFromSeed } from './protocol/signing.js';

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
  // P16: the directory is this process's before anything in it is opened.
  const lock = lockDataDir(config.dataDir);
  announceDataDir(config, logger);
  const env = openEnvironment(config.dataDir);
  const { store, signingKey, pepper, sealingKey } = await openIdentity(env, config);
  const log = new LmdbLog(env);
  let signer = signingKeyFromSeed(signingKey.seed_hex);

  const events = new WebhookDelivery({
    log,
    clock: systemClock,
    signer: () => signer,
    operatorUrls: config.webhookUrls,
    dev: config.dev,
    limits: config.limits,
    logger,
  });
  // The local holder's endpoint is the base URL, known once the listener has its port.
  const localHolder = { member: config.member, endpoint: config.baseUrl };
  const directory = new LocalDirectory(log, localHolder);
  const { pool, stats } = await ShardPool.start({
    workers: config.workers,
    dataDir: config.dataDir,
    member: config.member,
    seedHex: signingKey.seed_hex,
    sealingKeyHex: sealingKey.toString('hex'),
    pepperHex: pepper.hex,
    limits: config.limits,
    dev: config.dev,
    onFatal,
    afterCommit: (result) => {
      log.refresh();
      if (result.outbox.length > 0) events.notify(result.outbox);
      if (result.directory.length > 0) directory.apply(result.directory);
    },
  });

  // Credentials: those added with the command line, and the active signing keys of member nodes.
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
    signer: () => signer,
    limits: config.limits,
    logger,
    onKeys: () => loadCredentials(),
  });
  const loadCredentials = () =>
    authenticator.load([...store.allCredentials(), ...network.credentials()]);
  loadCredentials();
  const { directoryRows, replicaRows } = await network.start();
  // What earlier runs committed must follow is carried out before anyone is answered (STYLE 12).
  const followedUp = await pool.resumeFollowUps(unfinishedFollowUps(log));

  const services: Services = {
    config: { ...config },
    pool,
    log,
    store,
    pepper: Buffer.from(pepper.hex, 'hex'),
    pepperVersion: pepper.version,
    sealingKey,
    events,
    directory,
    signer: () => signer,
    members: network.registry,
  };
  const documents = { keys: keysDocument(config.member, store.signingKeys()), configuration: '' };
  const routes = allRoutes(services, network, documents);
  const server = new HttpServer({
    routes,
    authenticator,
    idempotency: idempotencyStore(log, config.limits.idempotency_retention_ms),
    limits: config.limits,
    logger,
    now: Date.now,
  });
  const port = await server.listen(config.host, config.port);
  const external = await startExternal(config, store, logger);
  services.config.baseUrl =
    config.baseUrl !== '' ? config.baseUrl : `http://${config.host}:${port}`;
  localHolder.endpoint = services.config.baseUrl;
  documents.configuration = configurationDocument(
    services,
    routes,
    `http://${config.host}:${external.port}`,
  );

  // The command line changes credentials, keys, clients
  // and members in the same environment; follow it.
  let activeKid = signingKey.kid;
  const poll = followChanges(store, config.limits.credentials_poll_interval_ms, () => {
    network.membersChanged();
    loadCredentials();
    external.reload();
    const keys = store.signingKeys();
    documents.keys = keysDocument(config.member, keys);
    const active = keys.find((k) => k.status === 'active');
    if (active !== undefined && active.kid !== activeKid) {
      activeKid = active.kid;
      signer = signingKeyFromSeed(active.seed_hex);
      pool.setSigningKey(active.seed_hex);
      logger.info({ kid: active.kid }, 'signing key rotated');
    }
  });
  const sweep = setInterval(
    () => void housekeeping(log, config.limits),
    config.limits.idempotency_sweep_interval_ms,
  );
  const replaySweep = setInterval(() => {
    authenticator.forget(Date.now());
    void forgetReplays(log, Date.now());
  }, config.limits.replay_sweep_interval_ms);
  await housekeeping(log, config.limits);
  await forgetReplays(log, Date.now());
  events.start();
  logger.info(
    {
      port,
      external_port: external.port,
      base_url: services.config.baseUrl,
      member: config.member,
      workers: config.workers,
      recovery: stats,
      directory_rows: directoryRows,
      replica_rows: replicaRows,
      replay_rows: replayed,
      follow_ups: followedUp,
      directory_keys: directory.index.size,
      recovery_ms: Date.now() - started,
    },
    'listening',
  );

  return {
    port,
    baseUrl: services.config.baseUrl,
    async stop() {
      clearInterval(poll);
      clearInterval(sweep);
      clearInterval(replaySweep);
      await Promise.all([
        server.close(config.limits.shutdown_drain_ms),
        external.close(config.limits.shutdown_drain_ms),
      ]);
      // Requests that changed nothing durable are remembered too, once no new one can arrive.
      await log.write([...authenticator.remembered()].map(replayRows.mark));
      await events.stop();
      await network.stop();
      await pool.drain();
      await log.close();
      lock.release();
      logger.info('stopped');
    },
  };
}

/**
 * Narrows the node's files left open by a data directory made before P16, and tells once at start
 * which secrets live in the data directory: whoever can copy it holds them. The signing key has
 * no variable yet; it always lives there.
 */
function announceDataDir(config: Config, logger: Logger): void {
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
  logger.warn(
    { data_dir: config.dataDir },
    `secrets stored in the data directory: ${secrets.join(', ')}`,
  );
}

/**
 * The node's own records: its signing key, the network
 * pepper and the sealing key (made on first start).
 */
async function openIdentity(env: LmdbEnvironment, config: Config) {
  const store = new NodeStore(env);
  const signingKey = await store.ensureSigningKey(Date.now());
  const pepper = await store.ensurePepper(config.pepper);
  const sealingKey = await store.ensureSealingKey(config.sealingKeyHex);
  return { store, signingKey, pepper, sealingKey };
}

/**
 * Every route of the main listener; the fixed documents
 * are read at request time, so they can change.
 */
function allRoutes(
  services: Services,
  network: Network,
  documents: { keys: string; configuration: string },
): RouteSpec<Handler>[] {
  return [
    ...fixedRoutes(services, {
      keys: () => documents.keys,
      configuration: () => documents.configuration,
    }),
    ...receiptRoutes(services),
    ...directoryRoutes(services),
    ...paymentRoutes(services),
    ...instructionRoutes(services),
    ...sonarRoutes(services),
    ...payeeCheckRoutes(services),
    ...connectRoutes(services),
    ...networkRoutes(services, network.feed),
  ];
}

/** Calls `changed` whenever the command line has changed the store (its change counter moved). */
function followChanges(store: NodeStore, intervalMs: number, changed: () => void): NodeJS.Timeout {
  let seen = store.changes();
  return setInterval(() => {
    const now = store.changes();
    if (now === seen) return;
    seen = now;
    changed();
  }, intervalMs);
}

function idempotencyStore(log: LmdbLog, retentionMs: number): IdempotencyStore {
  return {
    stored(scope) {
      const bytes = log.get('idempotency', scope);
      if (bytes === undefined) return undefined;
      const entry = idempotencyRows.read(scope, bytes);
      return entry.at + retentionMs < Date.now() ? undefined : entry;
    },
  };
}

/** The requests earlier runs accepted and still remember (P5). */
function* rememberedReplays(log: Log): Iterable<{ key: string; keyId: string }> {
  for (const { key, bytes } of log.scan('replay', { start: replayCutoff(Date.now()) })) {
    yield { key, keyId: replayRows.read(key, bytes).c };
  }
}

/** Replay rows sort by the time they may be forgotten: the expired ones are one range. */
async function forgetReplays(log: Log, now: number): Promise<void> {
  const writes: TableWrite[] = [];
  for (const { key } of log.scan('replay', { end: replayCutoff(now) }))
    writes.push({ table: 'replay', key, bytes: null });
  if (writes.length > 0) await log.write(writes);
}

/**
 * Forgets what is past its retention: idempotent answers (P7 keeps them at least 24 hours) and
 * lookup journal rows (the retention published in discovery). Journal keys start with their
 * time, so the expired ones are one range.
 */
export async function housekeeping(log: Log, limits: Limits): Promise<void> {
  const now = Date.now();
  const writes: TableWrite[] = [];
  for (const { key, bytes } of log.scan('idempotency')) {
    if (idempotencyRows.read(key, bytes).at < now - limits.idempotency_retention_ms)
      writes.push({ table: 'idempotency', key, bytes: null });
  }
  const cutoff = new Date(now - limits.lookup_journal_retention_days * 86_400_000).toISOString();
  for (const { key } of log.scan('journal', { end: cutoff }))
    writes.push({ table: 'journal', key, bytes: null });
  if (writes.length > 0) await log.write(writes);
}
