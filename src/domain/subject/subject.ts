// The subject aggregate's decisions (SPEC B, C, E). The front end normalises, hashes and seals
// before a command gets here: this code only ever sees hashes and sealed values.
import type { Command, DecideContext, Decider, Decision, DirectoryRow, Publication, Reply } from '../../actors/types.js';
import { invalid, refusal, type Refusal } from '../../protocol/errors.js';
import type { CapabilityT } from '../../protocol/schemas.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';
import { addressPublications, commitmentOf } from './resolver.js';
import { maskedName, matchName } from '../payee/names.js';
import { LIVE_RAILS, VERIFICATION_METHODS, type Discoverability } from './schema.js';
import {
  evolveSubject, liveTargets, type AddressEntry, type AttestationEntry, type BindingEntry, type IdentifierEntry,
  type SubjectEvent, type SubjectState, type TargetEntry,
} from './state.js';

export const routeViewKey = (id: string) => `route/${id}`;
const OPEN_TO_MEMBERS = new Set(['read-attestation', 'read-binding']);
const AUTHORISED_BY_ROUTE = new Set(['payee-check']);

const ok = (status: number, value: unknown): Reply => ({ status, body: JSON.stringify(value), signed: false });
const notFound = (what: string): Refusal => refusal('path.core.not_found', `no such ${what}`);
const gone = (): Refusal => refusal('path.address.revoked', 'this address was revoked');

type Result = Decision<SubjectEvent>;
type Inputs = Record<string, any>;

export const subjectDecider: Decider<SubjectState, SubjectEvent> = {
  type: 'subject',
  evolve: evolveSubject,

  decide(command: Command, state: SubjectState | null, context: DecideContext): Result {
    const input = (command.input ?? {}) as Inputs;
    if (command.name === 'create') return create(state, input, context, command.caller?.member ?? '');
    if (state === null) return notFound(input.what ?? 'subject');
    // Another member's subject is answered as absent, never as forbidden: existence is not
    // disclosed. Attestation and binding reads are open to any member (SPEC B); the payee check
    // is authorised by its route (a member credential or a payment context, SPEC F).
    if (!AUTHORISED_BY_ROUTE.has(command.name)) {
      const caller = command.caller;
      if (caller === null || (!OPEN_TO_MEMBERS.has(command.name) && !caller.local && caller.member !== state.owner)) {
        return notFound(input.what ?? 'subject');
      }
    }
    const handler = HANDLERS[command.name];
    return handler === undefined ? notFound('operation') : handler(state, input, context);
  },
};

