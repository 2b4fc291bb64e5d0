// The node's own records beside the log: API credentials (public keys only, P5), the signing
// keys (P1, P4) and the network pepper (P8). Kept in the same LMDB environment so that the
// `path-node` command can change them whether or not the node runs; a running node notices
// through a change counter it polls.
import { randomBytes } from 'node:crypto';
import type { Database } from 'lmdb';
import type { LmdbEnvironment } from './log/lmdb-log.js';
import { sha256Hex } from './protocol/digest.js';
import { generateSeedHex, kidOf, publicKeyFault } from './protocol/signing.js';

export interface Credential {
  key_id: string;
  member: string;
  public_key: string;
  local: boolean;
  created_at: string;
  revoked_at: string | null;
}

/** A client of the external discovery interface (SPEC L), with the registries it is granted. */
export interface ExternalClient {
  key_id: string;
  client: string;
  public_key: string;
  registries: string[];
  created_at: string;
  revoked_at: string | null;
}

/** Another member node of the network (issue: a network of nodes). */
export interface NetworkMember {
  member: string;
  base_url: string;
  added_at: string;
  /** The member's published signing keys, as last fetched (P4). */
  keys: { kid: string; public_key: string; status: string }[];
  keys_fetched_at: string | null;
}

export interface StoredSigningKey {
  kid: string;
  seed_hex: string;
  public_key: string;
  status: 'active' | 'retired';
  created_at: string;
  retired_at: string | null;
}

/**
 * A webhook secret (P11): `whsec_` and base64 of 32 random bytes, for the `v1` HMAC signature.
 * A rotated secret keeps signing beside its successor until `retired_at` plus the overlap.
 */
export interface WebhookSecret {
  secret: string;
  created_at: string;
  retired_at: string | null;
}

/**
 * The webhook secrets that still sign at `now` (P11): the active one, and those retired less
 * than `overlapMs` ago.
 */
export function signingSecrets(
  secrets: readonly WebhookSecret[],
  now: number,
  overlapMs: number,
): WebhookSecret[] {
  return secrets.filter((s) => s.retired_at === null || Date.parse(s.retired_at) + overlapMs > now);
}

export interface Pepper {
  version: string;
  hex: string;
}

const CHANGES_KEY = 'changes';
const PEPPER_KEY = 'pepper';
const SEALING_KEY = 'sealing_key';
const PEPPER_BYTES = 32; // tidy: format (P8: a 256-bit pepper)
const WEBHOOK_SECRETS_KEY = 'webhook_secrets';
const WEBHOOK_SECRET_BYTES = 32; // tidy: format (P11: 32 random bytes)

/**
 * Refuses a public key that is not 32 bytes of lowercase hex, or that is a small-order or
 * non-canonical point (P1). Strict verification refuses every signature under such a key, but a
 * credential that can never sign is a mistake or an attack the operator should hear of when
 * adding it, not a stream of 401s later.
 */
function refuseUnusableKey(publicKeyHex: string): void {
  const fault = publicKeyFault(publicKeyHex);
  if (fault === 'malformed') throw new RangeError('public key must be 32 bytes of lowercase hex');
  if (fault === 'weak') {
    throw new RangeError(
      'public key is a small-order or non-canonical Ed25519 point, ' +
        'under which signatures can be forged; it is refused (P1)',
    );
  }
}

export class NodeStore {
  private readonly credentials: Database<Credential, string>;
  private readonly keys: Database<StoredSigningKey, string>;
  private readonly meta: Database<unknown, string>;
  private readonly externalClients: Database<ExternalClient, string>;
  private readonly members: Database<NetworkMember, string>;

  constructor(private readonly env: LmdbEnvironment) {
    this.credentials = env.root.openDB<Credential, string>({ name: 'credentials' });
    this.keys = env.root.openDB<StoredSigningKey, string>({ name: 'keys' });
    this.meta = env.root.openDB<unknown, string>({ name: 'meta' });
    this.externalClients = env.root.openDB<ExternalClient, string>({ name: 'external_clients' });
    this.members = env.root.openDB<NetworkMember, string>({ name: 'members' });
  }

