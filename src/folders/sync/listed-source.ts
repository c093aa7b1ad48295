import type { Sha256Hex } from '../../core/hash.js';
import { IntegrityError } from '../../errors.js';
import type { DigestOutcome } from '../../objects/content-workers.js';
import type { FileContent } from '../../snapshot/checkpoint/file-reader.js';
import type { FileIds } from '../../snapshot/checkpoint/tree-builder.js';
import type { SourceScan, WorkspaceSource } from '../../snapshot/workspace-source.js';
import type { ScannedDir, ScannedEntry, ScannedFile, ScanResult } from '../../workspace-fs/scan.js';
import { StatCache } from '../../workspace-fs/stat-cache.js';

/** One entry of the tree a {@link ListedSource} yields. */
export type ListedEntry =
  | {
      readonly kind: 'file';
      readonly path: string;
      readonly size: number;
      readonly sha256: string;
      readonly chunks: readonly string[];
      readonly executable: boolean;
      readonly mtimeMs: number;
    }
  | { readonly kind: 'directory'; readonly path: string; readonly mtimeMs: number }
  | { readonly kind: 'symlink'; readonly path: string; readonly target: string; readonly mtimeMs: number };

/** Modes a listed file gets: what a collection records is the executable bit alone. */
const FILE_MODE = 0o644;
const EXECUTABLE_MODE = 0o755;
const DIR_MODE = 0o755;

/**
 * A workspace that exists only as a list of entries whose content the store already holds:
 * what an incoming work-folder sync builds its target tree from, without reading a byte. Its
 * scan yields the listed entries (missing parent directories made up, mtimes as listed) and
 * its `lookup` vouches for every file's listed ids, so the checkpoint engine never asks to
 * read one (a `digest` or `readLarge` would be a bug: `INTEGRITY`). The entries come from the
 * host's own records (collection rows, its own checkpoints), never from a sandbox.
 */
export class ListedSource implements WorkspaceSource {
  private readonly ids = new Map<string, FileIds>();

  constructor(
    readonly label: string,
    private readonly entries: readonly ListedEntry[],
    private readonly rootMtimeMs: number,
  ) {}

  async scan(): Promise<SourceScan> {
    const root: ScannedDir = dir('', '', this.rootMtimeMs);
    const dirs = new Map<string, ScannedDir>([['', root]]);
    const parentOf = (path: string, mtimeMs: number): ScannedDir => {
      const cut = path.lastIndexOf('/');
      if (cut === -1) return root;
      const parentPath = path.slice(0, cut);
      const found = dirs.get(parentPath);
      if (found !== undefined) return found;
      const made = dir(parentPath.slice(parentPath.lastIndexOf('/') + 1), parentPath, mtimeMs);
      parentOf(parentPath, mtimeMs).children.push(made);
      dirs.set(parentPath, made);
      return made;
    };
    // Parents first, so a listed directory keeps its own mtime rather than a child's.
    const sorted = [...this.entries].sort((a, b) => a.path.split('/').length - b.path.split('/').length);
    let files = 0;
    let bytes = 0;
    let symlinks = 0;
    for (const [i, e] of sorted.entries()) {
      const name = e.path.slice(e.path.lastIndexOf('/') + 1);
      const parent = parentOf(e.path, e.mtimeMs);
      if (e.kind === 'directory') {
        if (dirs.has(e.path)) continue;
        const made = dir(name, e.path, e.mtimeMs);
        parent.children.push(made);
        dirs.set(e.path, made);
      } else if (e.kind === 'symlink') {
        parent.children.push({ type: 'symlink', name, path: e.path, target: e.target, mtimeMs: e.mtimeMs });
        symlinks += 1;
      } else {
        const file: ScannedFile = {
          type: 'file',
          name,
          path: e.path,
          mode: e.executable ? EXECUTABLE_MODE : FILE_MODE,
          size: e.size,
          mtimeMs: e.mtimeMs,
          ctimeMs: e.mtimeMs,
          ino: i + 1,
        };
        parent.children.push(file);
        this.ids.set(e.path, { sha256: e.sha256 as Sha256Hex, chunks: e.chunks as Sha256Hex[] });
        files += 1;
        bytes += e.size;
      }
    }
    const scan: ScanResult = { root, files, dirs: dirs.size - 1, symlinks, bytes, excluded: [], startedAtMs: Date.now() };
    return { scan, lookup: (file) => this.ids.get(file.path), trees: StatCache.empty(), allowances: [] };
  }

  async digest(files: readonly ScannedFile[]): Promise<DigestOutcome[]> {
    throw unlisted(files[0]?.path);
  }

  async readLarge(file: ScannedFile): Promise<FileContent> {
    throw unlisted(file.path);
  }

  async unchanged(): Promise<boolean> {
    return true;
  }

  async saveCache(): Promise<void> {}
}

function dir(name: string, path: string, mtimeMs: number): ScannedDir & { children: ScannedEntry[] } {
  return { type: 'dir', name, path, mode: DIR_MODE, mtimeMs: Math.floor(mtimeMs), exactMtimeMs: mtimeMs, ctimeMs: mtimeMs, children: [] };
}

function unlisted(path: string | undefined): IntegrityError {
  return new IntegrityError('INTEGRITY', `a listed tree was asked for the bytes of ${path ?? 'a file'}, whose ids it vouches for`, {
    data: { path: path ?? null },
  });
}
