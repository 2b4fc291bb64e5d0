// Attestations and ownership bindings (SPEC B, "States and transitions: attestation"): statements
// the node makes about a subject, read at execution time by any member.
//   active -> revoked (the operator revokes it; the row is kept)
//   active -> expired (passage of expires_at, judged at each read)
// Either way the next read answers 410 with the matching code; the list still shows the row.
import type { DecideContext } from '../decider.js';
import { invalid, refusal } from '../../protocol/errors.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime, parseTime } from '../../protocol/time.js';
import { attestationsOf, bindingsOf, type AttestationEntry, type BindingEntry } from './state.js';
import { notFound, routePublication, unchanged, type Handler, type Result } from './decision.js';

type RecordStatus = 'active' | 'revoked' | 'expired';

interface Lifetime {
  revoked_at: string | null;
  expires_at: string | null;
}

function recordStatus(r: Lifetime, now: number): RecordStatus {
  if (r.revoked_at !== null) return 'revoked';
  if (r.expires_at !== null && parseTime(r.expires_at)! <= now) return 'expired';
  return 'active';
}

export const addAttestation: Handler<'add-attestation'> = (s, input, context) => {
  const expires = parseTime(input.expires_at);
  if (expires === null) return invalid('expires_at', 'expires_at is not an RFC 3339 UTC time');
  if (expires <= context.now) return invalid('expires_at', 'expires_at must be in the future');
  const { reference, claim, value, expires_at } = input;
  const attestation: AttestationEntry = {
    reference,
    claim,
    value,
    expires_at,
    created_at: isoTime(context.now),
    revoked_at: null,
  };
  return {
    events: [{ type: 'attestation_recorded', attestation }],
    answer: {
      value: {
        reference,
        subject_id: s.id,
        claim,
        value,
        expires_at,
        created_at: attestation.created_at,
      },
      created: true,
    },
    publications: [routePublication(reference, s.id)],
  };
};

export const readAttestation: Handler<'read-attestation'> = (s, input, context) =>
  readRecord(attestationsOf(s).get(input.reference), context, 'attestation', (a) => ({
    type: 'path.attestation',
    reference: a.reference,
    issuer: context.member,
    subject_id: s.id,
    claim: a.claim,
    value: a.value,
    expires_at: a.expires_at,
    created_at: a.created_at,
  }));

/** Revoking twice changes nothing and answers with the first revocation's time. */
export const revokeAttestation: Handler<'revoke-attestation'> = (s, input, context) => {
  const a = attestationsOf(s).get(input.reference);
  if (a === undefined) return notFound('attestation');
  if (a.revoked_at !== null) {
    return unchanged({ reference: a.reference, revoked: true, revoked_at: a.revoked_at });
  }
  const at = isoTime(context.now);
  return {
    events: [{ type: 'attestation_revoked', reference: a.reference, at }],
    answer: { value: { reference: a.reference, revoked: true, revoked_at: at } },
  };
};

export const listAttestations: Handler<'list-attestations'> = (s, _input, context) =>
  unchanged({
    subject_id: s.id,
    attestations: [...attestationsOf(s).values()].map((a) => ({
      reference: a.reference,
      claim: a.claim,
      value: a.value,
      expires_at: a.expires_at,
      created_at: a.created_at,
      status: recordStatus(a, context.now),
      revoked_at: a.revoked_at,
    })),
  });

export const addBinding: Handler<'add-binding'> = (s, input, context) => {
  const expiresAt = input.expires_at ?? null;
  if (expiresAt !== null) {
    const expires = parseTime(expiresAt);
    if (expires === null || expires <= context.now) {
      return invalid('expires_at', 'expires_at must be a future RFC 3339 UTC time');
    }
  }
  const binding: BindingEntry = {
    reference: input.reference,
    binding_type: input.binding_type,
    target_kind: input.target_kind,
    target_hash: input.target_hash,
    proof_method: input.proof_method,
    expires_at: expiresAt,
    created_at: isoTime(context.now),
    revoked_at: null,
  };
  const { reference, binding_type, target_kind, proof_method, expires_at, created_at } = binding;
  return {
    events: [{ type: 'binding_recorded', binding }],
    answer: {
      value: {
        reference,
        subject_id: s.id,
        binding_type,
        target_kind,
        proof_method,
        expires_at,
        created_at,
      },
      created: true,
    },
    publications: [routePublication(reference, s.id)],
  };
};

export const readBinding: Handler<'read-binding'> = (s, input, context) =>
  readRecord(bindingsOf(s).get(input.reference), context, 'ownership binding', (b) => ({
    type: 'path.ownership_binding',
    reference: b.reference,
    issuer: context.member,
    subject_id: s.id,
    binding_type: b.binding_type,
    target_kind: b.target_kind,
    proof_method: b.proof_method,
    expires_at: b.expires_at,
    created_at: b.created_at,
  }));

/** An execution-time read: 410 once revoked or expired (SPEC B), otherwise a signed statement. */
function readRecord<T extends Lifetime>(
  record: T | undefined,
  context: DecideContext,
  what: string,
  body: (r: T) => Record<string, unknown>,
): Result {
  if (record === undefined) return notFound(what);
  const status = recordStatus(record, context.now);
  if (status === 'revoked') {
    return refusal('path.id.attestation_revoked', `this ${what} was revoked`);
  }
  if (status === 'expired') {
    return refusal('path.id.attestation_expired', `this ${what} has expired`);
  }
  const statement = signObject(
    {
      ...body(record),
      ...envelopeFields(context.signer, isoTime(context.now)),
    },
    context.signer,
  );
  return { events: [], answer: { text: JSON.stringify(statement), signed: true } };
}
