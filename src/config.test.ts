// What `--store` takes (issue 29): a postgres:// URL of one host, or of several separated by
// commas for a switchover, each host a URL of its own; anything else is refused without the
// URL in the message (it may carry a password).
import { describe, expect, it } from 'vitest';
import { ConfigError, storeOf } from './config.js';

describe('--store', () => {
  it('takes one host, several hosts, and a host-less URL', () => {
    for (const url of [
      'postgres://path@db.internal/path',
      'postgresql://path:secret@10.0.0.5:5433/path?sslmode=require',
      'postgres://path@db1:5432,db2:5432/path?target_session_attrs=read-write',
      'postgres:///path?host=/var/run/postgresql',
    ])
      expect(storeOf(url)).toBe(url);
    expect(storeOf('')).toBeNull();
  });

  it('refuses other URLs and empty hosts, never quoting the URL', () => {
    for (const url of [
      'mysql://u:hunter2@db/path',
      'db.internal/path',
      'postgres://u:hunter2@db1:5432,,db2/path',
      'postgres://u:hunter2@db1:99999999,db2/path',
    ]) {
      expect(() => storeOf(url), url).toThrow(ConfigError);
      expect(() => storeOf(url)).not.toThrow(/hunter2/);
    }
  });
});
