// Routes of SPEC B (subjects, identifiers, payee records, attestations, ownership bindings),
// C (addresses, targets, standing intents) and E (resolver, commitments), as a table: each entry
// parses the body, finds the subject (a fresh id, the body's or the path's subject id, or the
// route index for an address, attestation or binding id) and builds one subject command. Clear
// identifiers are normalised and hashed here and go no further; names and account references
// are sealed here. Every rule (who may, defaults, states) is the subject decider's.
import type { TSchema } from '@sinclair/typebox';
import * as answers from './answers.js';
import type { SubjectCommands } from './decision.js';
import { commitmentViewKey, resolverViewKey } from './resolver.js';
import {
  CreateAddress,
  CreateAttestation,
  CreateBinding,
  CreateIdentifier,
  CreateSubject,
  CreateTarget,
  PayeeRecord,
  StandingIntent,
} from './schema.js';
import { SUBJECT_ACCESS, subjectDecider, type SubjectCommandName } from './subject.js';
import {
  IDENTIFIER_TYPES,
  identifierHash,
  normaliseIdentifier,
  type LookupKeyType,
} from '../../protocol/identifiers.js';
import {
  isReferenceShaped,
  newAddress,
  newReference,
  type ReferencePrefix,
} from '../../protocol/ids.js';
import { invalid, type Refusal } from '../../protocol/errors.js';
import { CommitmentObject, ResolverAnswer } from '../../protocol/responses.js';
import { Reference } from '../../protocol/schemas.js';
import { seal } from '../../protocol/sealing.js';
import { failure } from '../../http/reply.js';
import type { Auth, RouteSpec } from '../../http/router.js';
import type { Handler, RequestContext } from '../../http/server.js';
import { REVALIDATE } from '../../http/cache.js';
import {
  after,
  cacheableViewReply,
  notFound,
  ownerOf,
  publicView,
  queryParams,
  type Services,
} from '../../http/services.js';
import { commandRoute, sendCommand, type CommandRoute } from '../../http/routes/table.js';

type Entry<K extends SubjectCommandName, B> = Omit<
  CommandRoute<SubjectCommands, K, B>,
  'decider' | 'auth'
>;

/**
 * The operator's own commands (SUBJECT_ACCESS) are refused to other members before the body is
 * read, in the order these routes always answered; the decider refuses them on any other way in.
 */
const authOf = (command: SubjectCommandName): Auth =>
  SUBJECT_ACCESS[command] === 'local' ? 'local' : 'member';

function subjectRoute<K extends SubjectCommandName, B = Record<string, never>>(
  services: Services,
  entry: Entry<K, B>,
): RouteSpec<Handler> {
  return commandRoute<SubjectCommands, K, B>(services, {
    ...entry,
    decider: subjectDecider,
    auth: authOf(entry.command),
  });
}

/** How the routes find the subject, and make the values a command carries (P8, P9). */
function helpers(services: Services) {
  return {
    /** The subject named by the path's `:id`. */
    subjectInPath: (context: RequestContext) => {
      const id = context.params.id ?? '';
      return isReferenceShaped(id, 'sub') ? id : null;
    },
    /** The subject that holds the path's address, attestation or binding id (the route index). */
    holderOf: (prefix: ReferencePrefix, param: 'id' | 'reference') => (context: RequestContext) => {
      const id = context.params[param] ?? '';
      return isReferenceShaped(id, prefix) ? ownerOf(services, id) : null;
    },
    hash: (type: LookupKeyType, value: string) => identifierHash(services.pepper, type, value),
    seal: (clear: string) => seal(services.sealingKey, clear),
    /** A fresh address: its id, its opaque form and the hash the index keeps of it. */
    freshAddress: () => {
      const address = newAddress();
      const hash = identifierHash(services.pepper, 'address', address);
      return { id: newReference('adr'), address, hash };
    },
  };
}

type Helpers = ReturnType<typeof helpers>;

