// What `GET /path/{reference}` answers (P4, P20): the signed object, or the page for people when
// the request prefers HTML (a browser's Accept). Both forms vary by Accept, so no cache hands
// one to a client that asked for the other.
import Negotiator from 'negotiator';
import type { HttpReply } from '../http/reply.js';
import { renderLinkPage, type LinkAnswer } from './render.js';

/**
 * The page's policy: its script and style from this node only, no inline code or style, no
 * forms, no framing, and reads only from this node (the object and the keys document).
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers on both forms of a link's answer. */
const LINK_HEADERS = { vary: 'Accept', 'x-content-type-options': 'nosniff' } as const;

const PAGE_HEADERS = {
  ...LINK_HEADERS,
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'referrer-policy': 'no-referrer',
} as const;

/** JSON first: a client that states no preference (no Accept, or `*` alone) gets the object. */
const OFFERED = ['application/json', 'text/html'];

export function prefersHtml(accept: string): boolean {
  if (accept === '') return false;
  return new Negotiator({ headers: { accept } }).mediaType(OFFERED) === 'text/html';
}

/** The answer to a link: the node's reply as it is, or rendered as the page, same status. */
export function linkAnswer(
  reply: HttpReply,
  request: { accept: string; reference: string; link: string; now: number },
): HttpReply {
  const headers = { ...reply.headers, ...LINK_HEADERS };
  if (!prefersHtml(request.accept)) return { ...reply, headers };
  const text = typeof reply.body === 'string' ? reply.body : Buffer.from(reply.body).toString();
  const parsed = JSON.parse(text) as Record<string, unknown>;
  const answer: LinkAnswer =
    reply.status < 300
      ? { status: reply.status, object: parsed }
      : { status: reply.status, refusal: parsed.error as { code: string; message: string } };
  const page = renderLinkPage({ ...request, answer });
  return { status: reply.status, body: page, signed: false, headers: { ...PAGE_HEADERS } };
}
