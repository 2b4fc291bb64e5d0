// The external registry discovery interface (SPEC L), on its own listener (P6) with closed
// access: POST /discovery for issued clients, GET /registries for anyone. Neither answer is
// signed or budgeted; the raw key is parsed in memory and never echoed, stored or logged.
import { Type } from '@sinclair/typebox';
import { refusal } from '../protocol/errors.js';
import { validator } from '../protocol/schemas.js';
import { failure, json } from '../http/reply.js';
import type { RouteSpec } from '../http/router.js';
import type { Handler } from '../http/server.js';
import { validBody } from '../http/services.js';
import { candidatesFor, type Connector } from './connectors.js';
import { EXTERNAL_KEY_TYPES, parseExternalKey } from './keys.js';

const Discovery = Type.Object({
  key_type: Type.Union(EXTERNAL_KEY_TYPES.map((t) => Type.Literal(t))),
  key: Type.String({ minLength: 1, maxLength: 320 }),
});
const validateDiscovery = validator(Discovery);

const Operations = Type.Array(Type.String());
const DiscoveryAnswer = Type.Object({
  kind: Type.Literal('external.discovery'),
  key_type: Type.String(),
  candidates: Type.Array(
    Type.Object({
      registry: Type.String(),
      rail: Type.String(),
      zone: Type.String(),
      operations: Operations,
      granted: Type.Boolean(),
    }),
  ),
});
const RegistryList = Type.Object({
  registries: Type.Array(
    Type.Object({
      registry: Type.String(),
      name: Type.Union([Type.String(), Type.Null()]),
      rail: Type.String(),
      zone: Type.String(),
      operations: Operations,
      key_types: Type.Array(Type.String()),
      status: Type.String(),
    }),
  ),
});

export function externalRoutes(
  connectors: readonly Connector[],
  grantsOf: (client: string) => ReadonlySet<string>,
): RouteSpec<Handler>[] {
  const registries = JSON.stringify({
    registries: connectors.map((c) => ({
      registry: c.registry,
      name: c.name ?? null,
      rail: c.rail,
      zone: c.zone,
      operations: c.operations,
      key_types: c.key_types,
      status: c.status,
    })),
  });
  return [
    {
      operation: 'external.discovery',
      summary: 'Find the registries that handle an external key',
      description:
        'Answers the registries whose connectors handle a key of this form, each with its ' +
        "rail, zone and operations and whether the caller's access covers it; unsigned and " +
        'unbudgeted (SPEC L).',
      method: 'POST',
      path: '/discovery',
      auth: 'member',
      body: Discovery,
      responses: { 200: DiscoveryAnswer },
      errors: ['external.key.invalid'],
      handler: (context) => {
        const body = validBody(context, validateDiscovery);
        if (!body.ok) return failure(body.refusal);
        const { key_type, key } = body.value;
        const invalidKey = () =>
          failure(refusal('external.key.invalid', `the key does not parse as ${key_type}`));
        // An address is the network's own key, never an external one.
        if (key.trim().toLowerCase().startsWith('path:')) return invalidKey();
        const parsed = parseExternalKey(key_type, key);
        if (parsed === null) return invalidKey();
        const granted = grantsOf(context.caller!.member);
        return json(200, {
          kind: 'external.discovery',
          key_type,
          candidates: candidatesFor(connectors, key_type, parsed).map((c) => ({
            registry: c.registry,
            rail: c.rail,
            zone: c.zone,
            operations: c.operations,
            granted: granted.has(c.registry),
          })),
        });
      },
    },
    {
      operation: 'external.registries',
      summary: 'List the external registries',
      description:
        'Answers the external registries this node knows, with their zone, operations and ' +
        'status, to anyone (SPEC L).',
      method: 'GET',
      path: '/registries',
      auth: 'public',
      responses: { 200: RegistryList },
      handler: () => ({ status: 200, body: registries, signed: false }),
    },
  ];
}
