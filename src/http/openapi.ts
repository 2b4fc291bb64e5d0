// The OpenAPI 3.1 document (P19), built once at start from the route table: each route's body
// schema is the one that validates its requests (routes/table.ts compiles it), and its answers
// are the schemas it declares, so the document describes what the node does. Operations keep
// their discovery names as `operationId`; errors come from the P7 table; the P5 headers are a
// security scheme; the events of P11 are `webhooks`. Same routes and settings: same bytes.
import { Kind, Type, type TSchema } from '@sinclair/typebox';
import { API_PREFIXES, API_VERSION, SERVED_API_VERSIONS, type Limits } from '../config.js';
import { REQUEST_PAID_EVENT } from '../domain/request/request.js';
import { RECEIPT_EVENT } from '../domain/receipt/receipt.js';
import { SESSION_COMPLETED_EVENT, SESSION_EXPIRED_EVENT } from '../domain/checkout/checkout.js';
import { SessionEventData } from '../domain/checkout/schema.js';
import { ERROR_STATUS, type ErrorCode } from '../protocol/errors.js';
import * as responses from '../protocol/responses.js';
import * as wire from '../protocol/schemas.js';
import { EventObject, ReceiptObject, RequestObject } from '../protocol/responses.js';
import type { HttpReply } from './reply.js';
import type { RouteSpec } from './router.js';
import type { Handler } from './server.js';
import { OPENAPI_PATH } from './routes/fixed.js';

type Json = Record<string, unknown>;
type Route = RouteSpec<unknown>;

/** The document's own shape, as its route declares it: enough to know it is one. */
const OpenApiShape = Type.Object({
  openapi: Type.String({ pattern: '^3\\.1\\.' }),
  info: Type.Object({ title: Type.String(), version: Type.String() }),
  paths: Type.Object({}),
});

/** `GET /api/path/v1/openapi.json` (P19): the same cached bytes on every call. */
export function openApiRoute(document: () => HttpReply): RouteSpec<Handler> {
  return {
    operation: 'openapi',
    summary: 'Read the OpenAPI document',
    description:
      'Answers this OpenAPI 3.1 document, generated at start from the routes and the schemas ' +
      'that validate their requests, the same bytes on every call (P19).',
    method: 'GET',
    path: OPENAPI_PATH,
    auth: 'public',
    responses: { 200: OpenApiShape },
    cacheable: true,
    handler: document,
  };
}

/** Schemas shown once under `components.schemas` and referred to by name elsewhere. */
const NAMED: ReadonlyMap<TSchema, string> = new Map(
  (Object.entries({ ...wire, ...responses }) as [string, unknown][])
    .filter((entry): entry is [string, TSchema] => isSchema(entry[1]) && Kind in entry[1])
    .map(([name, schema]) => [schema, name]),
);

function isSchema(value: unknown): value is TSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A typebox schema as plain JSON Schema: typebox's symbol-keyed markers dropped, named schemas
 * replaced by a `$ref` (except at the top of their own definition).
 */
function plain(schema: unknown, root: boolean): unknown {
  if (Array.isArray(schema)) return schema.map((item) => plain(item, false));
  if (!isSchema(schema)) return schema;
  const name = NAMED.get(schema);
  if (!root && name !== undefined) return { $ref: `#/components/schemas/${name}` };
  const out: Json = {};
  for (const key of Object.keys(schema)) out[key] = plain((schema as Json)[key], false);
  return out;
}

const jsonContent = (schema: unknown) => ({ 'application/json': { schema: plain(schema, false) } });

/** P20: a route with pages answers HTML to a browser that prefers it, at any status. */
const PAGE = { 'text/html': { schema: { type: 'string' } } };
const pageContent = (route: Route) => (route.pages === true ? PAGE : {});

/**
 * Every refusal a route can answer: those of its kind (auth, body, path, idempotency), its own.
 * Any route may answer 500 `path.core.internal`: a row it reads fails its checksum (P14, never
 * answered from) or the node meets a defect; the request id names it in the node's log.
 */