const HANDLERS: Record<string, (s: SubjectState, input: Inputs, context: DecideContext) => Result> = {
  'add-identifier': addIdentifier,
  withdraw,
  'set-payee-record': (s, input, context) => {
    const at = isoTime(context.now);
    return {
      events: [{ type: 'payee_record_set', name_sealed: input.name_sealed, payee_check: input.payee_check, at }],
      reply: ok(200, { subject_id: s.id, payee_check: input.payee_check, updated_at: at }),
    };
  },
  'add-attestation': addAttestation,
  'read-attestation': (s, input, context) => readRecord(s.attestations[input.reference], context, (a) => ({
    type: 'path.attestation', reference: a.reference, issuer: context.member, subject_id: s.id,
    claim: a.claim, value: a.value, expires_at: a.expires_at, created_at: a.created_at,
  }), 'attestation'),
  'revoke-attestation': (s, input, context) => {
    const a = s.attestations[input.reference];
    if (a === undefined) return notFound('attestation');
    if (a.revoked_at !== null) return { events: [], reply: ok(200, { reference: a.reference, revoked: true, revoked_at: a.revoked_at }) };
    const at = isoTime(context.now);
    return { events: [{ type: 'attestation_revoked', reference: a.reference, at }], reply: ok(200, { reference: a.reference, revoked: true, revoked_at: at }) };
  },
  'list-attestations': (s, _input, context) => ({
    events: [],
    reply: ok(200, {
      subject_id: s.id,
      attestations: Object.values(s.attestations).map((a) => ({
        reference: a.reference, claim: a.claim, value: a.value, expires_at: a.expires_at, created_at: a.created_at,
        status: recordStatus(a, context.now), revoked_at: a.revoked_at,
      })),
    }),
  }),
  'add-binding': addBinding,
  'read-binding': (s, input, context) => readRecord(s.bindings[input.reference], context, (b) => ({
    type: 'path.ownership_binding', reference: b.reference, issuer: context.member, subject_id: s.id,
    binding_type: b.binding_type, target_kind: b.target_kind, proof_method: b.proof_method,
    expires_at: b.expires_at, created_at: b.created_at,
  }), 'ownership binding'),
  'create-address': createAddress,
  'list-addresses': (s) => ({
    events: [],
    reply: ok(200, {
      addresses: Object.values(s.addresses).filter((a) => a.revoked_at === null).map((a) => ({
        id: a.id, address: a.address, profile: a.profile, discoverability: a.discoverability, is_primary: a.is_primary, created_at: a.created_at,
      })),
    }),
  }),
  'rotate-address': rotateAddress,
  'revoke-address': (s, input, context) => withLiveAddress(s, input, (a) => {
    const at = isoTime(context.now);
    const revoked = evolveSubject(s, { type: 'address_revoked', address_id: a.id, at }).addresses[a.id]!;
    return {
      events: [{ type: 'address_revoked', address_id: a.id, at }],
      reply: ok(200, { id: a.id, revoked: true }),
      publications: addressPublications(revoked, context),
      directory: [directoryRowOfAddress(revoked)],
    };
  }, () => ({ events: [], reply: ok(200, { id: input.address_id, revoked: true }) })),
  'set-intent': setIntent,
  exists: (s) => ({ events: [], reply: ok(200, { id: s.id }) }),
  'payee-check': payeeCheck,
  'add-target': addTarget,
  'list-targets': (s, input) => withLiveAddress(s, input, (a) => ({
    events: [], reply: ok(200, { address_id: a.id, targets: liveTargets(a).map(publicTarget) }),
  })),
  'revoke-target': (s, input, context) => withLiveAddress(s, input, (a) => {
    const target = a.targets[input.target_id];
    if (target === undefined) return notFound('target');
    if (target.revoked_at !== null) return { events: [], reply: ok(200, { id: target.id, revoked: true, revoked_at: target.revoked_at }) };
    const at = isoTime(context.now);
    const event: SubjectEvent = { type: 'target_revoked', address_id: a.id, target_id: target.id, at };
    return {
      events: [event], reply: ok(200, { id: target.id, revoked: true, revoked_at: at }),
      publications: addressPublications(evolveSubject(s, event).addresses[a.id]!, context),
    };
  }),
};

function create(state: SubjectState | null, input: Inputs, context: DecideContext, owner: string): Result {
  if (state !== null) return invalid('id', 'subject id already in use');
  const created_at = isoTime(context.now);
  return {
    events: [{ type: 'created', subject: { id: input.id, subject_type: input.subject_type, owner, external_ref_sealed: input.external_ref_sealed ?? null, created_at } }],
    reply: ok(201, { id: input.id, subject_type: input.subject_type, created_at }),
  };
}

function addIdentifier(_subject: SubjectState, input: Inputs, context: DecideContext): Result {
  const method: string | null = input.verification_method ?? null;
  if (method !== null && !VERIFICATION_METHODS[input.identifier_type as keyof typeof VERIFICATION_METHODS].includes(method)) {
    return invalid('verification_method', `verification_method is not one of ${input.identifier_type}'s methods`);
  }
  const at = isoTime(context.now);
  const identifier: IdentifierEntry = {
    id: input.id, identifier_type: input.identifier_type, hash: input.hash, discoverability: input.discoverability,
    verification_method: method, verified_at: method === null ? null : at, created_at: at,
  };
  return {
    events: [{ type: 'identifier_added', identifier }],
    reply: ok(201, { id: identifier.id, identifier_type: identifier.identifier_type, discoverability: identifier.discoverability, verified_at: identifier.verified_at }),
    directory: [directoryRowOfIdentifier(identifier)],
  };
}

