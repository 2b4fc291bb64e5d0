// Routes as a table. A command route is an operation name, a method and path, who may call it,
// and how a request becomes one command of one aggregate: parse the body, find or make the
// aggregate's key, build the typed input (hashing and sealing clear values, making ids). No
// business rule lives here: the decider decides, the runtime answers. The compiler ties each
// entry to its command: `input` must return what the decider's schema for `command` describes.
// The entry's body schema is the one the OpenAPI document shows (P19): the validator is compiled
// from it here, so the document and the validation cannot drift apart.
import type { TSchema } from '@sinclair/typebox';
import type { AnyDecider, CommandSchemas, Decider, InputOf } from '../../domain/decider.js';
import { isRefusal, refusal, type ErrorCode, type Refusal } from '../../protocol/errors.js';
import { isReferenceShaped } from '../../protocol/ids.js';
import { validator, type Validator } from '../../protocol/schemas.js';
import { failure, type HttpReply } from '../reply.js';
import type { Auth, RouteSpec } from '../router.js';
import type { Handler, RequestContext } from '../server.js';
import {
  after,
  notFound,
  publicView,
  runCommand,
  validBody,
  type Later,
  type Services,
} from '../services.js';

export interface CommandRoute<C extends CommandSchemas, K extends keyof C & string, B> {
  operation: string;
  /** The OpenAPI summary and description (router.ts). */
  summary: string;
  description: string;
  method: 'POST' | 'PUT' | 'GET';
  path: string;
  auth: Auth;
  idempotent?: boolean;
  decider: Decider<any, C, any>;
  command: K;
  /** The request body's schema; absent: the call takes no body. */
  body?: TSchema & { static: B };
  /** An empty body reads as `{}` (a body whose members are all optional). */
  bodyOptional?: boolean;
  /** The JSON answers of success, by status; the refusals beyond the common ones (router.ts). */
  responses: Record<number, TSchema>;
  errors?: readonly ErrorCode[];
  /**
   * The aggregate instance the command goes to: a path parameter, a fresh reference, or a
   * lookup of the route index. Null: no such object (404 naming `what`), answered before the
   * body is read, as for any unknown object.
   */
  key?: (request: RequestContext) => Later<string | null>;
  /** The same, for an aggregate named in the body (a subject id): found after the body is read. */
  keyOf?: (request: RequestContext, body: B) => string | null;
  /** The command's input, from the body and the key; a refusal for what the wire cannot say. */
  input: (request: RequestContext, body: B, key: string) => InputOf<C, K> | Refusal;
  /** What the route names, in its 404 (`no such <what>`). */
  what: string;
}

/** A route entry that sends one command to its aggregate. */
export function commandRoute<
  C extends CommandSchemas,
  K extends keyof C & string,
  B = Record<string, never>,
>(services: Services, route: CommandRoute<C, K, B>): RouteSpec<Handler> {
  const notFound = () => failure(refusal('path.core.not_found', `no such ${route.what}`));
  const validate = route.body === undefined ? null : (validator(route.body) as Validator<B>);
  const handler: Handler = (context) => {
    if (route.key === undefined) return withKey(context, null);
    return after(route.key(context), (key) => (key === null ? notFound() : withKey(context, key)));
  };
  const withKey = (context: RequestContext, found: string | null) => {
    let key = found;
    let body = {} as B;
    if (validate !== null && !(route.bodyOptional === true && context.body.length === 0)) {
      const parsed = validBody(context, validate);
      if (!parsed.ok) return failure(parsed.refusal);
      body = parsed.value;
    }
    if (route.keyOf !== undefined) key = route.keyOf(context, body);
    if (key === null) return notFound();
    const input = route.input(context, body, key);
    if (isRefusal(input)) return failure(input);
    return runCommand(services, context, route.decider.type, key, route.command, input);
  };
  return {
    operation: route.operation,
    summary: route.summary,
    description: route.description,
    method: route.method,
    path: route.path,
    auth: route.auth,
    ...(route.idempotent === true ? { idempotent: true } : {}),
    ...(route.body === undefined ? {} : { body: route.body }),
    ...(route.bodyOptional === true ? { bodyOptional: true } : {}),
    responses: route.responses,
    ...(route.errors === undefined ? {} : { errors: route.errors }),
    handler,
  };
}

/**
 * Sends one typed command from a handler that is more than a table entry (a query parameter to
 * refuse, a second command first): the compiler still ties the input to the decider's schema.
 */
export function sendCommand<C extends CommandSchemas, K extends keyof C & string>(
  services: Services,
  context: RequestContext,
  decider: Decider<any, C, any>,
  key: string,
  command: K,
  input: InputOf<C, K>,
): Promise<HttpReply> {
  return runCommand(services, context, decider.type, key, command, input);
}

/** A path parameter that must be a reference of the aggregate's own prefix (P9), or null. */
export function ownReference(decider: AnyDecider, name = 'reference') {
  return (context: RequestContext): string | null => {
    const value = context.params[name] ?? '';
    return decider.prefix !== null && isReferenceShaped(value, decider.prefix) ? value : null;
  };
}

/**
 * A public read of the committed view named by the
 * path's reference (SPEC: reads serve what was signed).
 */
export function publicRead(
  services: Services,
  route: {
    operation: string;
    summary: string;
    description: string;
    path: string;
    decider: AnyDecider;
    what: string;
    /** The signed object read, and the codes of its reads once it is gone (410). */
    object: TSchema;
    gone: readonly ErrorCode[];
  },
): RouteSpec<Handler> {
  const reference = ownReference(route.decider);
  return {
    operation: route.operation,
    summary: route.summary,
    description: route.description,
    method: 'GET',
    path: route.path,
    auth: 'public',
    responses: { 200: route.object },
    errors: route.gone,
    handler: (context) => {
      const key = reference(context);
      if (key === null) return notFound(route.what);
      return after(publicView(services, key), (reply) => reply ?? notFound(route.what));
    },
  };
}

export type { HttpReply };
