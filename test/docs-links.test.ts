// The docs as a front door (issue 31 item 6): every relative link of the README, docs/*.md,
// bench/README.md, bench/results/*.md and packages/*/README.md names a file that exists and, for
// an anchor into markdown, one of its headings (GitHub's slugs); the README stays short.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(__dirname, '..');
const README_LINES_MAX = 150;

/** The markdown files whose links are checked, relative to the root. */
function docFiles(root: string): string[] {
  const within = (dir: string, keep: (name: string) => boolean): string[] =>
    existsSync(join(root, dir))
      ? readdirSync(join(root, dir))
          .filter(keep)
          .map((name) => join(dir, name))
      : [];
  const packageReadmes = within('packages', () => true)
    .filter((dir) => statSync(join(root, dir)).isDirectory())
    .map((dir) => join(dir, 'README.md'))
    .filter((file) => existsSync(join(root, file)));
  return [
    'README.md',
    ...within('docs', (name) => name.endsWith('.md')),
    'bench/README.md',
    ...within('bench/results', (name) => name.endsWith('.md')),
    ...packageReadmes,
  ].filter((file) => existsSync(join(root, file)));
}

/** The text outside fenced code blocks, where a heading is a heading. */
function unfenced(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
}

/** The text outside fenced code blocks and inline code, where a link is a link. */
function prose(markdown: string): string {
  return unfenced(markdown).replace(/`[^`\n]*`/g, '');
}

/** Every link target: `[text](target)`, `[label]: target`, and HTML `src`/`href`. */
function linkTargets(markdown: string): string[] {
  const text = prose(markdown);
  const targets = [
    ...[...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!),
    ...[...text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]!),
    ...[...text.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((m) => m[1]!),
  ];
  return targets.filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

/** GitHub's anchor of a heading: lowercase, punctuation but `-` and `_` dropped, spaces `-`. */
function slugOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a markdown file's headings, repeated ones numbered as GitHub does. */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const m of unfenced(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = slugOf(m[1]!);
    const count = seen.get(slug) ?? 0;
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
    seen.set(slug, count + 1);
  }
  return anchors;
}

/** The links of `file` (relative to `root`) that do not resolve, each with why. */
function brokenLinks(root: string, file: string): string[] {
  const source = readFileSync(join(root, file), 'utf8');
  const broken: string[] = [];
  for (const target of linkTargets(source)) {
    const hash = target.indexOf('#');
    const path = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? '' : decodeURIComponent(target.slice(hash + 1));
    const resolved = path === '' ? join(root, file) : resolve(root, dirname(file), path);
    if (!existsSync(resolved)) {
      broken.push(`${file}: ${target} (no file ${relative(root, resolved)})`);
      continue;
    }
    if (anchor === '' || !resolved.endsWith('.md')) continue;
    if (!anchorsOf(readFileSync(resolved, 'utf8')).has(anchor))
      broken.push(`${file}: ${target} (no heading #${anchor} in ${relative(root, resolved)})`);
  }
  return broken;
}

describe('relative links in the docs', () => {
  it('GitHub slugs: lowercase, spaces to -, punctuation but - and _ dropped', () => {
    expect(slugOf('Cluster mode')).toBe('cluster-mode');
    expect(slugOf('`path-node serve` flags')).toBe('path-node-serve-flags');
    expect(slugOf('Backups and restore (P16)')).toBe('backups-and-restore-p16');
    expect(slugOf('Reading them: snake_case, 2026-11-23')).toBe(
      'reading-them-snake_case-2026-11-23',
    );
  });

  it('finds a link to a missing file, a missing heading, and passes good ones', () => {
    const broken = brokenLinks(join(ROOT, 'test', 'fixtures', 'docs-links'), 'README.md');
    expect(broken).toEqual([
      'README.md: docs/missing.md (no file docs/missing.md)',
      'README.md: docs/GUIDE.md#no-such-heading (no heading #no-such-heading in docs/GUIDE.md)',
      'README.md: #nowhere (no heading #nowhere in README.md)',
    ]);
  });

  it('every relative link of the docs resolves', () => {
    const files = docFiles(ROOT);
    expect(files).toContain('README.md');
    expect(files.flatMap((file) => brokenLinks(ROOT, file))).toEqual([]);
  });

  it(`README.md is at most ${README_LINES_MAX} lines`, () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').replace(/\n$/, '').split('\n');
    expect(lines.length).toBeLessThanOrEqual(README_LINES_MAX);
  });
});
