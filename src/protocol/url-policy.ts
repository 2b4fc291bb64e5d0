// Which webhook targets the node will call (P11): https only, and never a private, loopback or
// link-local address, unless the node runs with --dev (which also allows http and loopback).
// Pure: checked on the URL by the decider that takes it (a checkout session's webhook_url), and
// again on every resolved address at delivery (events/url-policy.ts).
import { BlockList, isIP } from 'node:net';
import { invalid, type Refusal } from './errors.js';

const FORBIDDEN_V4 = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const;
const FORBIDDEN_V6 = [
  ['::', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const;

const forbidden = new BlockList();
for (const [net, prefix] of FORBIDDEN_V4) forbidden.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of FORBIDDEN_V6) forbidden.addSubnet(net, prefix, 'ipv6');
const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** May the node send to this IP address? */
export function addressAllowed(ip: string, options: { dev: boolean }): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  const address = mapped?.[1] ?? ip;
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  if (loopback.check(address, family)) return options.dev;
  return !forbidden.check(address, family);
}

/** A refusal naming `field` when the URL is not an allowed webhook target, else null. */
export function checkWebhookUrl(
  text: string,
  field: string,
  options: { dev: boolean },
): Refusal | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return invalid(field, `${field} is not a URL`);
  }
  if (url.protocol !== 'https:' && !(options.dev && url.protocol === 'http:')) {
    return invalid(field, `${field} must use https`);
  }
  if (url.username !== '' || url.password !== '') {
    return invalid(field, `${field} must not carry credentials`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host.endsWith('.localhost')) {
    return options.dev ? null : invalid(field, `${field} must not be a loopback address`);
  }
  if (isIP(host) !== 0 && !addressAllowed(host, options)) {
    return invalid(field, `${field} must not be a private, loopback or link-local address`);
  }
  return null;
}
