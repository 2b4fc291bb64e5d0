// The operator's own listener (P21): `/metrics` in the Prometheus text format, `/healthz` (the
// process is alive and its event loop turns) and `/readyz` (recovered, listening and not
// draining; 503 otherwise, so a load balancer or systemd sends nothing to a node that cannot
// answer). A node whose scrub found damage in its log (issue 28) answers 200 `degraded`: it
// still serves what is intact (every record it replayed was checked at start), so taking it out
// of service would turn a warning into an outage; the operator hears of it from the status, the
// log line and `path_log_damaged_records`, and restores from a backup at a time of their choice.
// It opens before recovery, so a long start shows as not ready rather than as down, and binds to
// loopback unless the operator says otherwise. Nothing here is on the public port. In cluster
// mode a ready instance whose database does not answer says 503 `database_unreachable` (issue
// 29): it stays up and answers what it can from memory, but a balancer should prefer another;
// `/healthz` stays 200 `alive` throughout, since restarting it would not bring the database back.
import type { Logger } from 'pino';
import type uws from 'uWebSockets.js';
import { nativeServer } from './native.js';
import { exceptionFields } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { DatabaseHealth } from '../log/unavailable.js';
import { statusLine } from './reply.js';
import { listenExclusive } from './server.js';

export type Readiness = 'starting' | 'ready' | 'draining';

export class AdminListener {
  private readonly app = nativeServer().App();
  private socket: uws.us_listen_socket | null = null;
  state: Readiness = 'starting';
  /** The scrub found damage in the log: ready answers say `degraded`, still 200. */
  degraded = false;
  /** Cluster mode: the database as this instance last found it; null embedded. */
  database: DatabaseHealth | null = null;

  constructor(
    private readonly metrics: Metrics,
    private readonly logger: Logger,
  ) {
    this.route('/healthz', (res) => answer(res, 200, { status: 'alive' }));
    this.route('/readyz', (res) => {
      if (this.state !== 'ready') return answer(res, 503, { status: this.state });
      if (this.database?.reachable === false)
        return answer(res, 503, { status: 'database_unreachable' });
      answer(res, 200, { status: this.degraded ? 'degraded' : 'ready' });
    });
    this.route('/metrics', (res) => this.scrape(res));
    this.app.any('/*', (res) =>
      this.guarded(res, () =>
        answer(res, 404, {
          error: { code: 'path.core.not_found', message: 'no such route on the admin listener' },
        }),
      ),
    );
  }

  private route(path: string, handle: (res: uws.HttpResponse) => void): void {
    this.app.get(path, (res) => this.guarded(res, () => handle(res)));
  }

  /** As on the public listeners: an exception answers its request 500, never ends the node. */
  private guarded(res: uws.HttpResponse, handle: () => void): void {
    try {
      handle();
    } catch (error) {
      this.metrics.internalError();
      const exception = exceptionFields(error);
      this.logger.error({ exception, listener: 'admin' }, 'request failed');
      try {
        answer(res, 500, { error: { code: 'path.core.internal', message: 'internal error' } });
      } catch {
        // Already answered or aborted: nothing more can be said on it.
      }
    }
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      listenExclusive(this.app, host, port, (socket) => {
        if (!socket)
          return reject(new Error(`cannot listen on ${host}:${port} (admin): port in use`));
        this.socket = socket;
        resolve(nativeServer().us_socket_local_port(socket));
      });
    });
  }

  close(): void {
    if (this.socket !== null) nativeServer().us_listen_socket_close(this.socket);
    this.socket = null;
  }

  private scrape(res: uws.HttpResponse): void {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    this.metrics.registry.metrics().then(
      (text) => {
        if (aborted) return;
        res.cork(() => {
          res.writeStatus('200 OK');
          res.writeHeader('content-type', this.metrics.registry.contentType);
          res.end(text);
        });
      },
      () => {
        if (!aborted) res.cork(() => answer(res, 500, { status: 'metrics unavailable' }));
      },
    );
  }
}

function answer(res: uws.HttpResponse, status: number, body: unknown): void {
  res.writeStatus(statusLine(status));
  res.writeHeader('content-type', 'application/json');
  res.end(JSON.stringify(body));
}
