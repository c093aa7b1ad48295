import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { holdfastToken, legacyHoldfastToken } from '../../test/support/secret-samples.js';
import { ExcludeRules } from '../rules/excludes.js';
import { checkAgentScan } from '../sandbox/agent/host/scan-check.js';
import { type ScannedEntry, scanWorkspace } from './scan.js';
import { DEFAULT_MAX_ENTRIES, DEFAULT_MAX_FILE_BYTES } from './scan-limits.js';

const LIMITS = { maxFileBytes: DEFAULT_MAX_FILE_BYTES, maxEntries: DEFAULT_MAX_ENTRIES };
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** Every name and link target of a scanned tree, and every string of its report. */
function texts(entries: readonly ScannedEntry[], out: string[] = []): string[] {
  for (const e of entries) {
    out.push(e.name, e.path);
    if (e.type === 'symlink') out.push(e.target);
    if (e.type === 'dir') texts(e.children, out);
  }
  return out;
}

describe('a credential in a name or a link target', () => {
  it('is left out of a scan and withheld from its report: a file or directory named by a token, a link whose target is one', () => {
    const token = holdfastToken();
    const legacy = legacyHoldfastToken();
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-scan-names-'));
    dirs.push(root);
    fs.writeFileSync(path.join(root, token), 'harmless\n');
    fs.mkdirSync(path.join(root, `dir-${legacy}`));
    fs.writeFileSync(path.join(root, `dir-${legacy}`, 'a.txt'), 'a\n');
    fs.symlinkSync(token, path.join(root, 'link'));
    fs.symlinkSync(`/${legacy}`, path.join(root, 'escaping'));
    fs.writeFileSync(path.join(root, 'kept.txt'), 'kept\n');
    const scan = scanWorkspace(root, ExcludeRules.create(), LIMITS);
    const all = [...texts(scan.root.children), ...scan.excluded.flatMap((e) => [e.path, e.rule])];
    expect(all.some((t) => t.includes(token) || t.includes(legacy))).toBe(false);
    expect(scan.root.children.map((e) => e.name)).toEqual(['kept.txt']);
    expect(
      scan.excluded
        .filter((e) => e.reason === 'secret-content')
        .map((e) => e.rule)
        .sort(),
    ).toEqual(['holdfast-legacy-token', 'holdfast-legacy-token', 'holdfast-token', 'holdfast-token']);
  });

  it("is left out of an agent's scan and of the exclusions it reports", () => {
    const token = holdfastToken();
    const file = (name: string) => ({ type: 'file', name, mode: 0o644, size: 1, mtimeMs: 1, ctimeMs: 1, ino: 1 });
    const raw = {
      startedAtMs: 1,
      root: {
        type: 'dir',
        name: '',
        mode: 0o755,
        mtimeMs: 1,
        exactMtimeMs: 1,
        ctimeMs: 1,
        children: [file(token), file('kept.txt'), { type: 'symlink', name: 'link', target: token, mtimeMs: 1 }],
      },
      excluded: [{ path: `cache/${token}`, reason: 'cache', rule: `rule ${token}` }],
    };
    const { scan } = checkAgentScan(raw, ExcludeRules.create(), LIMITS, '/work');
    const all = [...texts(scan.root.children), ...scan.excluded.flatMap((e) => [e.path, e.rule])];
    expect(all.some((t) => t.includes(token))).toBe(false);
    expect(scan.root.children.map((e) => e.name)).toEqual(['kept.txt']);
  });
});

/** Every file path a scan kept, sorted. */
function filePaths(entries: readonly ScannedEntry[], out: string[] = []): string[] {
  for (const e of entries) {
    if (e.type === 'file') out.push(e.path);
    if (e.type === 'dir') filePaths(e.children, out);
  }
  return out.sort();
}

describe('.gitignore files', () => {
  it('apply in the directory that lists one and below it; one that is a symlink or a directory is not read', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-scan-ignore-'));
    dirs.push(root);
    const write = (rel: string, text: string) => {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), text);
    };
    write('.gitignore', '*.log\n');
    for (const rel of ['a.log', 'a.txt', 'sub/b.log', 'sub/b.tmp', 'sub/deep/c.tmp', 'sub/deep/c.txt', 'other/d.tmp']) write(rel, 'x\n');
    write('sub/.gitignore', '*.tmp\n!keep.tmp\n');
    write('sub/deep/keep.tmp', 'x\n');
    write('sub/deep/.gitignore', 'c.txt\n');
    // Not read: a .gitignore that is a symlink (git does not follow one) and one that is a directory.
    write('linked/rules', '*\n');
    write('linked/e.txt', 'x\n');
    fs.symlinkSync('rules', path.join(root, 'linked', '.gitignore'));
    write('dir-rules/.gitignore/inner', 'x\n');
    write('dir-rules/f.txt', 'x\n');
    const scan = scanWorkspace(root, ExcludeRules.create({ gitignore: true }), LIMITS);
    expect(filePaths(scan.root.children)).toEqual([
      '.gitignore',
      'a.txt',
      'dir-rules/.gitignore/inner',
      'dir-rules/f.txt',
      'linked/e.txt',
      'linked/rules',
      'other/d.tmp',
      'sub/.gitignore',
      'sub/deep/.gitignore',
      'sub/deep/keep.tmp',
    ]);
    // Without the option no .gitignore is read at all.
    expect(filePaths(scanWorkspace(root, ExcludeRules.create(), LIMITS).root.children)).toContain('sub/deep/c.txt');
  });
});
