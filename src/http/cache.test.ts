// The choice cache.ts makes per request: If-None-Match as RFC 9110 13.1.2 reads it (`*`, a
// list, weak comparison), and the coding from Accept-Encoding; the representations themselves
// are made once. Over HTTP on a real node: test/http-cache.test.ts.
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { cacheable, documentReply, noneMatchNames, representation, REVALIDATE } from './cache.js';

const TAG = '"abc-123_XYZ"';

describe('noneMatchNames (RFC 9110 13.1.2)', () => {
  it('names the tag alone, weak or strong, in a list, and with `*`', () => {
    expect(noneMatchNames(TAG, TAG)).toBe(true);
    expect(noneMatchNames(`W/${TAG}`, TAG)).toBe(true);
    expect(noneMatchNames(`"other", W/"more" ,\t${TAG}`, TAG)).toBe(true);
    expect(noneMatchNames('*', TAG)).toBe(true);
    expect(noneMatchNames(' * ', TAG)).toBe(true);
  });

  it('does not name another tag, one it is part of, or one split by a comma in quotes', () => {
    expect(noneMatchNames('"other"', TAG)).toBe(false);
    expect(noneMatchNames('"abc-123_XYZ-gzip"', TAG)).toBe(false);
    expect(noneMatchNames('"x"abc-123_XYZ"', TAG)).toBe(false);
    expect(noneMatchNames('"a,"abc-123_XYZ""', TAG)).toBe(false);
    expect(noneMatchNames('"a, abc-123_XYZ"', TAG)).toBe(false);
  });

  it('a value that is not a list of entity tags names nothing (the full answer is sent)', () => {
    expect(noneMatchNames('abc-123_XYZ', TAG)).toBe(false);
    expect(noneMatchNames(`garbage ${TAG}`, TAG)).toBe(false);
    expect(noneMatchNames('"unterminated', TAG)).toBe(false);
    expect(noneMatchNames('W/', TAG)).toBe(false);
  });
});

describe('representation', () => {
  const items = Array.from({ length: 200 }, (_, i) => ({ i, name: `n${i}` }));
  const text = JSON.stringify({ items });
  const document = documentReply(text);
  const none = { ifNoneMatch: '', acceptEncoding: '' };

  it('a document is made with its ETag, Cache-Control and both codings, each its own tag', () => {
    expect(document.headers?.etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    expect(document.headers?.['cache-control']).toBe(REVALIDATE);
    expect(document.headers?.vary).toBe('Accept-Encoding');
    const { br, gzip } = document.cache!.coded!;
    expect(Buffer.from(brotliDecompressSync(br.body as Uint8Array)).toString()).toBe(text);
    expect(Buffer.from(gunzipSync(gzip.body as Uint8Array)).toString()).toBe(text);
    expect(br.headers?.['content-encoding']).toBe('br');
    expect(gzip.headers?.['content-encoding']).toBe('gzip');
    const tags = new Set([document.cache!.etag, br.cache!.etag, gzip.cache!.etag]);
    expect(tags.size).toBe(3);
  });

  it('picks the coding asked for, brotli on a tie, none when none is asked or acceptable', () => {
    const { br, gzip } = document.cache!.coded!;
    expect(representation(document, none)).toBe(document);
    expect(representation(document, { ...none, acceptEncoding: 'gzip' })).toBe(gzip);
    expect(representation(document, { ...none, acceptEncoding: 'gzip, deflate, br' })).toBe(br);
    expect(representation(document, { ...none, acceptEncoding: 'br;q=0.5, gzip' })).toBe(gzip);
    expect(representation(document, { ...none, acceptEncoding: 'deflate' })).toBe(document);
    expect(representation(document, { ...none, acceptEncoding: 'identity' })).toBe(document);
  });

  it('answers the 304 of the chosen representation when If-None-Match names it', () => {
    const { gzip } = document.cache!.coded!;
    const asGzip = { ifNoneMatch: gzip.cache!.etag, acceptEncoding: 'gzip' };
    const notModified = representation(document, asGzip);
    expect(notModified.status).toBe(304);
    expect(notModified.headers).toEqual({
      etag: gzip.cache!.etag,
      'cache-control': REVALIDATE,
      vary: 'Accept-Encoding',
    });
    expect(representation(document, { ...asGzip, acceptEncoding: '' })).toBe(document);
  });

  it('a short body is not compressed and carries no Vary', () => {
    const small = cacheable(
      { status: 200, body: '{"a":1}', signed: true },
      { cacheControl: REVALIDATE, compress: true },
    );
    expect(small.cache!.coded).toBeUndefined();
    expect(small.headers?.vary).toBeUndefined();
    expect(representation(small, { ...none, acceptEncoding: 'br' })).toBe(small);
  });
});