function withdraw(s: SubjectState, _input: Inputs, context: DecideContext): Result {
  const identifiers = Object.values(s.identifiers);
  const addresses = Object.values(s.addresses).filter((a) => a.revoked_at === null);
  const entries = identifiers.length + addresses.length;
  const at = isoTime(context.now);
  const next = evolveSubject(s, { type: 'withdrawn', at });
  return {
    events: [{ type: 'withdrawn', at }],
    reply: ok(200, { subject_id: s.id, withdrawn: true, entries }),
    directory: [...Object.values(next.identifiers).map(directoryRowOfIdentifier), ...Object.values(next.addresses).map(directoryRowOfAddress)],
  };
}

function addAttestation(s: SubjectState, input: Inputs, context: DecideContext): Result {
  const expires = parseTime(input.expires_at);
  if (expires === null) return invalid('expires_at', 'expires_at is not an RFC 3339 UTC time');
  if (expires <= context.now) return invalid('expires_at', 'expires_at must be in the future');
  const attestation: AttestationEntry = {
    reference: input.reference, claim: input.claim, value: input.value, expires_at: input.expires_at, created_at: isoTime(context.now), revoked_at: null,
  };
  return {
    events: [{ type: 'attestation_recorded', attestation }],
    reply: ok(201, { reference: attestation.reference, subject_id: s.id, claim: attestation.claim, value: attestation.value, expires_at: attestation.expires_at, created_at: attestation.created_at }),
    publications: [routePublication(attestation.reference, s.id)],
  };
}

function addBinding(s: SubjectState, input: Inputs, context: DecideContext): Result {
  if (input.expires_at != null) {
    const expires = parseTime(input.expires_at);
    if (expires === null || expires <= context.now) return invalid('expires_at', 'expires_at must be a future RFC 3339 UTC time');
  }
  const binding: BindingEntry = {
    reference: input.reference, binding_type: input.binding_type, target_kind: input.target_kind, target_hash: input.target_hash,
    proof_method: input.proof_method, expires_at: input.expires_at ?? null, created_at: isoTime(context.now), revoked_at: null,
  };
  return {
    events: [{ type: 'binding_recorded', binding }],
    reply: ok(201, {
      reference: binding.reference, subject_id: s.id, binding_type: binding.binding_type, target_kind: binding.target_kind,
      proof_method: binding.proof_method, expires_at: binding.expires_at, created_at: binding.created_at,
    }),
    publications: [routePublication(binding.reference, s.id)],
  };
}

function recordStatus(r: { revoked_at: string | null; expires_at: string | null }, now: number): 'active' | 'revoked' | 'expired' {
  if (r.revoked_at !== null) return 'revoked';
  if (r.expires_at !== null && parseTime(r.expires_at)! <= now) return 'expired';
  return 'active';
}

/** An execution-time read: 410 once revoked or expired (SPEC B), otherwise a signed statement. */
function readRecord<T extends { revoked_at: string | null; expires_at: string | null }>(
  record: T | undefined, context: DecideContext, body: (r: T) => Record<string, unknown>, what: string,
): Result {
  if (record === undefined) return notFound(what);
  const status = recordStatus(record, context.now);
  if (status === 'revoked') return refusal('path.id.attestation_revoked', `this ${what} was revoked`);
  if (status === 'expired') return refusal('path.id.attestation_expired', `this ${what} has expired`);
  const signed = signObject({ ...body(record), ...envelopeFields(context.signer, isoTime(context.now)) }, context.signer);
  return { events: [], reply: { status: 200, body: JSON.stringify(signed), signed: true } };
}

