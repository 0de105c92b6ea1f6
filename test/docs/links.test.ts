// Unit suite of the documentation's links: every relative link in README.md and docs/*.md names a file
// that exists and, with a #fragment, a heading of that page (as GitHub makes heading anchors).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ROOT } from '../support/helpers.js';

const test = suite('documentation links');

/** The text outside fenced code blocks and inline code, where a `[x](y)` is prose, not a link. */
const prose = (markdown: string) => markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').replace(/`[^`\n]*`/g, '');

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const [, heading] of markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').matchAll(/^#{1,6} (.*)$/gm)) {
    const base = (heading as string)
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.add(count === 0 ? base : `${base}-${count}`);
  }
  return found;
}

/** Each relative link of `file` that names no file, or no heading of its page, as `file: target`. */
function brokenLinks(file: string): string[] {
  const broken: string[] = [];
  for (const [, target] of prose(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    if (/^[a-z][a-z\d+.-]*:/i.test(target as string)) continue; // https:, mailto:: not ours to check
    const [path = '', fragment] = (target as string).split('#');
    const named = path === '' ? file : join(dirname(file), decodeURIComponent(path));
    const ok = existsSync(named) && (fragment === undefined || anchors(readFileSync(named, 'utf8')).has(decodeURIComponent(fragment)));
    if (!ok) broken.push(`${relative(ROOT, file)}: ${target}`);
  }
  return broken;
}

const pages = () => [
  join(ROOT, 'README.md'),
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(ROOT, 'docs', name)),
];

test('every relative link in README.md and docs/*.md names a file that exists, and a heading of it', () => {
  assert.equal(pages().flatMap(brokenLinks), []);
});

test('a link to a missing file or to a heading its page lacks is reported; code is not read as links', () => {
  const dir = mkdtempSync(join(tmpdir(), 'restable-links-'));
  try {
    writeFileSync(join(dir, 'b.md'), '# B page\n\n## Twice\n\n## Twice\n\n## `q=` and *more*\n');
    writeFileSync(
      join(dir, 'a.md'),
      [
        '# A',
        '[ok](b.md) [ok](b.md#b-page) [ok](b.md#twice-1) [ok](b.md#q-and-more) [ok](#a) [web](https://example.com/x.md)',
        '[gone](c.md) [no heading](b.md#nothing) [no third](b.md#twice-2)',
        '`[inline](nowhere.md)`',
        '```md\n[fenced](nowhere.md)\n```',
      ].join('\n'),
    );
    assert.equal(
      brokenLinks(join(dir, 'a.md')).map((line) => line.slice(line.indexOf(': ') + 2)),
      ['c.md', 'b.md#nothing', 'b.md#twice-2'],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
