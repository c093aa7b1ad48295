import { InputError, IntegrityError } from '../errors.js';
import { CDC_MAX_BYTES, CDC_MIN_BYTES } from './fastcdc.js';
import { isSha256Hex, type Sha256Hex, sha256Hex } from './hash.js';
import { isStorableMode } from './modes.js';
import { bytesFromText } from './name-bytes.js';
import { MAX_PATH_BYTES, nameProblem, symlinkTargetProblem } from './paths.js';

/**
 * A regular file: its whole-file hash and the ids of its chunks, in order. Names (here and in
 * every entry) are the text of the name's bytes (`core/name-bytes.ts`): a name that is not
 * valid UTF-8 holds byte escapes and is restored to the same bytes.
 */
export interface FileEntry {
  readonly name: string;
  readonly type: 'file';
  /** Permission bits only (`0o755`, `0o644`, …): no file type, setuid, setgid or sticky bits. */
  readonly mode: number;
  readonly size: number;
  /** Modification time in whole milliseconds since the epoch. */
  readonly mtimeMs: number;
  readonly sha256: Sha256Hex;
  readonly chunks: readonly Sha256Hex[];
  /**
   * Present when this file is a hard link to another file of the same checkpoint: the
   * workspace-relative path of the group's first member (in the order a restore writes files),
   * which carries no `hardlink` itself. Content, mode and mtime equal the first member's (one
   * inode), so a reader that ignores the field restores an identical copy.
   */
  readonly hardlink?: string;
}

/** A directory: the id of its own tree object. */
export interface DirEntry {
  readonly name: string;
  readonly type: 'dir';
  readonly mode: number;
  readonly mtimeMs: number;
  readonly tree: Sha256Hex;
}

/** A symbolic link whose target stays inside the workspace. */
export interface SymlinkEntry {
  readonly name: string;
  readonly type: 'symlink';
  readonly target: string;
  readonly mtimeMs: number;
}

/** One entry of a directory tree. */
export type TreeEntry = FileEntry | DirEntry | SymlinkEntry;

/** Format version written into every tree object. */
export const TREE_FORMAT_VERSION = 1;

/** Matches any UTF-16 surrogate: a pair (a character beyond U+FFFF) or a byte escape. */
const SURROGATE_RE = /[\ud800-\udfff]/;

/**
 * Orders names by their bytes, as the canonical form requires. Without surrogates, comparing
 * UTF-16 code units is that order (UTF-8 keeps code point order, and below U+10000 a code unit
 * is the code point), so most names are compared as strings: encoding both names on every
 * comparison was a third of encoding the trees of a 100k-file checkpoint.
 */
export function compareNames(a: string, b: string): number {
  if (!SURROGATE_RE.test(a) && !SURROGATE_RE.test(b)) return a < b ? -1 : a > b ? 1 : 0;
  return Buffer.compare(bytesFromText(a), bytesFromText(b));
}

/** Rebuilds an entry with its keys in canonical order (and nothing else). */
function canonicalEntry(e: TreeEntry): TreeEntry {
  switch (e.type) {
    case 'file': {
      const file = {
        name: e.name,
        type: 'file',
        mode: e.mode,
        size: e.size,
        mtimeMs: e.mtimeMs,
        sha256: e.sha256,
        chunks: [...e.chunks],
      } as const;
      return e.hardlink === undefined ? file : { ...file, hardlink: e.hardlink };
    }
    case 'dir':
      return { name: e.name, type: 'dir', mode: e.mode, mtimeMs: e.mtimeMs, tree: e.tree };
    case 'symlink':
      return { name: e.name, type: 'symlink', target: e.target, mtimeMs: e.mtimeMs };
  }
}

/**
 * Encodes a directory as its canonical tree object: JSON, entries sorted by name bytes, keys
 * in a fixed order. Equal directories give equal bytes and therefore equal ids. Throws
 * `INVALID_INPUT` for an entry {@link decodeTree} would refuse (the same rules, one function),
 * so no tree this code writes can fail to restore.
 */
export function encodeTree(entries: readonly TreeEntry[]): { bytes: Buffer; id: Sha256Hex } {
  const sorted = [...entries].sort((a, b) => compareNames(a.name, b.name)).map(canonicalEntry);
  const problem = entriesProblem(sorted);
  if (problem !== undefined) throw new InputError('INVALID_INPUT', `cannot encode a tree: ${problem}`, { data: { reason: problem } });
  const bytes = Buffer.from(JSON.stringify({ v: TREE_FORMAT_VERSION, entries: sorted }));
  return { bytes, id: sha256Hex(bytes) };
}

function corrupt(id: string, why: string): IntegrityError {
  return new IntegrityError('INTEGRITY', `tree ${id} is malformed: ${why}`, { data: { tree: id, reason: why } });
}

const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;