  allMembers(): NetworkMember[] {
    return [...this.members.getRange({ snapshot: false })].map(({ value }) => value);
  }

  async addMember(options: {
    member: string;
    baseUrl: string;
    now: number;
  }): Promise<NetworkMember> {
    const existing = this.members.get(options.member);
    const member: NetworkMember = {
      member: options.member,
      base_url: options.baseUrl.replace(/\/+$/, ''),
      added_at: new Date(options.now).toISOString(),
      keys: existing?.base_url === options.baseUrl ? existing.keys : [],
      keys_fetched_at: existing?.base_url === options.baseUrl ? existing.keys_fetched_at : null,
    };
    await this.write(() => this.members.put(member.member, member));
    return member;
  }

  async removeMember(name: string): Promise<boolean> {
    if (this.members.get(name) === undefined) return false;
    await this.write(() => this.members.remove(name));
    return true;
  }

  /** Caches a member's fetched keys (not a change the running node needs to be told about). */
  async cacheMemberKeys(name: string, keys: NetworkMember['keys'], now: number): Promise<void> {
    const existing = this.members.get(name);
    if (existing === undefined) return;
    await this.members.put(name, {
      ...existing,
      keys,
      keys_fetched_at: new Date(now).toISOString(),
    });
  }

  allExternalClients(): ExternalClient[] {
    return [...this.externalClients.getRange({ snapshot: false })].map(({ value }) => value);
  }

  async addExternalClient(options: {
    client: string;
    publicKeyHex: string;
    registries: string[];
    now: number;
  }): Promise<ExternalClient> {
    refuseUnusableKey(options.publicKeyHex);
    const client: ExternalClient = {
      key_id: `ext_${sha256Hex(Buffer.from(options.publicKeyHex, 'hex')).slice(0, 32)}`,
      client: options.client,
      public_key: options.publicKeyHex,
      registries: options.registries,
      created_at: new Date(options.now).toISOString(),
      revoked_at: null,
    };
    await this.write(() => this.externalClients.put(client.key_id, client));
    return client;
  }

  async revokeExternalClient(keyId: string, now: number): Promise<boolean> {
    const existing = this.externalClients.get(keyId);
    if (existing === undefined) return false;
    await this.write(() =>
      this.externalClients.put(keyId, {
        ...existing,
        revoked_at: existing.revoked_at ?? new Date(now).toISOString(),
      }),
    );
    return true;
  }

  /** Bumped on every change to credentials or keys. */
  changes(): number {
    this.env.root.resetReadTxn();
    return (this.meta.get(CHANGES_KEY) as number | undefined) ?? 0;
  }

  allCredentials(): Credential[] {
    return [...this.credentials.getRange({ snapshot: false })].map(({ value }) => value);
  }

  async addCredential(options: {
    member: string;
    publicKeyHex: string;
    local: boolean;
    now: number;
  }): Promise<Credential> {
    refuseUnusableKey(options.publicKeyHex);
    const credential: Credential = {
      key_id: `cred_${sha256Hex(Buffer.from(options.publicKeyHex, 'hex')).slice(0, 32)}`,
      member: options.member,
      public_key: options.publicKeyHex,
      local: options.local,
      created_at: new Date(options.now).toISOString(),
      revoked_at: null,
    };
    await this.write(() => this.credentials.put(credential.key_id, credential));
    return credential;
  }

  async revokeCredential(keyId: string, now: number): Promise<boolean> {
    const existing = this.credentials.get(keyId);
    if (existing === undefined) return false;
    await this.write(() =>
      this.credentials.put(keyId, {
        ...existing,
        revoked_at: existing.revoked_at ?? new Date(now).toISOString(),
      }),
    );
    return true;
  }