function newAddress(s: SubjectState, input: Inputs, context: DecideContext, rotatedFrom: AddressEntry | null): AddressEntry {
  const at = isoTime(context.now);
  const base = rotatedFrom ?? { profile: input.profile, discoverability: input.discoverability, is_primary: input.is_primary };
  return {
    id: input.id, address: input.address, hash: input.hash, profile: base.profile,
    discoverability: s.withdrawn_at !== null && rotatedFrom !== null ? 'private' : base.discoverability,
    is_primary: base.is_primary, created_at: at, revoked_at: null, rotated_from: rotatedFrom?.id ?? null,
    targets: rotatedFrom === null ? {} : Object.fromEntries(liveTargets(rotatedFrom).map((t) => [t.id, t])),
    // A rotated address keeps its terms, committed afresh over the new address.
    intents: rotatedFrom === null ? [] : rotatedFrom.intents.filter((i) => i.active).map((i) => ({
      ...i, version: 1, created_at: at, commitment: commitmentOf(input.address, i.accepts, i.limits),
    })),
  };
}

function createAddress(s: SubjectState, input: Inputs, context: DecideContext): Result {
  const address = newAddress(s, input, context, null);
  const events: SubjectEvent[] = [];
  if (address.is_primary) {
    for (const a of Object.values(s.addresses)) if (a.is_primary) events.push({ type: 'primary_cleared', address_id: a.id });
  }
  events.push({ type: 'address_created', address });
  return {
    events,
    reply: ok(201, { id: address.id, address: address.address, profile: address.profile, discoverability: address.discoverability, is_primary: address.is_primary, created_at: address.created_at }),
    publications: [routePublication(address.id, s.id), ...addressPublications(address, context)],
    directory: [directoryRowOfAddress(address)],
  };
}

function rotateAddress(s: SubjectState, input: Inputs, context: DecideContext): Result {
  return withLiveAddress(s, input, (old) => {
    const at = isoTime(context.now);
    const fresh = newAddress(s, input.replacement, context, old);
    const revoked = evolveSubject(s, { type: 'address_revoked', address_id: old.id, at }).addresses[old.id]!;
    return {
      events: [{ type: 'address_revoked', address_id: old.id, at }, { type: 'address_created', address: fresh }],
      reply: ok(201, { id: fresh.id, address: fresh.address, rotated_from: old.id, profile: fresh.profile, discoverability: fresh.discoverability }),
      publications: [...addressPublications(revoked, context), routePublication(fresh.id, s.id), ...addressPublications(fresh, context)],
      directory: [directoryRowOfAddress(revoked), directoryRowOfAddress(fresh)],
    };
  });
}

function setIntent(s: SubjectState, input: Inputs, context: DecideContext): Result {
  return withLiveAddress(s, input, (a) => {
    const accepts = input.accepts as CapabilityT[];
    const limits = (input.limits ?? {}) as Record<string, unknown>;
    const version = a.intents.length + 1;
    const event: SubjectEvent = {
      type: 'intent_set', address_id: a.id,
      intent: {
        version, accepts, policy: input.policy ?? null, limits, active: true, created_at: isoTime(context.now),
        commitment: commitmentOf(a.address, accepts, limits),
      },
    };
    return {
      events: [event],
      reply: ok(200, { version, active: true }),
      publications: addressPublications(evolveSubject(s, event).addresses[a.id]!, context),
    };
  });
}

function addTarget(s: SubjectState, input: Inputs, context: DecideContext): Result {
  return withLiveAddress(s, input, (a) => {
    const t = input.target as Omit<TargetEntry, 'created_at' | 'revoked_at'>;
    const live = (LIVE_RAILS as readonly string[]).includes(t.rail);
    if (!live && (t.beneficiary_format !== null || t.beneficiary !== null)) {
      return invalid('beneficiary_format', 'a reserved rail has no beneficiary format');
    }
    if (t.beneficiary_format !== null && t.rail !== 'blockchain') return invalid('beneficiary_format', 'chain_address is a blockchain beneficiary format');
    if ((t.beneficiary_format === null) !== (t.beneficiary === null)) return invalid('beneficiary', 'beneficiary and beneficiary_format go together');
    const target: TargetEntry = { ...t, created_at: isoTime(context.now), revoked_at: null };
    const event: SubjectEvent = { type: 'target_added', address_id: a.id, target };
    return {
      events: [event],
      reply: ok(201, publicTarget(target)),
      publications: addressPublications(evolveSubject(s, event).addresses[a.id]!, context),
    };
  });
}