/**
 * Why a file's chunk list cannot belong to a file of `size` bytes: empty exactly when the
 * file is, and as many chunks as FastCDC can cut from that size (every chunk but the last is
 * at least {@link CDC_MIN_BYTES}, none more than {@link CDC_MAX_BYTES}).
 */
function chunksProblem(size: number, chunks: readonly unknown[]): string | undefined {
  if (!chunks.every(isSha256Hex)) return 'bad chunk id';
  if ((size === 0) !== (chunks.length === 0)) return 'chunk list does not match size';
  if (chunks.length < Math.ceil(size / CDC_MAX_BYTES) || chunks.length > Math.ceil(size / CDC_MIN_BYTES))
    return `${chunks.length} chunks cannot make ${size} bytes`;
  return undefined;
}

/** Why one raw entry is not a valid tree entry, or undefined. The rules that need no path. */
function entryProblem(raw: unknown): string | undefined {
  const e = raw as Record<string, unknown> | null;
  const name = e?.name;
  if (e === null || typeof e !== 'object' || typeof name !== 'string') return 'entry without a name';
  const named = (why: string): string => `${JSON.stringify(name)}: ${why}`;
  const nameIssue = nameProblem(name);
  if (nameIssue !== undefined) return named(nameIssue);
  if (!Number.isSafeInteger(e.mtimeMs)) return named('bad mtime');
  if (e.type === 'file') {
    if (!isStorableMode(e.mode)) return named('mode is not permission bits only (setuid, setgid and sticky are refused)');
    if (!isCount(e.size) || !isSha256Hex(e.sha256)) return named('bad file fields');
    if (!Array.isArray(e.chunks)) return named('bad chunk list');
    if (e.hardlink !== undefined && !isRelativePath(e.hardlink)) return named('bad hard link');
    const chunkIssue = chunksProblem(e.size, e.chunks);
    return chunkIssue === undefined ? undefined : named(chunkIssue);
  }
  if (e.type === 'dir') {
    if (!isStorableMode(e.mode)) return named('mode is not permission bits only (setuid, setgid and sticky are refused)');
    return isSha256Hex(e.tree) ? undefined : named('bad directory fields');
  }
  if (e.type === 'symlink') {
    const targetIssue = typeof e.target === 'string' ? symlinkTargetProblem(e.target) : 'no target';
    return targetIssue === undefined ? undefined : named(`bad symlink target: ${targetIssue}`);
  }
  return named(`unknown type ${JSON.stringify(e.type)}`);
}

/** A workspace-relative path whose every segment is a valid name (where it leads is checked by the walk). */
function isRelativePath(p: unknown): boolean {
  if (typeof p !== 'string' || p === '' || p.length > MAX_PATH_BYTES) return false;
  return p.split('/').every((segment) => nameProblem(segment) === undefined);
}

/**
 * The one validation of a tree's entries, shared by {@link encodeTree} and {@link decodeTree}:
 * every entry valid ({@link entryProblem}) and names unique and sorted by their bytes. Rules
 * that depend on where the tree sits (symlink confinement, path length) are checked by the
 * walk that knows each entry's path (`snapshot/tree-walk.ts`).
 */
function entriesProblem(entries: readonly unknown[]): string | undefined {
  for (let i = 0; i < entries.length; i += 1) {
    const problem = entryProblem(entries[i]);
    if (problem !== undefined) return problem;
    if (i > 0 && compareNames((entries[i - 1] as TreeEntry).name, (entries[i] as TreeEntry).name) >= 0)
      return 'entries not sorted or not unique';
  }
  return undefined;
}

/**
 * Decodes and validates a tree object. Throws `INTEGRITY` when the bytes do not hash to `id`,
 * are not the canonical encoding of their entries, or hold an entry {@link encodeTree} would
 * refuse (so a stored tree can never smuggle `..`, a reserved name, a setuid mode or an
 * escaping symlink target into a restore).
 */
export function decodeTree(id: Sha256Hex, bytes: Uint8Array): TreeEntry[] {
  if (sha256Hex(bytes) !== id) throw corrupt(id, 'content does not match its id');
  let doc: { v?: unknown; entries?: unknown };
  try {
    doc = JSON.parse(Buffer.from(bytes).toString('utf8')) as typeof doc;
  } catch {
    throw corrupt(id, 'not JSON');
  }
  if (doc === null || typeof doc !== 'object' || doc.v !== TREE_FORMAT_VERSION || !Array.isArray(doc.entries))
    throw corrupt(id, 'unknown format');
  const problem = entriesProblem(doc.entries);
  if (problem !== undefined) throw corrupt(id, problem);
  const entries = (doc.entries as TreeEntry[]).map(canonicalEntry);
  if (!Buffer.from(JSON.stringify({ v: TREE_FORMAT_VERSION, entries })).equals(bytes)) throw corrupt(id, 'not in canonical form');
  return entries;
}
