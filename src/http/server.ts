// The HTTP front end on uWebSockets.js. Thin by design: version check -> route -> body ->
// authenticate -> idempotency -> handler (which validates and sends to an actor) -> answer.
// Every failure on the way is a JSON error from the P7 table; nothing a client sends can
// produce a 5xx; a database that does not answer (cluster mode) is a 503 with Retry-After (issue
// 29). Public reads answer synchronously from committed bytes (in cluster mode, a view not in
// memory is loaded first, the thread never waiting on it); the cacheable ones (documents,
// commitments) pick among representations made once: a coding, or a 304 (cache.ts).
// Public routes also answer browsers (P20): CORS on every answer of theirs, a preflight for
// `OPTIONS`, and `HEAD` for each of their GETs; the routes of members get none of it.
import { createHash, randomBytes } from 'node:crypto';
import type uws from 'uWebSockets.js';
import { nativeServer } from './native.js';
import type { Logger } from 'pino';
import { exceptionFields } from '../logger.js';
import type { Caller, ClaimKind, ReplayMark } from '../actors/types.js';
import {
  API_PREFIXES,
  CORS_MAX_AGE_SECONDS,
  DATABASE_RETRY_AFTER_SECONDS,
  SERVED_API_VERSIONS,
  VERIFY_CHUNK_MAX,
  type Limits,
} from '../config.js';
import { invalid, isRefusal, refusal, type Refusal } from '../protocol/errors.js';
import { unreachable, type DatabaseHealth } from '../log/unavailable.js';
import type { Authenticator } from './auth.js';
import { BodyBytes, isJsonMediaType, LingeringRefusal } from './body.js';
import { representation, type Conditions } from './cache.js';
import { readHead } from './headers.js';
import { writeStandardHead } from './head.js';
import { failure, statusLine, type HttpReply } from './reply.js';
import { Router, type RouteSpec } from './router.js';

export interface RequestContext {
  method: string;
  /**
   * Hex SHA-256 of the body, computed once (the P5 signing
   * string and the idempotency fingerprint both use it).
   */
  bodySha256Hex?: string;
  path: string;
  query: string;
  params: Record<string, string>;
  /**
   * The request's `Accept` header on a route with pages (a link answers a page or the object,
   * P20), or empty; other routes do not read it.
   */
  accept: string;
  /**
   * On a cacheable route (its answer may be a 304 or a coding, cache.ts): what the request says
   * of the representation it takes; null elsewhere, whose requests are spared the headers' copies.
   */
  conditions: Conditions | null;
  body: Buffer;
  caller: Caller | null;
  now: number;
  /** Set on creating calls that carried `Path-Idempotency-Key` (P7). */
  idempotency?: { scope: string; requestHash: string };
  /**
   * Set on signed calls: what the commit of their command remembers (P5, replays across restarts).
   */
  replay?: ReplayMark;
  /** Set once a commit of the call carried its replay mark and idempotency answer (services.ts). */
  claimed?: boolean;
  route: RouteSpec<Handler>;
}

export type Handler = (context: RequestContext) => HttpReply | Promise<HttpReply>;

/** A stored answer for an idempotency key (P7). */
export interface StoredAnswer {
  requestHash: string;
  status: number;
  body: string;
  signed: boolean;
}

/**
 * How a request's replay mark (P5) and idempotency answer (P7) are made its own, chosen by the
 * deployment (deployment.ts). Embedded, one process checks both before the run (the stored answer
 * read in place, the mark in the authenticator's memory) and its commit writes them. In cluster
 * mode nothing is asked of the database before the run: the command's commit claims both
 * (log.ts, TableWrite.until) in its one round trip, and a claim another commit holds refuses it
 * (the request then answers as a replay, or with the stored answer). In both, a signed call whose
 * commits claimed neither (a refusal: it committed nothing) is settled before it is answered, its
 * mark durable by then, so that no restart, orderly or kill -9, forgets it: written on its own
 * (embedded), or claimed, which also tells a replay another instance ran (cluster). Embedded mode
 * keeps a read's mark (GET, HEAD) in memory alone: replayed after a kill -9, it changes nothing.
 */
export interface RequestClaims {
  /** The stored answer of a scope, before the run; undefined where the commit checks it. */
  stored(scope: string): StoredAnswer | undefined | Promise<StoredAnswer | undefined>;
  /**
   * After a run whose commits claimed neither, once its mark is durable: whether the mark was
   * another request's already, and the answer stored for its scope now; null where nothing is
   * left to settle (embedded: no mark, the scope checked by this process before the run).
   */
  settle(
    mark: ReplayMark | undefined,
    scope: string | undefined,
    read: boolean,
  ): Promise<Settled> | null;
  /** The answer stored for a scope whose claim a commit found taken. */
  taken(scope: string): Promise<StoredAnswer | undefined>;
}

export interface Settled {
  replayed: boolean;
  stored: StoredAnswer | undefined;
}

/** A command not run: its request's claim (ClaimKind) was another commit's (services.ts). */
export class ClaimTaken extends Error {
  override name = 'ClaimTaken';
  constructor(readonly kind: ClaimKind) {
    super(`the request's ${kind} claim was another commit's`);
  }
}