function refusalsOf(route: Route): ErrorCode[] {
  const codes = new Set<ErrorCode>([
    'path.core.invalid_request',
    'path.core.version_unknown',
    'path.core.unavailable',
    'path.core.internal',
  ]);
  const add = (...more: ErrorCode[]) => more.forEach((code) => codes.add(code));
  // A public GET answers from committed bytes without reading a body; every other call reads it.
  if (!(route.auth === 'public' && route.method === 'GET')) {
    add('path.core.payload_too_large', 'path.core.unsupported_media_type');
  }
  if (route.auth !== 'public') add('path.auth.unauthenticated');
  if (route.auth === 'local') add('path.auth.forbidden');
  if (route.path.includes('/:')) add('path.core.not_found');
  if (route.idempotent === true) {
    add('path.core.idempotency_conflict', 'path.core.idempotency_in_progress');
  }
  add(...(route.errors ?? []));
  return [...codes].sort();
}

/** The refusals by status, each with the error envelope narrowed to its codes (P7). */
function errorResponses(route: Route): Json {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of refusalsOf(route)) {
    const status = ERROR_STATUS[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Json = {};
  for (const status of [...byStatus.keys()].sort((a, b) => a - b)) {
    const codes = byStatus.get(status)!;
    const narrowed = {
      allOf: [
        { $ref: '#/components/schemas/ErrorEnvelope' },
        { properties: { error: { properties: { code: { enum: codes } } } } },
      ],
    };
    // P7: an overloaded or draining node says when to come back.
    const retry = status === 503 ? { 'Retry-After': header('RetryAfter') } : {};
    out[String(status)] = {
      description: codes.join(', '),
      headers: { ...commonHeaders(false), ...retry },
      content: { 'application/json': { schema: narrowed }, ...pageContent(route) },
    };
  }
  return out;
}

const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

/** P10: every answer names the version and the request; a signed one the protocol version. */
function commonHeaders(signed: boolean): Json {
  return {
    'Path-Version': header('PathVersion'),
    'Path-Version-Pinned': header('PathVersionPinned'),
    'Path-Request-Id': header('PathRequestId'),
    ...(signed ? { 'Path-Protocol-Version': header('PathProtocolVersion') } : {}),
  };
}

/** Carries a signed object (the envelope's `signature` among its members, or in its items). */
const isSigned = (schema: TSchema) => JSON.stringify(schema).includes('"signature"');

function successResponses(route: Route): Json {
  const out: Json = {};
  for (const status of Object.keys(route.responses).sort()) {
    const schema = route.responses[Number(status)]!;
    const replay =
      route.idempotent === true ? { 'Path-Idempotent-Replayed': header('PathReplayed') } : {};
    out[status] = {
      description: Number(status) === 201 ? 'created (P7)' : 'success',
      headers: { ...commonHeaders(isSigned(schema)), ...replay, ...validatorHeaders(route) },
      content: { ...jsonContent(schema), ...pageContent(route) },
    };
  }
  if (route.cacheable === true) {
    out['304'] = {
      description: 'not modified: If-None-Match names the current representation',
      headers: { ...commonHeaders(false), ...validatorHeaders(route) },
    };
  }
  return out;
}

/** What a cacheable route's 200 and 304 carry (http/cache.ts). */
function validatorHeaders(route: Route): Json {
  if (route.cacheable !== true) return {};
  return {
    ETag: {
      description: 'strong entity tag of the exact bytes of this representation',
      schema: { type: 'string' },
    },
    'Cache-Control': {
      description: 'public, no-cache: any cache may keep it and revalidates before each use',
      schema: { type: 'string' },
    },
  };
}

const SIGNED_CALL = { PathKeyId: [], PathTimestamp: [], PathSignature: [] };

/** P5: public calls take no signature; optional ones take one or none. */
function securityOf(route: Route): Json[] {
  switch (route.auth) {
    case 'public':
      return [];
    case 'optional':
      return [{}, SIGNED_CALL];
    default:
      return [SIGNED_CALL];
  }
}

/** What a path parameter names; a value of the wrong form answers 404, like an unknown one. */
const PATH_PARAMETERS: Record<string, string> = {
  reference: "the object's reference (P9: a type prefix, an underscore, 32 hex digits)",
  id: "the object's id (P9: a type prefix, an underscore, 32 hex digits)",
  target_id: 'the target id (tgt_...)',
  key: 'a Path address, path:<opaque>, with or without percent-encoding',
};

function parametersOf(route: Route): Json[] {
  const inPath = [...route.path.matchAll(/:([a-z_]+)/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    description: PATH_PARAMETERS[m[1]!] ?? m[1],
    schema: { type: 'string', minLength: 1 },
  }));
  const query = Object.entries(route.query ?? {}).map(([name, q]) => ({
    name,
    in: 'query',
    required: q.required === true,
    description: q.description,
    schema: plain(q.schema, false),
  }));
  const headers = [{ $ref: '#/components/parameters/PathVersion' }];
  if (route.idempotent === true) headers.push({ $ref: '#/components/parameters/IdempotencyKey' });
  return [...inPath, ...query, ...headers];
}

