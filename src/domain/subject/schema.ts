// Wire schemas of SPEC B, C and E (subjects, identifiers, payee records, attestations,
// ownership bindings, addresses, targets, standing intents).
import { Type, type Static } from '@sinclair/typebox';
import { IDENTIFIER_TYPES } from '../../protocol/identifiers.js';
import { Capability, Reference, Rfc3339, Text, validator } from '../../protocol/schemas.js';

const literals = <T extends string>(values: readonly T[]) => Type.Union(values.map((v) => Type.Literal(v)));

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

export const DEFAULT_DISCOVERABILITY: Record<(typeof IDENTIFIER_TYPES)[number], Discoverability> = {
  phone: 'network', email: 'network', bank_account: 'private', lei: 'public', reg: 'public', tax: 'public',
};

export const CLAIMS = ['kyc_level', 'kyb_level', 'aml', 'sanctions', 'pep', 'risk_tier', 'identity_level'] as const;
/** Rails with a live beneficiary format; any other rail name is reserved (SPEC: no format, no instruction). */
export const LIVE_RAILS = ['book', 'blockchain', 'mobile_money'] as const;
export const ACCOUNT_KINDS = ['own_ledger', 'virtual_account', 'external_account', 'wallet'] as const;

const SubjectId = Reference('sub', 'a subject id');

export const CreateSubject = Type.Object({
  subject_type: literals(['natural_person', 'legal_entity'] as const),
  external_ref: Type.Optional(Text({ maxLength: 256 })),
});

export const CreateIdentifier = Type.Object({
  subject_id: SubjectId,
  identifier_type: literals(IDENTIFIER_TYPES),
  identifier: Type.String({ minLength: 1, maxLength: 320 }),
  verification_method: Type.Optional(Type.String({ maxLength: 64 })),
  discoverability: Type.Optional(literals(DISCOVERABILITY)),
});
export type CreateIdentifierInput = Static<typeof CreateIdentifier>;

export const PayeeRecord = Type.Object({
  registered_name: Text({ maxLength: 512 }),
  payee_check: literals(['enabled', 'disabled'] as const),
});

export const CreateAttestation = Type.Object({
  subject_id: SubjectId,
  claim: literals(CLAIMS),
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
  profile: literals(['directory', 'relationship'] as const),
  discoverability: Type.Optional(literals(DISCOVERABILITY)),
  is_primary: Type.Optional(Type.Boolean()),
});

export const StandingIntent = Type.Object({
  accepts: Type.Array(Capability, { minItems: 1, maxItems: 64 }),
  policy: Type.Optional(Type.Object({ unknown_sender: Type.Optional(Type.String({ maxLength: 64 })) })),
  limits: Type.Optional(Type.Object({})),
});
export type StandingIntentInput = Static<typeof StandingIntent>;

export const CreateTarget = Type.Object({
  rail: Text({ maxLength: 64 }),
  asset_type: Text({ maxLength: 64 }),
  asset_code: Text({ maxLength: 64 }),
  account_kind: literals(ACCOUNT_KINDS),
  account_ref: Type.String({ minLength: 1, maxLength: 256 }),
  is_default: Type.Optional(Type.Boolean()),
  beneficiary_format: Type.Optional(Type.Literal('chain_address')),
  beneficiary: Type.Optional(Text({ maxLength: 256 })),
});

export const validateCreateSubject = validator(CreateSubject);
export const validateCreateIdentifier = validator(CreateIdentifier);
export const validatePayeeRecord = validator(PayeeRecord);
export const validateCreateAttestation = validator(CreateAttestation);
export const validateCreateBinding = validator(CreateBinding);
export const validateCreateAddress = validator(CreateAddress);
export const validateStandingIntent = validator(StandingIntent);
export const validateCreateTarget = validator(CreateTarget);
