// What the node answers, as schemas (P19): the error envelope, the members every signed object
// carries (P1, P2) and the signed objects more than one route or event serves. Written from what
// the deciders sign, field for field. Unknown members are allowed, as in requests (SPEC
// principle 6): a reader must accept an object that grew a member. The answers of one
// aggregate's commands sit beside its commands, in domain/<aggregate>/schema.ts.
import { Type, type TProperties, type TSchema } from '@sinclair/typebox';
import {
  Amount,
  Capability,
  Fee,
  PathAddress,
  RailReference,
  Reference,
  Rfc3339,
} from './schemas.js';

/** A value or null: the node writes null for an absent fact, never leaves the member out. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** One of a closed set of strings. */
export const OneOf = <T extends string>(values: readonly T[]) =>
  Type.Union(values.map((v) => Type.Literal(v)));

/** A member name as the node writes it (its own, or a caller's). */
export const Member = Type.String({ minLength: 1, description: 'a member name' });

export const SignatureHex = Type.String({
  pattern: '^[0-9a-f]{128}$',
  description: 'an Ed25519 signature: 128 lowercase hex digits (P1)',
});

/** `sha256:` and the hex digest of the canonical bytes (P3). */
export const Digest = Type.String({
  pattern: '^sha256:[0-9a-f]{64}$',
  description: '"sha256:" followed by 64 lowercase hex digits (P3)',
});

/** The members of every signed object of grammar 2 (P1, P2); `signature` covers the others. */
export const EnvelopeFields = {
  grammar: Type.Integer({ minimum: 1 }),
  protocol_version: Type.String({ minLength: 1 }),
  signed_at: Rfc3339,
  kid: Type.String({ minLength: 1, description: "the signing key's id in the keys document" }),
  signature: SignatureHex,
};

/** A signed object: its own members and the envelope's. */
export const Signed = <P extends TProperties>(properties: P, description: string) =>
  Type.Object({ ...properties, ...EnvelopeFields }, { description });

/** The SPEC error envelope (P7). */
export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ pattern: '^[a-z]+(\\.[a-z_]+)+$' }),
      message: Type.String(),
      detail: Type.Optional(Type.Object({})),
    }),
  },
  {
    description:
      'the error envelope (P7); detail.field names a bad field, and for an amount beyond its ' +
      "asset's unit detail.max_fraction_digits gives the fractional digits allowed (P23)",
  },
);

const Payee = Type.Object({ member: Member, address: Nullable(PathAddress) });

export const RequestObject = Signed(
  {
    type: Type.Literal('path.request'),
    reference: Reference('req', 'a request reference'),
    issuer: Member,
    payee: Payee,
    amount: Type.Optional(Amount),
    accepts: Type.Array(Capability, { minItems: 1 }),
    intent_version: Nullable(Type.Integer()),
    order_reference: Nullable(Type.String()),
    status: OneOf(['created', 'paid', 'expired', 'revoked'] as const),
    settled_by: Type.Array(Type.Unknown()),
    expires_at: Nullable(Rfc3339),
  },
  'a payment request, signed (SPEC H)',
);

export const CheckoutObject = Signed(
  {
    type: Type.Literal('path.checkout'),
    reference: Reference('chk', 'a checkout reference'),
    issuer: Member,
    status: OneOf(['open', 'completed', 'expired', 'revoked'] as const),
    request: RequestObject,
    success_url: Type.String(),
    cancel_url: Type.String(),
    attempts: Type.Integer({ minimum: 0 }),
    expires_at: Rfc3339,
    completed_at: Nullable(Rfc3339),
  },
  "a checkout session's payer-facing object, signed (SPEC I, P4)",
);

export const InstructionObject = Signed(
  {
    type: Type.Literal('path.instruction'),
    reference: Reference('ins', 'an instruction reference'),
    issuer: Member,
    payee: Type.Object({ member: Member, address: PathAddress }),
    request: Nullable(Reference('req', 'a request reference')),
    intent_version: Nullable(Type.Integer()),
    via: Capability,
    beneficiary: Type.Object({ format: Type.String(), value: Type.String() }),
    payment_reference: Type.String(),
    amount: Nullable(Amount),
    single_use: Type.Boolean(),
    status: OneOf(['open', 'used', 'expired', 'revoked'] as const),
    expires_at: Rfc3339,
  },
  'a payment instruction, signed (SPEC G)',
);

export const RECEIPT_STATUSES = ['pending', 'settled', 'failed', 'reversed'] as const;

