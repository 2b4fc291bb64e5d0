// Issue 15 target 2 over a real node: the growing children of an aggregate (a subject's
// identifiers and addresses, a connection's delegations) are persistent maps in memory and
// plain entries in snapshots. With a snapshot every few records, a SIGTERM restart and a kill -9
// restart each bring back every child, in the order it was added, and the aggregates go on.
import { describe, expect, it } from 'vitest';
import { Client, createCredential, startNode, tempDir, type NodeProcess } from './support/harness.js';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';

const cleanup = cleanedUpAfterEach();
const EMAILS = 24;
const COMMIT = `sha256:${'c'.repeat(64)}`;
const inHours = (h: number) => new Date(Date.now() + h * 3_600_000).toISOString();
const SNAPSHOTS = { PATH_LIMIT_SNAPSHOT_EVERY_RECORDS: '4' };

describe('children of aggregates across snapshots and restarts', () => {
  it('identifiers, addresses in order and delegations survive SIGTERM and kill -9 restarts, and keep growing', async () => {
    const dataDir = tempDir('path-children');
    cleanup.dirs.push(dataDir);
    const creds = {
      local: createCredential(dataDir, 'local', { local: true }),
      beta: createCredential(dataDir, 'beta', { local: false }),
      gamma: createCredential(dataDir, 'gamma', { local: false }),
    };
    let node: NodeProcess = await startNode({ dataDir, env: SNAPSHOTS, args: ['--lookup-budget-base', '100000'] });
    cleanup.running.push(node);
    const as = (who: keyof typeof creds) => new Client(node.baseUrl, creds[who]);
    const post = (who: keyof typeof creds, path: string, body: unknown) => as(who).post(path, body, { timestamp: stamp() });

    const subject = (await post('local', '/subjects', { subject_type: 'natural_person' })).json.id as string;
    for (let n = 0; n < EMAILS; n++)
      expect((await post('local', '/identifiers', { subject_id: subject, identifier_type: 'email', identifier: `kid${n}@children.example`, discoverability: 'network' })).status).toBe(201);
    const addresses: string[] = [];
    for (let n = 0; n < 5; n++) {
      const res = await post('local', '/addresses', { subject_id: subject, profile: 'directory', discoverability: 'network' });
      expect(res.status, res.text).toBe(201);
      addresses.push(res.json.id);
    }
    const connection = (await post('local', '/connect/connections', {
      grantee: 'beta', subject_id: subject, capabilities: { payment_request: true }, mode: 'persistent_consent',
      max_single: '10', max_total: '1000', currency: 'EUR', expires_at: inHours(2),
    })).json.reference as string;
    const delegations: string[] = [];
    for (let n = 0; n < 3; n++) {
      const res = await post('local', `/connect/connections/${connection}/delegations`, {
        delegate: 'gamma', capability: 'payment_request', amount: '5', currency: 'EUR', destination_commitment: COMMIT, max_total: '50', expires_at: inHours(1),
      });
      expect(res.status, res.text).toBe(201);
      delegations.push(res.json.reference);
    }

    const check = async (expectedEmails: number) => {
      const listed = await as('local').get(`/addresses?subject_id=${subject}`);
      expect(listed.status, listed.text).toBe(200);
      expect(listed.json.addresses.map((a: { id: string }) => a.id)).toEqual(addresses);
      const items = Array.from({ length: expectedEmails }, (_, n) => ({ identifier_type: 'email', identifier: `kid${n}@children.example` }));
      const found = await post('beta', '/sonar/lookup/batch', { items });
      expect(found.status, found.text).toBe(200);
      expect(found.json.results.every((r: { found: boolean }) => r.found)).toBe(true);
      for (const d of delegations) expect((await as('gamma').get(`/connect/delegations/${d}`)).status).toBe(200);
      const consumed = await post('gamma', `/connect/delegations/${delegations[1]}/consume`, {
        capability: 'payment_request', amount: '5', currency: 'EUR', destination_commitment: COMMIT, operation_ref: `op-${stamp()}`,
      });
      expect(consumed.status, consumed.text).toBe(200);
      return consumed.json.consumed_operations as number;
    };
    expect(await check(EMAILS)).toBe(1);

    await node.stop();
    node = await startNode({ dataDir, env: SNAPSHOTS, args: ['--lookup-budget-base', '100000'] });
    cleanup.running.push(node);
    expect(await check(EMAILS)).toBe(2);
    expect((await post('local', '/identifiers', { subject_id: subject, identifier_type: 'email', identifier: `kid${EMAILS}@children.example`, discoverability: 'network' })).status).toBe(201);

    await node.kill9();
    node = await startNode({ dataDir, env: SNAPSHOTS, args: ['--lookup-budget-base', '100000'] });
    cleanup.running.push(node);
    expect(await check(EMAILS + 1)).toBe(3);
    const withdrawn = await post('local', `/subjects/${subject}/withdraw`, {});
    expect(withdrawn.status, withdrawn.text).toBe(200);
    expect(withdrawn.json.entries).toBe(EMAILS + 1 + addresses.length);
  });
});
