import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bytesFromText, textFromBytes } from '../src/core/name-bytes.js';
import { MAX_PATH_BYTES } from '../src/core/paths.js';
import type { CheckpointResult } from '../src/snapshot/checkpoint/checkpoint.js';
import { verifyStore } from '../src/snapshot/inspect/verify.js';
import { LongPaths } from '../src/workspace-fs/long-paths.js';
import { removeTree } from '../src/workspace-fs/remove-tree.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { type CraftedObject, commitCrafted, dirEntry, fileEntry, rawChunk, rawTree } from './support/crafted-trees.js';
import { codeOf } from './support/error-code.js';
import { describeTree, writeFile } from './support/trees.js';

/** What one entry is, as far as a restore must bring it back (paths are name-bytes text). */
interface Facts {
  readonly type: 'file' | 'dir' | 'symlink';
  readonly mode?: number;
  readonly mtimeMs: number;
  readonly sha256?: string;
  readonly target?: string;
  /** For a file with other hard links: the first path (in this listing's order) of its inode. */
  readonly linkedTo?: string;
  readonly nlink?: number;
}

const at = (long: LongPaths, abs: string): string | Buffer => long.at(abs);
/** `utimes` argument for whole ms (a numeric string: Node takes a negative number as "now"). */
const time = (ms: number): string => String((ms + 0.01) / 1000);

/** Every entry under `root` read as bytes (readdir `buffer`), through LongPaths: exact names, any depth. */
function describeExact(root: string): Map<string, Facts> {
  const long = new LongPaths();
  const out = new Map<string, Facts>();
  const inodes = new Map<string, string>();
  const walk = (abs: string, rel: string): void => {
    const names = fs.readdirSync(at(long, abs), { encoding: 'buffer' }).sort(Buffer.compare);
    for (const raw of names) {
      const name = textFromBytes(raw);
      const p = rel === '' ? name : `${rel}/${name}`;
      const full = path.join(abs, name);
      const st = fs.lstatSync(at(long, full));
      const mtimeMs = Math.floor(st.mtimeMs);
      if (st.isDirectory()) {
        out.set(p, { type: 'dir', mode: st.mode & 0o7777, mtimeMs });
        walk(full, p);
      } else if (st.isSymbolicLink()) {
        out.set(p, { type: 'symlink', mtimeMs, target: textFromBytes(fs.readlinkSync(at(long, full), { encoding: 'buffer' })) });
      } else {
        const sha256 = createHash('sha256')
          .update(fs.readFileSync(at(long, full)))
          .digest('hex');
        const facts: Facts = { type: 'file', mode: st.mode & 0o7777, mtimeMs, sha256 };
        if (st.nlink > 1) {
          const key = `${st.dev}:${st.ino}`;
          const first = inodes.get(key);
          if (first === undefined) inodes.set(key, p);
          out.set(p, { ...facts, linkedTo: first ?? p, nlink: st.nlink });
        } else out.set(p, facts);
      }
    }
  };
  try {
    walk(root, '');
  } finally {
    long.close();
  }
  return out;
}

/** Writes `content` at `rel` (name-bytes text, any depth) with mode and mtime, creating parents. */
function put(root: string, rel: string, content: string, mode: number, mtimeMs: number): void {
  const cut = rel.lastIndexOf('/');
  mkdirs(root, cut < 0 ? '' : rel.slice(0, cut));
  const long = new LongPaths();
  try {
    const p = at(long, path.join(root, rel));
    fs.writeFileSync(p, content);
    fs.chmodSync(p, mode);
    fs.utimesSync(p, time(mtimeMs), time(mtimeMs));
  } finally {
    long.close();
  }
}

/** Creates every missing directory of `rel` (name-bytes text, any depth). */
function mkdirs(root: string, rel: string): void {
  fs.mkdirSync(root, { recursive: true });
  if (rel === '') return;
  const long = new LongPaths();
  try {
    const parts = rel.split('/');
    for (let i = 1; i <= parts.length; i += 1) {
      const p = at(long, path.join(root, ...parts.slice(0, i)));
      if (!fs.existsSync(p)) fs.mkdirSync(p);
    }
  } finally {
    long.close();
  }
}

