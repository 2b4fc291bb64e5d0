// Wire schemas of SPEC B, C and E (subjects, identifiers, payee records, attestations,
// ownership bindings, addresses, targets, standing intents), and the subject aggregate's
// commands. A command carries hashes and sealed values only (P8): the route normalises, hashes
// and seals the clear values of the wire before it builds one.
import { Type, type Static } from '@sinclair/typebox';
import { IDENTIFIER_TYPES } from '../../protocol/identifiers.js';
import { OneOf } from '../../protocol/responses.js';
import { Capability, PathAddress, Reference, Rfc3339, Text } from '../../protocol/schemas.js';

export const DISCOVERABILITY = ['public', 'network', 'private'] as const;
export type Discoverability = (typeof DISCOVERABILITY)[number];

export const VERIFICATION_METHODS: Record<(typeof IDENTIFIER_TYPES)[number], readonly string[]> = {
  phone: ['otp_sms', 'otp_voice'],
  email: ['link_click'],
  bank_account: ['micro_deposit', 'payee_name_check'],
  lei: ['registry_lookup', 'document_review'],
  reg: ['registry_lookup', 'document_review'],
  tax: ['registry_lookup', 'document_review'],
};

/** SPEC B: the discoverability of an identifier given without one. */
export const DEFAULT_DISCOVERABILITY: Record<(typeof IDENTIFIER_TYPES)[number], Discoverability> = {
  phone: 'network',
  email: 'network',
  bank_account: 'private',
  lei: 'public',
  reg: 'public',
  tax: 'public',
};

export const CLAIMS = [
  'kyc_level',
  'kyb_level',
  'aml',
  'sanctions',
  'pep',
  'risk_tier',
  'identity_level',
] as const;
/**
 * Rails with a live beneficiary format; any other rail name is reserved (SPEC: no format, no
 * instruction).
 */
export const LIVE_RAILS = ['book', 'blockchain', 'mobile_money'] as const;
export const ACCOUNT_KINDS = [
  'own_ledger',
  'virtual_account',
  'external_account',
  'wallet',
] as const;

const reference = (prefix: string) => Reference(prefix, `a ${prefix}_ reference`);
const SubjectId = Reference('sub', 'a subject id');
const AddressId = Reference('adr', 'an address id');
/** An identifier hash (P8) or another keyed digest: lowercase hex of an HMAC-SHA-256. */
const Hash = Type.String({ pattern: '^[0-9a-f]{64}$' });
/** A value sealed by the front end (sealing.ts). */
const Sealed = Type.String({ minLength: 1 });
const Address = PathAddress;
const SubjectType = OneOf(['natural_person', 'legal_entity'] as const);
const PayeeCheckSetting = OneOf(['enabled', 'disabled'] as const);
const Profile = OneOf(['directory', 'relationship'] as const);

export const CreateSubject = Type.Object({
  subject_type: SubjectType,
  external_ref: Type.Optional(Text({ maxLength: 256 })),
});

export const CreateIdentifier = Type.Object({
  subject_id: SubjectId,
  identifier_type: OneOf(IDENTIFIER_TYPES),
  identifier: Type.String({ minLength: 1, maxLength: 320 }),
  verification_method: Type.Optional(Type.String({ maxLength: 64 })),
  discoverability: Type.Optional(OneOf(DISCOVERABILITY)),
});
export type CreateIdentifierInput = Static<typeof CreateIdentifier>;

export const PayeeRecord = Type.Object({
  registered_name: Text({ maxLength: 512 }),
  payee_check: PayeeCheckSetting,
});

export const CreateAttestation = Type.Object({
  subject_id: SubjectId,
  claim: OneOf(CLAIMS),
  value: Text({ maxLength: 256 }),
  expires_at: Rfc3339,
});

export const CreateBinding = Type.Object({
  subject_id: SubjectId,
  binding_type: Text({ maxLength: 64 }),
  target_kind: Text({ maxLength: 64 }),
  target: Type.String({ minLength: 1, maxLength: 320 }),
  proof_method: Text({ maxLength: 64 }),
  expires_at: Type.Optional(Rfc3339),
});

export const CreateAddress = Type.Object({
  subject_id: SubjectId,
  profile: Profile,
  discoverability: Type.Optional(OneOf(DISCOVERABILITY)),
  is_primary: Type.Optional(Type.Boolean()),
});

export const StandingIntent = Type.Object({
  accepts: Type.Array(Capability, { minItems: 1, maxItems: 64 }),
  policy: Type.Optional(
    Type.Object({
      unknown_sender: Type.Optional(Type.String({ maxLength: 64 })),
    }),
  ),
  limits: Type.Optional(Type.Object({})),
});
export type StandingIntentInput = Static<typeof StandingIntent>;

