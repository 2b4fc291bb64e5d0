// The shapes the client reads and returns (P4, P18, SPEC E, P11). Objects from the node may carry
// more members than listed here; every member is covered by its signature all the same (P2).

/** Why a signed object does not verify (the node's reasons, plus `kid_unknown`). */
export type VerifyFailure =
  | 'not_an_object'
  | 'signature_missing'
  | 'signature_malformed'
  | 'kid_unknown'
  | 'public_key_malformed'
  | 'public_key_weak'
  | 'signature_non_canonical'
  | 'signature_invalid';

export type VerifyResult = { valid: true } | { valid: false; reason: VerifyFailure };

/** One published signing key (P4). */
export interface KeyEntry {
  kid: string;
  alg: 'Ed25519' | (string & {});
  /** The raw 32-byte public key, lowercase hex (P1). */
  public_key: string;
  kty?: string;
  crv?: string;
  x?: string;
  status: 'active' | 'retired' | (string & {});
  created_at?: string;
  retired_at?: string | null;
}

/** `GET /.well-known/path-keys` (P4). */
export interface KeysDocument {
  member: string;
  keys: KeyEntry[];
}

export interface Endpoint {
  method: string;
  /** Absolute URL; `{name}` placeholders are filled from `params`. */
  url: string;
}

/** `GET /.well-known/path-configuration` (P4). */
export interface ConfigurationDocument {
  member: string;
  base_url: string;
  protocol_version: string;
  grammar: number;
  api_versions: string[];
  keys_url: string;
  endpoints: Record<string, Endpoint>;
  profiles: string[];
  lookup_journal_retention_days: number;
  external_url: string | null;
  pepper_version: string;
  [member: string]: unknown;
}

/** A member credential (P5): its key id and the 32-byte Ed25519 seed in hex. */
export interface PathCredential {
  keyId: string;
  privateKeyHex: string;
}

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface PathClientOptions {
  /** The operator's node, e.g. `https://pay.example.com`; discovery is at its root (P4). */
  baseUrl: string;
  /** Signs every call (P5) when given. */
  credential?: PathCredential;
  /** A fetch to use instead of the global one. */
  fetch?: FetchLike;
}

export type QueryValue = string | number | boolean | undefined;

export interface CallOptions {
  /** Values for the `{name}` placeholders of the operation's URL (URL-encoded here). */
  params?: Record<string, string | number>;
  query?: Record<string, QueryValue>;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as `Path-Idempotency-Key` (P7). */
  idempotencyKey?: string;
}

export interface CallResult<T = any> {
  status: number;
  headers: Headers;
  /** The parsed JSON body; null when the answer has none. */
  body: T;
}

/** A capability (SPEC shared types): rail and asset, and members such as `chain` for tokens. */
export interface Capability {
  rail: string;
  asset_type: string;
  asset_code: string;
  [member: string]: unknown;
}

/** The envelope members of grammar 2 (P2). */
export interface Envelope {
  grammar: number;
  protocol_version: string;
  signed_at: string;
  kid: string;
  signature: string;
}

/** `GET /resolver/{key}` (SPEC E). */
export interface ResolverAnswer extends Envelope {
  kind: 'resolver_answer';
  address: string;
  requester: null;
  standing: 'holder' | 'gateway';
  valid: boolean;
  accepts: Capability[];
  limits: Record<string, unknown>;
  commitment: string | null;
  commitment_version: number | null;
  [member: string]: unknown;
}

/** `GET /commitments/{key}` (SPEC E). */
export interface CommitmentObject {
  type: 'path.address.commitment';
  address: string;
  issuer: string;
  commitment: string;
  version: number;
  committed_at: string;
  kid: string;
  signature: string;
  [member: string]: unknown;
}

/** What `resolve` returns: both statements, verified and agreeing (null: no standing intent). */
export interface Resolution {
  answer: ResolverAnswer;
  commitment: CommitmentObject | null;
}

/** A webhook's body (P11). */
export interface PathEvent extends Envelope {
  type: 'path.event';
  id: string;
  event: string;
  created_at: string;
  data: Record<string, any>;
  [member: string]: unknown;
}

/** Headers as a fetch `Headers` or a plain record (Node's IncomingHttpHeaders included). */
export type WebhookHeaders = Headers | Record<string, string | readonly string[] | undefined>;

/**
 * What verifies a delivery: the operator's keys document (`v1a`), or the webhook secret
 * (`whsec_...`, `v1`), or several secrets while one is being rotated.
 */
export type WebhookVerifier =
  | { keys: KeysDocument; secret?: string | readonly string[] }
  | { secret: string | readonly string[]; keys?: KeysDocument };
