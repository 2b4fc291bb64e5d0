// What a signed load sends, request by request. A plan describes thousands of distinct requests
// in a few bytes (it travels to the load generator on its command line), and any request can be
// rebuilt from the plan and its number: the lookup figure measures, in the benchmark's own
// process, the cost of the very keys the load generator sent.
import { identifierHash } from '../src/protocol/identifiers.js';
import { API_PREFIX } from './signed-request.js';

export type RequestPlan = TemplatePlan | LookupPlan;

/**
 * Requests from a path and a JSON body text in which `{n}` stands for the request's number
 * (plus `first`) and `{name}` for the entry of `lists[name]` at that number, cycled.
 */
export interface TemplatePlan {
  kind: 'template';
  method: 'GET' | 'POST' | 'PUT';
  target: string;
  body: string;
  lists?: Record<string, readonly string[]>;
  first?: number;
}

/** The same JSON body to one path, request after request (figure 4's `POST /receipts`). */
export function fixedPostPlan(target: string, body: unknown): TemplatePlan {
  return { kind: 'template', method: 'POST', target, body: JSON.stringify(body) };
}

/**
 * Lookups of email identifiers by their clear value (the node normalises and hashes them). The
 * directory holds `user<k>@example.com` for every k below `presentKeys`; a share `presentShare`
 * of the keys asked are among those, the rest are `nobody<k>@example.net`, which no one holds.
 */
export interface LookupPlan {
  kind: 'lookup';
  /** Keys per call (POST /sonar/lookup/batch); null: one key per call (POST /sonar/lookup). */
  batch: number | null;
  signed: boolean;
  presentKeys: number;
  presentShare: number;
  seed: number;
  /**
   * The network pepper, hex: when given, each key is sent as its `identifier_hash` (the email's
   * HMAC under this pepper, P8) instead of its clear value.
   */
  pepperHex?: string;
}

export interface PlannedRequest {
  method: 'GET' | 'POST' | 'PUT';
  target: string;
  body: Buffer;
}

/** The email a directory of `keys` keys holds at position k (the lookup figure builds it so). */
export const presentEmail = (k: number): string => `user${k}@example.com`;

/** The identifiers request `index` of a lookup plan asks for. */
export function lookupIdentifiers(plan: LookupPlan, index: number): string[] {
  const random = mulberry32((plan.seed ^ Math.imul(index + 1, 0x9e3779b9)) >>> 0);
  const count = plan.batch ?? 1;
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const present = random() < plan.presentShare;
    const k = Math.floor(random() * plan.presentKeys);
    out.push(present ? presentEmail(k) : `nobody${k}@example.net`);
  }
  return out;
}

export function plannedRequest(plan: RequestPlan, index: number): PlannedRequest {
  if (plan.kind === 'template') {
    const n = (plan.first ?? 0) + index;
    const fill = (text: string) => text.replace(/\{(\w+)\}/g, (whole, name: string) => {
      if (name === 'n') return String(n);
      const list = plan.lists?.[name];
      if (list === undefined || list.length === 0) throw new Error(`request plan: no list '${name}' for ${whole}`);
      return list[n % list.length]!;
    });
    return { method: plan.method, target: fill(plan.target), body: Buffer.from(fill(plan.body), 'utf8') };
  }
  const identifiers = lookupIdentifiers(plan, index);
  if (plan.batch === null) {
    return { method: 'POST', target: `${API_PREFIX}/sonar/lookup`, body: Buffer.from(JSON.stringify({ identifier_type: 'email', identifier: identifiers[0] }), 'utf8') };
  }
  const pepper = plan.pepperHex === undefined ? null : Buffer.from(plan.pepperHex, 'hex');
  const items = identifiers.map((identifier) => pepper === null
    ? { identifier_type: 'email', identifier }
    : { identifier_type: 'email', identifier_hash: identifierHash(pepper, 'email', identifier) });
  return { method: 'POST', target: `${API_PREFIX}/sonar/lookup/batch`, body: Buffer.from(JSON.stringify({ items, signed: plan.signed }), 'utf8') };
}

/** A small seeded generator (mulberry32): the same plan gives the same keys in every process. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
