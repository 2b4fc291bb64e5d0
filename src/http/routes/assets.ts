// The files of the pages for people (P20): the page's script and style, built by
// scripts/bundle.ts into dist/assets and served as they are. They are read once when the node
// starts; a node built without them still serves its pages, whose badge then stays pending.
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { PAGE_ASSETS } from '../../pages/render.js';
import type { HttpReply } from '../reply.js';

/** dist/assets, from this module's place in dist/src/http/routes. */
const ASSET_DIR = new URL('../../../assets/', import.meta.url);

const FILES = [
  { path: PAGE_ASSETS.script, file: 'page.js', type: 'text/javascript; charset=utf-8' },
  { path: PAGE_ASSETS.style, file: 'page.css', type: 'text/css; charset=utf-8' },
];

/** The assets by path, as answers for the front end (server.ts `assets`). */
export function pageAssets(logger: Logger): ReadonlyMap<string, HttpReply> {
  const assets = new Map<string, HttpReply>();
  for (const { path, file, type } of FILES) {
    let body: Buffer;
    try {
      body = readFileSync(new URL(file, ASSET_DIR));
    } catch {
      logger.warn({ file }, 'page asset not built (scripts/bundle.ts); pages will not verify');
      continue;
    }
    const headers = {
      'content-type': type,
      'x-content-type-options': 'nosniff',
      'cache-control': 'no-cache',
    };
    assets.set(path, { status: 200, body, signed: false, headers });
  }
  return assets;
}
