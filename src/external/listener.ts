// The external discovery interface's listener (SPEC L, P6): its own port, its own clients.
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { Authenticator } from '../http/auth.js';
import { HttpServer } from '../http/server.js';
import type { NodeStore } from '../store.js';
import { DatabaseHealth } from '../log/unavailable.js';
import { loadConnectors } from './connectors.js';
import { externalRoutes } from './routes.js';

export interface ExternalListener {
  port: number;
  /** Re-reads the clients after the command line changed them. */
  reload(): void;
  close(drainMs: number): Promise<void>;
}

export async function startExternal(
  config: Config,
  store: NodeStore,
  logger: Logger,
  onInternalError: () => void,
): Promise<ExternalListener> {
  const connectors = loadConnectors(config.connectorsFile);
  const authenticator = new Authenticator({
    skewMs: config.limits.timestamp_skew_ms,
    replayEntriesPerCredentialMax: config.limits.replay_entries_per_credential_max,
    code: 'external.auth.unauthenticated',
  });
  let grants = new Map<string, Set<string>>();
  const reload = () => {
    const clients = store.allExternalClients();
    authenticator.load(
      clients.map((c) => ({
        key_id: c.key_id,
        member: c.client,
        public_key: c.public_key,
        local: false,
        created_at: c.created_at,
        revoked_at: c.revoked_at,
      })),
    );
    grants = new Map();
    for (const c of clients.filter((x) => x.revoked_at === null))
      grants.set(c.client, new Set([...(grants.get(c.client) ?? []), ...c.registries]));
  };
  reload();
  const server = new HttpServer({
    routes: externalRoutes(connectors, (client) => grants.get(client) ?? new Set()),
    prefixes: [''],
    authenticator,
    // No route of this listener commits or takes an idempotency key: its replays are the
    // authenticator's memory's to refuse.
    claims: { stored: () => undefined, settle: () => null, taken: async () => undefined },
    limits: config.limits,
    logger,
    now: Date.now,
    onInternalError,
    // Its routes read no database: nothing it answers fails for want of one.
    health: new DatabaseHealth(),
  });
  const port = await server.listen(config.host, config.externalPort);
  return { port, reload, close: (drainMs) => server.close(drainMs) };
}
