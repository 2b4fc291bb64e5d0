// The three fixed routes at the root (P4): keys, discovery, and the signed object behind a link.
import { API_PREFIXES, SERVED_API_VERSIONS } from '../../config.js';
import { Type } from '@sinclair/typebox';
import { isReferenceShaped } from '../../protocol/ids.js';
import {
  CheckoutObject,
  ConfigurationDocument,
  InstructionObject,
  KeysDocument,
  ReceiptObject,
  RequestObject,
} from '../../protocol/responses.js';
import { GRAMMAR, PROTOCOL_VERSION } from '../../protocol/signing.js';
import { linkAnswer } from '../../pages/link.js';
import type { StoredSigningKey } from '../../store.js';
import type { HttpReply } from '../reply.js';
import type { RouteSpec } from '../router.js';
import type { Handler } from '../server.js';
import { after, notFound, publicView, type Services } from '../services.js';

/** Where the OpenAPI document is served, under each API prefix (P19). */
export const OPENAPI_PATH = '/openapi.json';

/** Profiles this node declares; reserved ones (gateway, reconciliation) never appear. */
export const DECLARED_PROFILES = ['receipts'] as const;

export function keysDocument(member: string, keys: readonly StoredSigningKey[]): string {
  return JSON.stringify({
    member,
    keys: keys.map((k) => ({
      kid: k.kid,
      alg: 'Ed25519',
      public_key: k.public_key,
      kty: 'OKP',
      crv: 'Ed25519',
      x: Buffer.from(k.public_key, 'hex').toString('base64url'),
      status: k.status,
      created_at: k.created_at,
      retired_at: k.retired_at,
    })),
  });
}

export function configurationDocument(
  services: Services,
  routes: readonly RouteSpec<Handler>[],
  externalUrl: string | null,
): string {
  const { baseUrl, member } = services.config;
  const endpoints: Record<string, { method: string; url: string }> = {};
  for (const r of routes)
    endpoints[r.operation] = {
      method: r.method,
      url: `${baseUrl}${r.root ? '' : API_PREFIXES[0]}${r.path.replace(/:([a-z_]+)/g, '{$1}')}`,
    };
  return JSON.stringify({
    member,
    base_url: baseUrl,
    protocol_version: PROTOCOL_VERSION,
    grammar: GRAMMAR,
    api_versions: [...SERVED_API_VERSIONS],
    keys_url: `${baseUrl}/.well-known/path-keys`,
    openapi_url: `${baseUrl}${API_PREFIXES[0]}${OPENAPI_PATH}`,
    endpoints,
    profiles: [...DECLARED_PROFILES],
    lookup_journal_retention_days: services.config.limits.lookup_journal_retention_days,
    external_url: externalUrl,
    pepper_version: services.pepperVersion,
    webhook_public_key:
      services.signer === undefined ? null : webhookPublicKey(services.signer().publicKeyHex),
  });
}

/**
 * The key that signs `v1a` webhook signatures, in the Standard Webhooks form (P11): `whpk_` and
 * base64 of the raw 32-byte Ed25519 public key.
 */
function webhookPublicKey(publicKeyHex: string): string {
  return `whpk_${Buffer.from(publicKeyHex, 'hex').toString('base64')}`;
}

/** What a link answers once its object is gone (410): the request's and instruction's codes. */
const LINK_GONE = [
  'path.request.expired',
  'path.request.revoked',
  'path.instruction.used',
  'path.instruction.expired',
  'path.instruction.revoked',
] as const;

/**
 * The fixed routes; the documents are rebuilt by the node when keys or routes change, each made
 * cacheable and compressed once then (cache.ts documentReply).
 */
export function fixedRoutes(
  services: Services,
  documents: { keys: () => HttpReply; configuration: () => HttpReply },
): RouteSpec<Handler>[] {
  return [
    {
      operation: 'keys',
      summary: 'Read the published signing keys',
      description:
        'Answers the keys this node signs with, by kid, active and retired, each as hex and ' +
        'as a JWK, so anyone can verify its signed objects offline (SPEC A, P4).',
      method: 'GET',
      path: '/.well-known/path-keys',
      root: true,
      auth: 'public',
      responses: { 200: KeysDocument },
      cacheable: true,
      handler: documents.keys,
    },
    {
      operation: 'configuration',
      summary: 'Read the discovery document',
      description:
        "Answers the discovery document: this member's name, the URL and method of every " +
        "operation, the API versions served, the profiles declared and the lookup journal's " +
        'retention (SPEC A, P4).',
      method: 'GET',
      path: '/.well-known/path-configuration',
      root: true,
      auth: 'public',
      responses: { 200: ConfigurationDocument },
      cacheable: true,
      handler: documents.configuration,
    },
    {
      responses: {
        200: Type.Union([RequestObject, CheckoutObject, InstructionObject, ReceiptObject]),
      },
      errors: LINK_GONE,
      pages: true,
      operation: 'links.get',
      summary: 'Follow a payment link',
      description:
        'Answers the signed object behind a public reference (a request, a checkout as a ' +
        'path.checkout, an instruction, a receipt), or a page for people to a browser that ' +
        'prefers HTML (SPEC A, P4, P20).',
      method: 'GET',
      path: '/path/:reference',
      root: true,
      auth: 'public',
      handler: (context) => {
        const reference = context.params.reference!;
        // P20: a browser gets the page for people, anyone else the object.
        const link = `${services.config.baseUrl}/path/${reference}`;
        const answer = (reply: HttpReply | null) =>
          linkAnswer(reply ?? notFound('object'), {
            accept: context.accept,
            reference,
            link,
            now: context.now,
          });
        return isReferenceShaped(reference)
          ? after(publicView(services, reference), answer)
          : answer(null);
      },
    },
  ];
}
