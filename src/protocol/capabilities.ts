// Capability identity: two capabilities name the same way to be paid when their rail, asset,
// chain, token standard and contract agree. Fees, limits and unknown members describe terms,
// not identity.
import { canonicalJson } from './canonical.js';
import type { CapabilityT } from './schemas.js';

export function capabilityIdentity(c: CapabilityT): string {
  return canonicalJson([
    c.rail,
    c.asset_type,
    c.asset_code,
    c.chain ?? null,
    c.standard ?? null,
    c.contract ?? null,
  ]);
}

/** The entry of `offered` that `wanted` names, or undefined (an absent capability is denied). */
export function findCapability(
  offered: readonly CapabilityT[],
  wanted: CapabilityT,
): CapabilityT | undefined {
  const id = capabilityIdentity(wanted);
  return offered.find((c) => capabilityIdentity(c) === id);
}
