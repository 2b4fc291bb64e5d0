// The webhook target policy at delivery (P11): the URL was checked when it was given
// (protocol/url-policy.ts); every address its host resolves to is checked again before sending.
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { addressAllowed } from '../protocol/url-policy.js';

/** Checks every address the URL's host resolves to (no rebinding into private ranges). */
export async function resolvedAllowed(text: string, options: { dev: boolean }): Promise<boolean> {
  const host = new URL(text).hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) !== 0 ? [{ address: host }] : await lookup(host, { all: true });
  return addresses.length > 0 && addresses.every((a) => addressAllowed(a.address, options));
}