export const ReceiptObject = Signed(
  {
    type: Type.Literal('path.receipt'),
    reference: Reference('rcp', 'a receipt reference'),
    issuer: Member,
    issued_by: OneOf(['payer', 'payee'] as const),
    payer: Type.Object({ member: Nullable(Member) }),
    payee: Type.Object({ member: Nullable(Member) }),
    request: Nullable(Type.String()),
    instruction: Nullable(Type.String()),
    via: Capability,
    sent: Nullable(Amount),
    received: Nullable(Amount),
    fx: Nullable(Type.Object({})),
    fees: Type.Array(Fee),
    rail_references: Type.Array(RailReference),
    attestations: Type.Array(Type.Unknown()),
    status: OneOf(RECEIPT_STATUSES),
    reason_code: Nullable(Type.String()),
    reason: Type.Optional(Type.String()),
    supersedes: Nullable(Digest),
    route: Type.Null(),
  },
  'a settlement receipt, signed (SPEC J); a transition supersedes the envelope before it',
);

/** A receipt's steps, oldest first, each with the envelope it produced (SPEC J). */
export const ReceiptTransitions = Type.Object({
  reference: Reference('rcp', 'a receipt reference'),
  status: OneOf(RECEIPT_STATUSES),
  transitions: Type.Array(
    Type.Object({
      from: Nullable(OneOf(RECEIPT_STATUSES)),
      to: OneOf(RECEIPT_STATUSES),
      reason_code: Nullable(Type.String()),
      occurred_at: Rfc3339,
      envelope: ReceiptObject,
    }),
    { minItems: 1 },
  ),
});

/** What the node says of an address (SPEC E): its standing terms, signed. */
export const ResolverAnswer = Signed(
  {
    kind: Type.Literal('resolver_answer'),
    address: PathAddress,
    requester: Nullable(Member),
    standing: Type.String(),
    valid: Type.Boolean(),
    accepts: Type.Array(Capability),
    limits: Type.Object({}),
    commitment: Nullable(Digest),
    commitment_version: Nullable(Type.Integer({ minimum: 1 })),
  },
  "an address's resolver answer, signed (SPEC E)",
);

/** The commitment over `{grammar, address, accepts, limits}` (P3), signed by its issuer. */
export const CommitmentObject = Type.Object(
  {
    type: Type.Literal('path.address.commitment'),
    address: PathAddress,
    issuer: Member,
    commitment: Digest,
    version: Type.Integer({ minimum: 1 }),
    committed_at: Rfc3339,
    kid: Type.String({ minLength: 1 }),
    signature: SignatureHex,
  },
  { description: "an address's commitment object, signed (SPEC E, P3)" },
);

/** An event (P11), as a webhook delivers it. */
export const EventObject = <T extends TSchema>(name: string, data: T) =>
  Signed(
    {
      type: Type.Literal('path.event'),
      id: Reference('evt', 'an event id'),
      event: Type.Literal(name),
      created_at: Rfc3339,
      data,
      test: Type.Optional(
        Type.Literal(true, {
          description:
            'present on a test event only (`path-node events trigger`): its data is made up',
        }),
      ),
    },
    `the event ${name}, signed (P11)`,
  );

/** The keys document (P4). */
export const KeysDocument = Type.Object({
  member: Member,
  keys: Type.Array(
    Type.Object({
      kid: Type.String({ minLength: 1 }),
      alg: Type.Literal('Ed25519'),
      public_key: Type.String({ pattern: '^[0-9a-f]{64}$' }),
      kty: Type.Literal('OKP'),
      crv: Type.Literal('Ed25519'),
      x: Type.String({ pattern: '^[A-Za-z0-9_-]{43}$' }),
      status: OneOf(['active', 'retired'] as const),
      created_at: Rfc3339,
      retired_at: Nullable(Rfc3339),
    }),
    { minItems: 1 },
  ),
});

/** The discovery document (P4). */
export const ConfigurationDocument = Type.Object({
  member: Member,
  base_url: Type.String(),
  protocol_version: Type.String(),
  grammar: Type.Integer(),
  api_versions: Type.Array(Type.String(), { minItems: 1 }),
  keys_url: Type.String(),
  openapi_url: Type.String(),
  endpoints: Type.Record(
    Type.String(),
    Type.Object({ method: OneOf(['GET', 'POST', 'PUT'] as const), url: Type.String() }),
  ),
  profiles: Type.Array(Type.String()),
  lookup_journal_retention_days: Type.Number(),
  external_url: Nullable(Type.String()),
  pepper_version: Type.String(),
  /** The `v1a` webhook key in the Standard Webhooks form (P11). */
  webhook_public_key: Nullable(Type.String({ pattern: '^whpk_[A-Za-z0-9+/]{43}=$' })),
});
