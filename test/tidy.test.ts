// The tidy rule `routes` (issue 29, vertical slices): a route module of an aggregate
// (src/domain/<aggregate>/routes.ts, *-routes.ts) reads no table itself. It imports nothing of
// src/log or src/reads and reads no `log`, `loadRange` or `scan` (a type may still name a log);
// the domain's own modules may.
// Run on a small tree of its own, and on this repository, which keeps it.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tidy, type Finding } from '../scripts/tidy.js';

let root: string;

/** Writes `text` at `path` under the tree's root. */
function put(path: string, text: string): void {
  mkdirSync(join(root, path, '..'), { recursive: true });
  writeFileSync(join(root, path), text);
}

const READS_A_TABLE = [
  "import { usageRows } from '../../reads/rows.js';",
  "import type { Log } from '../../log/log.js';",
  'export async function page(services: { log: Log }, owner: string) {',
  "  const rows = await services.log.loadRange('usage', usageRows.range(owner));",
  '  return rows.length;',
  '}',
  '',
].join('\n');

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'path-tidy-'));
  put('src/domain/shop/routes.ts', READS_A_TABLE);
  put(
    'src/domain/shop/stock-routes.ts',
    [
      'export function stock(services: { log: { scan(t: string): unknown } }) {',
      '  const { log } = services;',
      "  return log.scan('usage');",
      '}',
      '',
    ].join('\n'),
  );
  // The same reads in the domain's own module, and a route that reads nothing: both kept.
  put('src/domain/shop/usage.ts', READS_A_TABLE);
  // A route that imports its aggregate's row codec, even without reading: refused.
  put('src/domain/shop/stock-rows.ts', 'export const stockRows = { table: "stock" };\n');
  put('src/domain/shop/price-routes.ts', "import { stockRows } from './stock-rows.js';\n");
  put(
    'src/domain/shop/shop-routes.ts',
    [
      "import { page } from './usage.js';",
      'export const route = (services: { log: never }) => page;',
      '',
    ].join('\n'),
  );
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('tidy: the front end reads through Reads (issue 29)', () => {
  it("finds a front-end module that takes the Log port; the workers' may", () => {
    const tree = mkdtempSync(join(tmpdir(), 'path-tidy-reads-'));
    try {
      const at = (path: string, text: string) => {
        mkdirSync(join(tree, path, '..'), { recursive: true });
        writeFileSync(join(tree, path), text);
      };
      at('src/log/log.ts', 'export interface Log {}\nexport interface Reads {}\n');
      at(
        'src/network/feed.ts',
        "import type { Log } from '../log/log.js';\nexport type F = Log;\n",
      );
      at('src/http/ok.ts', "import type { Reads } from '../log/log.js';\nexport type R = Reads;\n");
      at(
        'src/actors/shard.ts',
        "import type { Log } from '../log/log.js';\nexport type S = Log;\n",
      );
      const found = tidy(tree).filter((f) => f.rule === 'reads');
      expect(found.map((f) => `${f.file}:${f.line}`)).toEqual(['src/network/feed.ts:1']);
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  });
});

const routeFindings = (findings: Finding[]) =>
  findings.filter((f) => f.rule === 'routes').map((f) => `${f.file}:${f.line} ${f.message}`);

describe('tidy: routes read no table (issue 29)', () => {
  it("finds a route module's imports of src/reads and src/log, and its reads of a log", () => {
    expect(routeFindings(tidy(root))).toEqual([
      'src/domain/shop/price-routes.ts:1 a route reads no table: it imports nothing of ' +
        'the row codecs (src/domain/shop/stock-rows.ts)',
      'src/domain/shop/routes.ts:1 a route reads no table: it imports nothing of src/reads ' +
        '(src/reads/rows.ts)',
      'src/domain/shop/routes.ts:2 a route reads no table: it imports nothing of src/log ' +
        '(src/log/log.ts)',
      'src/domain/shop/routes.ts:4 a route reads no table: no `loadRange` here (its domain reads it)',
      'src/domain/shop/routes.ts:4 a route reads no table: no `log` here (its domain reads it)',
      'src/domain/shop/stock-routes.ts:2 a route reads no table: no `log` here (its domain reads it)',
      'src/domain/shop/stock-routes.ts:3 a route reads no table: no `scan` here (its domain reads it)',
    ]);
  });

  it("keeps this repository's routes free of table reads", () => {
    expect(routeFindings(tidy(process.cwd()))).toEqual([]);
  });
});

describe('tidy: the client package is read too (issue 31: it left src/client)', () => {
  it('finds a long line and a long function under packages/client/src as under src/', () => {
    const tree = mkdtempSync(join(tmpdir(), 'path-tidy-client-'));
    try {
      const body = Array.from({ length: 80 }, (_, i) => `  const v${i} = ${i};`).join('\n');
      mkdirSync(join(tree, 'packages/client/src'), { recursive: true });
      writeFileSync(join(tree, 'packages/client/src/wide.ts'), `export const wide = '${'x'.repeat(120)}';\n`);
      writeFileSync(join(tree, 'packages/client/src/long.ts'), `export function long(): void {\n${body}\n}\n`);
      const found = tidy(tree).map((f) => `${f.file} ${f.rule}`);
      expect(found).toEqual(
        expect.arrayContaining(['packages/client/src/wide.ts line-width', 'packages/client/src/long.ts function-length']),
      );
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  });
});
