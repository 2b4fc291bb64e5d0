// The declarative route table's matcher: literal segments and `:name` parameters. Operation
// routes are mounted under both API prefixes (P6); the fixed routes sit at the root.
// Parameters are named per route, not per position: `/checkout/sessions/:id` and
// `/checkout/sessions/:reference/attempt` share a position but not a name (SPEC I).
// Each route also says what it takes and answers, as schemas: the body schema is the one that
// validates requests, and the OpenAPI document (P19, openapi.ts) is built from the same table.
import type { TSchema } from '@sinclair/typebox';
import type { ErrorCode } from '../protocol/errors.js';

export type Auth = 'public' | 'member' | 'local' | 'optional';

export interface RouteSpec<H> {
  /** Operation name, published in discovery's `endpoints`. */
  operation: string;
  /** What the call does, imperative and short ("Create a payment request"): the OpenAPI summary. */
  summary: string;
  /**
   * A sentence or two on what the call does and what it answers, citing the SPEC section or the
   * PROTOCOL decision it serves: the OpenAPI description (P19). Kept beside the route, so a new
   * route cannot be published without one.
   */
  description: string;
  method: 'GET' | 'POST' | 'PUT';
  /** Path under the prefix (or from the root when `root` is set), `:name` for parameters. */
  path: string;
  root?: boolean;
  auth: Auth;
  /** Takes `Path-Idempotency-Key` (P7): every creating call, and consumes. */
  idempotent?: boolean;
  /** The request body's schema, the one that validates it; absent: the call takes no body. */
  body?: TSchema;
  /** An empty body reads as `{}` (the body's members are all optional). */
  bodyOptional?: boolean;
  /** Query parameters the route reads, each with its schema. */
  query?: Record<string, { schema: TSchema; required?: boolean; description: string }>;
  /** The JSON answers of success, by status (P7: 201 creates, 200 otherwise). */
  responses: Record<number, TSchema>;
  /**
   * The refusals of this route beyond those any route of its kind can answer (openapi.ts adds
   * those from its auth, body, path parameters and idempotency).
   */
  errors?: readonly ErrorCode[];
  /** Answers a page (text/html) to a browser that prefers one, at any status (P20). */
  pages?: boolean;
  /**
   * Its 200s carry a validator and may be coded (http/cache.ts): the route reads If-None-Match
   * and Accept-Encoding and answers 304 or a coding. A public GET only.
   */
  cacheable?: boolean;
  handler: H;
}

interface Node<H> {
  /**
   * Literal segments, each with its node. Matched by length and then in place in the path: a
   * node has a handful of them, and comparing them is cheaper than cutting each segment out as
   * a new string and hashing it for a map.
   */
  literals: { text: string; node: Node<H> }[];
  /** A parameter segment. Routes through it name it each their own way (`:id`, `:reference`). */
  param: Node<H> | null;
  /** By method: the route and the names of its parameters, in path order. */
  routes: Map<string, { route: RouteSpec<H>; names: string[] }>;
}

export type Match<H> =
  | { kind: 'found'; route: RouteSpec<H>; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allowed: string[] }
  | { kind: 'not_found' };

const newNode = <H>(): Node<H> => ({ literals: [], param: null, routes: new Map() });

/** The child of `node` named by the path's characters from `start` to `end`, if any. */
function literalAt<H>(node: Node<H>, path: string, start: number, end: number): Node<H> | null {
  const length = end - start;
  for (const literal of node.literals) {
    if (literal.text.length === length && path.startsWith(literal.text, start)) return literal.node;
  }
  return null;
}

export class Router<H> {
  private readonly root = newNode<H>();

  constructor(routes: readonly RouteSpec<H>[], prefixes: readonly string[]) {
    for (const route of routes) {
      for (const prefix of route.root ? [''] : prefixes) this.add(prefix + route.path, route);
    }
  }

  match(method: string, path: string): Match<H> {
    const values: string[] = [];
    let node = this.root;
    let start = 1;
    while (start <= path.length) {
      let end = path.indexOf('/', start);
      if (end < 0) end = path.length;
      const next = literalAt(node, path, start, end);
      if (next !== null) node = next;
      else if (node.param !== null && end > start) {
        values.push(path.slice(start, end));
        node = node.param;
      } else return { kind: 'not_found' };
      start = end + 1;
    }
    if (node.routes.size === 0) return { kind: 'not_found' };
    const entry = node.routes.get(method);
    if (entry === undefined) {
      return { kind: 'method_not_allowed', allowed: [...node.routes.keys()] };
    }
    const params: Record<string, string> = {};
    const names = entry.names;
    for (let i = 0; i < names.length; i++) params[names[i]!] = values[i]!;
    return { kind: 'found', route: entry.route, params };
  }

  /**
   * For each parameter of `pattern` (a mounted route's whole path), the literal segments this
   * table tries first in its place: a value equal to one of them takes the literal's branch here,
   * whatever follows (the match does not go back), so it never reaches the parameter.
   */
  literalsBeside(pattern: string): ReadonlySet<string>[] {
    const beside: ReadonlySet<string>[] = [];
    let node: Node<H> | null = this.root;
    for (const segment of pattern.split('/').slice(1)) {
      if (node === null) break;
      if (segment.startsWith(':')) {
        beside.push(new Set(node.literals.map((literal) => literal.text)));
        node = node.param;
      } else {
        node = node.literals.find((literal) => literal.text === segment)?.node ?? null;
      }
    }
    return beside;
  }

  private add(path: string, route: RouteSpec<H>): void {
    let node = this.root;
    const names: string[] = [];
    for (const segment of path.split('/').slice(1)) {
      if (segment.startsWith(':')) {
        names.push(segment.slice(1));
        node.param ??= newNode<H>();
        node = node.param;
      } else {
        let next = node.literals.find((literal) => literal.text === segment)?.node;
        if (next === undefined) {
          next = newNode<H>();
          node.literals.push({ text: segment, node: next });
        }
        node = next;
      }
    }
    if (node.routes.has(route.method)) throw new Error(`duplicate route ${route.method} ${path}`);
    node.routes.set(route.method, { route, names });
  }
}
