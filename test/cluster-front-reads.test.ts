// Issue 29, P22: no thread that serves HTTP waits on the database. Two instances of one operator
// (member alpha) on the test run's PostgreSQL, and beta, an embedded node, as the other member of
// the network. Once an instance serves, a synchronous read on its front end's thread throws
// (postgres-log.ts, `serving`), so a path left reading that way fails here: the node's tables
// loaded again when the command line changes them (a credential, a member), the followers a new
// member brings (their replicas and cursors loaded), and the change feed, whose writer reads what
// it last said of each key as keys registered through either instance reach it.
import { randomBytes } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import {
  Client,
  createCredential,
  runCli,
  startNode,
  tempDir,
  type Credential,
  type NodeProcess,
} from './support/harness.js';
import { cleanedUpAfterEach } from './support/lifecycle.js';
import { freshDatabase } from './support/postgres.js';
import { waitFor } from './support/wait.js';

const { running, dirs } = cleanedUpAfterEach();
const NETWORK_ENV = { PATH_PEPPER: randomBytes(32).toString('hex'), PATH_PEPPER_VERSION: 'net-1' };
const NODE_ARGS = ['--lookup-budget-base', '1000000'];
const CLUSTER_ARGS = [...NODE_ARGS, '--lease-ms', '1500', '--internal-port', '0'];
/** Far beyond a credentials poll, a key fetch and a few replication polls (config.ts). */
const REACHED_MS = 20_000;

async function started(options: {
  member: string;
  store?: string;
  args: string[];
}): Promise<{ node: NodeProcess; dataDir: string }> {
  const dataDir = tempDir(`path-front-reads-${options.member}`);
  dirs.push(dataDir);
  const node = await startNode({ ...options, dataDir, workers: 1, env: NETWORK_ENV });
  running.push(node);
  return { node, dataDir };
}

async function register(client: Client, identifier: string): Promise<void> {
  const subject = await client.post('/subjects', { subject_type: 'natural_person' });
  expect(subject.status, subject.text).toBe(201);
  const body = { subject_id: subject.json.id, identifier_type: 'email', identifier };
  const registered = await client.post('/identifiers', { ...body, discoverability: 'network' });
  expect(registered.status, registered.text).toBe(201);
}

/** Waits until `client`'s node finds the email, held by `member`. */
async function foundAt(client: Client, identifier: string, member: string): Promise<void> {
  await waitFor(
    `${identifier} found as ${member}'s`,
    async () => {
      const res = await client.post('/sonar/lookup', { identifier_type: 'email', identifier });
      expect(res.status, res.text).toBe(200);
      return res.json.found === true && res.json.member === member;
    },
    REACHED_MS,
  );
}

const email = (tag: string) => `front-reads-${tag}-${randomBytes(4).toString('hex')}@example.org`;

describe('the front end of a cluster instance reads without waiting on the database (issue 29)', () => {
  it('reloads, follows a new member and writes the feed with no synchronous read once serving', async () => {
    const store = await freshDatabase(inject('postgresUrl'));
    const cliDir = tempDir('path-front-reads-cli');
    dirs.push(cliDir);
    const own = createCredential(cliDir, 'alpha', { local: true, store });
    const instances = [
      await started({ member: 'alpha', store, args: CLUSTER_ARGS }),
      await started({ member: 'alpha', store, args: CLUSTER_ARGS }),
    ].map((i) => i.node);
    const beta = await started({ member: 'beta', args: NODE_ARGS });
    const betaOwn = createCredential(beta.dataDir, 'beta', { local: true });

    // A credential the command line adds while both run: each instance loads the node's tables
    // again on the change, and takes calls signed with it.
    const late: Credential = createCredential(cliDir, 'alpha', { local: true, store });
    for (const node of instances) {
      await waitFor(
        'the new credential taken up',
        async () => {
          const res = await new Client(node.baseUrl, late).post('/subjects', {
            subject_type: 'natural_person',
          });
          return res.status === 201;
        },
        REACHED_MS,
      );
    }

    // Members both ways: alpha's added through the command line against its database while it
    // runs (a change: members loaded again, a follower of beta loaded on each instance).
    runCli([
      'members',
      'add',
      '--data-dir',
      cliDir,
      '--store',
      store,
      '--member',
      'beta',
      '--base-url',
      beta.node.baseUrl,
    ]);
    runCli([
      'members',
      'add',
      '--data-dir',
      beta.dataDir,
      '--member',
      'alpha',
      '--base-url',
      instances[0]!.baseUrl,
    ]);

    // beta's key reaches both instances through their followers.
    const atBeta = email('beta');
    await register(new Client(beta.node.baseUrl, betaOwn), atBeta);
    for (const node of instances) await foundAt(new Client(node.baseUrl, own), atBeta, 'beta');

    // A key registered through each instance: one of them holds the feed's partition and writes
    // the feed, the other's commit it hears; both reach beta through alpha's feed.
    const throughEach = [email('first'), email('second')];
    await register(new Client(instances[0]!.baseUrl, own), throughEach[0]!);
    await register(new Client(instances[1]!.baseUrl, late), throughEach[1]!);
    const betaClient = new Client(beta.node.baseUrl, betaOwn);
    for (const identifier of throughEach) await foundAt(betaClient, identifier, 'alpha');

    // Nothing on either front end read synchronously, nor failed in the background.
    for (const node of instances) {
      expect(node.output()).not.toContain('synchronous read');
      expect(node.output()).not.toContain('background task failed');
      expect(node.output()).not.toContain('was not applied');
    }
  }, 120_000);
});
