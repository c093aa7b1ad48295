import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { BatchWriter, type BatchWriterStats, type WriteSink } from '../../src/sandbox/agent/host/batch-writer.js';
import type { ReuseFile } from '../../src/sandbox/agent/wire/protocol.js';

/** Files at least this big are sent as a stream of pieces, as a restore sends chunked files. */
const PIECE_BYTES = 1024 * 1024;

interface Listed {
  dirs: Array<{ path: string; mode: number; mtimeMs: number }>;
  files: ReuseFile[];
  symlinks: Array<{ path: string; target: string; mtimeMs: number }>;
}

/** Everything under `root` as a restore would describe it (dirs parent-first). */
export function listTree(root: string): Listed {
  const out: Listed = { dirs: [], files: [], symlinks: [] };
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
      const p = rel === '' ? name : `${rel}/${name}`;
      const abs = path.join(root, p);
      const st = fs.lstatSync(abs);
      const mtimeMs = Math.floor(st.mtimeMs);
      if (st.isDirectory()) {
        out.dirs.push({ path: p, mode: st.mode & 0o7777, mtimeMs });
        walk(p);
      } else if (st.isSymbolicLink()) {
        out.symlinks.push({ path: p, target: fs.readlinkSync(abs), mtimeMs });
      } else {
        const sha256 = createHash('sha256').update(fs.readFileSync(abs)).digest('hex');
        out.files.push({ path: p, size: st.size, mode: st.mode & 0o7777, mtimeMs, sha256, chunks: [sha256] });
      }
    }
  };
  walk('');
  return out;
}

/** Copies a tree exactly, directory mtimes included (`cpSync` sets them before filling the directories). */
export function cloneTree(src: string, dst: string): void {
  fs.cpSync(src, dst, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
  for (const d of [...listTree(src).dirs].reverse()) {
    const st = fs.statSync(path.join(src, d.path));
    fs.utimesSync(path.join(dst, d.path), st.atime, st.mtime);
  }
}

async function* pieces(abs: string): AsyncGenerator<Uint8Array> {
  const bytes = fs.readFileSync(abs);
  for (let at = 0; at < bytes.length; at += PIECE_BYTES) yield bytes.subarray(at, at + PIECE_BYTES);
}

/**
 * Sends the tree at `src` into staging `stagingId` in restore order: mkdirs parent-first, files
 * (except `skip`, e.g. reused ones), symlinks, then dir modes and mtimes child-first.
 */
export async function sendTree(
  sink: WriteSink,
  stagingId: string,
  src: string,
  options: { skip?: ReadonlySet<string>; completed?: Iterable<string> } = {},
): Promise<BatchWriterStats> {
  const tree = listTree(src);
  const writer = new BatchWriter(sink, stagingId, options.completed === undefined ? {} : { completed: options.completed });
  for (const d of tree.dirs) await writer.mkdir(d.path);
  for (const f of tree.files) {
    if (options.skip?.has(f.path) === true) continue;
    const abs = path.join(src, f.path);
    await writer.file(f, f.size >= PIECE_BYTES ? pieces(abs) : fs.readFileSync(abs));
  }
  for (const s of tree.symlinks) await writer.symlink(s.path, s.target, s.mtimeMs);
  for (const d of [...tree.dirs].reverse()) await writer.dir(d.path, d.mode, d.mtimeMs);
  await writer.dir('', 0o755, 0);
  return writer.flush();
}