export function directoryRoutes(services: Services): RouteSpec<Handler>[] {
  const use = helpers(services);
  return [
    ...subjectRoutes(services, use),
    ...subjectRecordRoutes(services, use),
    ...attestationRoutes(services, use),
    ...bindingRoutes(services, use),
    ...addressRoutes(services, use),
    ...targetRoutes(services, use),
    resolverRead(services, {
      operation: 'commitments.get',
      summary: 'Read the commitment of an address',
      description:
        "Answers the signed commitment of an address's standing intent, the same for every " +
        'caller and cacheable, for a payer to compare with the resolver answer (SPEC E).',
      path: '/commitments/:key',
      viewKey: commitmentViewKey,
      object: CommitmentObject,
      cacheable: true,
    }),
    resolverRead(services, {
      operation: 'resolver.get',
      summary: 'Resolve an address',
      description:
        'Answers what an address accepts, from its standing intent with its commitment, or ' +
        'inferred from its receive targets when it has none (commitment null) (SPEC E).',
      path: '/resolver/:key',
      viewKey: resolverViewKey,
      object: ResolverAnswer,
    }),
  ];
}

function subjectRoutes(services: Services, use: Helpers): RouteSpec<Handler>[] {
  const what = 'subject';
  return [
    subjectRoute(services, {
      operation: 'subjects.create',
      summary: 'Create a subject',
      description:
        'Creates a subject, a natural person or a legal entity, with an optional external ' +
        'reference kept sealed, and answers its id (SPEC B).',
      method: 'POST',
      path: '/subjects',
      idempotent: true,
      command: 'create',
      what,
      body: CreateSubject,
      responses: { 201: answers.SubjectCreated },
      key: () => newReference('sub'),
      input: (_context, body, id) => ({
        id,
        subject_type: body.subject_type,
        external_ref_sealed: body.external_ref === undefined ? null : use.seal(body.external_ref),
      }),
    }),
    subjectRoute(services, {
      operation: 'identifiers.create',
      summary: 'Add an identifier to a subject',
      description:
        'Indexes an identifier (a phone, email, account, LEI, registration or tax number) ' +
        'for a subject, hashed and never stored in the clear, and answers its id, type, ' +
        'discoverability and verified_at (SPEC B).',
      method: 'POST',
      path: '/identifiers',
      idempotent: true,
      command: 'add-identifier',
      what,
      body: CreateIdentifier,
      responses: { 201: answers.IdentifierCreated },
      errors: ['path.core.not_found', 'path.auth.forbidden'],
      keyOf: (_context, body) => body.subject_id,
      input: (_context, body) => {
        const { identifier_type, verification_method, discoverability } = body;
        const normalised = normaliseIdentifier(identifier_type, body.identifier);
        if (!normalised.ok) return normalised.refusal;
        const hash = use.hash(identifier_type, normalised.value);
        const id = newReference('idn');
        return { id, identifier_type, hash, verification_method, discoverability };
      },
    }),
  ];
}

/** Withdrawing a subject, and its payee record (SPEC B, F). */
function subjectRecordRoutes(services: Services, use: Helpers): RouteSpec<Handler>[] {
  const what = 'subject';
  return [
    subjectRoute(services, {
      operation: 'subjects.withdraw',
      summary: 'Withdraw a subject from the directory',
      description:
        'Withdraws every identifier and address of a subject from the directory, so lookups ' +
        'no longer find them, and answers how many entries went (SPEC B).',
      method: 'POST',
      path: '/subjects/:id/withdraw',
      command: 'withdraw',
      what,
      responses: { 200: answers.SubjectWithdrawn },
      key: use.subjectInPath,
      input: () => ({}),
    }),
    subjectRoute(services, {
      operation: 'subjects.payee_record',
      summary: 'Set the payee record of a subject',
      description:
        'Sets the registered name (sealed, never echoed) and whether payee checks are ' +
        'answered for the subject, as the operator (SPEC B, SPEC F).',
      method: 'PUT',
      path: '/subjects/:id/payee-record',
      command: 'set-payee-record',
      what,
      body: PayeeRecord,
      responses: { 200: answers.PayeeRecordSet },
      key: use.subjectInPath,
      input: (_context, body) => ({
        name_sealed: use.seal(body.registered_name),
        payee_check: body.payee_check,
      }),
    }),
  ];
}