/** Sets every directory's mtime, deepest first, then the root's mode and mtime. */
function settle(root: string, dirMtimeMs: number, rootMode: number, rootMtimeMs: number): void {
  const long = new LongPaths();
  const walk = (abs: string): void => {
    for (const d of fs.readdirSync(at(long, abs), { withFileTypes: true, encoding: 'buffer' }))
      if (d.isDirectory()) walk(path.join(abs, textFromBytes(d.name)));
    if (abs !== root) fs.utimesSync(at(long, abs), time(dirMtimeMs), time(dirMtimeMs));
  };
  try {
    walk(root);
  } finally {
    long.close();
  }
  fs.chmodSync(root, rootMode);
  fs.utimesSync(root, time(rootMtimeMs), time(rootMtimeMs));
}

const T2024 = Date.UTC(2024, 4, 5, 6, 7, 8, 678);
const T1960 = Date.UTC(1960, 0, 1, 0, 0, 0, 123);
const T2400 = Date.UTC(2400, 0, 1, 0, 0, 0, 7);
const ROOT_MTIME = Date.UTC(2001, 1, 2, 3, 4, 5, 321);
/** A name that is not UTF-8 (latin-1 é), and one with a real U+FFFD, which must stay apart. */
const LATIN1 = textFromBytes(Buffer.from('caf\xe9.txt', 'latin1'));
const REPLACEMENT = 'caf\ufffd.txt';
const ESCAPED_DIR = textFromBytes(Buffer.from('d\xff', 'latin1'));
const ESCAPED_FILE = textFromBytes(Buffer.from('x\xfe\xfd', 'latin1'));
/** 24 levels of 200-byte names: a path of 4,800+ bytes, past PATH_MAX. */
const DEEP = Array.from({ length: 24 }, (_, i) => `${String(i).padStart(2, '0')}${'d'.repeat(198)}`).join('/');

/** The fixture: one of each thing issue 10 found lost, plus what a checkpoint must leave out. */
function makeFidelityTree(root: string): void {
  put(root, 'plain.txt', 'plain\n', 0o640, T2024);
  put(root, LATIN1, 'latin-1 name\n', 0o644, T2024);
  put(root, REPLACEMENT, 'a real U+FFFD name\n', 0o600, T2024);
  put(root, `${ESCAPED_DIR}/${ESCAPED_FILE}`, 'escaped dir and file\n', 0o644, T2024);
  put(root, `${DEEP}/deep.txt`, 'past PATH_MAX\n', 0o755, T2024);
  fs.symlinkSync('deep.txt', at(new LongPaths(), path.join(root, DEEP, 'deep-link')));
  put(root, 'times/1960.txt', 'old\n', 0o644, T1960);
  put(root, 'times/2400.txt', 'future\n', 0o644, T2400);
  fs.symlinkSync('1960.txt', path.join(root, 'times/old-link'));
  fs.lutimesSync(path.join(root, 'times/old-link'), time(T1960), time(T1960));
  mkdirs(root, 'times/old-dir');
  put(root, 'links/a', 'one inode, four names\n', 0o755, T2024);
  mkdirs(root, 'links/sub');
  mkdirs(root, 'other');
  fs.linkSync(path.join(root, 'links/a'), path.join(root, 'links/b'));
  fs.linkSync(path.join(root, 'links/a'), path.join(root, 'links/sub/c'));
  fs.linkSync(path.join(root, 'links/a'), path.join(root, 'other/z'));
  put(root, 'links/lonely', 'one link only\n', 0o644, T2024);
  fs.symlinkSync(path.join(root, 'links/a'), path.join(root, 'abs-in'));
  fs.symlinkSync(`${root}/links/../`, path.join(root, 'links/sub/abs-root'));
  fs.symlinkSync('/etc/passwd', path.join(root, 'abs-out'));
  put(root, 'node_modules/esbuild/bin/esbuild', 'binary\n', 0o755, T2024);
  put(root, '.ssh/id_ed25519', 'not a real key\n', 0o600, T2024);
  settle(root, T2024, 0o750, ROOT_MTIME);
  const old = path.join(root, 'times/old-dir');
  fs.utimesSync(old, time(-500), time(-500)); // 1969-12-31T23:59:59.500
  fs.utimesSync(path.join(root, 'times'), time(T1960), time(T1960));
  fs.utimesSync(root, time(ROOT_MTIME), time(ROOT_MTIME));
}

