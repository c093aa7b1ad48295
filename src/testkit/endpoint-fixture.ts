import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { utimeOf } from '../workspace-fs/fs-exact.js';

/**
 * The workspace every endpoint of the contract suite is filled with, written by means
 * independent of the transport under test (the host's `fs`, a Node script run over exec, or
 * a POSIX shell script), and what a checkpoint of it must hold.
 */
export type FixtureEntry =
  | { readonly type: 'dir'; readonly path: string; readonly mode: number; readonly mtimeMs: number }
  | {
      readonly type: 'file';
      readonly path: string;
      readonly mode: number;
      readonly mtimeMs: number;
      /** Literal bytes, or `repeat` of a line to `size` bytes (big files, made the same way on every side). */
      readonly content: { readonly bytes: string } | { readonly repeat: string; readonly size: number };
    }
  | { readonly type: 'hardlink'; readonly path: string; readonly leader: string }
  | { readonly type: 'symlink'; readonly path: string; readonly target: string; readonly mtimeMs: number };

const MiB = 1024 * 1024;
/** 2024-03-04T05:06:07Z: every fixture time is this plus whole seconds (and, where the endpoint keeps them, milliseconds). */
const BASE_MS = Date.UTC(2024, 2, 4, 5, 6, 7);
/** 1960-01-01T00:00:00Z: a time before the epoch. */
const BEFORE_EPOCH_MS = Date.UTC(1960, 0, 1);

/**
 * The fixture for an endpoint keeping mtimes to `precisionMs` (1 or 1000): nested and empty
 * directories with their own modes, an empty file, a file over one fetch round (streamed),
 * an executable, an owner-only file, a name with spaces and non-ASCII letters, a hard-link
 * pair, symlinks within the tree, a time before 1970, and a credential file no checkpoint may
 * store.
 */
export function endpointFixture(precisionMs: 1 | 1000): FixtureEntry[] {
  const ms = (seconds: number, extra: number) => BASE_MS + seconds * 1000 + (precisionMs === 1 ? extra : 0);
  return [
    { type: 'file', path: 'README.md', mode: 0o644, mtimeMs: ms(1, 89), content: { bytes: '# fixture\n' } },
    { type: 'file', path: 'empty.txt', mode: 0o644, mtimeMs: ms(2, 1), content: { bytes: '' } },
    { type: 'file', path: 'run.sh', mode: 0o755, mtimeMs: BEFORE_EPOCH_MS, content: { bytes: '#!/bin/sh\necho hi\n' } },
    { type: 'file', path: 'private.txt', mode: 0o600, mtimeMs: ms(3, 999), content: { bytes: 'owner only\n' } },
    { type: 'file', path: 'name with space ü.txt', mode: 0o644, mtimeMs: ms(4, 5), content: { bytes: 'spaced\n' } },
    { type: 'file', path: '.env', mode: 0o600, mtimeMs: ms(5, 0), content: { bytes: 'TOKEN=never-stored\n' } },
    { type: 'file', path: 'src/a.txt', mode: 0o644, mtimeMs: ms(6, 250), content: { bytes: 'alpha\n' } },
    { type: 'hardlink', path: 'src/a-link.txt', leader: 'src/a.txt' },
    {
      type: 'file',
      path: 'src/deep/er/mid.bin',
      mode: 0o640,
      mtimeMs: ms(7, 7),
      content: { repeat: 'mid-sized line\n', size: 3 * MiB + 5 },
    },
    { type: 'file', path: 'big.bin', mode: 0o644, mtimeMs: ms(8, 8), content: { repeat: 'holdfast big file\n', size: 33 * MiB + 3 } },
    { type: 'symlink', path: 'link', target: 'src/a.txt', mtimeMs: ms(9, 0) },
    { type: 'symlink', path: 'src/up', target: '../run.sh', mtimeMs: ms(10, 0) },
    { type: 'dir', path: 'empty', mode: 0o750, mtimeMs: ms(11, 11) },
    { type: 'dir', path: 'src/deep/er', mode: 0o755, mtimeMs: ms(12, 12) },
    { type: 'dir', path: 'src/deep', mode: 0o700, mtimeMs: ms(13, 13) },
    { type: 'dir', path: 'src', mode: 0o755, mtimeMs: ms(14, 14) },
  ];
}

/** Paths of the fixture a checkpoint must leave out (credential files). */
export const FIXTURE_SECRETS = ['.env'];

