// Test support: every answer a black-box test reads is checked against the node's own OpenAPI
// document (P19), the way a client generated from that document would read it. The document is
// fetched once per base URL and compiled with Ajv (JSON Schema 2020-12, as OpenAPI 3.1 uses);
// an answer is found its operation by method and path template (under either API prefix, P6),
// then its response by status; its JSON body must validate, the headers the document requires
// (P10) must be there, and a body the node accepted (2xx) must pass the operation's request
// schema. A mismatch throws, naming the operation, the status and what the schema refused.
// Answers no operation describes (an unknown path, a method the path does not take, HEAD, a
// non-JSON page) are not checked.
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { ValidateFunction } from 'ajv';

type Json = Record<string, any>;

export const OPENAPI_TARGET = '/api/path/v1/openapi.json';
const PREFIXES = ['/api/path/v1', '/api/path/genesis/v1'];

interface Operation {
  id: string;
  method: string;
  template: string;
  pattern: RegExp;
  /** Path parameters: a literal segment wins over a parameter where both match (the router's rule). */
  params: number;
  spec: Json;
}

/** What was answered, as the client read it. */
export interface Answered {
  method: string;
  /** Path and query as sent. */
  target: string;
  status: number;
  contentType: string | null;
  text: string;
  /** The answer's headers; absent: they are not checked. */
  headers?: Headers;
  /** The body sent, as text; absent or empty: none. */
  requestBody?: string;
}

export class ConformanceError extends Error {}

