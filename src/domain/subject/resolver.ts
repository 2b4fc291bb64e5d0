// What the holder answers about an address (SPEC E): the resolver answer and the commitment
// object, signed when the terms change and served as committed bytes. A routing question gets a
// routing answer: nothing here names the holder, the subject, an account or an identifier.
import type { DecideContext, Publication, View } from '../decider.js';
import { digestOf } from '../../protocol/digest.js';
import { refusal } from '../../protocol/errors.js';
import type { CapabilityT } from '../../protocol/schemas.js';
import { GRAMMAR, envelopeFields, signObject } from '../../protocol/signing.js';
import { isoTime } from '../../protocol/time.js';
import { activeIntent, liveTargets, type AddressEntry } from './state.js';

/**
 * The internal view that says a subject exists (never served: not reference-shaped), read by
 * the connection aggregate. Its text is not read: its presence is the fact.
 */
export const subjectViewKey = (subjectId: string) => `subject/${subjectId}`;
export const resolverViewKey = (address: string) => `resolver/${address}`;
export const commitmentViewKey = (address: string) => `commitment/${address}`;
/** Internal view (never served): what requests and instructions need to know of an address. */
export const addressInfoKey = (idOrAddress: string) => `address/${idOrAddress}`;

export interface AddressInfo {
  id: string;
  address: string;
  revoked: boolean;
  /** Version of the standing intent in force, or null when accepts are inferred from targets. */
  intent_version: number | null;
  accepts: CapabilityT[];
  targets: {
    rail: string;
    asset_type: string;
    asset_code: string;
    is_default: boolean;
    beneficiary_format: string | null;
    beneficiary: string | null;
  }[];
}

/** commitment = digest of {grammar, address, accepts, limits} (P3). */
export function commitmentOf(
  address: string,
  accepts: readonly CapabilityT[],
  limits: Record<string, unknown>,
): string {
  return digestOf({ grammar: GRAMMAR, address, accepts, limits });
}

/**
 * Without a standing intent, accepts is inferred from the live targets (one capability per
 * distinct rail and asset).
 */
export function inferredAccepts(address: AddressEntry): CapabilityT[] {
  const seen = new Map<string, CapabilityT>();
  for (const t of liveTargets(address)) {
    const capability = { rail: t.rail, asset_type: t.asset_type, asset_code: t.asset_code };
    seen.set(JSON.stringify(capability), capability);
  }
  return [...seen.values()];
}

const signed = (object: unknown): View => ({ text: JSON.stringify(object), signed: true });

function infoOf(address: AddressEntry): AddressInfo {
  const intent = activeIntent(address);
  return {
    id: address.id,
    address: address.address,
    revoked: address.revoked_at !== null,
    intent_version: intent?.version ?? null,
    accepts: intent?.accepts ?? inferredAccepts(address),
    targets: liveTargets(address).map((t) => ({
      rail: t.rail,
      asset_type: t.asset_type,
      asset_code: t.asset_code,
      is_default: t.is_default,
      beneficiary_format: t.beneficiary_format,
      beneficiary: t.beneficiary,
    })),
  };
}

/** The public answers for one address, as they stand after a change at `context.now`. */
export function addressPublications(address: AddressEntry, context: DecideContext): Publication[] {
  const info = infoOf(address);
  const infoView: View = { text: JSON.stringify(info), signed: false };
  const internal: Publication[] = [
    { key: addressInfoKey(address.id), view: infoView },
    { key: addressInfoKey(address.address), view: infoView },
  ];
  if (address.revoked_at !== null) {
    const gone: View = { gone: refusal('path.address.revoked', 'this address was revoked') };
    return [
      ...internal,
      { key: resolverViewKey(address.address), view: gone },
      { key: commitmentViewKey(address.address), view: gone },
    ];
  }
  const intent = activeIntent(address);
  const answer = signObject(
    {
      kind: 'resolver_answer',
      address: address.address,
      requester: null,
      standing: 'holder',
      valid: true,
      accepts: info.accepts,
      limits: intent?.limits ?? {},
      commitment: intent?.commitment ?? null,
      commitment_version: intent?.version ?? null,
      ...envelopeFields(context.signer, isoTime(context.now)),
    },
    context.signer,
  );
  const commitment =
    intent === null
      ? null
      : signed(
          signObject(
            {
              type: 'path.address.commitment',
              address: address.address,
              issuer: context.member,
              commitment: intent.commitment,
              version: intent.version,
              committed_at: intent.created_at,
              kid: context.signer.kid,
            },
            context.signer,
          ),
        );
  return [
    ...internal,
    { key: resolverViewKey(address.address), view: signed(answer) },
    { key: commitmentViewKey(address.address), view: commitment },
  ];
}