export interface ServerOptions {
  routes: readonly RouteSpec<Handler>[];
  /** Where operation routes are mounted (P6); the external interface mounts them at the root. */
  prefixes?: readonly string[];
  authenticator: Authenticator;
  claims: RequestClaims;
  limits: Limits;
  logger: Logger;
  now: () => number;
  /**
   * Files served as they are by path, outside the route table (they are no operation of
   * discovery): the script and style of the pages for people (P20).
   */
  assets?: ReadonlyMap<string, HttpReply>;
  /** Told of every answer written: the access log and the metrics (P21). */
  onAnswered?: (answered: Answered) => void;
  /** Told of every exception a request met (answered 500): the metrics count them (P21). */
  onInternalError?: () => void;
  /**
   * Told of each request that failed because the database did not answer (answered 503, not
   * counted as an internal error), so `/readyz` says so (issue 29). Embedded, nothing is across a
   * network and nothing tells it of a failure.
   */
  health: DatabaseHealth;
}

/**
 * The answer to a request that needed the database while it did not answer (issue 29, P7): try
 * again in DATABASE_RETRY_AFTER_SECONDS. A write so refused may or may not have committed; its
 * retry with the same idempotency key finds out.
 */
export function databaseUnavailable(): HttpReply {
  const details = { retry_after_seconds: DATABASE_RETRY_AFTER_SECONDS };
  return failure(refusal('path.core.unavailable', 'the database does not answer', details));
}

/**
 * One answered request, as the access log and the metrics see it: no body, no identifier. The
 * object is the server's own and is refilled for the next answer: read it during the call.
 */
export interface Answered {
  requestId: string;
  method: string;
  /** The route's operation name, or null when no route took the request. */
  operation: string | null;
  status: number;
  seconds: number;
  /** The authenticated member, or null for public and refused calls. */
  member: string | null;
}

const EMPTY = Buffer.alloc(0);
const EMPTY_SHA256 = createHash('sha256').update(EMPTY).digest('hex');

const byteLength = (body: string | Uint8Array): number =>
  typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;

function bodyDigest(context: RequestContext): string {
  context.bodySha256Hex ??=
    context.body.length === 0
      ? EMPTY_SHA256
      : createHash('sha256').update(context.body).digest('hex');
  return context.bodySha256Hex;
}

/**
 * uws.ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT: the typings declare that enum, but the binding
 * exports no such object to read it from.
 */
const LISTEN_EXCLUSIVE_PORT = 1;

/**
 * The methods of RFC 9110 and PATCH (RFC 5789): a route may lack one (405), but any other
 * method (QUERY, FOO) is one the node does not implement anywhere (501, RFC 9110 15.6.2).
 */
const KNOWN_METHODS: ReadonlySet<string> = new Set([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'CONNECT',
  'OPTIONS',
  'TRACE',
  'PATCH',
]);

function notImplemented(method: string): HttpReply {
  const message = 'the node does not implement this method on any route';
  return failure(refusal('path.core.method_not_implemented', message, { method }));
}

type ListenCallback = (socket: uws.us_listen_socket | false) => void;
type ListenWithOptions = (host: string, port: number, options: number, cb: ListenCallback) => void;

/** The binding's listen(host, port, options, callback), an overload its typings lack. */
export function listenExclusive(
  app: uws.TemplatedApp,
  host: string,
  port: number,
  done: ListenCallback,
): void {
  (app.listen as unknown as ListenWithOptions).call(app, host, port, LISTEN_EXCLUSIVE_PORT, done);
}

/**
 * Routes a browser may call across origins (P20): the public ones, and those a credential is
 * optional on (SPEC Authentication 4: an instruction for a request needs none, so a wallet in a
 * browser can pay; signed calls there are authenticated as anywhere else).
 */
const opensToBrowsers = (route: RouteSpec<Handler>): boolean =>
  route.auth === 'public' || route.auth === 'optional';

/** The call is authenticated by its signature: its route is not public, or it offers one. */
function checksSignature(
  route: RouteSpec<Handler>,
  signed: { keyId?: string | undefined; signature?: string | undefined; timestamp?: string },
): boolean {
  if (route.auth === 'public') return false;
  if (route.auth !== 'optional') return true;
  return (
    signed.keyId !== undefined || signed.signature !== undefined || signed.timestamp !== undefined
  );
}

/**
 * What every answer to one request carries: its id, whether it pinned a version (P10), whether
 * it went to a public path (CORS, P20), whether it was a HEAD (the head of the answer only), and
 * what the access log and the metrics are told of it (P21).
 */
type Base = {
  requestId: string;
  pinned: boolean;
  cors: boolean;
  head: boolean;
  method: string;
  /** performance.now() when the request arrived. */
  started: number;
  operation: string | null;
  member: string | null;
  /** An answer was handed to uWebSockets.js: an exception after it can only close. */
  sent: boolean;
};

/**
 * Request headers a browser may send to a public route: the body's type, a pinned version (P10),
 * and the P5 and P7 headers, which a client holding a credential puts on every call it makes.
 */
const ALLOWED_REQUEST_HEADERS = [
  'content-type',
  'path-version',
  'path-key-id',
  'path-timestamp',
  'path-signature',
  'path-idempotency-key',
].join(', ');

