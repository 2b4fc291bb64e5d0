// Addresses, their targets and standing intents (SPEC C, "States and transitions: Address,
// intent"). An address is attached to a subject, never to an account:
//   active -> revoked (revoke, or rotation, which issues its replacement); revoked goes nowhere:
//   its resolution answers 410 and it is left out of the list, but it is kept.
// A standing intent is versioned: setting one appends version n+1, active, and deactivates n.
import type { DecideContext, DirectoryRow } from '../decider.js';
import { capabilitiesRefusal } from '../../protocol/amounts.js';
import { invalid } from '../../protocol/errors.js';
import { isoTime } from '../../protocol/time.js';
import { addressPublications, commitmentOf } from './resolver.js';
import { LIVE_RAILS, type Discoverability } from './schema.js';
import {
  intentsOf,
  targetsOf,
  addressesOf,
  evolveSubject,
  liveTargets,
  type AddressEntry,
  type SubjectEvent,
  type SubjectState,
  type TargetEntry,
} from './state.js';
import {
  notFound,
  revokedAddress,
  routePublication,
  unchanged,
  type Handler,
  type Input,
  type Result,
} from './decision.js';

type Context = DecideContext;

/** The live address a command names; a revoked one answers 410 unless `revoked` says otherwise. */
export function withLiveAddress(
  s: SubjectState,
  addressId: string,
  live: (a: AddressEntry) => Result,
  revoked?: (a: AddressEntry) => Result,
): Result {
  const a = addressesOf(s).get(addressId);
  if (a === undefined) return notFound('address');
  if (a.revoked_at !== null) return revoked === undefined ? revokedAddress() : revoked(a);
  return live(a);
}

type Fresh = Input<'rotate-address'>['replacement'] & Partial<Input<'create-address'>>;

/** A new address, or the replacement of `from`, which keeps its profile, targets and terms. */
function newAddress(
  s: SubjectState,
  input: Fresh,
  context: Context,
  from: AddressEntry | null,
): AddressEntry {
  const at = isoTime(context.now);
  const profile = from?.profile ?? input.profile ?? 'directory';
  // SPEC C: a directory address is network-visible unless the caller says otherwise; a
  // relationship address is reachable only by whoever already knows it.
  const chosen =
    from?.discoverability ??
    input.discoverability ??
    (profile === 'directory' ? 'network' : 'private');
  return {
    id: input.id,
    address: input.address,
    hash: input.hash,
    profile,
    // A withdrawn subject stays withdrawn: a replacement is private too.
    discoverability: s.withdrawn_at !== null && from !== null ? 'private' : chosen,
    is_primary: from?.is_primary ?? input.is_primary ?? false,
    created_at: at,
    revoked_at: null,
    rotated_from: from?.id ?? null,
    targets: from === null ? {} : Object.fromEntries(liveTargets(from).map((t) => [t.id, t])),
    // A rotated address keeps its terms, committed afresh over the new address.
    intents:
      from === null
        ? []
        : [...intentsOf(from).values()]
            .filter((i) => i.active)
            .map((i) => ({
              ...i,
              version: 1,
              created_at: at,
              commitment: commitmentOf(input.address, i.accepts, i.limits),
            })),
  };
}

export const createAddress: Handler<'create-address'> = (s, input, context) => {
  const address = newAddress(s, input, context, null);
  const events: SubjectEvent[] = [];
  if (address.is_primary) {
    for (const a of addressesOf(s).values()) {
      if (a.is_primary) events.push({ type: 'primary_cleared', address_id: a.id });
    }
  }
  events.push({ type: 'address_created', address });
  const { id, profile, discoverability, is_primary, created_at } = address;
  const value = { id, address: address.address, profile, discoverability, is_primary, created_at };
  return {
    events,
    answer: { value, created: true },
    publications: [routePublication(address.id, s.id), ...addressPublications(address, context)],
    directory: [directoryRowOfAddress(address)],
  };
};

export function listAddresses(s: SubjectState): Result {
  const live = [...addressesOf(s).values()].filter((a) => a.revoked_at === null);
  return unchanged({
    addresses: live.map((a) => ({
      id: a.id,
      address: a.address,
      profile: a.profile,
      discoverability: a.discoverability,
      is_primary: a.is_primary,
      created_at: a.created_at,
    })),
  });
}

export const rotateAddress: Handler<'rotate-address'> = (s, input, context) => {
  return withLiveAddress(s, input.address_id, (old) => {
    const at = isoTime(context.now);
    const revoke: SubjectEvent = { type: 'address_revoked', address_id: old.id, at };
    const revoked = addressesOf(evolveSubject(s, revoke)).get(old.id)!;
    const fresh = newAddress(s, input.replacement, context, old);
    const { id, address, profile, discoverability } = fresh;
    return {
      events: [revoke, { type: 'address_created', address: fresh }],
      answer: {
        value: { id, address, rotated_from: old.id, profile, discoverability },
        created: true,
      },
      publications: [
        ...addressPublications(revoked, context),
        routePublication(fresh.id, s.id),
        ...addressPublications(fresh, context),
      ],
      directory: [directoryRowOfAddress(revoked), directoryRowOfAddress(fresh)],
    };
  });
};

