// The systemd unit in deploy/: systemd's own checker accepts it, and the serve command accepts
// every flag it passes (a unit that names a flag the node refuses would fail at boot). The unit
// and docs/OPERATIONS.md say the same: how it restarts, and that the tree is built before it runs.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI } from './support/harness.js';

const UNIT = resolve(__dirname, '../deploy/path-node.service');
const OPERATIONS = resolve(__dirname, '../docs/OPERATIONS.md');

/** The serve flags of the unit's ExecStart, continuation lines joined. */
function serveFlags(): string[] {
  const text = readFileSync(UNIT, 'utf8').replace(/\\\n\s*/g, ' ');
  const exec = /^ExecStart=(.*)$/m.exec(text)![1]!.trim().split(/\s+/);
  return exec.slice(exec.indexOf('serve') + 1);
}

describe('deploy/path-node.service', () => {
  it('systemd-analyze verify accepts the unit', () => {
    const r = spawnSync('systemd-analyze', ['verify', UNIT], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr.split('\n').filter((l) => l.includes('path-node.service'))).toEqual([]);
  });

  it('uses the SIGTERM drain and waits for /readyz on the admin port it gives the node', () => {
    const text = readFileSync(UNIT, 'utf8');
    expect(text).toMatch(/^KillSignal=SIGTERM$/m);
    const flags = serveFlags();
    const adminPort = flags[flags.indexOf('--admin-port') + 1];
    expect(text).toContain(`http://127.0.0.1:${adminPort}/readyz`);
  });

  it('the unit and OPERATIONS.md agree on restarts, and both say to build the tree first', () => {
    const unit = readFileSync(UNIT, 'utf8');
    const operations = readFileSync(OPERATIONS, 'utf8');
    const policy = /^Restart=(\S+)$/m.exec(unit)![1]!;
    expect(policy).toBe('always');
    for (const named of operations.matchAll(/Restart=(\w[\w-]*)/g)) expect(named[1]).toBe(policy);
    expect(operations).toContain(`\`Restart=${policy}\``);
    const prevented = /^RestartPreventExitStatus=(\d+)$/m.exec(unit)![1]!;
    expect(operations).toMatch(new RegExp(`except on\\s+exit status ${prevented}`));
    // The unit runs dist/ through bin/path-node.js and builds nothing: both say so.
    expect(unit).toMatch(/^ExecStart=\S+node \S*bin\/path-node\.js serve/m);
    expect(unit).toMatch(/^#\s+cd \/opt\/path-node && npm ci && npm run build$/m);
    const systemd = operations.slice(operations.indexOf('**systemd.**'));
    expect(systemd.slice(0, systemd.indexOf('\n\n'))).toContain('`npm ci && npm run build`');
  });

  it('the node knows every flag of its ExecStart', () => {
    // Flags are checked in the order given: with one unknown flag after the unit's, the refusal
    // names that one only if every flag of the unit is known.
    const r = spawnSync(process.execPath, [CLI, 'serve', ...serveFlags(), '--no-such-flag-check'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/unknown flag --no-such-flag-check/);
  });
});