  signingKeys(): StoredSigningKey[] {
    return [...this.keys.getRange({ snapshot: false })]
      .map(({ value }) => value)
      .sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  activeSigningKey(): StoredSigningKey | undefined {
    return this.signingKeys().find((k) => k.status === 'active');
  }

  /** A new active key; the previous active key is retired and stays published (P1). */
  async rotateSigningKey(now: number): Promise<StoredSigningKey> {
    const { seedHex, publicKeyHex } = generateSeedHex();
    const at = new Date(now).toISOString();
    const fresh: StoredSigningKey = {
      kid: kidOf(publicKeyHex),
      seed_hex: seedHex,
      public_key: publicKeyHex,
      status: 'active',
      created_at: at,
      retired_at: null,
    };
    await this.write(() => {
      for (const k of this.signingKeys())
        if (k.status === 'active')
          this.keys.put(k.kid, { ...k, status: 'retired', retired_at: at });
      this.keys.put(fresh.kid, fresh);
    });
    return fresh;
  }

  async ensureSigningKey(now: number): Promise<StoredSigningKey> {
    return this.activeSigningKey() ?? this.rotateSigningKey(now);
  }

  /** The key that seals names and account references at rest, made on first start. */
  async ensureSealingKey(configuredHex?: string): Promise<Buffer> {
    if (configuredHex !== undefined) return Buffer.from(configuredHex, 'hex');
    const existing = this.meta.get(SEALING_KEY) as string | undefined;
    if (existing !== undefined) return Buffer.from(existing, 'hex');
    const hex = randomBytes(32).toString('hex');
    await this.env.root.transaction(() => this.meta.put(SEALING_KEY, hex));
    await this.env.root.flushed;
    return Buffer.from(hex, 'hex');
  }

  /** Every webhook secret kept, the active one last (P11). */
  webhookSecrets(): WebhookSecret[] {
    return (this.meta.get(WEBHOOK_SECRETS_KEY) as WebhookSecret[] | undefined) ?? [];
  }

  async ensureWebhookSecret(now: number): Promise<WebhookSecret> {
    return (
      this.webhookSecrets().find((s) => s.retired_at === null) ?? this.rotateWebhookSecret(now)
    );
  }

  /**
   * A new active webhook secret. The previous one is retired now and still signs for `overlapMs`
   * (receivers switch over in that time); secrets retired longer ago than that are forgotten.
   */
  async rotateWebhookSecret(now: number, overlapMs = 0): Promise<WebhookSecret> {
    const at = new Date(now).toISOString();
    const fresh: WebhookSecret = {
      secret: `whsec_${randomBytes(WEBHOOK_SECRET_BYTES).toString('base64')}`,
      created_at: at,
      retired_at: null,
    };
    await this.write(() => {
      const retired = this.webhookSecrets().map((s) =>
        s.retired_at === null ? { ...s, retired_at: at } : s,
      );
      const kept = signingSecrets(retired, now, overlapMs);
      this.meta.put(WEBHOOK_SECRETS_KEY, [...kept, fresh]);
    });
    return fresh;
  }

  pepper(): Pepper | undefined {
    return this.meta.get(PEPPER_KEY) as Pepper | undefined;
  }

  /** The network pepper: the configured one, or one generated on first start (P8). */
  async ensurePepper(configured?: Pepper): Promise<Pepper> {
    if (configured !== undefined) return configured;
    const existing = this.pepper();
    if (existing !== undefined) return existing;
    const hex = randomBytes(PEPPER_BYTES).toString('hex');
    const pepper = { version: `pv-${randomBytes(6).toString('hex')}`, hex };
    await this.env.root.transaction(() => this.meta.put(PEPPER_KEY, pepper));
    await this.env.root.flushed;
    return pepper;
  }

  /**
   * Makes a change to the environment (any table) in one durable transaction that a running node
   * notices, as it notices credentials and keys: the command line's way to ask it something.
   */
  notify(change: () => void): Promise<void> {
    return this.write(change);
  }

  private async write(change: () => void): Promise<void> {
    await this.env.root.transaction(() => {
      change();
      this.meta.put(CHANGES_KEY, ((this.meta.get(CHANGES_KEY) as number | undefined) ?? 0) + 1);
    });
    await this.env.root.flushed;
  }
}
