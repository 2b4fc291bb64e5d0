// The test harness itself (test/support/harness.ts): a process that ends before it listens is
// reported with all it wrote. Its exit can be seen before its last lines are read (a loaded
// machine, or another process still holding its output), and a start that refuses names its
// reason in those lines (test/recovery-helpers.test.ts reads the damaged record's place there).
import { describe, expect, it } from 'vitest';
import { spawnUntilListening } from './support/harness.js';

/**
 * Exits at once, while a process it started, holding the same output, writes the reason a
 * moment later: the exit is seen before that line can be read.
 */
const EXITS_BEFORE_ITS_LAST_LINE = `
  const { spawn } = require('node:child_process');
  const late = 'setTimeout(() => console.log("the reason, written late"), 300)';
  const stdio = ['ignore', 'inherit', 'inherit'];
  spawn(process.execPath, ['-e', late], { stdio, detached: true }).unref();
  process.exit(1);
`;

describe('the harness', () => {
  it('reports a process that ends before listening with every line it wrote', async () => {
    const started = await spawnUntilListening(['-e', EXITS_BEFORE_ITS_LAST_LINE]).then(
      () => null,
      (error: Error) => error,
    );
    expect(started).toBeInstanceOf(Error);
    expect(started!.message).toContain('the reason, written late');
  });
});
