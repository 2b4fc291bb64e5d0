// One contract suite (log.contract.ts), run against every `Log` implementation.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { logContract } from './log.contract.js';
import { LmdbLog, openEnvironment } from './lmdb-log.js';
import type { Log } from './log.js';
import { MemoryLog } from './memory-log.js';

logContract(
  'MemoryLog',
  (() => {
    return {
      open: () => new MemoryLog(),
      // The memory log lives as long as its object: a reopen is the same log (no crash between).
      reopen: (log: Log) => log,
      dispose: () => undefined,
    };
  })(),
);

logContract(
  'LmdbLog',
  (() => {
    let dir: string | null = null;
    let open: LmdbLog | null = null;
    return {
      open: () => {
        dir = mkdtempSync(join(tmpdir(), 'path-node-contract-'));
        open = new LmdbLog(openEnvironment(dir));
        return open;
      },
      reopen: async (log: Log) => {
        await log.close();
        open = new LmdbLog(openEnvironment(dir!));
        return open;
      },
      dispose: async () => {
        await open?.close();
        open = null;
        if (dir !== null) rmSync(dir, { recursive: true, force: true });
        dir = null;
      },
    };
  })(),
);