/** The reference named by the path, as the read and revoke commands of a record take it. */
const pathReference = (context: RequestContext) => ({ reference: context.params.reference! });

function attestationRoutes(services: Services, use: Helpers): RouteSpec<Handler>[] {
  const attestation = use.holderOf('att', 'reference');
  return [
    subjectRoute(services, {
      operation: 'attestations.create',
      summary: 'Attest a claim about a subject',
      description:
        'Records a claim about a subject (a KYC level, a sanctions check and the like) with ' +
        'its value and a mandatory expiry, as the operator, and answers its reference (SPEC B).',
      method: 'POST',
      path: '/attestations',
      idempotent: true,
      command: 'add-attestation',
      what: 'subject',
      body: CreateAttestation,
      responses: { 201: answers.AttestationCreated },
      errors: ['path.core.not_found'],
      keyOf: (_context, body) => body.subject_id,
      input: (_context, { claim, value, expires_at }) => ({
        reference: newReference('att'),
        claim,
        value,
        expires_at,
      }),
    }),
    subjectRoute(services, {
      operation: 'attestations.get',
      summary: 'Check an attestation',
      description:
        'Answers an attestation for a check at the time of execution; a revoked or expired ' +
        'one answers 410 with its code (SPEC B).',
      method: 'GET',
      path: '/attestations/:reference',
      command: 'read-attestation',
      what: 'attestation',
      responses: { 200: answers.AttestationObject },
      errors: ['path.id.attestation_revoked', 'path.id.attestation_expired'],
      key: attestation,
      input: pathReference,
    }),
    subjectRoute(services, {
      operation: 'attestations.revoke',
      summary: 'Revoke an attestation',
      description:
        'Revokes an attestation as the operator: the record is kept and its next read answers ' +
        '410 path.id.attestation_revoked (SPEC B).',
      method: 'POST',
      path: '/attestations/:reference/revoke',
      command: 'revoke-attestation',
      what: 'attestation',
      responses: { 200: answers.RecordRevoked },
      key: attestation,
      input: pathReference,
    }),
    subjectRoute(services, {
      operation: 'subjects.attestations',
      summary: 'List the attestations of a subject',
      description:
        'Answers the claims attested about a subject, with their status, to the operator ' +
        '(SPEC B).',
      method: 'GET',
      path: '/subjects/:id/attestations',
      command: 'list-attestations',
      what: 'subject',
      responses: { 200: answers.AttestationList },
      key: use.subjectInPath,
      input: () => ({}),
    }),
  ];
}

function bindingRoutes(services: Services, use: Helpers): RouteSpec<Handler>[] {
  const binding = use.holderOf('obd', 'reference');
  return [
    subjectRoute(services, {
      operation: 'ownership_bindings.create',
      summary: 'Bind a subject to what it owns',
      description:
        'Records, as the operator, that a subject owns a target (an account, a key) and how ' +
        'that was proved; the target is hashed, never kept. Answers the reference (SPEC B).',
      method: 'POST',
      path: '/ownership-bindings',
      idempotent: true,
      command: 'add-binding',
      what: 'subject',
      body: CreateBinding,
      responses: { 201: answers.BindingCreated },
      errors: ['path.core.not_found'],
      keyOf: (_context, body) => body.subject_id,
      input: (_context, body) => {
        const { binding_type, target_kind, proof_method, expires_at } = body;
        const hash = bindingTargetHash(use, target_kind, body.target);
        if (typeof hash !== 'string') return hash;
        const reference = newReference('obd');
        const target_hash = hash;
        return { reference, binding_type, target_kind, proof_method, expires_at, target_hash };
      },
    }),
    subjectRoute(services, {
      operation: 'ownership_bindings.get',
      summary: 'Check an ownership binding',
      description:
        'Answers an ownership binding for a check at the time of execution, with the same ' +
        '410 rules as an attestation (SPEC B).',
      method: 'GET',
      path: '/ownership-bindings/:reference',
      command: 'read-binding',
      what: 'ownership binding',
      responses: { 200: answers.BindingObject },
      errors: ['path.id.attestation_revoked', 'path.id.attestation_expired'],
      key: binding,
      input: pathReference,
    }),
  ];
}