/** A public read routed by uWebSockets.js (mountPublicReads). */
interface PublicRead {
  route: RouteSpec<Handler>;
  /** The names of the path's parameters, in order. */
  names: readonly string[];
  /** Per parameter, the literals the route table takes in its place (Router.literalsBeside). */
  beside: readonly ReadonlySet<string>[];
}

/**
 * The context of a call as it arrives, before any body is read or caller known. `seen`: what
 * the caller already took from the request (the binding's getters copy each time), else read.
 */
function arrived(
  req: uws.HttpRequest,
  route: RouteSpec<Handler>,
  params: Record<string, string>,
  now: number,
  seen?: { method: string; path: string; query: string },
): RequestContext {
  return {
    method: seen?.method ?? 'GET',
    path: seen?.path ?? req.getUrl(),
    query: seen?.query ?? req.getQuery() ?? '',
    params,
    // Only a route with pages reads it (P20); the others are spared the header's copy.
    accept: route.pages === true ? req.getHeader('accept') : '',
    conditions:
      route.cacheable === true
        ? {
            ifNoneMatch: req.getHeader('if-none-match'),
            acceptEncoding: req.getHeader('accept-encoding'),
          }
        : null,
    body: EMPTY,
    caller: null,
    now,
    route,
  };
}

/** The answer being written, between send and its corked callback. */
interface Sending {
  res: uws.HttpResponse | null;
  reply: HttpReply | null;
  base: Base | null;
  close: boolean;
}

/**
 * What outlives the request handler: whether the client went away, whether the call counts
 * among those a drain waits for, and a refusal in progress.
 */
interface RequestState {
  aborted: boolean;
  counted: boolean;
  lingering?: LingeringRefusal;
}

const UNSUPPORTED_MEDIA_TYPE = refusal(
  'path.core.unsupported_media_type',
  'request body must be sent as Content-Type: application/json',
  { supported: ['application/json'] },
);

/** A stored answer replayed (P7), or refused for a different request under its key. */
function storedReply(stored: StoredAnswer, requestHash: string): HttpReply {
  if (stored.requestHash !== requestHash) {
    return failure(
      refusal(
        'path.core.idempotency_conflict',
        'this idempotency key was used with a different request',
      ),
    );
  }
  return {
    status: stored.status,
    body: stored.body,
    signed: stored.signed,
    headers: { 'path-idempotent-replayed': 'true' },
  };
}

function inProgress(): HttpReply {
  return failure(
    refusal(
      'path.core.idempotency_in_progress',
      'a request with this idempotency key is still in flight',
    ),
  );
}

export class HttpServer {
  private readonly router: Router<Handler>;
  private readonly app = nativeServer().App();
  private listenSocket: uws.us_listen_socket | null = null;
  private readonly inFlightScopes = new Set<string>();
  /** Calls read whole and waiting for their signature check, in arrival order (verifyLater). */
  private readonly unverified: (() => void)[] = [];
  /**
   * Request ids (P10): this process's random prefix and a count in decimal (which V8 writes in
   * half the time of base 36).
   */
  private readonly requestIdPrefix = `${randomBytes(6).toString('hex')}-`;
  private requestCounter = 0;
  private active = 0;
  private closing = false;
  /** The lengths of the asset paths. */
  private readonly assetLengths: ReadonlySet<number>;
  /** The answer being written, for the corked callback (see send). */
  private readonly sending: Sending = { res: null, reply: null, base: null, close: false };
  /** What `onAnswered` is told, filled anew for each answer: it is read during the call only. */
  private readonly answered: Answered = {
    requestId: '',
    method: '',
    operation: null,
    status: 0,
    seconds: 0,
    member: null,
  };
  /** The per-answer part of the standard head (see head.ts), filled anew for each answer. */
  private readonly head = { pinned: false, requestId: '', signed: false, cors: false };

  constructor(private readonly options: ServerOptions) {
    this.router = new Router(options.routes, options.prefixes ?? API_PREFIXES);
    this.assetLengths = new Set([...(options.assets?.keys() ?? [])].map((path) => path.length));
    this.mountPublicReads(options.prefixes ?? API_PREFIXES);
    this.app.any('/*', (res, req) => {
      const base = this.newBase();
      try {
        this.onRequest(res, req, base);
      } catch (error) {
        this.crashed(res, base, null, error);
      }
    });
  }

  private newBase(): Base {
    return {
      requestId: this.requestIdPrefix + this.requestCounter++,
      pinned: false,
      cors: false,
      head: false,
      method: '',
      started: performance.now(),
      operation: null,
      member: null,
      sent: false,
    };
  }

  /**
   * An exception while handling one request: that request is answered 500 (or, when its answer
   * had begun, its connection closed), the exception is logged once with the request id and
   * counted, and the node goes on serving every other request. No request, however malformed,
   * ends the process.
   */
  private crashed(
    res: uws.HttpResponse,
    base: Base,
    state: RequestState | null,
    error: unknown,
  ): void {
    const reply = this.internal(error, base.requestId);
    if (state !== null) this.uncount(state);
    if (state?.aborted === true) return;
    try {
      if (base.sent) res.close();
      else this.send(res, reply, base, true, state ?? undefined);
    } catch {
      // The response was ended or aborted meanwhile: nothing more can be said on it.
    }
  }

