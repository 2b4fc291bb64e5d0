// The network's other members, as the operator listed them with `path-node members add`. Their
// signing keys are fetched from their published keys document (P4) and refreshed; a request
// signed by a member's active key is that member's credential, and any of its keys (retired
// ones too) verifies what it signed.
import type { Logger } from 'pino';
import type { Credential, NetworkMember, NodeStore } from '../store.js';
import { publicKeyFault } from '../protocol/signing.js';
import { peerRequest } from './peer.js';

interface KeysDocument {
  member: string;
  keys: { kid: string; public_key: string; status: string }[];
}

export class MemberRegistry {
  private members = new Map<string, NetworkMember>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly options: {
      store: NodeStore;
      self: string;
      logger: Logger;
      refreshMs: number;
      timeoutMs: number;
      onKeys: () => void;
    },
  ) {}

  /**
   * Reads the member list (and cached keys) from the store; fetches keys of members that have none.
   */
  load(): void {
    // Keys cached before P1's check was made at the door are checked again here.
    const others = this.options.store.allMembers().filter((m) => m.member !== this.options.self);
    const checked = others.map((m) => ({ ...m, keys: this.usableKeys(m.member, m.keys) }));
    this.members = new Map(checked.map((m) => [m.member, m]));
    for (const m of this.members.values()) if (m.keys.length === 0) void this.refresh(m.member);
  }

  start(): void {
    this.timer = setInterval(() => {
      for (const name of this.members.keys()) void this.refresh(name);
    }, this.options.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
  }

  list(): NetworkMember[] {
    return [...this.members.values()];
  }

  /** Credentials for request authentication: each member's active keys. */
  credentials(): Credential[] {
    return this.list().flatMap((m) =>
      m.keys
        .filter((k) => k.status === 'active')
        .map((k) => ({
          key_id: k.kid,
          member: m.member,
          public_key: k.public_key,
          local: false,
          created_at: m.added_at,
          revoked_at: null,
        })),
    );
  }

  /** The member and public key behind a kid, for verifying a signed object. */
  keyFor(kid: string): { member: string; public_key: string } | undefined {
    for (const m of this.members.values()) {
      const key = m.keys.find((k) => k.kid === kid);
      if (key !== undefined) return { member: m.member, public_key: key.public_key };
    }
    return undefined;
  }

  /**
   * The keys of a member's document this node will trust. A malformed, small-order or
   * non-canonical key (P1) is dropped and logged: a member publishing one is misconfigured or
   * hostile, and its other keys stay usable.
   */
  private usableKeys(name: string, published: KeysDocument['keys']): NetworkMember['keys'] {
    const keys: NetworkMember['keys'] = [];
    for (const k of published) {
      const fault = publicKeyFault(k.public_key);
      if (fault === null) {
        keys.push({ kid: k.kid, public_key: k.public_key, status: k.status });
        continue;
      }
      this.options.logger.warn({ member: name, kid: k.kid, fault }, 'member key ignored (P1)');
    }
    return keys;
  }

  /** Fetches a member's keys document; keeps the previous keys when the member is unreachable. */
  async refresh(name: string): Promise<void> {
    const member = this.members.get(name);
    if (member === undefined) return;
    try {
      const res = await peerRequest(`${member.base_url}/.well-known/path-keys`, {
        method: 'GET',
        timeoutMs: this.options.timeoutMs,
      });
      if (res.status !== 200) throw new Error(`keys document answered ${res.status}`);
      const doc = JSON.parse(res.text) as KeysDocument;
      if (doc.member !== member.member)
        throw new Error(`keys document names member '${doc.member}'`);
      const keys = this.usableKeys(name, doc.keys);
      const current = this.members.get(name);
      if (current === undefined || current.base_url !== member.base_url) return;
      this.members.set(name, { ...current, keys, keys_fetched_at: new Date().toISOString() });
      await this.options.store.cacheMemberKeys(name, keys, Date.now());
      this.options.onKeys();
    } catch (error) {
      this.options.logger.warn(
        { member: name, err: { message: (error as Error).message } },
        'cannot fetch member keys',
      );
    }
  }
}
