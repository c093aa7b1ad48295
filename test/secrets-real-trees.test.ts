import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findSecret } from '../src/rules/secrets.js';

// The content rules are only useful if they are never wrong on real code: an exclusion that
// is usually a false alarm teaches people to switch the rules off. So they run over real
// third-party code (the project's installed node_modules, present after `npm ci`) and a real
// git repository (this one: its working tree and every blob in its object store), and must
// find nothing there, apart from the allowances below, each with its reason.

const ROOT = path.resolve(import.meta.dirname, '..');

/** Real files that hold a credential-format value on purpose: `path` (relative to ROOT) + rule + why. */
const ALLOWANCES: ReadonlyArray<{ readonly path: string; readonly rule: string; readonly reason: string }> = [];

interface Finding {
  readonly where: string;
  readonly rule: string;
  readonly text: string;
}

function* regularFiles(dir: string): Generator<string> {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* regularFiles(full);
    else if (entry.isFile()) yield full;
  }
}

function scan(where: string, bytes: Buffer, findings: Finding[]): void {
  const found = findSecret(bytes);
  if (found === undefined) return;
  const allowed = ALLOWANCES.some((a) => a.path === where && a.rule === found.rule);
  if (!allowed) findings.push({ where, rule: found.rule, text: bytes.toString('latin1', found.offset, found.offset + 80) });
}

/** Every blob in the repository's object store, through one `git cat-file --batch` process. */
async function scanGitObjects(findings: Finding[]): Promise<number> {
  const child = spawn('git', ['cat-file', '--batch-all-objects', '--batch', '--unordered'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const parts: Buffer[] = [];
  for await (const piece of child.stdout) parts.push(piece as Buffer);
  const all = Buffer.concat(parts);
  let blobs = 0;
  for (let at = 0; at < all.length; ) {
    const eol = all.indexOf(0x0a, at);
    const [id, type, size] = all.toString('latin1', at, eol).split(' ');
    const length = Number(size);
    if (type === 'blob') {
      scan(`git:${id}`, all.subarray(eol + 1, eol + 1 + length), findings);
      blobs += 1;
    }
    at = eol + 1 + length + 1;
  }
  return blobs;
}

describe('content rules on real trees', () => {
  it('find no secret in the installed node_modules', () => {
    const findings: Finding[] = [];
    let files = 0;
    let bytes = 0;
    for (const file of regularFiles(path.join(ROOT, 'node_modules'))) {
      const content = fs.readFileSync(file);
      scan(path.relative(ROOT, file), content, findings);
      files += 1;
      bytes += content.length;
    }
    console.log(`node_modules: ${files} files, ${(bytes / 2 ** 20).toFixed(0)} MiB scanned, ${ALLOWANCES.length} allowances`);
    expect(files).toBeGreaterThan(1000);
    expect(findings).toEqual([]);
  }, 120_000);

  it('find no secret in this git repository, working tree and object store', async () => {
    const findings: Finding[] = [];
    const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' })
      .split('\0')
      .filter((p) => p !== '');
    let files = 0;
    for (const rel of tracked) {
      const full = path.join(ROOT, rel);
      if (!fs.lstatSync(full, { throwIfNoEntry: false })?.isFile()) continue;
      scan(rel, fs.readFileSync(full), findings);
      files += 1;
    }
    const blobs = await scanGitObjects(findings);
    console.log(`git: ${files} working-tree files, ${blobs} blobs scanned`);
    expect(files).toBeGreaterThan(100);
    expect(blobs).toBeGreaterThan(files / 2);
    expect(findings).toEqual([]);
  }, 120_000);
});