/**
 * The payee check (SPEC F): the holder compares the proposed name with the registered one and
 * answers a signed result; the answer never carries any other identifier, account detail, KYC
 * level or balance. Allowances (P12): checks per payment context over its life, and distinct
 * names per requester, address and day (a resubmitted name is free).
 */
function payeeCheck(s: SubjectState, input: Inputs, context: DecideContext): Result {
  return withLiveAddress(s, input, (a) => {
    const day = isoTime(context.now).slice(0, 10);
    const checks = s.payee_checks ?? { contexts: {}, names: {} };
    const contextRef: string | null = input.context_ref ?? null;
    if (contextRef !== null && (checks.contexts[contextRef] ?? 0) >= input.limits.context_max) {
      return refusal('path.finder.budget_exhausted', 'the payee checks of this payment context are spent', { allowance: input.limits.context_max, window: 'context' });
    }
    const record = s.payee_record;
    const available = record !== null && record.payee_check === 'enabled';
    const namesKey = `${a.id}|${input.requester}|${day}`;
    const counted = available && input.mode === 'verify';
    if (counted) {
      const seen = checks.names[namesKey] ?? [];
      if (!seen.includes(input.name_key) && seen.length >= input.limits.names_per_day_max) {
        return refusal('path.finder.budget_exhausted', 'too many different names checked for this address today', { allowance: input.limits.names_per_day_max, window: 'calendar_day' });
      }
    }
    let result: string = 'unavailable';
    let displayName: string | null = null;
    if (available) {
      if (context.unseal === undefined) throw new Error('payee check needs the sealing key');
      const registered = context.unseal(record.name_sealed);
      if (input.mode === 'display') {
        result = 'shown';
        displayName = maskedName(registered, s.subject_type);
      } else {
        result = matchName(registered, input.name, s.subject_type);
        if (result === 'close_match') displayName = maskedName(registered, s.subject_type);
      }
    }
    const answer = signObject({
      kind: 'payee_check', key: a.address, requester: input.requester, mode: input.mode, result,
      ...(displayName === null ? {} : { display_name: displayName }),
      subject_type: s.subject_type, nonce: input.nonce, ...envelopeFields(context.signer, isoTime(context.now)),
    }, context.signer);
    return {
      events: [{ type: 'payee_checked', day, context: contextRef, names_key: counted ? namesKey : null, name_key: counted ? input.name_key : null }],
      reply: { status: 200, body: JSON.stringify(answer), signed: true },
    };
  });
}

function withLiveAddress(s: SubjectState, input: Inputs, live: (a: AddressEntry) => Result, revoked?: (a: AddressEntry) => Result): Result {
  const a = s.addresses[input.address_id];
  if (a === undefined) return notFound('address');
  if (a.revoked_at !== null) return revoked === undefined ? gone() : revoked(a);
  return live(a);
}

/** Public fields of a target; `account_ref` never leaves the node. */
export function publicTarget(t: TargetEntry): Record<string, unknown> {
  return {
    id: t.id, rail: t.rail, asset_type: t.asset_type, asset_code: t.asset_code, account_kind: t.account_kind, is_default: t.is_default,
    ...(t.beneficiary_format === null ? {} : { beneficiary_format: t.beneficiary_format, beneficiary: t.beneficiary }),
    created_at: t.created_at,
  };
}

function routePublication(id: string, subjectId: string): Publication {
  return { key: routeViewKey(id), reply: { status: 200, body: subjectId, signed: false } };
}

const visible = (d: Discoverability): 'public' | 'network' | null => (d === 'private' ? null : d);

function directoryRowOfIdentifier(i: IdentifierEntry): DirectoryRow {
  return { key: `idn/${i.id}`, identifierType: i.identifier_type, identifierHash: i.hash, visibility: visible(i.discoverability) };
}

/** Only `directory` addresses are reachable through the index (SPEC C). */
function directoryRowOfAddress(a: AddressEntry): DirectoryRow {
  const visibility = a.profile === 'directory' && a.revoked_at === null ? visible(a.discoverability) : null;
  return { key: `adr/${a.id}`, identifierType: 'address', identifierHash: a.hash, visibility };
}
