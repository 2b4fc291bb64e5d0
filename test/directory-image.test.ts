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
const WRITTEN = '"msg":"directory image written"';
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

async function start(setup: Setup, env: Record<string, string> = {}): Promise<{ node: NodeProcess; listening: Record<string, any>; local: Client; beta: Client }> {
  const node = await startNode({ dataDir: setup.dataDir, args: ARGS, env });
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

  it('writes since the image, then kill -9: the image is used and only the keys changed since are read again (issue 34)', async () => {
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
    expect(third.listening.directory_image).toBe('used');
    expect(third.listening.directory_rows).toBe(0);
    expect(third.listening.directory_changed_keys).toBe(2);
    expect(await answers(third.beta, [...phones, added, another]))
      .toEqual(found([true, true, false, false, false, false, false, true], third.node.baseUrl));
    // Its stop writes the image again, with nothing left to read again after it.
    expect(await third.node.stop()).toBe(0);
    const fourth = await start(setup);
    expect(fourth.listening.directory_image).toBe('used');
    expect(fourth.listening.directory_changed_keys).toBe(0);
    expect(await answers(fourth.beta, [...phones, added, another]))
      .toEqual(found([true, true, false, false, false, false, false, true], fourth.node.baseUrl));
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

/** Waits until the node's lines of images written while it runs are as `enough` wants; them. */
async function imagesWritten(node: NodeProcess, enough: number | ((lines: Record<string, any>[]) => boolean)): Promise<Record<string, any>[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const lines = node.output().split('\n').filter((l) => l.includes(WRITTEN)).map((l) => JSON.parse(l));
    if (typeof enough === 'number' ? lines.length >= enough : enough(lines)) return lines;
    if (Date.now() > deadline) throw new Error(`${lines.length} images written in 30 s:\n${node.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The node's `path_directory_changes_since_image` gauge. */
async function changesSinceImage(node: NodeProcess): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${node.adminPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('path_directory_changes_since_image '));
  if (line === undefined) throw new Error('no path_directory_changes_since_image gauge');
  return Number(line.split(' ')[1]);
}

const QUICK_IMAGES = { PATH_LIMIT_DIRECTORY_IMAGE_INTERVAL_MS: '1000' };

describe('the directory image taken while the node runs (issue 34)', () => {
  it('a kill -9 after it: the start takes it and reads again only the keys changed after it', async () => {
    const setup = setUp();
    const first = await start(setup, QUICK_IMAGES);
    expect(first.listening.directory_image).toBe('absent');
    const before = Array.from({ length: 4 }, nextPhone);
    const leaving = await subjectWith(first.local, before.map((p): [string, string] => [p, 'network']));
    // An image of all four (one taken between two registrations holds fewer).
    const images = await imagesWritten(first.node, (lines) => lines.at(-1)?.keys === 4);
    // Nothing changed since: no image is written again, and the gauge says none to read again.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await imagesWritten(first.node, () => true)).length).toBe(images.length);
    expect(await changesSinceImage(first.node)).toBe(0);
    // After the image: a key added, the image's keys withdrawn, a key made public.
    const after = nextPhone();
    await subjectWith(first.local, [[after, 'public']]);
    const withdrawn = await first.local.post(`/subjects/${leaving}/withdraw`, {}, { timestamp: stamp() });
    expect(withdrawn.status, withdrawn.text).toBe(200);
    const expected = [false, false, false, false, true];
    expect(await answers(first.beta, [...before, after])).toEqual(found(expected, first.node.baseUrl));
    const pending = await changesSinceImage(first.node);
    const taken = (await imagesWritten(first.node, () => true)).length > images.length;
    // Five keys changed, unless an image was taken of some of them meanwhile.
    if (!taken) expect(pending).toBe(5);
    await first.node.kill9();
    expect(first.node.output()).not.toContain('directory image not written');

    const second = await start(setup, QUICK_IMAGES);
    expect(second.listening.directory_image).toBe('used');
    expect(second.listening.directory_rows).toBe(0);
    // At most the five keys changed after the image (fewer if a later image caught some; the
    // exact count is the test of an image written at a stop, above).
    expect(second.listening.directory_changed_keys).toBeLessThanOrEqual(5);
    expect(await answers(second.beta, [...before, after])).toEqual(found(expected, second.node.baseUrl));
    // The change feed says of every key what the directory does (a member following it).
    const feed = await second.beta.get('/directory/feed?after=0&limit=100');
    expect(feed.status, feed.text).toBe(200);
    const last = new Map<string, string | null>();
    for (const e of feed.json.entries) last.set(e.identifier_hash, e.visibility);
    expect([...last.values()].sort()).toEqual([null, null, null, null, 'public']);
  });

  it('an image older than the rows already deleted is not taken: the index is rebuilt', async () => {
    const setup = setUp();
    const first = await start(setup, QUICK_IMAGES);
    const phones = Array.from({ length: 3 }, nextPhone);
    await subjectWith(first.local, [[phones[0]!, 'network']]);
    await imagesWritten(first.node, 1);
    const old = readFileSync(join(setup.dataDir, IMAGE));
    await subjectWith(first.local, [[phones[1]!, 'network']]);
    await imagesWritten(first.node, 2);
    await subjectWith(first.local, [[phones[2]!, 'network']]);
    await first.node.kill9();
    // The first image, put back: the rows of the key added before the second are gone.
    writeFileSync(join(setup.dataDir, IMAGE), old);
    const second = await start(setup, QUICK_IMAGES);
    expect(second.listening.directory_image).toBe('stale');
    expect(second.node.output()).toContain('not the image the tables name');
    expect(second.listening.directory_rows).toBe(3);
    expect(await answers(second.beta, phones)).toEqual(found([true, true, true], second.node.baseUrl));
  });

  it('an image of another history (another data directory) is not taken', async () => {
    const setup = setUp();
    const first = await start(setup, QUICK_IMAGES);
    const phone = nextPhone();
    await subjectWith(first.local, [[phone, 'network']]);
    await imagesWritten(first.node, 1);
    await first.node.kill9();
    const other = setUp();
    const elsewhere = await start(other, QUICK_IMAGES);
    await subjectWith(elsewhere.local, [[nextPhone(), 'network'], [nextPhone(), 'network']]);
    await imagesWritten(elsewhere.node, 1);
    await elsewhere.node.kill9();
    writeFileSync(join(setup.dataDir, IMAGE), readFileSync(join(other.dataDir, IMAGE)));
    const second = await start(setup, QUICK_IMAGES);
    expect(second.listening.directory_image).toBe('stale');
    expect(await answers(second.beta, [phone])).toEqual(found([true], second.node.baseUrl));
  });
});