/** A binding's target is hashed like an identifier when it is one (P8), and then forgotten. */
function bindingTargetHash(use: Helpers, kind: string, target: string): string | Refusal {
  if (!(IDENTIFIER_TYPES as readonly string[]).includes(kind)) {
    return use.hash(kind as LookupKeyType, target.trim());
  }
  const normalised = normaliseIdentifier(kind as LookupKeyType, target, 'target');
  return normalised.ok ? use.hash(kind as LookupKeyType, normalised.value) : normalised.refusal;
}

function addressRoutes(services: Services, use: Helpers): RouteSpec<Handler>[] {
  const address = use.holderOf('adr', 'id');
  const addressId = (context: RequestContext) => ({ address_id: context.params.id! });
  return [
    subjectRoute(services, {
      operation: 'addresses.create',
      summary: 'Create an address for a subject',
      description:
        'Issues an opaque Path address (path:...) for a subject, with its profile and ' +
        'discoverability, and answers its id and address (SPEC C).',
      method: 'POST',
      path: '/addresses',
      idempotent: true,
      command: 'create-address',
      what: 'subject',
      body: CreateAddress,
      responses: { 201: answers.AddressCreated },
      errors: ['path.core.not_found'],
      keyOf: (_context, body) => body.subject_id,
      input: (_context, { profile, discoverability, is_primary }) => ({
        ...use.freshAddress(),
        profile,
        discoverability,
        is_primary,
      }),
    }),
    addressList(services),
    subjectRoute(services, {
      operation: 'addresses.rotate',
      summary: 'Rotate an address',
      description:
        'Issues a new opaque address in place of an address, which stops resolving, and ' +
        'answers the new address and the id it replaces (SPEC C).',
      method: 'POST',
      path: '/addresses/:id/rotate',
      idempotent: true,
      command: 'rotate-address',
      what: 'address',
      responses: { 201: answers.AddressRotated },
      errors: ['path.address.revoked'],
      key: address,
      input: (context) => ({ ...addressId(context), replacement: use.freshAddress() }),
    }),
    subjectRoute(services, {
      operation: 'addresses.revoke',
      summary: 'Revoke an address',
      description:
        'Revokes an address: it drops from lists and its resolver and commitment reads ' +
        'answer 410 path.address.revoked (SPEC C, SPEC E).',
      method: 'POST',
      path: '/addresses/:id/revoke',
      command: 'revoke-address',
      what: 'address',
      responses: { 200: answers.AddressRevoked },
      key: address,
      input: addressId,
    }),
    intentRoute(services, use),
  ];
}

/** What an address accepts: its standing intent, the source of its commitment (SPEC C, E). */
function intentRoute(services: Services, use: Helpers): RouteSpec<Handler> {
  return subjectRoute(services, {
    operation: 'addresses.standing_intent',
    summary: 'Set the standing intent of an address',
    description:
      'Sets what an address accepts (an array of capabilities) and its policy, a new ' +
      'version of its signed commitment, and answers the version (SPEC C, SPEC E).',
    method: 'PUT',
    path: '/addresses/:id/standing-intent',
    command: 'set-intent',
    what: 'address',
    body: StandingIntent,
    responses: { 200: answers.IntentSet },
    errors: ['path.address.revoked'],
    key: use.holderOf('adr', 'id'),
    input: (context, { accepts, policy, limits }) => ({
      address_id: context.params.id!,
      accepts,
      policy,
      limits,
    }),
  });
}

