// Routes of SPEC B (subjects, identifiers, payee records, attestations, ownership bindings),
// C (addresses, targets, standing intents) and E (resolver, commitments). Clear identifiers are
// normalised and hashed here and go no further; names and account references are sealed here.
import { commitmentViewKey, resolverViewKey } from '../../domain/subject/resolver.js';
import {
  DEFAULT_DISCOVERABILITY, validateCreateAddress, validateCreateAttestation, validateCreateBinding, validateCreateIdentifier,
  validateCreateSubject, validateCreateTarget, validatePayeeRecord, validateStandingIntent,
} from '../../domain/subject/schema.js';
import { IDENTIFIER_TYPES, identifierHash, normaliseIdentifier, type IdentifierType } from '../../protocol/identifiers.js';
import { isReferenceShaped, newAddress, newReference, type ReferencePrefix } from '../../protocol/ids.js';
import { invalid } from '../../protocol/errors.js';
import { seal } from '../../protocol/sealing.js';
import { failure, isReply, type HttpReply } from '../reply.js';
import type { RouteSpec } from '../router.js';
import type { Handler, RequestContext } from '../server.js';
import { notFound, queryParams, runCommand, ownerOf, validBody, viewReply, type Services } from '../services.js';

export function directoryRoutes(services: Services): RouteSpec<Handler>[] {
  const subject = (context: RequestContext, id: string, name: string, input: Record<string, unknown>, what = 'subject') =>
    isReferenceShaped(id, 'sub') ? runCommand(services, context, 'subject', id, name, { ...input, what }) : notFound(what);

  /** Commands on something a subject owns, found through the route index. */
  const owned = (prefix: ReferencePrefix, what: string, name: string, input: (context: RequestContext) => HttpReply | Record<string, unknown>): Handler =>
    (context) => {
      const id = context.params.id ?? context.params.reference!;
      const owner = isReferenceShaped(id, prefix) ? ownerOf(services, id) : null;
      if (owner === null) return notFound(what);
      const built = input(context);
      if (isReply(built)) return built;
      return runCommand(services, context, 'subject', owner, name, { ...built, what });
    };

  const hashOf = (type: IdentifierType | 'address', value: string) => identifierHash(services.pepper, type, value);
  const addressInput = () => {
    const address = newAddress();
    return { id: newReference('adr'), address, hash: hashOf('address', address) };
  };
  const publicView = (key: (address: string) => string): Handler => (context) => {
    let address: string;
    try {
      address = decodeURIComponent(context.params.key!);
    } catch {
      return notFound('address');
    }
    return (/^path:[A-Za-z0-9]{1,64}$/.test(address) ? viewReply(services, key(address)) : null) ?? notFound('address');
  };

  return [
    {
      operation: 'subjects.create', method: 'POST', path: '/subjects', auth: 'member', idempotent: true,
      handler: (context) => {
        const body = validBody(context, validateCreateSubject);
        if (!body.ok) return failure(body.refusal);
        const id = newReference('sub');
        const external = body.value.external_ref;
        return runCommand(services, context, 'subject', id, 'create', {
          id, subject_type: body.value.subject_type, external_ref_sealed: external === undefined ? null : seal(services.sealingKey, external),
        });
      },
    },
    {
      operation: 'identifiers.create', method: 'POST', path: '/identifiers', auth: 'member', idempotent: true,
      handler: (context) => {
        const body = validBody(context, validateCreateIdentifier);
        if (!body.ok) return failure(body.refusal);
        const { subject_id, identifier_type, identifier } = body.value;
        const normalised = normaliseIdentifier(identifier_type, identifier);
        if (!normalised.ok) return failure(normalised.refusal);
        return subject(context, subject_id, 'add-identifier', {
          id: newReference('idn'), identifier_type, hash: hashOf(identifier_type, normalised.value),
          verification_method: body.value.verification_method ?? null,
          discoverability: body.value.discoverability ?? DEFAULT_DISCOVERABILITY[identifier_type],
        });
      },
    },
    {
      operation: 'subjects.withdraw', method: 'POST', path: '/subjects/:id/withdraw', auth: 'member',
      handler: (context) => subject(context, context.params.id!, 'withdraw', {}),
    },
    {
      operation: 'subjects.payee_record', method: 'PUT', path: '/subjects/:id/payee-record', auth: 'local',
      handler: (context) => {
        const body = validBody(context, validatePayeeRecord);
        if (!body.ok) return failure(body.refusal);
        return subject(context, context.params.id!, 'set-payee-record', {
          name_sealed: seal(services.sealingKey, body.value.registered_name), payee_check: body.value.payee_check,
        });
      },
    },
    {
      operation: 'attestations.create', method: 'POST', path: '/attestations', auth: 'local', idempotent: true,
      handler: (context) => {
        const body = validBody(context, validateCreateAttestation);
        if (!body.ok) return failure(body.refusal);
        const { subject_id, ...rest } = body.value;
        return subject(context, subject_id, 'add-attestation', { ...rest, reference: newReference('att') });
      },
    },
    {
      operation: 'attestations.get', method: 'GET', path: '/attestations/:reference', auth: 'member',
      handler: owned('att', 'attestation', 'read-attestation', (context) => ({ reference: context.params.reference })),
    },
    {
      operation: 'attestations.revoke', method: 'POST', path: '/attestations/:reference/revoke', auth: 'local',
      handler: owned('att', 'attestation', 'revoke-attestation', (context) => ({ reference: context.params.reference })),
    },
    {
      operation: 'subjects.attestations', method: 'GET', path: '/subjects/:id/attestations', auth: 'local',
      handler: (context) => subject(context, context.params.id!, 'list-attestations', {}),
    },
    {
      operation: 'ownership_bindings.create', method: 'POST', path: '/ownership-bindings', auth: 'local', idempotent: true,
      handler: (context) => {
        const body = validBody(context, validateCreateBinding);
        if (!body.ok) return failure(body.refusal);
        const { subject_id, target, ...rest } = body.value;
        // The target is hashed like an identifier when it is one, and then forgotten.
        let hash: string;
        if ((IDENTIFIER_TYPES as readonly string[]).includes(rest.target_kind)) {
          const normalised = normaliseIdentifier(rest.target_kind as IdentifierType, target, 'target');
          if (!normalised.ok) return failure(normalised.refusal);
          hash = hashOf(rest.target_kind as IdentifierType, normalised.value);
        } else {
          hash = identifierHash(services.pepper, rest.target_kind as IdentifierType, target.trim());
        }
        return subject(context, subject_id, 'add-binding', { ...rest, expires_at: rest.expires_at ?? null, target_hash: hash, reference: newReference('obd') });
      },
    },
    {
      operation: 'ownership_bindings.get', method: 'GET', path: '/ownership-bindings/:reference', auth: 'member',
      handler: owned('obd', 'ownership binding', 'read-binding', (context) => ({ reference: context.params.reference })),
    },
    {
      operation: 'addresses.create', method: 'POST', path: '/addresses', auth: 'member', idempotent: true,
      handler: (context) => {
        const body = validBody(context, validateCreateAddress);
        if (!body.ok) return failure(body.refusal);
        const { subject_id, profile } = body.value;
        return subject(context, subject_id, 'create-address', {
          ...addressInput(), profile, discoverability: body.value.discoverability ?? (profile === 'directory' ? 'network' : 'private'),
          is_primary: body.value.is_primary ?? false,
        });
      },
    },
    {
      operation: 'addresses.list', method: 'GET', path: '/addresses', auth: 'member',
      handler: (context) => {
        const subjectId = queryParams(context).get('subject_id');
        if (subjectId === null) return failure(invalid('subject_id', 'query parameter subject_id is required'));
        return subject(context, subjectId, 'list-addresses', {});
      },
    },
    {
      operation: 'addresses.rotate', method: 'POST', path: '/addresses/:id/rotate', auth: 'member', idempotent: true,
      handler: owned('adr', 'address', 'rotate-address', (context) => ({ address_id: context.params.id, replacement: addressInput() })),
    },
    {
      operation: 'addresses.revoke', method: 'POST', path: '/addresses/:id/revoke', auth: 'member',
      handler: owned('adr', 'address', 'revoke-address', (context) => ({ address_id: context.params.id })),
    },
    {
      operation: 'addresses.standing_intent', method: 'PUT', path: '/addresses/:id/standing-intent', auth: 'member',
      handler: owned('adr', 'address', 'set-intent', (context) => {
        const body = validBody(context, validateStandingIntent);
        return body.ok ? { address_id: context.params.id, ...body.value } : failure(body.refusal);
      }),
    },
    {
      operation: 'targets.create', method: 'POST', path: '/addresses/:id/targets', auth: 'local', idempotent: true,
      handler: owned('adr', 'address', 'add-target', (context) => {
        const body = validBody(context, validateCreateTarget);
        if (!body.ok) return failure(body.refusal);
        const { account_ref, ...t } = body.value;
        return {
          address_id: context.params.id,
          target: {
            id: newReference('tgt'), rail: t.rail, asset_type: t.asset_type, asset_code: t.asset_code, account_kind: t.account_kind,
            account_ref_sealed: seal(services.sealingKey, account_ref), is_default: t.is_default ?? false,
            beneficiary_format: t.beneficiary_format ?? null, beneficiary: t.beneficiary ?? null,
          },
        };
      }),
    },
    {
      operation: 'targets.list', method: 'GET', path: '/addresses/:id/targets', auth: 'member',
      handler: owned('adr', 'address', 'list-targets', (context) => ({ address_id: context.params.id })),
    },
    {
      operation: 'targets.revoke', method: 'POST', path: '/addresses/:id/targets/:target_id/revoke', auth: 'member',
      handler: owned('adr', 'address', 'revoke-target', (context) => ({ address_id: context.params.id, target_id: context.params.target_id })),
    },
    { operation: 'commitments.get', method: 'GET', path: '/commitments/:key', auth: 'public', handler: publicView(commitmentViewKey) },
    { operation: 'resolver.get', method: 'GET', path: '/resolver/:key', auth: 'public', handler: publicView(resolverViewKey) },
  ];
}
