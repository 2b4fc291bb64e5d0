// Validators and content codings of the answers whose bytes are made once: the public documents
// (keys, discovery, OpenAPI) when the node makes them, a commitment when its view is first read.
// Each representation carries a strong ETag, the hash of its exact bytes (RFC 9110 8.8.3), and
// its 304 made beside it; a document long enough to pay is compressed once, brotli and gzip, each
// when first asked for and each a representation of its own with its own ETag. Per request only
// a choice is made: the coding from Accept-Encoding, then If-None-Match against the chosen
// representation (RFC 9110 13.1.2), for GET and HEAD (the only methods of the routes that read
// them).
import { createHash } from 'node:crypto';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import Negotiator from 'negotiator';
import { BROTLI_QUALITY, COMPRESSED_DOCUMENT_BYTES_MIN, GZIP_LEVEL } from '../config.js';
import type { HttpReply, ReplyCache } from './reply.js';
import { once } from '../once.js';

/**
 * The Cache-Control of the cacheable answers: any cache may keep them, as they are identical for
 * every caller (SPEC E: commitments are "cacheable"), and asks before each use (the 304 costs no
 * body). None is kept longer: at its URL each can change. The keys document and discovery change
 * when the signing key rotates, and a verifier must see a new key at once; the OpenAPI document
 * with a new build; an address's commitment with its standing terms, where a stale one would
 * make a payer refuse the resolver's answer as a mismatch (not retried). No route serves a
 * superseded version by a URL of its own, which alone could be kept for good.
 */
export const REVALIDATE = 'public, no-cache';

/** What a request says of the representation it takes; read on cacheable routes only. */
export interface Conditions {
  /** The If-None-Match header, or empty. */
  ifNoneMatch: string;
  /** The Accept-Encoding header, or empty (then no coding is used). */
  acceptEncoding: string;
}

type Coding = keyof NonNullable<ReplyCache['coded']>;

const EMPTY = Buffer.alloc(0);

const bytesOf = (body: string | Uint8Array): Uint8Array =>
  typeof body === 'string' ? Buffer.from(body) : body;

/** A strong validator: the base64url SHA-256 of the exact bytes sent. */
function entityTag(bytes: Uint8Array): string {
  return `"${createHash('sha256').update(bytes).digest('base64url')}"`;
}

/** The reply as one representation: its ETag and headers, and its 304 beside it. */
function represented(reply: HttpReply, headers: Record<string, string>): HttpReply {
  const etag = entityTag(bytesOf(reply.body));
  const kept: Record<string, string> = { etag, 'cache-control': headers['cache-control']! };
  if (headers.vary !== undefined) kept.vary = headers.vary;
  const notModified: HttpReply = { status: 304, body: EMPTY, signed: reply.signed, headers: kept };
  const all = { ...reply.headers, ...headers, etag };
  return { ...reply, headers: all, cache: { etag, notModified } };
}

/**
 * A 200 made cacheable, once: its ETag and Cache-Control, and where `compress` is set and the
 * body is long enough, its brotli and gzip codings (all representations `Vary: Accept-Encoding`),
 * each compressed on its first use.
 */
export function cacheable(
  reply: HttpReply,
  options: { cacheControl: string; compress: boolean },
): HttpReply {
  const bytes = bytesOf(reply.body);
  const compress = options.compress && bytes.byteLength >= COMPRESSED_DOCUMENT_BYTES_MIN;
  const headers: Record<string, string> = { 'cache-control': options.cacheControl };
  if (!compress) return represented({ ...reply, body: bytes }, headers);
  headers.vary = 'Accept-Encoding';
  const identity = represented({ ...reply, body: bytes }, headers);
  const coded = (coding: Coding, body: () => Uint8Array) =>
    once(() => represented({ ...reply, body: body() }, { ...headers, 'content-encoding': coding }));
  const brotli = () =>
    brotliCompressSync(bytes, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_SIZE_HINT]: bytes.byteLength,
      },
    });
  // Each coding is made when a request first asks for it, then kept: a start, and a document
  // made again (the keys at each poll), compress nothing no client has asked for.
  const br = coded('br', brotli);
  const gzip = coded('gzip', () => gzipSync(bytes, { level: GZIP_LEVEL }));
  const codings = {
    get br() {
      return br();
    },
    get gzip() {
      return gzip();
    },
  };
  return { ...identity, cache: { ...identity.cache!, coded: codings } };
}

/** A public document (P4, P19) as the node serves it: JSON, cacheable, compressed once. */
export function documentReply(text: string): HttpReply {
  const reply: HttpReply = { status: 200, body: Buffer.from(text), signed: false };
  return cacheable(reply, { cacheControl: REVALIDATE, compress: true });
}

/** Ours first where the client likes several as well: the smallest. */
const OFFERED = ['br', 'gzip', 'identity'];

/** The typings of negotiator lag its 1.x `preferred` option, which settles ties our way. */
type Encodings = (available: string[], options: { preferred: string[] }) => string[];

/** The last Accept-Encoding seen and the coding it chose: clients send the same few headers. */
let lastAccepted = '';
let lastCoding = 'identity';

function codingFor(acceptEncoding: string): string {
  if (acceptEncoding !== lastAccepted) {
    const negotiator = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } });
    const encodings = negotiator.encodings.bind(negotiator) as unknown as Encodings;
    lastCoding = encodings(OFFERED, { preferred: OFFERED })[0] ?? 'identity';
    lastAccepted = acceptEncoding;
  }
  return lastCoding;
}

/**
 * Whether If-None-Match names `etag` (RFC 9110 13.1.2): `*` names any representation, else a
 * comma-separated list of entity tags compared weakly (a `W/` prefix is ignored). A value that is
 * not such a list names nothing, and the full answer is sent.
 */
export function noneMatchNames(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  let at = 0;
  while (at < header.length) {
    const c = header[at];
    if (c === ' ' || c === '\t' || c === ',') {
      at++;
      continue;
    }
    if (header.startsWith('W/', at)) at += 2;
    if (header[at] !== '"') return false;
    const end = header.indexOf('"', at + 1);
    if (end === -1) return false;
    if (end + 1 - at === etag.length && header.startsWith(etag, at)) return true;
    at = end + 1;
  }
  return false;
}

/** The representation a request gets: its coding, then a 304 when If-None-Match names it. */
export function representation(reply: HttpReply, conditions: Conditions): HttpReply {
  const cache = reply.cache;
  if (cache === undefined) return reply;
  let chosen = reply;
  if (cache.coded !== undefined && conditions.acceptEncoding !== '') {
    const coding = codingFor(conditions.acceptEncoding);
    if (coding === 'br' || coding === 'gzip') chosen = cache.coded[coding];
  }
  const { etag, notModified } = chosen.cache!;
  if (conditions.ifNoneMatch !== '' && noneMatchNames(conditions.ifNoneMatch, etag)) {
    return notModified;
  }
  return chosen;
}
