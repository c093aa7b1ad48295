import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** What a test compares about one entry of a directory tree. */
export interface EntryFacts {
  readonly type: 'file' | 'dir' | 'symlink';
  readonly mode?: number;
  readonly mtimeMs?: number;
  readonly sha256?: string;
  readonly size?: number;
  readonly target?: string;
}

/**
 * Everything under `root` (not following symlinks): type, permission bits, whole-millisecond
 * mtime, and content hash or link target, by relative path. Paths listed in `ignore` are skipped.
 */
export function describeTree(root: string, ignore: readonly string[] = []): Map<string, EntryFacts> {
  const out = new Map<string, EntryFacts>();
  const walk = (abs: string, rel: string): void => {
    for (const name of fs.readdirSync(abs).sort()) {
      const p = rel === '' ? name : `${rel}/${name}`;
      if (ignore.includes(p)) continue;
      const full = path.join(abs, name);
      const st = fs.lstatSync(full);
      if (st.isDirectory()) {
        out.set(p, { type: 'dir', mode: st.mode & 0o7777, mtimeMs: Math.floor(st.mtimeMs) });
        walk(full, p);
      } else if (st.isSymbolicLink()) {
        out.set(p, { type: 'symlink', target: fs.readlinkSync(full) });
      } else {
        const sha256 = createHash('sha256').update(fs.readFileSync(full)).digest('hex');
        out.set(p, { type: 'file', mode: st.mode & 0o7777, mtimeMs: Math.floor(st.mtimeMs), sha256, size: st.size });
      }
    }
  };
  walk(root, '');
  return out;
}

/** Deterministic, incompressible pseudo-random bytes (xorshift128 seeded from SHA-256 of `seed`). */
export function seededBytes(size: number, seed: string): Buffer {
  const s = createHash('sha256').update(seed).digest();
  let [a, b, c, d] = [s.readUInt32LE(0) | 1, s.readUInt32LE(4), s.readUInt32LE(8), s.readUInt32LE(12)];
  const words = new Uint32Array(Math.ceil(size / 4));
  for (let i = 0; i < words.length; i += 1) {
    const t = a ^ (a << 11);
    a = b;
    b = c;
    c = d;
    d = (d ^ (d >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
    words[i] = d;
  }
  return Buffer.from(words.buffer, 0, size);
}

/** Writes a file with the given mode and mtime, creating parent directories. */
export function writeFile(root: string, rel: string, content: Uint8Array | string, mode = 0o644, mtimeMs?: number): void {
  const p = path.join(root, rel);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
  fs.chmodSync(p, mode);
  if (mtimeMs !== undefined) fs.utimesSync(p, mtimeMs / 1000, mtimeMs / 1000);
}

/** Sets directory mtimes bottom-up (creating files changes them), so tests can compare them. */
export function settleDirMtimes(root: string, mtimeMs: number): void {
  const walk = (abs: string): void => {
    for (const d of fs.readdirSync(abs, { withFileTypes: true })) if (d.isDirectory()) walk(path.join(abs, d.name));
    if (abs !== root) fs.utimesSync(abs, mtimeMs / 1000, mtimeMs / 1000);
  };
  walk(root);
}

/**
 * A tree with every kind of entry the engine must preserve: exec bits, symlinks (inside the
 * root), empty directories, unicode names, empty files, sizes around the 1 MiB chunking
 * threshold and one large file. Mtimes are fixed in the past so nothing is "racy".
 */
export function makeMixedTree(root: string, bigBytes = 50 * 1024 * 1024): void {
  const old = Date.UTC(2024, 0, 2, 3, 4, 5, 678);
  const MiB = 1024 * 1024;
  writeFile(root, 'run.sh', '#!/bin/sh\necho hi\n', 0o755, old);
  writeFile(root, 'plain.txt', 'hello\n'.repeat(1000), 0o644, old + 1);
  writeFile(root, 'readonly.txt', 'frozen', 0o444, old + 2);
  writeFile(root, 'empty', '', 0o600, old + 3);
  writeFile(root, 'a/b/c/deep.txt', 'deep content\n', 0o640, old + 4);
  writeFile(root, 'uni/日本語/ファイル.txt', 'ユニコード', 0o644, old + 5);
  writeFile(root, 'emoji 🎉 name.md', '# party', 0o644, old + 6);
  writeFile(root, 'sizes/mib-minus-1', seededBytes(MiB - 1, 'a'), 0o644, old + 7);
  writeFile(root, 'sizes/mib', seededBytes(MiB, 'b'), 0o644, old + 8);
  writeFile(root, 'sizes/mib-plus-1', seededBytes(MiB + 1, 'c'), 0o644, old + 9);
  writeFile(root, 'sizes/big.bin', seededBytes(bigBytes, 'big'), 0o644, old + 10);
  writeFile(root, 'dup/one.txt', 'same bytes in two files', 0o644, old + 11);
  writeFile(root, 'dup/two.txt', 'same bytes in two files', 0o644, old + 12);
  fs.mkdirSync(path.join(root, 'empty-dir'));
  fs.mkdirSync(path.join(root, 'a/empty-nested/deeper'), { recursive: true });
  fs.mkdirSync(path.join(root, 'private'), { mode: 0o700 });
  writeFile(root, 'private/note', 'mine', 0o600, old + 13);
  fs.symlinkSync('plain.txt', path.join(root, 'link-to-plain'));
  fs.symlinkSync('../../plain.txt', path.join(root, 'a/b/link-up'));
  fs.symlinkSync('a/b', path.join(root, 'link-to-dir'));
  settleDirMtimes(root, old + 100);
}