/** What the restore must give: the source, less what was left out, absolute links made relative. */
function expectedFrom(source: Map<string, Facts>): Map<string, Facts> {
  const out = new Map<string, Facts>();
  for (const [p, f] of source) {
    if (p === 'abs-out' || p.startsWith('node_modules') || p.startsWith('.ssh')) continue;
    if (p === 'abs-in') out.set(p, { ...f, target: 'links/a' });
    else if (p === 'links/sub/abs-root') out.set(p, { ...f, target: '../..' });
    else out.set(p, f);
  }
  return out;
}

describe.each(BACKENDS)('fidelity of a checkpoint and its restore on $name', (backend) => {
  let b: OpenedBackends;
  let source: string;
  let first: CheckpointResult;

  beforeAll(async () => {
    b = await backend.open();
    source = path.join(b.dir, 'source');
    makeFidelityTree(source);
    first = await b.snapshots.checkpoint({ dir: source, workspace: 'fidelity' });
  }, 120_000);
  afterAll(async () => {
    // `fs.rm` cannot remove a tree past PATH_MAX; removeTree can (and is tested so).
    for (const name of fs.readdirSync(b.dir)) removeTree(path.join(b.dir, name));
    await b?.cleanup();
  });

  it('reports what it left out and changed, and records the root and the link groups', () => {
    const reasons = first.excluded.map((e) => `${e.reason} ${e.path}`).sort();
    expect(reasons).toEqual([
      'cache node_modules',
      'secret-path .ssh',
      'symlink-escape abs-out',
      'symlink-made-relative abs-in',
      'symlink-made-relative links/sub/abs-root',
    ]);
    expect(first.excluded.find((e) => e.path === 'abs-in')?.rule).toBe(path.join(source, 'links/a'));
    expect(first.stats.excludedByReason).toEqual({ cache: 1, 'secret-path': 1, 'symlink-escape': 1, 'symlink-made-relative': 2 });
    expect(first.stats.root).toEqual({ mode: 0o750, mtimeMs: ROOT_MTIME });
    expect(first.stats.hardlinks).toBe(3);
    expect(first.checkpoint.stats).toMatchObject({ root: { mode: 0o750, mtimeMs: ROOT_MTIME }, excludedCount: 5 });
  });

  it('restores names as bytes, long paths, times to the ms, hard links, the root, and says what was left out', async () => {
    const target = path.join(b.dir, 'restored');
    const receipt = await b.snapshots.restore({ dir: target, workspace: 'fidelity' });
    expect(receipt).toMatchObject({
      verified: true,
      hardlinks: 3,
      excluded: { total: 5, byReason: { cache: 1, 'secret-path': 1, 'symlink-escape': 1, 'symlink-made-relative': 2 } },
    });
    const restored = describeExact(target);
    expect(restored).toEqual(expectedFrom(describeExact(source)));
    // Spot checks of what the whole-tree comparison covers, so a failure says which rule broke.
    const names = fs.readdirSync(target, { encoding: 'buffer' }).map((n) => n.toString('latin1'));
    expect(names).toContain('caf\xe9.txt');
    expect(names).toContain(Buffer.from(REPLACEMENT).toString('latin1'));
    expect(fs.readFileSync(path.join(target, REPLACEMENT), 'utf8')).toBe('a real U+FFFD name\n');
    expect(fs.readFileSync(bytesFromText(path.join(target, LATIN1)), 'utf8')).toBe('latin-1 name\n');
    expect(restored.get(`${DEEP}/deep.txt`)?.sha256).toBe(createHash('sha256').update('past PATH_MAX\n').digest('hex'));
    expect(restored.get('times/1960.txt')?.mtimeMs).toBe(T1960);
    expect(restored.get('times/2400.txt')?.mtimeMs).toBe(T2400);
    expect(restored.get('times/old-link')?.mtimeMs).toBe(T1960);
    expect(restored.get('times/old-dir')?.mtimeMs).toBe(-500);
    expect(restored.get('times')?.mtimeMs).toBe(T1960);
    const a = fs.lstatSync(path.join(target, 'links/a'));
    for (const p of ['links/b', 'links/sub/c', 'other/z']) expect(fs.lstatSync(path.join(target, p)).ino).toBe(a.ino);
    expect(a.nlink).toBe(4);
    expect(fs.lstatSync(path.join(target, 'links/lonely')).nlink).toBe(1);
    const rootStat = fs.lstatSync(target);
    expect(rootStat.mode & 0o7777).toBe(0o750);
    expect(Math.floor(rootStat.mtimeMs)).toBe(ROOT_MTIME);
    expect(fs.readFileSync(path.join(target, 'abs-in'), 'utf8')).toBe('one inode, four names\n');
  }, 120_000);

  it('a warm restore over the copy reuses leaders, links members afresh and gives the same tree', async () => {
    const target = path.join(b.dir, 'restored');
    const before = describeExact(target);
    const receipt = await b.snapshots.restore({ dir: target, workspace: 'fidelity', replace: true });
    expect(receipt.filesReused).toBeGreaterThan(0);
    expect(receipt.hardlinks).toBe(3);
    expect(describeExact(target)).toEqual(before);
  }, 120_000);

  it('a second checkpoint of the source, and one of the restored copy, store the same root tree', async () => {
    const again = await b.snapshots.checkpoint({ dir: source, workspace: 'fidelity' });
    expect(again.checkpoint.rootTree).toBe(first.checkpoint.rootTree);
    const copy = await b.snapshots.checkpoint({ dir: path.join(b.dir, 'restored'), workspace: 'fidelity-copy' });
    expect(copy.checkpoint.rootTree).toBe(first.checkpoint.rootTree);
    expect(copy.stats.root).toEqual(first.stats.root);
    expect(copy.stats.hardlinks).toBe(3);
  }, 120_000);

  it('a path past MAX_PATH_BYTES is reported invalid-path and the rest is checkpointed', async () => {
    const dir = path.join(b.dir, 'too-long');
    const tooDeep = Array.from({ length: 170 }, (_, i) => `${String(i).padStart(3, '0')}${'e'.repeat(197)}`).join('/');
    expect(Buffer.byteLength(tooDeep)).toBeGreaterThan(MAX_PATH_BYTES);
    put(dir, 'ok.txt', 'kept\n', 0o644, T2024);
    put(dir, `${tooDeep}/lost.txt`, 'too deep\n', 0o644, T2024);
    const result = await b.snapshots.checkpoint({ dir, workspace: 'too-long' });
    const invalid = result.excluded.filter((e) => e.reason === 'invalid-path');
    expect(invalid).toHaveLength(1);
    expect(result.stats.files).toBe(1);
    expect(result.stats.excludedByReason).toEqual({ 'invalid-path': 1 });
  }, 120_000);

  it('verify finds the store whole', async () => {
    const report = await verifyStore(b, { readData: true });
    expect(report.ok).toBe(true);
  }, 120_000);

  it('a checkpoint older than the root record restores its root as 0755 with the mtime of the restore', async () => {
    const chunk = rawChunk('old\n');
    const root = rawTree([fileEntry('f', chunk, 0o644, T2024)]);
    await commitCrafted(b, 'old-format', [chunk], root);
    const target = path.join(b.dir, 'old-format');
    const receipt = await b.snapshots.restore({ dir: target, workspace: 'old-format' });
    expect(receipt.excluded).toEqual({ total: 0, byReason: {} });
    expect(fs.lstatSync(target).mode & 0o7777).toBe(0o755);
    expect(Math.abs(fs.lstatSync(target).mtimeMs - Date.now())).toBeLessThan(60_000);
  }, 60_000);

  it('a time the target filesystem cannot keep fails the restore with INTEGRITY naming path and field, not a silent receipt', async () => {
    const T1800 = Date.UTC(1800, 0, 1);
    // ext4 keeps 1901..2446 and clamps the rest; tmpfs and others keep more. Ask the filesystem.
    const probe = path.join(b.dir, 'probe');
    fs.writeFileSync(probe, '');
    fs.utimesSync(probe, time(T1800), time(T1800));
    const kept = Math.floor(fs.statSync(probe).mtimeMs) === T1800;
    const chunk = rawChunk('ancient\n');
    await commitCrafted(b, 'ancient', [chunk], rawTree([fileEntry('f', chunk, 0o644, T1800)]));
    const target = path.join(b.dir, 'ancient');
    const outcome = await b.snapshots.restore({ dir: target, workspace: 'ancient' }).then(
      () => undefined,
      (error: unknown) => error as { code?: string; data?: unknown },
    );
    if (kept) {
      expect(outcome).toBeUndefined();
      expect(Math.floor(fs.statSync(path.join(target, 'f')).mtimeMs)).toBe(T1800);
    } else {
      expect(outcome?.code).toBe('INTEGRITY');
      expect(outcome?.data).toEqual({ path: 'f', field: 'mtime' });
      expect(fs.existsSync(target)).toBe(false);
    }
  }, 60_000);

  describe('a stored tree whose hard link lies fails with INTEGRITY and publishes nothing', () => {
    const content = rawChunk('linked\n');
    const other = rawChunk('other\n');
    const sub = rawTree([fileEntry('x', content)]);
    const link = (name: string, to: string, chunk: CraftedObject = content, mode = 0o644, mtimeMs = 0) => ({
      ...fileEntry(name, chunk, mode, mtimeMs),
      hardlink: to,
    });
    let n = 0;
    const restoreCrafted = async (objects: readonly CraftedObject[], root: CraftedObject): Promise<string> => {
      n += 1;
      const workspace = `lying-${n}`;
      await commitCrafted(b, workspace, [content, other, ...objects], root);
      const target = path.join(b.dir, `lying-target-${n}`);
      writeFile(target, 'keep.txt', 'mine\n');
      const before = describeTree(target);
      const code = await codeOf(b.snapshots.restore({ dir: target, workspace, replace: true }));
      expect(describeTree(target)).toEqual(before);
      expect(fs.readdirSync(b.dir).filter((name) => name.includes('holdfast-'))).toEqual([]);
      return code;
    };

    it.each([
      ['at a later file', () => rawTree([link('a', 'b'), fileEntry('b', content)])],
      ['at a file deeper in a later directory', () => rawTree([link('a', 'd/x'), dirEntry('d', sub)])],
      ['at a directory', () => rawTree([dirEntry('d', sub), link('e', 'd')])],
      ['at a file with other content', () => rawTree([fileEntry('a', other), link('b', 'a')])],
      ['at a file with another mode', () => rawTree([fileEntry('a', content, 0o600), link('b', 'a')])],
      ['at a file with another mtime', () => rawTree([fileEntry('a', content, 0o644, 5), link('b', 'a')])],
      ['at a member of a group', () => rawTree([fileEntry('a', content), link('b', 'a'), link('c', 'b')])],
      ['at nothing', () => rawTree([link('a', 'missing')])],
      ['at itself', () => rawTree([link('a', 'a')])],
    ])('pointing %s', async (_what, make) => {
      const root = make();
      expect(await restoreCrafted([sub], root)).toBe('INTEGRITY');
    });

    it('while an honest one restores as a link', async () => {
      const root = rawTree([fileEntry('a', content), link('b', 'a'), dirEntry('d', rawTree([link('y', 'a')]))]);
      n += 1;
      await commitCrafted(b, `honest-${n}`, [content, rawTree([link('y', 'a')])], root);
      const target = path.join(b.dir, `honest-target-${n}`);
      const receipt = await b.snapshots.restore({ dir: target, workspace: `honest-${n}` });
      expect(receipt.hardlinks).toBe(2);
      const ino = fs.lstatSync(path.join(target, 'a')).ino;
      expect(fs.lstatSync(path.join(target, 'b')).ino).toBe(ino);
      expect(fs.lstatSync(path.join(target, 'd/y')).ino).toBe(ino);
    });
  });
});
