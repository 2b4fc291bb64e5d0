// Real LMDB logs in temporary directories for tests, each closed and removed by `cleanUp`
// (call it from afterEach).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbLog, openEnvironment, type LmdbEnvironment } from '../../src/log/lmdb-log.js';

export function temporaryLogs(label: string): {
  fresh: () => LmdbLog;
  cleanUp: () => Promise<void>;
} {
  const envs: LmdbEnvironment[] = [];
  const dirs: string[] = [];
  return {
    fresh() {
      const dir = mkdtempSync(join(tmpdir(), `path-node-${label}-`));
      dirs.push(dir);
      const env = openEnvironment(dir);
      envs.push(env);
      return new LmdbLog(env);
    },
    async cleanUp() {
      for (const env of envs.splice(0)) await env.root.close();
      for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    },
  };
}
