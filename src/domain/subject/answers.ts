// What the subject aggregate answers (SPEC B, C, F), as schemas for the OpenAPI document (P19):
// field for field what its handlers in this folder return. Clear identifiers, names and account
// references never appear in an answer (P8): only ids, hashes and masked names.
import { Type } from '@sinclair/typebox';
import { Member, Nullable, OneOf, Signed } from '../../protocol/responses.js';
import { IDENTIFIER_TYPES } from '../../protocol/identifiers.js';
import { PathAddress, Reference, Rfc3339 } from '../../protocol/schemas.js';
import { ACCOUNT_KINDS, CLAIMS, DISCOVERABILITY } from './schema.js';

const SubjectId = Reference('sub', 'a subject id');
const AddressId = Reference('adr', 'an address id');
const Discoverability = OneOf(DISCOVERABILITY);
const Profile = OneOf(['directory', 'relationship'] as const);

export const SubjectCreated = Type.Object({
  id: SubjectId,
  subject_type: OneOf(['natural_person', 'legal_entity'] as const),
  created_at: Rfc3339,
});

export const IdentifierCreated = Type.Object({
  id: Reference('idn', 'an identifier id'),
  identifier_type: OneOf(IDENTIFIER_TYPES),
  discoverability: Discoverability,
  verified_at: Nullable(Rfc3339),
});

export const SubjectWithdrawn = Type.Object({
  subject_id: SubjectId,
  withdrawn: Type.Literal(true),
  entries: Type.Integer({ minimum: 0 }),
});

export const PayeeRecordSet = Type.Object({
  subject_id: SubjectId,
  payee_check: OneOf(['enabled', 'disabled'] as const),
  updated_at: Rfc3339,
});

const AttestationReference = Reference('att', 'an attestation reference');
const AttestationFields = {
  reference: AttestationReference,
  claim: OneOf(CLAIMS),
  value: Type.String(),
  expires_at: Rfc3339,
  created_at: Rfc3339,
};

export const AttestationCreated = Type.Object({ ...AttestationFields, subject_id: SubjectId });

export const AttestationObject = Signed(
  {
    type: Type.Literal('path.attestation'),
    issuer: Member,
    subject_id: SubjectId,
    ...AttestationFields,
  },
  'an attestation, signed at read (SPEC B)',
);

export const AttestationList = Type.Object({
  subject_id: SubjectId,
  attestations: Type.Array(
    Type.Object({
      ...AttestationFields,
      status: OneOf(['active', 'revoked', 'expired'] as const),
      revoked_at: Nullable(Rfc3339),
    }),
  ),
});

/** Revoking an attestation; a second revoke answers the first one's time. */
export const RecordRevoked = Type.Object({
  reference: AttestationReference,
  revoked: Type.Literal(true),
  revoked_at: Rfc3339,
});

const BindingFields = {
  reference: Reference('obd', 'an ownership binding reference'),
  subject_id: SubjectId,
  binding_type: Type.String(),
  target_kind: Type.String(),
  proof_method: Type.String(),
  expires_at: Nullable(Rfc3339),
  created_at: Rfc3339,
};

export const BindingCreated = Type.Object(BindingFields);

export const BindingObject = Signed(
  { type: Type.Literal('path.ownership_binding'), issuer: Member, ...BindingFields },
  'an ownership binding, signed at read (SPEC B)',
);

const AddressEntry = Type.Object({
  id: AddressId,
  address: PathAddress,
  profile: Profile,
  discoverability: Discoverability,
  is_primary: Type.Boolean(),
  created_at: Rfc3339,
});

export const AddressCreated = AddressEntry;

export const AddressList = Type.Object({ addresses: Type.Array(AddressEntry) });

export const AddressRotated = Type.Object({
  id: AddressId,
  address: PathAddress,
  rotated_from: AddressId,
  profile: Profile,
  discoverability: Discoverability,
});

export const AddressRevoked = Type.Object({ id: AddressId, revoked: Type.Literal(true) });

export const IntentSet = Type.Object({
  version: Type.Integer({ minimum: 1 }),
  active: Type.Literal(true),
});

/** A target as its owner reads it: never the account reference (sealed, P8). */
export const TargetEntry = Type.Object({
  id: Reference('tgt', 'a target id'),
  rail: Type.String(),
  asset_type: Type.String(),
  asset_code: Type.String(),
  account_kind: OneOf(ACCOUNT_KINDS),
  is_default: Type.Boolean(),
  beneficiary_format: Type.Optional(Type.String()),
  beneficiary: Type.Optional(Type.String()),
  created_at: Rfc3339,
});

export const TargetList = Type.Object({ address_id: AddressId, targets: Type.Array(TargetEntry) });

export const TargetRevoked = Type.Object({
  id: Reference('tgt', 'a target id'),
  revoked: Type.Literal(true),
  revoked_at: Rfc3339,
});

/** The payee check's answer (SPEC F): the outcome, and a masked name where one is shown. */
export const PayeeCheckAnswer = Signed(
  {
    kind: Type.Literal('payee_check'),
    key: PathAddress,
    requester: Nullable(Type.String()),
    mode: OneOf(['verify', 'display'] as const),
    result: Type.String(),
    display_name: Type.Optional(Type.String()),
    subject_type: OneOf(['natural_person', 'legal_entity'] as const),
    nonce: Type.String(),
  },
  'a payee check answer, signed (SPEC F)',
);
