// Issue 34, target 6, for a node that follows a member: the keys replicated after its directory
// image are read again at a start after a kill -9, from the `directory_changes` rows each
// followed page wrote with its replica rows, instead of the index being rebuilt from the tables.
// Two real nodes on loopback (alpha holds the keys, beta follows alpha's change feed), one network
// pepper, members registered both ways with `path-node members add`.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Client, createCredential, runCli, startNode, tempDir, type Credential, type NodeProcess } from './support/harness.js';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';

const NETWORK_ENV = { PATH_PEPPER: randomBytes(32).toString('hex'), PATH_PEPPER_VERSION: 'net-1' };
const ARGS = ['--lookup-budget-base', '1000000'];
const WRITTEN = '"msg":"directory image written"';
const { running, dirs } = cleanedUpAfterEach();

let phoneCounter = 300;
const nextPhone = () => `+44 20 7946 0${String(phoneCounter++).padStart(3, '0')}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function listening(node: NodeProcess): Record<string, any> {
  return JSON.parse(node.output().split('\n').find((l) => l.includes('"msg":"listening"'))!);
}

async function start(dataDir: string, member: string, env: Record<string, string> = {}): Promise<NodeProcess> {
  const node = await startNode({ dataDir, member, workers: 1, env: { ...NETWORK_ENV, ...env }, args: ARGS });
  running.push(node);
  return node;
}

function addMember(dataDir: string, member: string, baseUrl: string): void {
  runCli(['members', 'add', '--data-dir', dataDir, '--member', member, '--base-url', baseUrl]);
}

/** For each phone, whether beta finds it held by alpha (false: not found at all). */
async function atBeta(beta: Client, phones: string[]): Promise<(boolean | string)[]> {
  const out: (boolean | string)[] = [];
  for (const identifier of phones) {
    const res = await beta.post('/sonar/lookup', { identifier_type: 'phone', identifier }, { timestamp: stamp() });
    expect(res.status, res.text).toBe(200);
    out.push(res.json.found === true ? res.json.member : false);
  }
  return out;
}

/** Polls until beta answers `expected` for the phones (replication is asynchronous). */
async function replicated(beta: Client, phones: string[], expected: (boolean | string)[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const now = await atBeta(beta, phones);
    if (JSON.stringify(now) === JSON.stringify(expected)) return;
    if (Date.now() > deadline) throw new Error(`beta answers ${JSON.stringify(now)}, not ${JSON.stringify(expected)}`);
    await sleep(100);
  }
}

async function subjectWith(alpha: Client, phones: string[]): Promise<string> {
  const subject = await alpha.post('/subjects', { subject_type: 'natural_person' }, { timestamp: stamp() });
  expect(subject.status, subject.text).toBe(201);
  for (const identifier of phones) {
    const res = await alpha.post('/identifiers', { subject_id: subject.json.id, identifier_type: 'phone', identifier }, { timestamp: stamp() });
    expect(res.status, res.text).toBe(201);
  }
  return subject.json.id;
}

describe('the directory image of a node that follows a member (issue 34)', () => {
  it('is taken when only replicated keys changed, and after a kill -9 the keys replicated since it are read again', async () => {
    const alphaDir = tempDir('path-image-alpha');
    const betaDir = tempDir('path-image-beta');
    dirs.push(alphaDir, betaDir);
    const alphaCred: Credential = createCredential(alphaDir, 'alpha', { local: true });
    const betaCred: Credential = createCredential(betaDir, 'beta', { local: true });
    const alpha = await start(alphaDir, 'alpha');
    addMember(betaDir, 'alpha', alpha.baseUrl);
    // Beta takes an image every second while it runs: here, of keys it replicated alone.
    let beta = await start(betaDir, 'beta', { PATH_LIMIT_DIRECTORY_IMAGE_INTERVAL_MS: '1000' });
    addMember(alphaDir, 'beta', beta.baseUrl);
    const alphaLocal = new Client(alpha.baseUrl, alphaCred);
    const phones = Array.from({ length: 4 }, nextPhone);
    const leaving = await subjectWith(alphaLocal, [phones[0]!]);
    await subjectWith(alphaLocal, [phones[1]!, phones[2]!]);
    await replicated(new Client(beta.baseUrl, betaCred), phones, ['alpha', 'alpha', 'alpha', false]);
    const written = Date.now() + 30_000;
    while (!beta.output().includes(WRITTEN) && Date.now() < written) await sleep(100);
    expect(beta.output(), 'beta wrote no image of the keys it replicated').toContain(WRITTEN);
    expect(await beta.stop()).toBe(0);

    // At the default interval, no image is taken while it runs below: the image of the stop is
    // the last, and what beta replicates after it is found only through its rows.
    beta = await start(betaDir, 'beta');
    expect(listening(beta).directory_image).toBe('used');
    const withdrawn = await alphaLocal.post(`/subjects/${leaving}/withdraw`, {}, { timestamp: stamp() });
    expect(withdrawn.status, withdrawn.text).toBe(200);
    await subjectWith(alphaLocal, [phones[3]!]);
    const expected = [false, 'alpha', 'alpha', 'alpha'];
    await replicated(new Client(beta.baseUrl, betaCred), phones, expected);
    await beta.kill9();

    beta = await start(betaDir, 'beta');
    const line = listening(beta);
    expect(line.directory_image).toBe('used');
    expect(line.replica_rows).toBe(0);
    expect(line.directory_changed_keys).toBe(2);
    // Answered at once from the index (alpha's feed is not read again before the answers).
    expect(await atBeta(new Client(beta.baseUrl, betaCred), phones)).toEqual(expected);
  });
});
