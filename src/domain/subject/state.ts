// The subject aggregate's state: a subject with everything that hangs off it (identifiers as
// hashes, payee record sealed, addresses with their targets and standing-intent history,
// attestations, ownership bindings). One aggregate, so withdrawal and rotation change all of it
// in one atomic step under a single writer.
import { childrenOf, noChildren, type Children as ChildMap } from '../children.js';
import type { CapabilityT } from '../../protocol/schemas.js';
import type { Discoverability } from './schema.js';

export interface IdentifierEntry {
  id: string;
  identifier_type: string;
  hash: string;
  discoverability: Discoverability;
  verification_method: string | null;
  verified_at: string | null;
  created_at: string;
}

export interface TargetEntry {
  id: string;
  rail: string;
  asset_type: string;
  asset_code: string;
  account_kind: string;
  /** Sealed (sealing.ts); never returned. */
  account_ref_sealed: string;
  is_default: boolean;
  beneficiary_format: string | null;
  beneficiary: string | null;
  created_at: string;
  revoked_at: string | null;
}

/** A standing-intent version; versions are appended, never overwritten. */
export interface IntentVersion {
  version: number;
  accepts: CapabilityT[];
  policy: Record<string, unknown> | null;
  limits: Record<string, unknown>;
  active: boolean;
  created_at: string;
  commitment: string;
}

/** Address states: active -> revoked (by revoke or rotation); revoked goes nowhere. */
export interface AddressEntry {
  id: string;
  address: string;
  /** identifier_hash of the address (P8), for the directory index. */
  hash: string;
  profile: 'directory' | 'relationship';
  discoverability: Discoverability;
  is_primary: boolean;
  created_at: string;
  revoked_at: string | null;
  rotated_from: string | null;
  /** Held as persistent maps once evolved; events and older states hold the plain forms. */
  targets: Held<TargetEntry>;
  /** By version, in order. */
  intents: ChildMap<IntentVersion> | IntentVersion[];
}

/** Children as a persistent map, or as the plain object an event or an older state holds. */
type Held<T> = ChildMap<T> | Record<string, T>;

/** Attestations and bindings: active -> revoked; expiry is checked at read. */
export interface AttestationEntry {
  reference: string;
  claim: string;
  value: string;
  expires_at: string;
  created_at: string;
  revoked_at: string | null;
}

export interface BindingEntry {
  reference: string;
  binding_type: string;
  target_kind: string;
  target_hash: string;
  proof_method: string;
  expires_at: string | null;
  created_at: string;
  revoked_at: string | null;
}

export type PayeeCheckSetting = 'enabled' | 'disabled';

export interface PayeeRecordEntry {
  name_sealed: string;
  payee_check: PayeeCheckSetting;
  updated_at: string;
}

export interface SubjectState {
  id: string;
  subject_type: 'natural_person' | 'legal_entity';
  owner: string;
  external_ref_sealed: string | null;
  created_at: string;
  withdrawn_at: string | null;
  /** Persistent maps (src/domain/children.ts): read through `identifiersOf`, `addressesOf`. */
  identifiers: ChildMap<IdentifierEntry>;
  payee_record: PayeeRecordEntry | null;
  addresses: ChildMap<AddressEntry>;
  /** Persistent maps: read through `attestationsOf`, `bindingsOf`. */
  attestations: Held<AttestationEntry>;
  bindings: Held<BindingEntry>;
  /**
   * Payee-check allowances (P12): checks per payment context, and distinct names (by key) per
   * `<address id>|<requester>|<day>`, today's only.
   */
  payee_checks?: { contexts: Held<number>; names: Held<string[]>; day?: string };
}

type Children =
  'identifiers' | 'addresses' | 'attestations' | 'bindings' | 'payee_record' | 'withdrawn_at';

/** The events of a subject, as the log keeps them (their shapes are stored: change with care). */
export type SubjectEvent =
  | { type: 'created'; subject: Omit<SubjectState, Children> }
  | { type: 'identifier_added'; identifier: IdentifierEntry }
  | { type: 'withdrawn'; at: string }
  | { type: 'payee_record_set'; name_sealed: string; payee_check: PayeeCheckSetting; at: string }
  | { type: 'address_created'; address: AddressEntry }
  | { type: 'address_revoked'; address_id: string; at: string }
  | { type: 'primary_cleared'; address_id: string }
  | { type: 'intent_set'; address_id: string; intent: IntentVersion }
  | { type: 'target_added'; address_id: string; target: TargetEntry }
  | { type: 'target_revoked'; address_id: string; target_id: string; at: string }
  | { type: 'attestation_recorded'; attestation: AttestationEntry }
  | { type: 'attestation_revoked'; reference: string; at: string }
  | { type: 'binding_recorded'; binding: BindingEntry }
  | {
      type: 'payee_checked';
      day: string;
      context: string | null;
      names_key: string | null;
      name_key: string | null;
    };

type AddressChange = (a: AddressEntry) => AddressEntry;
const withAddress = (s: SubjectState, id: string, change: AddressChange): SubjectState => ({
  ...s,
  addresses: addressesOf(s).set(id, change(addressesOf(s).get(id)!)),
});

/** Withdrawal: every entry private (SPEC B), kept. */
const privately = <T extends { discoverability: Discoverability }>(entries: ChildMap<T>) =>
  entries.map((entry): T => ({ ...entry, discoverability: 'private' }));

/** A subject's identifiers (stored before they were a persistent map: taken over). */
export const identifiersOf = (s: SubjectState): ChildMap<IdentifierEntry> =>
  childrenOf(s.identifiers);