/** The bytes of a fixture file. */
export function fixtureBytes(entry: Extract<FixtureEntry, { type: 'file' }>): Buffer {
  const c = entry.content;
  if ('bytes' in c) return Buffer.from(c.bytes, 'utf8');
  const line = Buffer.from(c.repeat, 'utf8');
  const out = Buffer.alloc(c.size);
  for (let at = 0; at < c.size; at += line.length) line.copy(out, at, 0, Math.min(line.length, c.size - at));
  return out;
}

/** SHA-256 of a fixture file's bytes. */
export function fixtureSha256(entry: Extract<FixtureEntry, { type: 'file' }>): string {
  return createHash('sha256').update(fixtureBytes(entry)).digest('hex');
}

/** Fills `dir` (an empty directory on this host) with `fixture`. */
export function fillLocal(dir: string, fixture: readonly FixtureEntry[]): void {
  for (const e of fixture) {
    const p = path.join(dir, e.path);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    if (e.type === 'dir') fs.mkdirSync(p, { recursive: true });
    else if (e.type === 'file') fs.writeFileSync(p, fixtureBytes(e), { mode: e.mode });
    else if (e.type === 'hardlink') fs.linkSync(path.join(dir, e.leader), p);
    else fs.symlinkSync(e.target, p);
  }
  // Modes and times last, deepest directories last in the list, so nothing later changes them.
  for (const e of fixture) {
    const p = path.join(dir, e.path);
    if (e.type === 'hardlink') continue;
    const t = utimeOf(e.mtimeMs);
    if (e.type === 'symlink') fs.lutimesSync(p, t, t);
    else {
      fs.chmodSync(p, e.mode);
      fs.utimesSync(p, t, t);
    }
  }
}

/** A Node script that fills `root` (inside a sandbox) with `fixture`, as {@link fillLocal} does. */
export function fillScriptNode(root: string, fixture: readonly FixtureEntry[]): string {
  return `
const fs = require('fs'), path = require('path');
const root = ${JSON.stringify(root)}, fixture = ${JSON.stringify(fixture)};
const bytes = (c) => {
  if (c.bytes !== undefined) return Buffer.from(c.bytes, 'utf8');
  const line = Buffer.from(c.repeat, 'utf8'), out = Buffer.alloc(c.size);
  for (let at = 0; at < c.size; at += line.length) line.copy(out, at, 0, Math.min(line.length, c.size - at));
  return out;
};
for (const e of fixture) {
  const p = path.join(root, e.path);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  if (e.type === 'dir') fs.mkdirSync(p, { recursive: true });
  else if (e.type === 'file') fs.writeFileSync(p, bytes(e.content), { mode: e.mode });
  else if (e.type === 'hardlink') fs.linkSync(path.join(root, e.leader), p);
  else fs.symlinkSync(e.target, p);
}
for (const e of fixture) {
  // Seconds plus 10 µs, as the engine's utimeOf: a double near 1.7e9 s would otherwise read back a millisecond early.
  const p = path.join(root, e.path), t = String((e.mtimeMs + 0.01) / 1000);
  if (e.type === 'hardlink') continue;
  if (e.type === 'symlink') fs.lutimesSync(p, t, t);
  else { fs.chmodSync(p, e.mode); fs.utimesSync(p, t, t); }
}
`;
}

