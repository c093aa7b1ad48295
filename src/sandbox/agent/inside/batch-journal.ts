import fs from 'node:fs';
import path from 'node:path';
import { isSha256Hex, type Sha256Hex } from '../../../core/hash.js';

/** A file the restore put in staging, remembered for the stat cache written at publish. */
export interface StagedFile {
  readonly path: string;
  readonly size: number;
  readonly mtimeMs: number;
  readonly mode: number;
  readonly sha256: Sha256Hex;
  readonly chunks: readonly Sha256Hex[];
  /**
   * Its inode, mtime and ctime when it was completed, read back from the file itself: what the
   * stat cache records at publish, where nothing but a rename of a top-level entry or a hard
   * link to it changes them. Absent (reused files, older journals, a leader linked since): the
   * file is `lstat`ed at publish instead.
   */
  readonly stat?: StagedStat;
}

/** What {@link StagedFile.stat} keeps of an `fstat`. */
export interface StagedStat {
  readonly ino: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
}

/** The mark of a staged file whose stat changed after it was staged (a hard link was made to it). */
const RESTAT = '-';

/**
 * The durable memory of one staging directory, kept in `<staging>/.holdfast/` (a reserved name
 * no workspace path can use, removed before publish): `batches` lists completed write-batch
 * ids, `staged.tsv` the files written or reused (paths as JSON strings; a line of a path and `-`
 * marks one whose stat changed since). Both are append-only with fsync; a torn last
 * line (a kill mid-append) is cut off when the journal is opened, so it never merges with the
 * next record. A batch id is appended only after all of its operations are applied, so an id
 * in the journal means "applied exactly once", and an id missing means "apply it (again)".
 */
export class BatchJournal {
  /** Paths of staged files, read on first use and kept up to date by this object. */
  private stagedPaths: Set<string> | undefined;

  private constructor(
    private readonly dir: string,
    private readonly done: Set<string>,
  ) {}

  /** The journal directory inside a staging directory. */
  static dirOf(staging: string): string {
    return path.join(staging, '.holdfast');
  }

  /** Opens (creating when absent) the journal of `staging`. */
  static open(staging: string): BatchJournal {
    const dir = BatchJournal.dirOf(staging);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    return new BatchJournal(dir, new Set(readLines(path.join(dir, 'batches'))));
  }

  /** True when `batchId` was completed before (by this or an earlier agent process). */
  has(batchId: string): boolean {
    return this.done.has(batchId);
  }

  /** Every completed batch id, oldest first. */
  ids(): string[] {
    return [...this.done];
  }

  /** Records files staged by a reuse request (not a batch: reuse is idempotent by itself). */
  addStaged(files: readonly StagedFile[]): void {
    if (files.length === 0) return;
    appendDurably(this.stagedFile, files.map(stagedLine).join(''));
    for (const f of files) this.stagedPaths?.add(f.path);
  }

  /** True when a file at `relPath` was completed and verified in this staging (written or reused), by any agent process. */
  isStaged(relPath: string): boolean {
    this.stagedPaths ??= new Set(readStaged(this.stagedFile).keys());
    return this.stagedPaths.has(relPath);
  }

  /** Marks a batch complete, after recording the files it staged and the leaders it linked members to (`relinked`). */
  complete(batchId: string, files: readonly StagedFile[], relinked: readonly string[] = []): void {
    this.addStaged(files);
    if (relinked.length > 0) appendDurably(this.stagedFile, relinked.map((p) => `${quote(p)}\t${RESTAT}\n`).join(''));
    appendDurably(path.join(this.dir, 'batches'), `${batchId}\n`);
    this.done.add(batchId);
  }

  /** The file listing staged files (read it with {@link readStaged}). */
  get stagedFile(): string {
    return path.join(this.dir, 'staged.tsv');
  }
}

/** Every staged file listed in `file` by path; a path staged twice (a re-applied batch) keeps its last record. */
export function readStaged(file: string): Map<string, StagedFile> {
  const out = new Map<string, StagedFile>();
  for (const line of readLines(file)) {
    const f = line.split('\t');
    if (f.length === 2 && f[1] === RESTAT) {
      const p = unquote(f[0] as string);
      const known = p === undefined ? undefined : out.get(p);
      if (known?.stat !== undefined) {
        const { stat: _changed, ...rest } = known;
        out.set(known.path, rest);
      }
      continue;
    }
    if (f.length !== 6 && f.length !== 9) continue;
    const [quoted, size, mtimeMs, mode, sha256, chunks] = f as [string, string, string, string, string, string];
    const ids = chunks === '' ? [] : chunks.split(',');
    const p = unquote(quoted);
    if (p === undefined || !isSha256Hex(sha256) || !ids.every(isSha256Hex)) continue;
    const entry = { path: p, size: Number(size), mtimeMs: Number(mtimeMs), mode: Number(mode), sha256, chunks: ids };
    const stat = f.length === 9 ? statOf(f[6] as string, f[7] as string, f[8] as string) : undefined;
    out.set(p, stat === undefined ? entry : { ...entry, stat });
  }
  return out;
}

function statOf(ino: string, mtimeMs: string, ctimeMs: string): StagedStat | undefined {
  const stat = { ino: Number(ino), mtimeMs: Number(mtimeMs), ctimeMs: Number(ctimeMs) };
  return Number.isSafeInteger(stat.ino) && Number.isFinite(stat.mtimeMs) && Number.isFinite(stat.ctimeMs) ? stat : undefined;
}

/**
 * A path as one field of a line: JSON text, which writes a byte escape (a name that is not
 * UTF-8) as `\udcXX` and a tab as `\t`, where plain UTF-8 would turn the escape into U+FFFD.
 */
function quote(relPath: string): string {
  return JSON.stringify(relPath);
}

function unquote(field: string): string | undefined {
  try {
    const p: unknown = JSON.parse(field);
    return typeof p === 'string' ? p : undefined;
  } catch {
    return undefined;
  }
}

function stagedLine(f: StagedFile): string {
  const stat = f.stat === undefined ? '' : `\t${f.stat.ino}\t${f.stat.mtimeMs}\t${f.stat.ctimeMs}`;
  return `${quote(f.path)}\t${f.size}\t${f.mtimeMs}\t${f.mode}\t${f.sha256}\t${f.chunks.join(',')}${stat}\n`;
}

/** Complete lines of `file`; a torn tail is truncated away so the next append starts clean. */
function readLines(file: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const end = text.lastIndexOf('\n') + 1;
  if (end < text.length) fs.truncateSync(file, Buffer.byteLength(text.slice(0, end)));
  return text
    .slice(0, end)
    .split('\n')
    .filter((line) => line !== '');
}

function appendDurably(file: string, text: string): void {
  const fd = fs.openSync(file, 'a', 0o600);
  try {
    fs.writeSync(fd, text);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