/** The subject's live addresses; the subject is named in the query (SPEC C). */
function addressList(services: Services): RouteSpec<Handler> {
  return {
    operation: 'addresses.list',
    summary: 'List the addresses of a subject',
    description:
      'Answers the live addresses of the subject named in the query, with their profile, ' +
      'discoverability and whether each is primary; revoked ones are left out (SPEC C).',
    method: 'GET',
    path: '/addresses',
    auth: authOf('list-addresses'),
    query: {
      subject_id: {
        schema: Reference('sub', 'a subject id'),
        required: true,
        description: 'the subject whose addresses are listed',
      },
    },
    responses: { 200: answers.AddressList },
    errors: ['path.core.not_found'],
    handler: (context) => {
      const subjectId = queryParams(context).get('subject_id');
      if (subjectId === null) {
        return failure(invalid('subject_id', 'query parameter subject_id is required'));
      }
      if (!isReferenceShaped(subjectId, 'sub')) return notFound('subject');
      return sendCommand(services, context, subjectDecider, subjectId, 'list-addresses', {});
    },
  };
}

function targetRoutes(services: Services, use: Helpers): RouteSpec<Handler>[] {
  const address = use.holderOf('adr', 'id');
  return [
    subjectRoute(services, {
      operation: 'targets.create',
      summary: 'Add a receive target to an address',
      description:
        'Adds a rail account an address receives on, as the operator; the account reference ' +
        'is sealed and the answer carries public fields only (SPEC C).',
      method: 'POST',
      path: '/addresses/:id/targets',
      idempotent: true,
      command: 'add-target',
      what: 'address',
      body: CreateTarget,
      responses: { 201: answers.TargetEntry },
      errors: ['path.address.revoked'],
      key: address,
      input: (context, body) => {
        const { rail, asset_type, asset_code, account_kind, is_default } = body;
        const { beneficiary_format, beneficiary } = body;
        return {
          address_id: context.params.id!,
          target: {
            id: newReference('tgt'),
            rail,
            asset_type,
            asset_code,
            account_kind,
            is_default,
            beneficiary_format,
            beneficiary,
            account_ref_sealed: use.seal(body.account_ref),
          },
        };
      },
    }),
    subjectRoute(services, {
      operation: 'targets.list',
      summary: 'List the receive targets of an address',
      description: "Answers the public fields of an address's live receive targets (SPEC C).",
      method: 'GET',
      path: '/addresses/:id/targets',
      command: 'list-targets',
      what: 'address',
      responses: { 200: answers.TargetList },
      errors: ['path.address.revoked'],
      key: address,
      input: (context) => ({ address_id: context.params.id! }),
    }),
    subjectRoute(services, {
      operation: 'targets.revoke',
      summary: 'Retire a receive target',
      description:
        'Retires one receive target of an address, which is then no longer listed or ' +
        'inferred (SPEC C).',
      method: 'POST',
      path: '/addresses/:id/targets/:target_id/revoke',
      command: 'revoke-target',
      what: 'address',
      responses: { 200: answers.TargetRevoked },
      errors: ['path.address.revoked'],
      key: address,
      input: (context) => ({
        address_id: context.params.id!,
        target_id: context.params.target_id!,
      }),
    }),
  ];
}

/** A public read of an address's answer; `:key` is `path:<opaque>`, or percent-encoded. */
function resolverRead(
  services: Services,
  route: {
    operation: string;
    summary: string;
    description: string;
    path: string;
    viewKey: (address: string) => string;
    object: TSchema;
    /** SPEC E: a commitment is "cacheable, identical for every caller" (cache.ts REVALIDATE). */
    cacheable?: boolean;
  },
): RouteSpec<Handler> {
  const { operation, summary, description, path, viewKey } = route;
  const cacheable = route.cacheable === true;
  const read = (key: string) =>
    cacheable ? cacheableViewReply(services, key, REVALIDATE) : publicView(services, key);
  return {
    operation,
    summary,
    description,
    method: 'GET',
    path,
    auth: 'public',
    responses: { 200: route.object },
    errors: ['path.address.revoked'],
    cacheable,
    handler: (context) => {
      let address: string;
      try {
        address = decodeURIComponent(context.params.key!);
      } catch {
        return notFound('address');
      }
      const shaped = /^path:[A-Za-z0-9]{1,64}$/.test(address);
      if (!shaped) return notFound('address');
      return after(read(viewKey(address)), (reply) => reply ?? notFound('address'));
    },
  };
}