/** Quotes `s` for a POSIX shell. */
function shQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** `touch -t` form of a whole-second UTC time: `[[CC]YY]MMDDhhmm.ss`. */
function touchStamp(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${d.getUTCFullYear()}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}.${two(d.getUTCSeconds())}`;
}

/**
 * A POSIX shell script (busybox or coreutils) that fills `root` with `fixture`. Times are set
 * to whole seconds (`touch -t`), so use it with a fixture of precision 1000; symlink times
 * are left as made (`touch -h` is not everywhere).
 */
export function fillScriptShell(root: string, fixture: readonly FixtureEntry[]): string {
  const lines = ['set -e', 'export TZ=UTC', `cd ${shQuote(root)}`];
  for (const e of fixture) {
    const p = shQuote(e.path);
    lines.push(`mkdir -p "$(dirname ${p})"`);
    if (e.type === 'dir') lines.push(`mkdir -p ${p}`);
    else if (e.type === 'file') {
      const c = e.content;
      if ('bytes' in c) {
        const octal = [...Buffer.from(c.bytes, 'utf8')].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('');
        lines.push(`printf '${octal}' > ${p}`);
      } else {
        lines.push(`yes ${shQuote(c.repeat.replace(/\n$/, ''))} | head -c ${c.size} > ${p}`);
      }
    } else if (e.type === 'hardlink') lines.push(`ln ${shQuote(e.leader)} ${p}`);
    else lines.push(`ln -s ${shQuote(e.target)} ${p}`);
  }
  for (const e of fixture) {
    if (e.type === 'hardlink' || e.type === 'symlink') continue;
    lines.push(`chmod ${e.mode.toString(8)} ${shQuote(e.path)}`, `touch -t ${touchStamp(e.mtimeMs)} ${shQuote(e.path)}`);
  }
  return lines.join('\n');
}

/** The options of the `.gitignore` checkpoint of the contract: git decides alone, as for a repository checkout. */
export const GITIGNORE_EXCLUDES = Object.freeze({ gitignore: true, cacheExcludes: false });

/**
 * A tree for {@link GITIGNORE_EXCLUDES}: `.gitignore` files at three depths with anchored,
 * directory-only and negated patterns (a deeper negation re-including what the root ignores,
 * a pattern ignoring its own `.gitignore`, a negation that cannot reopen an ignored
 * directory), `.git/info/exclude` overridden by the root's `.gitignore`, and rules that must
 * not apply inside `.git`. Whole-second times, so every endpoint can fill it.
 */
export function gitignoreFixture(): FixtureEntry[] {
  const files: Array<[string, string]> = [
    ['.gitignore', '*.log\n!keep.log\n/build/\ntmp/\nnode_modules/\n!important.bak\n'],
    ['.git/HEAD', 'ref: refs/heads/main\n'],
    ['.git/info/exclude', '# local rules\nlocal-only.txt\n*.bak\n'],
    ['.git/x.log', 'inside .git no rule applies\n'],
    ['app.log', 'ignored\n'],
    ['keep.log', 'negated\n'],
    ['important.bak', 'the root .gitignore outranks info/exclude\n'],
    ['notes.bak', 'ignored by info/exclude\n'],
    ['local-only.txt', 'ignored by info/exclude\n'],
    ['build/out.js', 'ignored with its directory\n'],
    ['build/keep.log', 'a negation cannot reopen an ignored directory\n'],
    ['data/tmp', 'tmp/ matches directories only\n'],
    ['node_modules/pkg/index.js', 'ignored dependency\n'],
    ['src/.gitignore', '*.tmp\n!debug.log\n'],
    ['src/main.ts', 'kept\n'],
    ['src/debug.log', 're-included by the deeper .gitignore\n'],
    ['src/a.tmp', 'ignored\n'],
    ['src/build/gen.js', '/build/ is anchored to the root\n'],
    ['src/lib/b.tmp', 'ignored below the .gitignore that says so\n'],
    ['src/lib/c.ts', 'kept\n'],
    ['src/tmp/x.txt', 'ignored with its directory\n'],
    ['docs/.gitignore', '/*\n!/index.md\n'],
    ['docs/index.md', 'kept\n'],
    ['docs/draft.md', 'ignored\n'],
  ];
  return files.map(([p, bytes], i) => ({ type: 'file', path: p, mode: 0o644, mtimeMs: BASE_MS + i * 1000, content: { bytes } }));
}

/** The files a checkpoint of {@link gitignoreFixture} with {@link GITIGNORE_EXCLUDES} holds. */
export const GITIGNORE_KEPT: readonly string[] = Object.freeze([
  '.git/HEAD',
  '.git/info/exclude',
  '.git/x.log',
  '.gitignore',
  'data/tmp',
  'docs/index.md',
  'important.bak',
  'keep.log',
  'src/.gitignore',
  'src/build/gen.js',
  'src/debug.log',
  'src/lib/c.ts',
  'src/main.ts',
]);

/** The paths that checkpoint reports left out by `.gitignore` (an ignored directory once, not what it holds). */
export const GITIGNORE_IGNORED: readonly string[] = Object.freeze([
  'app.log',
  'build',
  'docs/.gitignore',
  'docs/draft.md',
  'local-only.txt',
  'node_modules',
  'notes.bak',
  'src/a.tmp',
  'src/lib/b.tmp',
  'src/tmp',
]);
