// The directory image over the real node and real LMDB: an orderly stop writes the index whole
// and the next start takes it instead of rebuilding it row by row; writes made since (then a
// kill -9), a damaged or truncated image, or a half-written replacement never give an index other
// than the one the `directory` table gives. Each start says in its `listening` line which way the
// index came (`directory_image`: used, absent, stale, damaged).
import { readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Client, createCredential, startNode, tempDir, type Credential, type NodeProcess } from './support/harness.js';
import { cleanedUpAfterEach, stamp } from './support/lifecycle.js';

const IMAGE = 'directory.image';
const ARGS = ['--lookup-budget-base', '1000000'];
const { running, dirs } = cleanedUpAfterEach();

let phoneCounter = 100;
const nextPhone = () => `+44 20 7946 0${String(phoneCounter++).padStart(3, '0')}`;

interface Setup {
  dataDir: string;
  own: Credential;
  beta: Credential;
}

function setUp(): Setup {
  const dataDir = tempDir('path-image');
  dirs.push(dataDir);
  return { dataDir, own: createCredential(dataDir, 'local', { local: true }), beta: createCredential(dataDir, 'beta', { local: false }) };
}

async function start(setup: Setup): Promise<{ node: NodeProcess; listening: Record<string, any>; local: Client; beta: Client }> {
  const node = await startNode({ dataDir: setup.dataDir, args: ARGS });
  running.push(node);
  const line = node.output().split('\n').find((l) => l.includes('"listening"'))!;
  return { node, listening: JSON.parse(line), local: new Client(node.baseUrl, setup.own), beta: new Client(node.baseUrl, setup.beta) };
}

async function subjectWith(local: Client, phones: [string, string][]): Promise<string> {
  const subject = await local.post('/subjects', { subject_type: 'natural_person' }, { timestamp: stamp() });
  expect(subject.status, subject.text).toBe(201);
  for (const [identifier, discoverability] of phones) {
    const res = await local.post('/identifiers', { subject_id: subject.json.id, identifier_type: 'phone', identifier, discoverability }, { timestamp: stamp() });
    expect(res.status, res.text).toBe(201);
  }
  return subject.json.id;
}

/** For each phone, whether a lookup by another member finds it, and the endpoint it answers. */
async function answers(beta: Client, phones: string[]): Promise<[boolean, string | null][]> {
  const out: [boolean, string | null][] = [];
  for (const identifier of phones) {
    const res = await beta.post('/sonar/lookup', { identifier_type: 'phone', identifier }, { timestamp: stamp() });
    expect(res.status, res.text).toBe(200);
    out.push([res.json.found, res.json.found ? res.json.endpoint : null]);
  }
  return out;
}

const found = (flags: boolean[], baseUrl: string) => flags.map((f): [boolean, string | null] => [f, f ? baseUrl : null]);

/** A directory of visible, private and withdrawn phones, stopped in order: its image is written. */
async function directoryStoppedInOrder(setup: Setup) {
  const phones = Array.from({ length: 6 }, nextPhone);
  const first = await start(setup);
  expect(first.listening.directory_image).toBe('absent');
  await subjectWith(first.local, [[phones[0]!, 'network'], [phones[1]!, 'network'], [phones[2]!, 'private']]);
  const gone = await subjectWith(first.local, [[phones[3]!, 'network'], [phones[4]!, 'network']]);
  const withdrawn = await first.local.post(`/subjects/${gone}/withdraw`, {}, { timestamp: stamp() });
  expect(withdrawn.status, withdrawn.text).toBe(200);
  const expected = found([true, true, false, false, false, false], first.node.baseUrl);
  expect(await answers(first.beta, phones)).toEqual(expected);
  expect(await first.node.stop()).toBe(0);
  expect(statSync(join(setup.dataDir, IMAGE)).size).toBeGreaterThan(0);
  return { phones, expected };
}

