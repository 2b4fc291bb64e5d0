// Public reads from committed views (services.ts) on a real LMDB log: the log lends each view's
// bytes for one read only, so every answer must be its own view's bytes, whatever is read after
// it, and a view committed anew must be served as it now is.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LmdbLog, openEnvironment } from '../log/lmdb-log.js';
import { encodeView } from '../reads/views.js';
import { viewReply } from './services.js';

/** The record a view written here names (issue 28): a partition's first. */
const AT_FIRST = { partition: 0, seq: 1 };

const body = (text: string) => JSON.stringify({ text });
const text = (reply: ReturnType<typeof viewReply>) =>
  reply === null ? null : Buffer.from(reply.body).toString();

describe('viewReply on LMDB', () => {
  let dir: string;
  let log: LmdbLog;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'path-node-views-'));
    log = new LmdbLog(openEnvironment(dir));
  });
  afterEach(async () => {
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const commit = async (key: string, json: string, signed = true) => {
    await log.write([
      { table: 'views', key, bytes: encodeView({ status: 200, body: json, signed }, AT_FIRST) },
    ]);
    log.refresh();
  };

  it('answers each view its own bytes, however the reads interleave', async () => {
    const long = body('a'.repeat(2000));
    const short = body('b');
    await commit('rcp_long', long);
    await commit('rcp_short', short, false);
    const answers = ['rcp_long', 'rcp_short', 'rcp_long', 'rcp_short'].map((key) => ({
      key,
      reply: viewReply({ log }, key),
    }));
    // Read after all of them: an answer that pointed into a buffer the next read overwrites
    // would show the last view read here.
    for (const { key, reply } of answers) {
      expect(text(reply)).toBe(key === 'rcp_long' ? long : short);
      expect(reply?.signed).toBe(key === 'rcp_long');
    }
    expect(viewReply({ log }, 'rcp_none')).toBeNull();
  });

  it('serves a view committed after a read, even of the same length', async () => {
    await commit('rcp_x', body('first'));
    expect(text(viewReply({ log }, 'rcp_x'))).toBe(body('first'));
    const before = viewReply({ log }, 'rcp_x');
    await commit('rcp_x', body('again'));
    expect(text(viewReply({ log }, 'rcp_x'))).toBe(body('again'));
    expect(text(before)).toBe(body('first'));
  });

  it("serves another writer's commit once refreshed, the old view read before or not", async () => {
    await commit('rcp_y', body('first'));
    const other = new LmdbLog(openEnvironment(dir));
    try {
      for (let i = 0; i < 3; i++) expect(text(viewReply({ log }, 'rcp_y'))).toBe(body('first'));
      const bytes = encodeView({ status: 200, body: body('moved'), signed: true }, AT_FIRST);
      await other.write([{ table: 'views', key: 'rcp_y', bytes }]);
      log.refresh();
      expect(text(viewReply({ log }, 'rcp_y'))).toBe(body('moved'));
      await other.write([{ table: 'views', key: 'rcp_y', bytes: null }]);
      log.refresh();
      expect(viewReply({ log }, 'rcp_y')).toBeNull();
    } finally {
      await other.close();
    }
  });
});