/** A subject's addresses (stored before they were a persistent map: taken over). */
export const addressesOf = (s: SubjectState): ChildMap<AddressEntry> => childrenOf(s.addresses);

export const attestationsOf = (s: SubjectState): ChildMap<AttestationEntry> =>
  childrenOf(s.attestations);

export const bindingsOf = (s: SubjectState): ChildMap<BindingEntry> => childrenOf(s.bindings);

export const targetsOf = (a: AddressEntry): ChildMap<TargetEntry> => childrenOf(a.targets);

/** An address's standing-intent versions by version number, in order. */
export const intentsOf = (a: AddressEntry): ChildMap<IntentVersion> =>
  Array.isArray(a.intents)
    ? noChildren<IntentVersion>().withMutations((m) => {
        for (const i of a.intents as IntentVersion[]) m.set(String(i.version), i);
      })
    : a.intents;

export function evolveSubject(state: SubjectState | null, event: SubjectEvent): SubjectState {
  if (event.type === 'created') {
    return {
      ...event.subject,
      withdrawn_at: null,
      identifiers: noChildren(),
      payee_record: null,
      addresses: noChildren(),
      attestations: noChildren(),
      bindings: noChildren(),
    };
  }
  if (state === null) throw new Error(`subject event ${event.type} before creation`);
  const s = state;
  switch (event.type) {
    case 'identifier_added':
      return { ...s, identifiers: identifiersOf(s).set(event.identifier.id, event.identifier) };
    case 'withdrawn':
      return {
        ...s,
        withdrawn_at: event.at,
        identifiers: privately(identifiersOf(s)),
        addresses: privately(addressesOf(s)),
      };
    case 'payee_record_set': {
      const { name_sealed, payee_check, at } = event;
      return { ...s, payee_record: { name_sealed, payee_check, updated_at: at } };
    }
    case 'address_created': {
      const a = event.address;
      const held = { ...a, targets: targetsOf(a), intents: intentsOf(a) };
      return { ...s, addresses: addressesOf(s).set(a.id, held) };
    }
    case 'address_revoked':
      return withAddress(s, event.address_id, (a) => ({
        ...a,
        revoked_at: event.at,
        is_primary: false,
      }));
    case 'primary_cleared':
      return withAddress(s, event.address_id, (a) => ({ ...a, is_primary: false }));
    case 'intent_set':
      return withAddress(s, event.address_id, (a) => ({ ...a, intents: nextIntents(a, event) }));
    case 'target_added':
      return withAddress(s, event.address_id, (a) => ({
        ...a,
        targets: targetsOf(a).set(event.target.id, event.target),
      }));
    case 'target_revoked':
      return withAddress(s, event.address_id, (a) => {
        const revoked = { ...targetsOf(a).get(event.target_id)!, revoked_at: event.at };
        return { ...a, targets: targetsOf(a).set(event.target_id, revoked) };
      });
    case 'attestation_recorded':
      return {
        ...s,
        attestations: attestationsOf(s).set(event.attestation.reference, event.attestation),
      };
    case 'attestation_revoked': {
      const revoked = { ...attestationsOf(s).get(event.reference)!, revoked_at: event.at };
      return { ...s, attestations: attestationsOf(s).set(event.reference, revoked) };
    }
    case 'binding_recorded':
      return { ...s, bindings: bindingsOf(s).set(event.binding.reference, event.binding) };
    case 'payee_checked':
      return { ...s, payee_checks: payeeChecked(s.payee_checks, event) };
  }
}

/** Version n+1 in force, n kept: only the version in force changes, the others are inactive. */
function nextIntents(
  a: AddressEntry,
  event: Extract<SubjectEvent, { type: 'intent_set' }>,
): ChildMap<IntentVersion> {
  const before = activeIntent(a);
  const kept = intentsOf(a);
  const retired =
    before === null ? kept : kept.set(String(before.version), { ...before, active: false });
  return retired.set(String(event.intent.version), event.intent);
}

type PayeeChecks = NonNullable<SubjectState['payee_checks']>;

/** Checks per payment context (persistent; a plain object in older states). */
export const contextChecksOf = (checks: PayeeChecks | undefined): ChildMap<number> =>
  checks === undefined ? noChildren() : childrenOf(checks.contexts);

/** Distinct names checked today per `<address id>|<requester>|<day>`. */
export const namesCheckedOf = (checks: PayeeChecks | undefined): ChildMap<string[]> =>
  checks === undefined ? noChildren() : childrenOf(checks.names);

function payeeChecked(
  before: PayeeChecks | undefined,
  event: Extract<SubjectEvent, { type: 'payee_checked' }>,
): PayeeChecks {
  const counted = contextChecksOf(before);
  const contexts =
    event.context === null
      ? counted
      : counted.set(event.context, (counted.get(event.context) ?? 0) + 1);
  // Name lists of earlier days are no longer needed: dropped at the day's first check, so the
  // other checks of the day copy nothing.
  const held = namesCheckedOf(before);
  let names =
    before?.day === event.day ? held : held.filter((_, key) => key.endsWith(`|${event.day}`));
  if (event.names_key !== null && event.name_key !== null) {
    const list = names.get(event.names_key) ?? [];
    if (!list.includes(event.name_key))
      names = names.set(event.names_key, [...list, event.name_key]);
  }
  return { contexts, names, day: event.day };
}

export function activeIntent(address: AddressEntry): IntentVersion | null {
  const latest = intentsOf(address).last();
  // Only the latest version can be in force; an address may hold none in force (SPEC C).
  return latest !== undefined && latest.active ? latest : null;
}

export function liveTargets(address: AddressEntry): TargetEntry[] {
  return [...targetsOf(address).values()].filter((t) => t.revoked_at === null);
}