  /** Runs one step of a request; an exception in it is that request's alone (crashed). */
  private guarded(
    res: uws.HttpResponse,
    base: Base,
    state: RequestState | null,
    step: () => void,
  ): void {
    try {
      step();
    } catch (error) {
      this.crashed(res, base, state, error);
    }
  }

  /** The call no longer holds up a drain (once, however many ways it ends). */
  private uncount(state: RequestState): void {
    if (!state.counted) return;
    state.counted = false;
    this.active--;
  }

  /**
   * Public reads are routed by uWebSockets.js itself, in native code, ahead of the route table
   * (which took a tenth of a public GET's CPU in JavaScript). uWebSockets.js tries a
   * parameter route before the catch-all and never matches an empty parameter or a trailing
   * slash; a route whose path an asset also matches stays with the table.
   */
  private mountPublicReads(prefixes: readonly string[]): void {
    const assets = [...(this.options.assets?.keys() ?? [])];
    for (const route of this.options.routes) {
      if (route.auth !== 'public' || route.method !== 'GET') continue;
      for (const prefix of route.root ? [''] : prefixes) {
        const pattern = prefix + route.path;
        const alone = new Router([route], [prefix]);
        if (assets.some((path) => alone.match('GET', path).kind === 'found')) continue;
        const read: PublicRead = {
          route,
          names: pattern
            .split('/')
            .filter((segment) => segment.startsWith(':'))
            .map((segment) => segment.slice(1)),
          beside: this.router.literalsBeside(pattern),
        };
        this.app.get(pattern, (res, req) => {
          try {
            this.onPublicRead(res, req, read);
          } catch (error) {
            this.crashed(res, this.newBase(), null, error);
          }
        });
      }
    }
  }

  /**
   * A GET routed natively to a public read: answered as onRequest would answer it (the same
   * handler, context and head), or handed back to onRequest (setYield) wherever onRequest's
   * answer could differ: while shutting down, with a pinned version (P10) or a declared body,
   * or when a parameter is one of the literals the route table would take in its place.
   */
  private onPublicRead(res: uws.HttpResponse, req: uws.HttpRequest, read: PublicRead): void {
    if (this.closing || req.getHeader('path-version') !== '') {
      req.setYield(true);
      return;
    }
    const head = readHead(req);
    if (head.problem !== null || head.declared !== null) {
      req.setYield(true);
      return;
    }
    const { route, names, beside } = read;
    const params: Record<string, string> = {};
    for (let i = 0; i < names.length; i++) {
      const value = req.getParameter(i) ?? '';
      if (beside[i]!.has(value)) {
        req.setYield(true);
        return;
      }
      params[names[i]!] = value;
    }
    const base = this.newBase();
    base.cors = true;
    base.method = 'GET';
    base.operation = route.operation;
    const context = arrived(req, route, params, this.options.now());
    this.finish(res, context, base, null);
  }