function operationOf(route: Route): Json {
  const body =
    route.body === undefined
      ? {}
      : {
          requestBody: {
            required: route.bodyOptional !== true,
            content: jsonContent(route.body),
          },
        };
  return {
    operationId: route.operation,
    summary: route.summary,
    description: route.description,
    // Operations are grouped by the first word of their discovery name (`receipts.create`).
    tags: [route.operation.split('.')[0]],
    parameters: parametersOf(route),
    ...body,
    security: securityOf(route),
    responses: { ...successResponses(route), ...errorResponses(route) },
  };
}

/** `/receipts/:reference` as OpenAPI writes it, from the root or under the first prefix (P6). */
function openApiPath(route: Route): string {
  const path = route.path.replace(/:([a-z_]+)/g, '{$1}');
  return route.root === true ? path : `${API_PREFIXES[0]}${path}`;
}

function pathsOf(routes: readonly Route[]): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = openApiPath(route);
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operationOf(route) };
  }
  return paths;
}

export interface OpenApiSettings {
  baseUrl: string;
  limits: Limits;
}

/** The document as JSON text, built once: the route answers these very bytes. */
export function openApiDocument(routes: readonly Route[], settings: OpenApiSettings): string {
  return JSON.stringify({
    openapi: '3.1.0',
    info: {
      title: 'path-node',
      version: API_VERSION,
      license: { name: 'Apache License 2.0', identifier: 'Apache-2.0' },
      description:
        `Operation routes are served under ${API_PREFIXES.join(' and ')} alike (P6); ` +
        'the paths here name the first. Unknown members of objects are allowed (SPEC ' +
        'principle 6). Public GET operations also answer HEAD and a CORS preflight (P20).',
    },
    servers: [{ url: settings.baseUrl, description: "this node's base URL (--base-url)" }],
    security: [SIGNED_CALL],
    paths: pathsOf(routes),
    webhooks: webhooks(),
    components: components(settings.limits),
  });
}

function components(limits: Limits): Json {
  const schemas: Json = {};
  for (const [schema, name] of [...NAMED].sort((a, b) => (a[1] < b[1] ? -1 : 1))) {
    schemas[name] = plain(schema, true);
  }
  return {
    schemas,
    securitySchemes: SECURITY_SCHEMES,
    parameters: {
      PathVersion: {
        name: 'Path-Version',
        in: 'header',
        required: false,
        description: 'the dated API version to pin (P10); absent: the latest',
        schema: { type: 'string', enum: [...SERVED_API_VERSIONS] },
      },
      IdempotencyKey: {
        name: 'Path-Idempotency-Key',
        in: 'header',
        required: false,
        description:
          'scoped to the calling member and kept at least 24 hours: a retry with the same key ' +
          'and body answers the stored status and body (P7)',
        schema: {
          type: 'string',
          minLength: 1,
          maxLength: limits.idempotency_key_length_max,
          pattern: '^[\\x21-\\x7e]+$',
        },
      },
    },
    headers: HEADERS,
  };
}

const SIGNING_STRING =
  'The Path-Signature is the lowercase hex Ed25519 signature, by the credential, of the ' +
  'signing string: these lines joined by "\\n", with no trailing newline: `path-request-v1`, ' +
  'the method in upper case, the request target (path and query exactly as sent), the ' +
  'Path-Timestamp value, the Path-Idempotency-Key value or an empty line, and the lowercase ' +
  'hex SHA-256 of the raw body bytes (of the empty string without a body). The timestamp ' +
  'must be within 300 seconds of the node clock; a replayed signing string is refused (P5). ' +
  'The three headers go together.';