describe('the directory image at start', () => {
  it('an orderly stop writes it; the next start uses it and answers exactly as the table does', async () => {
    const setup = setUp();
    const { phones } = await directoryStoppedInOrder(setup);
    const second = await start(setup);
    expect(second.listening.directory_image).toBe('used');
    expect(second.listening.directory_rows).toBe(0);
    // The local holder's endpoint is this run's, not the one the image was written with.
    const now = await answers(second.beta, phones);
    expect(now).toEqual(found([true, true, false, false, false, false], second.node.baseUrl));
    // The index rebuilt from the table, with no usable image, answers the same.
    expect(await second.node.stop()).toBe(0);
    writeFileSync(join(setup.dataDir, IMAGE), '');
    const rebuilt = await start(setup);
    expect(rebuilt.listening.directory_image).toBe('damaged');
    expect(await answers(rebuilt.beta, phones)).toEqual(found([true, true, false, false, false, false], rebuilt.node.baseUrl));
    // And a change after a used image is seen, by lookups and by the next image.
    expect(await rebuilt.node.stop()).toBe(0);
    const third = await start(setup);
    expect(third.listening.directory_image).toBe('used');
    const added = nextPhone();
    await subjectWith(third.local, [[added, 'network']]);
    expect(await answers(third.beta, [added])).toEqual(found([true], third.node.baseUrl));
    expect(await third.node.stop()).toBe(0);
    const fourth = await start(setup);
    expect(fourth.listening.directory_image).toBe('used');
    expect(await answers(fourth.beta, [...phones, added])).toEqual(found([true, true, false, false, false, false, true], fourth.node.baseUrl));
  });

  it('writes since the image, then kill -9: the image is stale and the index is rebuilt', async () => {
    const setup = setUp();
    const { phones } = await directoryStoppedInOrder(setup);
    const second = await start(setup);
    expect(second.listening.directory_image).toBe('used');
    const added = nextPhone();
    const subject = await subjectWith(second.local, [[added, 'network']]);
    const withdrawn = await second.local.post(`/subjects/${subject}/withdraw`, {}, { timestamp: stamp() });
    expect(withdrawn.status, withdrawn.text).toBe(200);
    const another = nextPhone();
    await subjectWith(second.local, [[another, 'public']]);
    await second.node.kill9();
    const third = await start(setup);
    expect(third.listening.directory_image).toBe('stale');
    expect(third.listening.directory_rows).toBeGreaterThan(0);
    expect(await answers(third.beta, [...phones, added, another]))
      .toEqual(found([true, true, false, false, false, false, false, true], third.node.baseUrl));
  });

  it('kill -9 with no write since a used image: the image still describes the table and is used', async () => {
    const setup = setUp();
    const { phones } = await directoryStoppedInOrder(setup);
    const second = await start(setup);
    await second.node.kill9();
    // A replacement cut short by a kill -9 is a temporary file: the image beside it is whole.
    writeFileSync(join(setup.dataDir, `${IMAGE}.tmp`), 'half an image');
    const third = await start(setup);
    expect(third.listening.directory_image).toBe('used');
    expect(await answers(third.beta, phones)).toEqual(found([true, true, false, false, false, false], third.node.baseUrl));
  });

  it('a damaged or truncated image is not trusted: the index is rebuilt from the table', async () => {
    const setup = setUp();
    const { phones } = await directoryStoppedInOrder(setup);
    const path = join(setup.dataDir, IMAGE);
    const whole = readFileSync(path);
    const damaged = Buffer.from(whole);
    damaged[damaged.length - 100] = damaged[damaged.length - 100]! ^ 0x01;
    writeFileSync(path, damaged);
    const second = await start(setup);
    expect(second.listening.directory_image).toBe('damaged');
    expect(second.node.output()).toContain('checksum mismatch');
    expect(await answers(second.beta, phones)).toEqual(found([true, true, false, false, false, false], second.node.baseUrl));
    await second.node.kill9();
    writeFileSync(path, whole);
    truncateSync(path, whole.length - 1000);
    const third = await start(setup);
    expect(third.listening.directory_image).toBe('damaged');
    expect(await answers(third.beta, phones)).toEqual(found([true, true, false, false, false, false], third.node.baseUrl));
  });
});
