// What a party reads (SPEC K): the connection or delegation signed at read, its terms as the
// signed consent or binds state them, its status and counters as they are now.
import type { Answer, DecideContext, Decision } from '../decider.js';
import { envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime } from '../../protocol/time.js';
import { countersView } from './consume.js';
import { statusOf, type ConnectionState, type DelegationState } from './state.js';

/** The connection as signed at read: status and counters now; terms as the consent states them. */
export function connectionObject(s: ConnectionState, now: number): Record<string, unknown> {
  const terms = s.consent;
  return {
    type: 'path.connection',
    reference: s.reference,
    grantor: terms.grantor,
    grantee: terms.grantee,
    subject_id: terms.subject_id,
    status: statusOf(s, now),
    mode: terms.mode,
    capabilities: terms.capabilities,
    max_single: terms.max_single,
    max_total: terms.max_total,
    currency: terms.currency,
    expires_at: terms.expires_at,
    schedule: terms.schedule ?? null,
    consent_digest: s.consent_digest,
    consent: s.consent,
    ...countersView(s),
    revoked_at: s.revoked_at,
    revoked_by: s.revoked_by,
  };
}

/** A delegation as signed at read: terms from `binds`, status and counters now. */
export function delegationObject(
  s: ConnectionState,
  d: DelegationState,
  now: number,
): Record<string, unknown> {
  return {
    type: 'path.delegation',
    reference: d.reference,
    connection: s.reference,
    delegate: d.binds.delegate,
    status: statusOf(d, now),
    binds_to: d.binds.binds_to,
    max_total: d.binds.max_total,
    expires_at: d.binds.expires_at,
    binds: d.binds,
    binds_digest: d.binds_digest,
    ...countersView(d),
    revoked_at: d.revoked_at,
    revoked_by: d.revoked_by,
  };
}

/** A read: the object signed now (P10), changing nothing. */
export function signedRead<E>(
  object: Record<string, unknown>,
  context: DecideContext,
): Decision<E> {
  const fields = envelopeFields(context.signer, isoTime(context.now));
  const signed = signObject({ ...object, ...fields }, context.signer);
  const answer: Answer = { text: JSON.stringify(signed), signed: true };
  return { events: [], answer };
}

/** A revocation as recorded (a second revoke answers it unchanged). */
export function revokedView(x: {
  reference: string;
  revoked_at: string | null;
  revoked_by: string | null;
}) {
  return {
    reference: x.reference,
    status: 'revoked',
    revoked_at: x.revoked_at,
    revoked_by: x.revoked_by,
  };
}