const SECURITY_SCHEMES: Json = {
  PathKeyId: {
    type: 'apiKey',
    in: 'header',
    name: 'Path-Key-Id',
    description: 'the credential key id (a fingerprint of its public key, P5)',
  },
  PathTimestamp: {
    type: 'apiKey',
    in: 'header',
    name: 'Path-Timestamp',
    description: 'RFC 3339 UTC with Z, whole or fractional seconds (P5)',
  },
  PathSignature: {
    type: 'apiKey',
    in: 'header',
    name: 'Path-Signature',
    description: SIGNING_STRING,
  },
};

/** P10: the version and the request id are on every answer. */
const HEADERS: Json = {
  PathVersion: {
    description: 'the dated API version that answered (P10)',
    required: true,
    schema: { type: 'string', enum: [...SERVED_API_VERSIONS] },
  },
  PathVersionPinned: {
    description: 'whether the request pinned a version (P10)',
    required: true,
    schema: { type: 'string', enum: ['true', 'false'] },
  },
  PathRequestId: {
    description: 'the id of this request',
    required: true,
    schema: { type: 'string', minLength: 1 },
  },
  PathProtocolVersion: {
    description: 'the protocol version of the signed object in the body (P10)',
    schema: { type: 'string' },
  },
  RetryAfter: { description: 'seconds to wait before trying again', schema: { type: 'string' } },
  PathReplayed: {
    description: 'present on an idempotent replay: the stored answer (P7)',
    schema: { type: 'string', enum: ['true'] },
  },
};

interface WebhookSpec {
  event: string;
  data: TSchema;
  summary: string;
  /** When it is sent (SPEC Events); the delivery itself is said once, in DELIVERY. */
  when: string;
}

/** The events (P11): when each is sent and what it carries. */
const WEBHOOKS: readonly WebhookSpec[] = [
  {
    event: RECEIPT_EVENT,
    data: ReceiptObject,
    summary: 'Receive an issued settlement receipt',
    when: 'Sent when a settlement receipt is issued (SPEC Events); `data` is the signed receipt.',
  },
  {
    event: REQUEST_PAID_EVENT,
    data: RequestObject,
    summary: 'Receive a payment request marked paid',
    when: 'Sent when a payment request is marked paid (SPEC Events); `data` is the signed request.',
  },
  {
    event: SESSION_COMPLETED_EVENT,
    data: SessionEventData,
    summary: 'Receive a completed checkout session',
    when: 'Sent when a checkout session completes (SPEC Events); `data` is the session.',
  },
  {
    event: SESSION_EXPIRED_EVENT,
    data: SessionEventData,
    summary: 'Receive an expired checkout session',
    when: 'Sent when a checkout session expires unpaid (SPEC Events); `data` is the session.',
  },
];

const DELIVERY =
  ' It is POSTed as a signed `path.event` to the configured endpoints and to any ' +
  'webhook_url the object names, at least once: receivers deduplicate on the event id (P11).';

/** The webhooks of the document, each named `webhooks.<event>` as its operationId. */
function webhooks(): Json {
  const out: Json = {};
  for (const hook of WEBHOOKS) {
    out[hook.event] = {
      post: {
        operationId: `webhooks.${hook.event}`,
        summary: hook.summary,
        description: hook.when + DELIVERY,
        tags: ['webhooks'],
        parameters: WEBHOOK_HEADERS,
        requestBody: { required: true, content: jsonContent(EventObject(hook.event, hook.data)) },
        responses: {
          '2XX': { description: 'acknowledged; anything else is retried with backoff (P11)' },
        },
      },
    };
  }
  return out;
}

const webhookHeader = (name: string, description: string) => ({
  name,
  in: 'header',
  required: true,
  description,
  schema: { type: 'string' },
});

/** Standard Webhooks headers (P11), and the event id under the node's own name. */
const WEBHOOK_HEADERS = [
  webhookHeader('webhook-id', 'the event id'),
  webhookHeader('webhook-timestamp', 'Unix seconds when this delivery was signed'),
  webhookHeader(
    'webhook-signature',
    'space-separated signatures over "<id>.<timestamp>.<body>": `v1,<base64 HMAC-SHA256>` ' +
      'with each webhook secret still signing (`path-node webhooks secret`), then ' +
      "`v1a,<base64 Ed25519>` by the node's signing key (discovery's `webhook_public_key`) (P11)",
  ),
  webhookHeader('Path-Event-Id', 'the event id'),
];
