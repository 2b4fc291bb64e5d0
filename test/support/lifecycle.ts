// Test support shared by files that start and stop nodes themselves: distinct signed timestamps
// (P5: identical signing strings are replays) and the clean-up of every node and directory a
// test made, whatever the test's outcome.
import { afterEach } from 'vitest';
import { removeDir, type NodeProcess } from './harness.js';

let lastStamp = 0;

/** An RFC 3339 time at least a millisecond after the last one this process handed out. */
export function stamp(): string {
  const t = Math.max(Date.now(), lastStamp + 1);
  lastStamp = t;
  return new Date(t).toISOString();
}

/** Nodes and directories registered here are killed and removed after each test. */
export function cleanedUpAfterEach(): { running: NodeProcess[]; dirs: string[] } {
  const running: NodeProcess[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const node of running.splice(0)) {
      if (node.process.exitCode === null && node.process.signalCode === null) await node.kill9();
    }
    for (const dir of dirs.splice(0)) removeDir(dir);
  });
  return { running, dirs };
}
