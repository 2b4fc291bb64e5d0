// package.json `engines` (issue 11 item 14) against what the code and its dependencies need:
// record framing (P14) checksums with zlib.crc32, the front end loads uWebSockets.js's native
// binary, and each dependency declares its own engines. A range that admits a Node without one
// of them fails here.
import { existsSync, readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { OrderedMap } from 'immutable';
import {
  ChecksumError,
  frame,
  frameRecord,
  holdsMoreValuesThan,
  openRecord,
  recordCheck,
  unframe,
  unframeRecord,
} from './record.js';

interface Manifest {
  engines?: { node?: string };
  dependencies?: Record<string, string>;
}

const root = new URL('../../', import.meta.url);
const manifest = (path: string): Manifest => JSON.parse(readFileSync(new URL(path, root), 'utf8'));
const pkg = manifest('package.json');
const engines = pkg.engines!.node!;

/** Node APIs the code uses that are newer than Node 20.0, with the releases that have them. */
const NEWER_APIS: Record<string, string> = {
  'zlib.crc32 (src/log/record.ts, src/reads/views.ts)': '^20.15.0 || >=22.2.0',
};

/** NODE_MODULE_VERSION of each Node major, which names uWebSockets.js's native binaries. */
const MODULE_VERSIONS: Record<number, number> = {
  18: 108,
  20: 115,
  21: 120,
  22: 127,
  23: 131,
  24: 137,
  25: 141,
  26: 147,
};

describe('package.json engines (issue 11 item 14)', () => {
  it.each(Object.entries(NEWER_APIS))('admits only Node releases that have %s', (_api, range) => {
    expect(semver.subset(engines, range), `${engines} within ${range}`).toBe(true);
  });

  it('admits only Node releases every runtime dependency declares it runs on', () => {
    for (const name of Object.keys(pkg.dependencies ?? {})) {
      const declared = manifest(`node_modules/${name}/package.json`).engines?.node;
      if (declared === undefined) continue;
      expect(semver.subset(engines, declared), `${name} declares ${declared}`).toBe(true);
    }
  });

  it('admits only Node majors whose ABI the pinned uWebSockets.js source builds for', () => {
    // vendor/uws builds at install for the running Node (issue 32); the pinned source (v20.67.0)
    // supports these ABIs, and this machine's build for the running one is in dist/.
    const supported = [115, 127, 137, 147];
    for (let major = 16; major <= 30; major++) {
      if (!semver.intersects(engines, `^${major}.0.0`)) continue;
      const abi = MODULE_VERSIONS[major];
      expect(abi, `NODE_MODULE_VERSION of Node ${major}`).toBeDefined();
      expect(supported, `Node ${major}`).toContain(abi);
    }
    const built = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
    const path = `node_modules/uWebSockets.js/dist/${built}`;
    expect(existsSync(new URL(path, root)), path).toBe(true);
  });

  it('the running Node satisfies engines; its zlib.crc32 frames and checks a record (P14)', () => {
    expect(semver.satisfies(process.versions.node, engines)).toBe(true);
    const bytes = frame({ hello: 'world' });
    expect(unframe(bytes)).toEqual({ hello: 'world' });
    bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 1;
    expect(() => unframe(bytes)).toThrow(ChecksumError);
  });
});

describe('persistent maps in frames (issue 15)', () => {
  it('an ordered map frames as its entries and reads back as an ordered map, in order', () => {
    const map = OrderedMap({ b: { n: 1 }, a: { n: 2 }, c: { n: 3 } });
    const read = unframe<{ children: OrderedMap<string, { n: number }> }>(frame({ children: map }));
    expect(OrderedMap.isOrderedMap(read.children)).toBe(true);
    expect([...read.children.keys()]).toEqual(['b', 'a', 'c']);
    expect(read.children.get('a')).toEqual({ n: 2 });
  });
});

describe('log records link to the one before (issue 28)', () => {
  it('a record carries its link under its own checksum, which the next one links to', () => {
    const first = frameRecord({ n: 1 }, 0);
    const second = frameRecord({ n: 2 }, recordCheck(first));
    expect(unframeRecord(first)).toEqual({ n: 1 });
    expect(openRecord(first).link).toBe(0);
    expect(openRecord(second).link).toBe(recordCheck(first));
    expect(recordCheck(first)).toBe(first.readUInt32BE(0));
    // The same value after another record is another record: its checksum differs too.
    expect(recordCheck(frameRecord({ n: 2 }, 0))).not.toBe(recordCheck(second));
  });

  it('a changed link fails the checksum, as a changed value does', () => {
    for (const at of [4, 7, 8]) {
      const damaged = frameRecord({ n: 1 }, 0x01020304);
      damaged[at] = damaged[at]! ^ 1;
      expect(() => openRecord(damaged)).toThrow(ChecksumError);
    }
  });
});

describe('a state measured against the bound of its row (issue 33)', () => {
  it('counts the values it holds, all the way down, and frames to more bytes than that', () => {
    const entry = (n: number) => ({ id: `e${n}`, at: n, tags: [n, n + 1] });
    const state = {
      id: 's',
      children: OrderedMap([1, 2, 3].map((n) => [`k${n}`, entry(n)] as [string, unknown])),
    };
    // id, children; three entries; each with id, at, tags; each tags with two numbers.
    const values = 2 + 3 + 3 * 3 + 3 * 2;
    expect(holdsMoreValuesThan(state, values - 1)).toBe(true);
    expect(holdsMoreValuesThan(state, values)).toBe(false);
    expect(frame(state).length).toBeGreaterThan(values);
    // A state of many children is found past a small bound without a look at most of them.
    const many = { children: OrderedMap(Array.from({ length: 100_000 }, (_, n) => [`k${n}`, n])) };
    expect(holdsMoreValuesThan(many, 16_384)).toBe(true);
  });
});