export const CreateTarget = Type.Object({
  rail: Text({ maxLength: 64 }),
  asset_type: Text({ maxLength: 64 }),
  asset_code: Text({ maxLength: 64 }),
  account_kind: OneOf(ACCOUNT_KINDS),
  account_ref: Type.String({ minLength: 1, maxLength: 256 }),
  is_default: Type.Optional(Type.Boolean()),
  beneficiary_format: Type.Optional(Type.Literal('chain_address')),
  beneficiary: Type.Optional(Text({ maxLength: 256 })),
});

/** SPEC F: `POST /payee-check`. */
export const PayeeCheck = Type.Object({
  key: Address,
  mode: OneOf(['verify', 'display'] as const),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  context: Type.Optional(
    Type.Object({
      request: Type.Optional(Reference('req', 'a request reference')),
      instruction: Type.Optional(Reference('ins', 'an instruction reference')),
    }),
  ),
  nonce: Type.String({ minLength: 1, maxLength: 128 }),
});

/** A fresh address as the front end makes it: id, opaque form, the hash of that (P8, P9). */
const NewAddress = { id: AddressId, address: Address, hash: Hash };
const Empty = Type.Object({});
const OnAddress = Type.Object({ address_id: AddressId });

/** A payment context of the payee check (SPEC F): one request or one instruction. */
export const PaymentContext = Type.Union([
  Type.Object({ request: Reference('req', 'a request reference') }),
  Type.Object({ instruction: Reference('ins', 'an instruction reference') }),
]);
export type PaymentContextInput = Static<typeof PaymentContext>;

/**
 * What a payee check asks: `display` the masked name, or `verify` a proposed name, which
 * arrives sealed, with `name_key`, a keyed digest of its words that counts distinct names
 * without keeping them.
 */
const PayeeCheckMode = Type.Union([
  Type.Object({ mode: Type.Literal('verify'), name_sealed: Sealed, name_key: Hash }),
  Type.Object({ mode: Type.Literal('display') }),
]);

/**
 * The subject aggregate's commands and their inputs. Optional fields are the caller's choices:
 * the decider applies the defaults (SPEC B and C), not the route.
 */
export const subjectCommands = {
  /** A new subject under a fresh id; the caller's member owns it. */
  create: Type.Object({
    id: SubjectId,
    subject_type: SubjectType,
    external_ref_sealed: Type.Union([Sealed, Type.Null()]),
  }),
  'add-identifier': Type.Object({
    id: reference('idn'),
    identifier_type: OneOf(IDENTIFIER_TYPES),
    hash: Hash,
    verification_method: Type.Optional(Type.String({ maxLength: 64 })),
    discoverability: Type.Optional(OneOf(DISCOVERABILITY)),
  }),
  /** Every identifier and address private, out of the directory index (SPEC B). */
  withdraw: Empty,
  'set-payee-record': Type.Object({ name_sealed: Sealed, payee_check: PayeeCheckSetting }),
  'add-attestation': Type.Composite([
    Type.Omit(CreateAttestation, ['subject_id']),
    Type.Object({ reference: reference('att') }),
  ]),
  'read-attestation': Type.Object({ reference: reference('att') }),
  'revoke-attestation': Type.Object({ reference: reference('att') }),
  'list-attestations': Empty,
  /** The target arrives hashed like an identifier; the clear target is forgotten. */
  'add-binding': Type.Composite([
    Type.Omit(CreateBinding, ['subject_id', 'target']),
    Type.Object({ reference: reference('obd'), target_hash: Hash }),
  ]),
  'read-binding': Type.Object({ reference: reference('obd') }),
  'create-address': Type.Composite([
    Type.Omit(CreateAddress, ['subject_id']),
    Type.Object(NewAddress),
  ]),
  'list-addresses': Empty,
  /** The old address revoked, `replacement` issued with its terms (SPEC C). */
  'rotate-address': Type.Object({ address_id: AddressId, replacement: Type.Object(NewAddress) }),
  'revoke-address': OnAddress,
  'set-intent': Type.Intersect([OnAddress, StandingIntent]),
  'add-target': Type.Object({
    address_id: AddressId,
    target: Type.Composite([
      Type.Omit(CreateTarget, ['account_ref']),
      Type.Object({ id: reference('tgt'), account_ref_sealed: Sealed }),
    ]),
  }),
  'list-targets': OnAddress,
  /** `target_id` is as the path gave it: an unknown one is not found. */
  'revoke-target': Type.Object({ address_id: AddressId, target_id: Type.String() }),
  /** Does the caller see this subject? (Other aggregates' routes ask before they name one.) */
  exists: Empty,
  /** The payee check of one address (SPEC F), by a member or in a payment context. */
  'payee-check': Type.Intersect([
    Type.Object({
      address_id: AddressId,
      nonce: PayeeCheck.properties.nonce,
      context: Type.Union([PaymentContext, Type.Null()]),
    }),
    PayeeCheckMode,
  ]),
};