export class Conformance {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly operations: Operation[] = [];
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(readonly document: Json) {
    addFormats(this.ajv);
    // The named schemas, compiled once and shared by every validator that refers to them.
    const named = JSON.stringify(document.components?.schemas ?? {}).replaceAll('"#/components/schemas/', '"#/$defs/');
    this.ajv.addSchema({ $id: DEFS, $defs: JSON.parse(named) });
    for (const [template, item] of Object.entries<Json>(document.paths ?? {})) {
      for (const [method, spec] of Object.entries<Json>(item)) {
        const source = template.split('/').map((s) => (s.startsWith('{') ? '[^/]+' : escape(s))).join('/');
        const params = (template.match(/\{/g) ?? []).length;
        this.operations.push({ id: spec.operationId, method: method.toUpperCase(), template, pattern: new RegExp(`^${source}$`), params, spec });
      }
    }
    this.operations.sort((a, b) => a.params - b.params);
  }

  /** The operation that answers `method` on `target` (either API prefix), or null. */
  operationFor(method: string, target: string): Operation | null {
    let path = target.split('?')[0]!;
    if (path.startsWith(PREFIXES[1] + '/')) path = PREFIXES[0] + path.slice(PREFIXES[1]!.length);
    return this.operations.find((o) => o.method === method.toUpperCase() && o.pattern.test(path)) ?? null;
  }

  /** The validator of an operation's request body, compiled from the document. */
  requestValidator(operationId: string): ValidateFunction {
    const operation = this.operations.find((o) => o.id === operationId);
    const schema = operation?.spec.requestBody?.content?.['application/json']?.schema;
    if (schema === undefined) throw new Error(`${operationId} takes no JSON body in the document`);
    return this.compile(`${operationId} request`, schema);
  }

  /** The validator of an event's delivered body (the document's `webhooks`, P11). */
  webhookValidator(event: string): ValidateFunction {
    const schema = this.document.webhooks?.[event]?.post?.requestBody?.content?.['application/json']?.schema;
    if (schema === undefined) throw new Error(`no webhook ${event} in the document`);
    return this.compile(`webhook ${event}`, schema);
  }

  /** Throws a ConformanceError when the answer is not what the document says it may be. */
  check(answer: Answered): void {
    if (answer.method.toUpperCase() === 'HEAD') return;
    if (answer.contentType !== null && !/^application\/json\b/i.test(answer.contentType)) return;
    const operation = this.operationFor(answer.method, answer.target);
    if (operation === null) return;
    const where = `${operation.id} (${answer.method} ${operation.template}) answered ${answer.status}`;
    const response = operation.spec.responses?.[String(answer.status)];
    if (response === undefined) throw new ConformanceError(`${where}, a status the OpenAPI document does not list for it: ${answer.text.slice(0, 300)}`);
    if (answer.headers !== undefined) this.checkHeaders(where, response, answer.headers);
    if (answer.status < 300) this.checkAccepted(where, operation, answer.requestBody);
    const schema = response.content?.['application/json']?.schema;
    if (schema === undefined) return;
    let body: unknown;
    try { body = JSON.parse(answer.text); } catch { throw new ConformanceError(`${where} with a body that is not JSON`); }
    const validate = this.compile(`${operation.id} ${answer.status}`, schema);
    if (!validate(body)) {
      const errors = this.ajv.errorsText(validate.errors, { separator: '; ' });
      throw new ConformanceError(`${where} with a body its OpenAPI schema refuses: ${errors}\nbody: ${answer.text.slice(0, 500)}`);
    }
  }

  /**
   * A body the node accepted must be one the document's request schema accepts: the node
   * validated it with the schema the document shows, so a refusal here is a drift between them.
   */
  private checkAccepted(where: string, operation: Operation, sent: string | undefined): void {
    const schema = operation.spec.requestBody?.content?.['application/json']?.schema;
    if (schema === undefined || sent === undefined || sent === '') return;
    const validate = this.compile(`${operation.id} request`, schema);
    // The node decodes a body as UTF-8 the standard way, which drops a leading byte order mark.
    if (!validate(JSON.parse(sent.replace(/^\ufeff/, '')))) {
      const errors = this.ajv.errorsText(validate.errors, { separator: '; ' });
      throw new ConformanceError(`${where} to a body its OpenAPI request schema refuses: ${errors}\nbody: ${sent.slice(0, 500)}`);
    }
  }

  /** The response's headers: each the document requires is there, each there has its form. */
  private checkHeaders(where: string, response: Json, headers: Headers): void {
    for (const [name, declared] of Object.entries<Json>(response.headers ?? {})) {
      const spec = declared.$ref === undefined ? declared : this.document.components.headers[declared.$ref.split('/').pop()];
      const value = headers.get(name);
      if (value === null) {
        if (spec.required === true) throw new ConformanceError(`${where} without the header ${name} its OpenAPI response requires`);
        continue;
      }
      const validate = this.compile(`header ${name}`, spec.schema ?? {});
      if (!validate(value)) throw new ConformanceError(`${where} with a header ${name}: ${value} its OpenAPI schema refuses`);
    }
  }

  /** A schema of the document, compiled once; its named references go to the shared `$defs`. */
  private compile(key: string, schema: Json): ValidateFunction {
    let validate = this.compiled.get(key);
    if (validate === undefined) {
      validate = this.ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${DEFS}#/$defs/`)));
      this.compiled.set(key, validate);
    }
    return validate;
  }
}

/** Where the document's named schemas live for Ajv; their own references stay inside it. */
const DEFS = 'https://path-node.invalid/openapi-components';

const escape = (segment: string) => segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Documents by base URL: fetched once; null where the listener serves none (the external one). */
const documents = new Map<string, Promise<Conformance | null | undefined>>();

/** The checker of the node at `baseUrl`, or null when it serves no document. */
export async function conformanceOf(baseUrl: string): Promise<Conformance | null> {
  let found = documents.get(baseUrl);
  if (found === undefined) {
    found = fetchDocument(baseUrl);
    documents.set(baseUrl, found);
  }
  const checker = await found;
  // A node that could not answer yet (starting, draining) is asked again next time.
  if (checker === undefined) documents.delete(baseUrl);
  return checker ?? null;
}

async function fetchDocument(baseUrl: string): Promise<Conformance | null | undefined> {
  let res: Response;
  try { res = await fetch(baseUrl + OPENAPI_TARGET); } catch { return undefined; }
  const text = await res.text();
  if (res.status === 503) return undefined;
  if (res.status !== 200) return null;
  let document: Json;
  try { document = JSON.parse(text) as Json; } catch { return null; }
  return typeof document?.openapi === 'string' ? new Conformance(document) : null;
}

/** Checks one answer of the node at `baseUrl` against its document (harness.ts Client). */
export async function checkConformance(baseUrl: string, answer: Answered): Promise<void> {
  const checker = await conformanceOf(baseUrl);
  checker?.check(answer);
}
