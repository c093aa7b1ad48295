import { IntegrityError } from '../errors.js';
import { isSha256Hex, type Sha256Hex, sha256Hex } from './hash.js';
import { nameProblem } from './paths.js';

/** A regular file: its whole-file hash and the ids of its chunks, in order. */
export interface FileEntry {
  readonly name: string;
  readonly type: 'file';
  /** Permission bits (`0o755`, `0o644`, …); file type bits are not stored. */
  readonly mode: number;
  readonly size: number;
  /** Modification time in whole milliseconds since the epoch. */
  readonly mtimeMs: number;
  readonly sha256: Sha256Hex;
  readonly chunks: readonly Sha256Hex[];
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

/** Orders names by their UTF-8 bytes, as the canonical form requires. */
export function compareNames(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** Rebuilds an entry with its keys in canonical order (and nothing else). */
function canonicalEntry(e: TreeEntry): TreeEntry {
  switch (e.type) {
    case 'file':
      return { name: e.name, type: 'file', mode: e.mode, size: e.size, mtimeMs: e.mtimeMs, sha256: e.sha256, chunks: [...e.chunks] };
    case 'dir':
      return { name: e.name, type: 'dir', mode: e.mode, mtimeMs: e.mtimeMs, tree: e.tree };
    case 'symlink':
      return { name: e.name, type: 'symlink', target: e.target, mtimeMs: e.mtimeMs };
  }
}

/**
 * Encodes a directory as its canonical tree object: JSON, entries sorted by name bytes, keys
 * in a fixed order. Equal directories give equal bytes and therefore equal ids.
 */
export function encodeTree(entries: readonly TreeEntry[]): { bytes: Buffer; id: Sha256Hex } {
  const sorted = [...entries].sort((a, b) => compareNames(a.name, b.name)).map(canonicalEntry);
  const bytes = Buffer.from(JSON.stringify({ v: TREE_FORMAT_VERSION, entries: sorted }));
  return { bytes, id: sha256Hex(bytes) };
}

function corrupt(id: string, why: string): IntegrityError {
  return new IntegrityError('INTEGRITY', `tree ${id} is malformed: ${why}`, { data: { tree: id } });
}

const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
const isMode = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 0 && (n as number) <= 0o7777;

function checkEntry(id: string, raw: unknown): TreeEntry {
  const e = raw as Record<string, unknown>;
  const name = e?.name;
  if (typeof name !== 'string' || nameProblem(name) !== undefined) throw corrupt(id, `bad entry name ${JSON.stringify(name)}`);
  if (!Number.isSafeInteger(e.mtimeMs)) throw corrupt(id, `${name}: bad mtime`);
  if (e.type === 'file') {
    if (!isMode(e.mode) || !isCount(e.size) || !isSha256Hex(e.sha256)) throw corrupt(id, `${name}: bad file fields`);
    if (!Array.isArray(e.chunks) || !e.chunks.every(isSha256Hex)) throw corrupt(id, `${name}: bad chunk list`);
    if ((e.size === 0) !== (e.chunks.length === 0)) throw corrupt(id, `${name}: chunk list does not match size`);
  } else if (e.type === 'dir') {
    if (!isMode(e.mode) || !isSha256Hex(e.tree)) throw corrupt(id, `${name}: bad directory fields`);
  } else if (e.type === 'symlink') {
    if (typeof e.target !== 'string' || e.target === '') throw corrupt(id, `${name}: bad symlink target`);
  } else {
    throw corrupt(id, `${name}: unknown type ${JSON.stringify(e.type)}`);
  }
  return canonicalEntry(e as unknown as TreeEntry);
}

/**
 * Decodes and validates a tree object. Throws `INTEGRITY` when the bytes do not hash to `id`,
 * are not canonical, or hold an invalid entry (so a stored tree can never smuggle `..` or a
 * reserved name into a restore).
 */
export function decodeTree(id: Sha256Hex, bytes: Uint8Array): TreeEntry[] {
  if (sha256Hex(bytes) !== id) throw corrupt(id, 'content does not match its id');
  let doc: { v?: unknown; entries?: unknown };
  try {
    doc = JSON.parse(Buffer.from(bytes).toString('utf8')) as typeof doc;
  } catch {
    throw corrupt(id, 'not JSON');
  }
  if (doc.v !== TREE_FORMAT_VERSION || !Array.isArray(doc.entries)) throw corrupt(id, 'unknown format');
  const entries = doc.entries.map((raw) => checkEntry(id, raw));
  for (let i = 1; i < entries.length; i += 1) {
    if (compareNames((entries[i - 1] as TreeEntry).name, (entries[i] as TreeEntry).name) >= 0)
      throw corrupt(id, 'entries not sorted or not unique');
  }
  return entries;
}