  /**
   * Binds the port for this process alone (P16). uWS otherwise listens with SO_REUSEPORT, and a
   * second node on the same port would start and the kernel would split the traffic between
   * them. uWS gives no reason for a refusal; in use is by far the likeliest.
   */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      listenExclusive(this.app, host, port, (socket) => {
        if (!socket) {
          return reject(
            new Error(
              `cannot listen on ${host}:${port}: port in use by another ` +
                'process (or the address is not available here)',
            ),
          );
        }
        this.listenSocket = socket;
        resolve(nativeServer().us_socket_local_port(socket));
      });
    });
  }

  /**
   * Stops accepting connections; resolves when in-flight requests are answered (or time runs out).
   */
  async close(drainMs: number): Promise<void> {
    this.closing = true;
    if (this.listenSocket !== null) nativeServer().us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    const deadline = Date.now() + drainMs;
    while (this.active > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  }

  private onRequest(res: uws.HttpResponse, req: uws.HttpRequest, base: Base): void {
    const method = req.getCaseSensitiveMethod().toUpperCase();
    const path = req.getUrl();
    const query = req.getQuery() ?? '';
    const pinned = req.getHeader('path-version');
    const head = method === 'HEAD';
    base.pinned = pinned !== '';
    base.head = head;
    base.method = method;

    const { problem, declared } = readHead(req);
    // A framing problem (RFC 9112 6.3: where this body ends is unknown) closes the connection,
    // since nothing more can be read from it; an unreadable header of another kind does not.
    if (problem !== null) return this.send(res, failure(problem.refusal), base, problem.close);
    if (!KNOWN_METHODS.has(method)) return this.send(res, notImplemented(method), base);
    // The lengths first: a number is found without hashing the whole path.
    const asset = this.assetLengths.has(path.length) ? this.options.assets?.get(path) : undefined;
    if (asset !== undefined && (method === 'GET' || head)) {
      base.operation = 'assets';
      return this.send(res, asset, base);
    }
    if (method === 'OPTIONS') {
      base.operation = 'preflight';
      return this.send(res, this.preflight(path, base), base);
    }
    // A HEAD is its GET without the body (RFC 9110 9.3.2), served where the GET is public.
    const admission = this.admit(head ? 'GET' : method, path, pinned);
    base.cors =
      admission.kind === 'found'
        ? opensToBrowsers(admission.route)
        : this.publicMethodsAt(path).length > 0;
    if (admission.kind === 'refused') return this.send(res, admission.reply, base);
    const { route, params } = admission;
    base.operation = route.operation;
    if (head && !base.cors) return this.send(res, this.notAllowed(path), base);
    const context = arrived(req, route, params, this.options.now(), { method, path, query });

    // Public reads without a body answer at once, from committed bytes.
    if (route.auth === 'public' && route.method === 'GET')
      return this.finish(res, context, base, null);
    this.receive(res, req, context, base, declared);
  }

  /**
   * The methods of the path's routes; none for an unknown path. No route takes the empty
   * method, so matching it lists every method the path has.
   */
  private methodsAt(path: string): string[] {
    const probe = this.router.match('', path);
    return probe.kind === 'method_not_allowed' ? probe.allowed : [];
  }

  /**
   * The methods of the path's routes a browser may call (P20); none for an unknown path or a
   * member's.
   */
  private publicMethodsAt(path: string): string[] {
    return this.methodsAt(path).filter((method) => {
      const match = this.router.match(method, path);
      return match.kind === 'found' && opensToBrowsers(match.route);
    });
  }

  /** 405 (P7), with `Allow` naming HEAD and OPTIONS too where the path serves them (P20). */
  private notAllowed(path: string): HttpReply {
    const open = this.publicMethodsAt(path);
    const allowed = [
      ...this.methodsAt(path),
      ...(open.includes('GET') ? ['HEAD'] : []),
      ...(open.length > 0 ? ['OPTIONS'] : []),
    ];
    const message = 'method not allowed on this route';
    return failure(refusal('path.core.method_not_allowed', message, { allowed }), {
      allow: allowed.join(', '),
    });
  }

  /**
   * A CORS preflight (P20): 204 with what a browser may send where the path has public routes;
   * elsewhere the refusal any other unknown method gets (404 or 405).
   */
  private preflight(path: string, base: Base): HttpReply {
    const open = this.publicMethodsAt(path);
    if (open.length === 0) {
      const admission = this.admit('OPTIONS', path, '');
      if (admission.kind === 'refused') return admission.reply;
      throw new Error('a route took OPTIONS');
    }
    base.cors = true;
    const methods = [...open, ...(open.includes('GET') ? ['HEAD'] : [])];
    const headers = {
      'access-control-allow-methods': methods.join(', '),
      'access-control-allow-headers': ALLOWED_REQUEST_HEADERS,
      'access-control-max-age': String(CORS_MAX_AGE_SECONDS),
    };
    return { status: 204, body: EMPTY, signed: false, headers };
  }

  /**
   * The route a request goes to, or the refusal that comes first: the node is shutting down, the
   * pinned version is unknown, no route has the path, or none takes the method.
   */
  private admit(
    method: string,
    path: string,
    pinned: string,
  ):
    | { kind: 'found'; route: RouteSpec<Handler>; params: Record<string, string> }
    | { kind: 'refused'; reply: HttpReply } {
    if (this.closing) {
      const details = { retry_after_seconds: 5 };
      const reply = failure(refusal('path.core.unavailable', 'the node is shutting down', details));
      return { kind: 'refused', reply };
    }
    if (pinned !== '' && !(SERVED_API_VERSIONS as readonly string[]).includes(pinned)) {
      const details = { served: [...SERVED_API_VERSIONS] };
      const reply = failure(refusal('path.core.version_unknown', 'unknown Path-Version', details));
      return { kind: 'refused', reply };
    }
    const match = this.router.match(method, path);
    if (match.kind === 'not_found') {
      return { kind: 'refused', reply: failure(refusal('path.core.not_found', 'no such route')) };
    }
    if (match.kind === 'method_not_allowed') {
      return { kind: 'refused', reply: this.notAllowed(path) };
    }
    return match;
  }

  /** A call that has (or may have) a body: reads it, then authenticates and runs the call. */
  private receive(
    res: uws.HttpResponse,
    req: uws.HttpRequest,
    context: RequestContext,
    base: Base,
    declared: number | null,
  ): void {
    const signed = {
      keyId: req.getHeader('path-key-id') || undefined,
      timestamp: req.getHeader('path-timestamp') || undefined,
      signature: req.getHeader('path-signature') || undefined,
      idempotencyKey: req.getHeader('path-idempotency-key') || undefined,
    };
    if (declared !== null && declared > this.options.limits.body_bytes_max) {
      return this.refuseDeclared(res, base, declared);
    }
    const contentType = req.getHeader('content-type');
    const state: RequestState = { aborted: false, counted: true };
    res.onAborted(() => {
      state.aborted = true;
      state.lingering?.onAborted();
    });
    this.active++;
    this.readBody(res, base, state, declared, (body) => {
      if (body.length > 0 && !isJsonMediaType(contentType)) {
        this.uncount(state);
        return this.send(res, failure(UNSUPPORTED_MEDIA_TYPE), base, false, state);
      }
      context.body = body;
      const { method, path, query } = context;
      const target = query === '' ? path : `${path}?${query}`;
      const run = () =>
        this.guarded(res, base, state, () =>
          this.authenticateAndRun(res, context, base, state, { ...signed, method, target }),
        );
      if (checksSignature(context.route, signed)) this.verifyLater(run);
      else run();
    });
  }

  /**
   * A signature check costs far more than reading a request, and the requests of many
   * connections arrive in one turn. They are checked a chunk at a time, a turn each, so that the
   * answers their commits release in between are written at once (and the clients send again)
   * instead of waiting until every request read in that turn is checked.
   */
  private verifyLater(run: () => void): void {
    this.unverified.push(run);
    if (this.unverified.length === 1) setImmediate(this.verifyChunk);
  }

  private readonly verifyChunk = (): void => {
    const chunk = this.unverified.splice(0, VERIFY_CHUNK_MAX);
    if (this.unverified.length > 0) setImmediate(this.verifyChunk);
    for (const run of chunk) run();
  };

  /**
   * P12: a declared length over the limit is refused before any of the body is read. The
   * answer is whole at once and says `Connection: close`, but does not close the connection:
   * uWebSockets.js drops the declared bytes that still come without keeping them, so a client
   * that sends its body anyway reads the 413 instead of a reset (closing here made 29 of 30
   * fetches of a 2-8 MiB body fail with EPIPE). The client closes, as told; if it does not,
   * uWebSockets.js closes about 10 s after the answer (its socket timeout, which the dropped
   * bytes do not renew). A length beyond `body_drain_bytes_max` is not waited for: that answer
   * closes the connection at once.
   */
  private refuseDeclared(res: uws.HttpResponse, base: Base, declared: number): void {
    const reply = this.tooLarge();
    const drainable = declared <= this.options.limits.body_drain_bytes_max;
    if (!drainable) return this.send(res, reply, base, true);
    this.send(res, { ...reply, headers: { ...reply.headers, connection: 'close' } }, base);
  }

  private tooLarge(): HttpReply {
    const limit = this.options.limits.body_bytes_max;
    const message = 'request body is over the limit';
    return failure(refusal('path.core.payload_too_large', message, { limit_bytes: limit }));
  }

  private authenticateAndRun(
    res: uws.HttpResponse,
    context: RequestContext,
    base: Base,
    state: RequestState,
    signed: {
      method: string;
      target: string;
      keyId?: string;
      timestamp?: string;
      signature?: string;
      idempotencyKey?: string;
    },
  ): void {
    const done = (reply: HttpReply) => this.answerNow(res, reply, base, state);
    if (checksSignature(context.route, signed)) {
      const verdict = this.options.authenticator.authenticate(
        {
          ...signed,
          keyId: signed.keyId,
          timestamp: signed.timestamp,
          signature: signed.signature,
          idempotencyKey: signed.idempotencyKey,
          bodySha256Hex: bodyDigest(context),
        },
        context.now,
      );
      if (isRefusal(verdict)) return done(failure(verdict));
      if (context.route.auth === 'local' && !verdict.local)
        return done(
          failure(refusal('path.auth.forbidden', "this route is for the operator's own member")),
        );
      context.caller = { member: verdict.member, local: verdict.local };
      base.member = verdict.member;
      context.replay = verdict.replay;
    }
    this.run(res, context, base, state, signed.idempotencyKey);
  }

  /** Runs an authenticated call: once per idempotency key where it carries one (P7). */
  private run(
    res: uws.HttpResponse,
    context: RequestContext,
    base: Base,
    state: RequestState,
    idempotencyKey: string | undefined,
  ): void {
    if (context.route.idempotent && idempotencyKey !== undefined) {
      const outcome = this.idempotency(context, idempotencyKey);
      if (!(outcome instanceof Promise)) return this.runOnce(res, context, base, state, outcome);
      return void outcome.then(
        (known) =>
          this.guarded(res, base, state, () => this.runOnce(res, context, base, state, known)),
        (error: unknown) => this.crashed(res, base, state, error),
      );
    }
    this.finish(res, context, base, state);
  }

  /** Answers a counted call without running its handler (a refusal, a stored answer). */
  private answerNow(
    res: uws.HttpResponse,
    reply: HttpReply,
    base: Base,
    state: RequestState,
  ): void {
    this.uncount(state);
    this.send(res, reply, base, false, state);
  }

  /** Answers what the idempotency check found, or runs the call marked in flight. */
  private runOnce(
    res: uws.HttpResponse,
    context: RequestContext,
    base: Base,
    state: RequestState,
    outcome: HttpReply | null,
  ): void {
    if (outcome !== null) return this.answerNow(res, outcome, base, state);
    const scope = context.idempotency!.scope;
    this.inFlightScopes.add(scope);
    this.finish(res, context, base, state, () => this.landed(scope));
  }

  /**
   * Replays a stored answer, refuses a conflict, or marks the call in flight (returns null);
   * later, when the stored answers are asked of the database.
   */
  private idempotency(
    context: RequestContext,
    key: string,
  ): HttpReply | null | Promise<HttpReply | null> {
    const lengthMax = this.options.limits.idempotency_key_length_max;
    if (key.length > lengthMax || !/^[\x21-\x7e]+$/.test(key)) {
      return failure(
        invalid(
          'Path-Idempotency-Key',
          `Path-Idempotency-Key must be 1-${lengthMax} visible ASCII characters`,
        ),
      );
    }
    const member = context.caller?.member ?? '';
    const scope = createHash('sha256').update(`${member}\n${key}`).digest('hex');
    const requestHash = createHash('sha256')
      .update(
        `${context.route.operation}\n${JSON.stringify(context.params)}\n${bodyDigest(context)}`,
      )
      .digest('hex');
    const stored = this.options.claims.stored(scope);
    if (!(stored instanceof Promise))
      return this.storedOutcome(context, scope, requestHash, stored);
    // Asked of the database: the call is in flight from now, so that one with the same key
    // coming before the answer is refused as in progress rather than run a second time (the
    // first may commit between this read and its answer).
    if (this.inFlightScopes.has(scope)) return inProgress();
    this.inFlightScopes.add(scope);
    return stored.then(
      (found) => {
        this.inFlightScopes.delete(scope);
        return this.storedOutcome(context, scope, requestHash, found);
      },
      (error: unknown) => {
        this.inFlightScopes.delete(scope);
        throw error;
      },
    );
  }

  /** What a stored answer (or none) means for this call; checked in the same turn as it is run. */
  private storedOutcome(
    context: RequestContext,
    scope: string,
    requestHash: string,
    stored: StoredAnswer | undefined,
  ): HttpReply | null {
    if (stored !== undefined) return storedReply(stored, requestHash);
    if (this.inFlightScopes.has(scope)) return inProgress();
    context.idempotency = { scope, requestHash };
    return null;
  }

  /** A call with an idempotency key is answered: another with its key may run. */
  private landed(scope: string): void {
    this.inFlightScopes.delete(scope);
  }

  /** Runs the handler and answers what it gives (`state` null: a public read, not counted). */
  private finish(
    res: uws.HttpResponse,
    context: RequestContext,
    base: Base,
    state: RequestState | null,
    after?: (reply: HttpReply) => void,
  ): void {
    let result: HttpReply | Promise<HttpReply>;
    try {
      result = context.route.handler(context);
    } catch (error) {
      result = this.internal(error, base.requestId);
    }
    const sent = (reply: HttpReply, counted: RequestState | null) => {
      after?.(reply);
      if (counted !== null) this.uncount(counted);
      // A cacheable read answers the representation the request takes, or its 304 (cache.ts).
      const { conditions } = context;
      const shown = conditions === null ? reply : representation(reply, conditions);
      this.send(res, shown, base, false, counted ?? undefined);
    };
    // A failure is answered as a reply, so that what follows an answer (`after`: the end of an
    // idempotency key's flight) runs for it too.
    const later = (reply: Promise<HttpReply>, counted: RequestState | null) =>
      void reply.then(
        (ready) => this.guarded(res, base, counted, () => sent(ready, counted)),
        (error: unknown) =>
          this.guarded(res, base, counted, () =>
            sent(this.internal(error, base.requestId), counted),
          ),
      );
    const complete = (reply: HttpReply, counted: RequestState | null) => {
      const settling = this.settling(context, reply);
      if (settling === null) sent(reply, counted);
      else later(settling, counted);
    };
    if (result instanceof Promise) {
      // A public read that had to ask the database (cluster mode, issue 29): told of an abort
      // before anything is awaited, and counted until answered like any call in progress.
      const waiting = state ?? this.waitingRead(res);
      result.then(
        (reply) => this.guarded(res, base, waiting, () => complete(reply, waiting)),
        (error: unknown) =>
          this.guarded(res, base, waiting, () =>
            error instanceof ClaimTaken
              ? later(this.claimTaken(context, error), waiting)
              : complete(this.internal(error, base.requestId), waiting),
          ),
      );
    } else {
      complete(result, state);
    }
  }

  /**
   * A call whose commits claimed neither its replay mark nor its idempotency answer, settled
   * before it is answered (RequestClaims): a replay, the stored answer, or its own; null where
   * nothing is to settle. An answer of 5xx is not settled: its command may yet commit.
   */
  private settling(context: RequestContext, reply: HttpReply): Promise<HttpReply> | null {
    if (context.claimed === true || reply.status >= 500) return null;
    const own = context.idempotency;
    if (context.replay === undefined && own === undefined) return null;
    const read = context.method === 'GET' || context.method === 'HEAD';
    const settled = this.options.claims.settle(context.replay, own?.scope, read);
    if (settled === null) return null;
    return settled.then(({ replayed, stored }) => {
      if (replayed) return failure(this.options.authenticator.replayed());
      return stored === undefined ? reply : storedReply(stored, own!.requestHash);
    });
  }

  /** A command not run for its request's claim another commit holds: a replay, or its answer. */
  private async claimTaken(context: RequestContext, taken: ClaimTaken): Promise<HttpReply> {
    const own = context.idempotency;
    if (taken.kind === 'replay' || own === undefined)
      return failure(this.options.authenticator.replayed());
    const stored = await this.options.claims.taken(own.scope);
    // Claimed by a commit whose answer is past its retention, and not yet swept: in flight.
    return stored === undefined ? inProgress() : storedReply(stored, own.requestHash);
  }

  /** A public read about to wait: it hears of its client going away, and a drain waits for it. */
  private waitingRead(res: uws.HttpResponse): RequestState {
    const state: RequestState = { aborted: false, counted: true };
    res.onAborted(() => {
      state.aborted = true;
    });
    this.active++;
    return state;
  }

  /**
   * The answer to an exception: a refusal thrown as one, a 503 when the database did not answer
   * (issue 29), else 500, logged once and counted.
   */
  private internal(error: unknown, requestId: string): HttpReply {
    if (isRefusal(error)) return failure(error as Refusal);
    // The database did not answer: the node is not at fault, and the client may try again.
    if (unreachable(error)) {
      this.options.health.failed(error);
      return databaseUnavailable();
    }
    this.options.onInternalError?.();
    // Once per exception, by request id: no body, no identifier (exceptionFields).
    this.options.logger.error(
      { exception: exceptionFields(error), request_id: requestId },
      'request failed',
    );
    return failure(refusal('path.core.internal', 'internal error', { request_id: requestId }));
  }

  /**
   * Keeps the body while it is within the limit. A chunked body that passes it is answered 413
   * at that moment and the rest is dropped (LingeringRefusal); a body that passes it with its
   * very last chunk is answered whole and the connection closed, the client having sent it all.
   */
  private readBody(
    res: uws.HttpResponse,
    base: Base,
    state: RequestState,
    declared: number | null,
    done: (body: Buffer) => void,
  ): void {
    const limit = this.options.limits.body_bytes_max;
    let bytes: BodyBytes | null = new BodyBytes(declared, limit);
    let size = 0;
    res.onData((chunk, isLast) => {
      try {
        if (state.lingering !== undefined) return state.lingering.onData(chunk, isLast);
        size += chunk.byteLength;
        if (size <= limit) {
          bytes!.add(chunk);
          if (isLast) done(bytes!.body());
          return;
        }
        this.overflowed(res, base, state, size, isLast);
        bytes = null;
      } catch (error) {
        this.crashed(res, base, state, error);
      }
    });
  }

  /** The body passed the limit (readBody): answered 413 at once, the rest dropped or read. */
  private overflowed(
    res: uws.HttpResponse,
    base: Base,
    state: RequestState,
    size: number,
    isLast: boolean,
  ): void {
    this.uncount(state);
    if (isLast) return this.send(res, this.tooLarge(), base, true, state);
    const reply = this.tooLarge();
    res.cork(() => {
      this.writeHead(res, { ...reply, headers: { ...reply.headers, connection: 'close' } }, base);
      res.write(reply.body);
    });
    state.lingering = new LingeringRefusal(res, this.options.limits, size);
  }

  private send(
    res: uws.HttpResponse,
    reply: HttpReply,
    base: Base,
    close = false,
    state?: RequestState,
  ): void {
    if (state?.aborted) return;
    // uWebSockets.js runs the corked callback at once: the answer is handed over in fields
    // rather than a closure made for each answer.
    this.sending.res = res;
    this.sending.reply = reply;
    this.sending.base = base;
    this.sending.close = close;
    res.cork(this.writeSending);
    const onAnswered = this.options.onAnswered;
    if (onAnswered === undefined) return;
    const answered = this.answered;
    answered.requestId = base.requestId;
    answered.method = base.method;
    answered.operation = base.operation;
    answered.status = reply.status;
    answered.seconds = (performance.now() - base.started) / 1000;
    answered.member = base.member;
    onAnswered(answered);
  }

  private readonly writeSending = (): void => {
    const sending = this.sending;
    const res = sending.res!;
    const reply = sending.reply!;
    const base = sending.base!;
    const close = sending.close;
    sending.res = sending.reply = sending.base = null;
    this.writeHead(res, reply, base);
    // A 304 has no content, and no length: one would have to be that of the 200 (RFC 9110 8.6).
    const empty = reply.status === 204 || reply.status === 304;
    if (!base.head && !empty) return void res.end(reply.body, close);
    if (close) return void res.end(EMPTY, true);
    // uWebSockets.js writes the body of a HEAD answer if given one, and its
    // endWithoutBody(length) never finishes the answer here: the length is written by hand
    // (the coded body's on a coded representation).
    if (base.head && reply.status !== 304) {
      res.writeHeader('content-length', String(byteLength(reply.body)));
    }
    res.endWithoutBody();
  };

  /**
   * Status and headers of every answer (P7 content type unless the handler names another, P10
   * version and request id, P20 CORS on public paths).
   */
  private writeHead(res: uws.HttpResponse, reply: HttpReply, base: Base): void {
    const { status } = reply;
    base.sent = true;
    // uWebSockets.js writes `200 OK` itself when no status was written: one call fewer.
    if (status !== 200) res.writeStatus(statusLine(status));
    const type = reply.headers?.['content-type'] ?? 'application/json';
    this.head.pinned = base.pinned;
    this.head.requestId = base.requestId;
    this.head.signed = reply.signed;
    this.head.cors = base.cors;
    const empty = reply.status === 204 || reply.status === 304;
    writeStandardHead(res, empty ? null : type, this.head);
    if (reply.headers === undefined) return;
    for (const name in reply.headers) {
      if (name !== 'content-type') res.writeHeader(name, reply.headers[name]!);
    }
  }
}