/** Revoking a revoked address changes nothing and answers as the first time did. */
export const revokeAddress: Handler<'revoke-address'> = (s, input, context) => {
  const again = () => unchanged({ id: input.address_id, revoked: true });
  return withLiveAddress(
    s,
    input.address_id,
    (a) => {
      const at = isoTime(context.now);
      const event: SubjectEvent = { type: 'address_revoked', address_id: a.id, at };
      const revoked = addressesOf(evolveSubject(s, event)).get(a.id)!;
      return {
        events: [event],
        answer: { value: { id: a.id, revoked: true } },
        publications: addressPublications(revoked, context),
        directory: [directoryRowOfAddress(revoked)],
      };
    },
    again,
  );
};

/** Version n+1, active; version n kept, inactive (SPEC C). */
export const setIntent: Handler<'set-intent'> = (s, input, context) => {
  // P23: the fees and ceilings of the terms, within their asset's unit.
  const digits = capabilitiesRefusal(input.accepts, 'accepts');
  if (digits !== null) return digits;
  return withLiveAddress(s, input.address_id, (a) => {
    const { accepts } = input;
    const limits: Record<string, unknown> = input.limits ?? {};
    const version = intentsOf(a).size + 1;
    const commitment = commitmentOf(a.address, accepts, limits);
    const created_at = isoTime(context.now);
    const event: SubjectEvent = {
      type: 'intent_set',
      address_id: a.id,
      intent: {
        version,
        accepts,
        policy: input.policy ?? null,
        limits,
        active: true,
        created_at,
        commitment,
      },
    };
    return {
      events: [event],
      answer: { value: { version, active: true } },
      publications: addressPublications(addressesOf(evolveSubject(s, event)).get(a.id)!, context),
    };
  });
};

/** SPEC C: a reserved rail has no beneficiary format; `chain_address` is a blockchain's. */
function beneficiaryProblem(rail: string, format: string | null, beneficiary: string | null) {
  const live = (LIVE_RAILS as readonly string[]).includes(rail);
  if (!live && (format !== null || beneficiary !== null)) {
    return invalid('beneficiary_format', 'a reserved rail has no beneficiary format');
  }
  if (format !== null && rail !== 'blockchain') {
    return invalid('beneficiary_format', 'chain_address is a blockchain beneficiary format');
  }
  if ((format === null) !== (beneficiary === null)) {
    return invalid('beneficiary', 'beneficiary and beneficiary_format go together');
  }
  return null;
}

export const addTarget: Handler<'add-target'> = (s, input, context) => {
  return withLiveAddress(s, input.address_id, (a) => {
    const t = input.target;
    const format = t.beneficiary_format ?? null;
    const beneficiary = t.beneficiary ?? null;
    const problem = beneficiaryProblem(t.rail, format, beneficiary);
    if (problem !== null) return problem;
    const target: TargetEntry = {
      id: t.id,
      rail: t.rail,
      asset_type: t.asset_type,
      asset_code: t.asset_code,
      account_kind: t.account_kind,
      account_ref_sealed: t.account_ref_sealed,
      is_default: t.is_default ?? false,
      beneficiary_format: format,
      beneficiary,
      created_at: isoTime(context.now),
      revoked_at: null,
    };
    const event: SubjectEvent = { type: 'target_added', address_id: a.id, target };
    return {
      events: [event],
      answer: { value: publicTarget(target), created: true },
      publications: addressPublications(addressesOf(evolveSubject(s, event)).get(a.id)!, context),
    };
  });
};

export function listTargets(s: SubjectState, input: Input<'list-targets'>): Result {
  return withLiveAddress(s, input.address_id, (a) =>
    unchanged({
      address_id: a.id,
      targets: liveTargets(a).map(publicTarget),
    }),
  );
}

/** A target is retired once; retiring it again answers as the first time did. */
export const revokeTarget: Handler<'revoke-target'> = (s, input, context) => {
  return withLiveAddress(s, input.address_id, (a) => {
    const id = input.target_id;
    const target = targetsOf(a).get(id);
    if (target === undefined) return notFound('target');
    if (target.revoked_at !== null) {
      return unchanged({ id: target.id, revoked: true, revoked_at: target.revoked_at });
    }
    const at = isoTime(context.now);
    const event: SubjectEvent = {
      type: 'target_revoked',
      address_id: a.id,
      target_id: target.id,
      at,
    };
    return {
      events: [event],
      answer: { value: { id: target.id, revoked: true, revoked_at: at } },
      publications: addressPublications(addressesOf(evolveSubject(s, event)).get(a.id)!, context),
    };
  });
};

/** Public fields of a target; `account_ref` never leaves the node. */
export function publicTarget(t: TargetEntry): Record<string, unknown> {
  const beneficiary =
    t.beneficiary_format === null
      ? {}
      : { beneficiary_format: t.beneficiary_format, beneficiary: t.beneficiary };
  return {
    id: t.id,
    rail: t.rail,
    asset_type: t.asset_type,
    asset_code: t.asset_code,
    account_kind: t.account_kind,
    is_default: t.is_default,
    ...beneficiary,
    created_at: t.created_at,
  };
}

export const visible = (d: Discoverability): DirectoryRow['visibility'] =>
  d === 'private' ? null : d;

/** Only live `directory` addresses are reachable through the index (SPEC C). */
export function directoryRowOfAddress(a: AddressEntry): DirectoryRow {
  const reachable = a.profile === 'directory' && a.revoked_at === null;
  const visibility = reachable ? visible(a.discoverability) : null;
  return { key: `adr/${a.id}`, identifierType: 'address', identifierHash: a.hash, visibility };
}
