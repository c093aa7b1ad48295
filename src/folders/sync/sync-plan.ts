import { isHoldfastError } from '../../errors.js';
import type { SyncIntents } from '../../metadata/metadata-store.js';
import type { Exclusion } from '../../rules/excludes.js';
import type { FlatTree } from '../../snapshot/tree-walk.js';
import { parentPaths, validateFolderPath } from '../folder-paths.js';
import type { StoredContent } from '../stored-operations.js';

/** A path with no entry (a removal's signature). */
export const MISSING = 'missing';

/**
 * What a sync compares: kind, SHA-256 and executable bit (never mtime or size alone), as JSON.
 * Two entries with one signature hold the same bytes the same way.
 */
export function signature(kind: 'file' | 'directory', sha256: string | null, executable: boolean): string {
  return JSON.stringify([kind, sha256, executable]);
}

/** The signature of every directory. */
export const DIRECTORY = signature('directory', null, false);

/** One file or directory as the sandbox holds it (from the outgoing checkpoint's tree). */
export type DiskEntry =
  | { readonly kind: 'directory'; readonly signature: string }
  | { readonly kind: 'file'; readonly signature: string; readonly content: StoredContent; readonly executable: boolean };

/** The sandbox's side of an outgoing sync: what it holds, and the paths the sync knows nothing of. */
export interface DiskView {
  readonly entries: ReadonlyMap<string, DiskEntry>;
  /**
   * Paths the checkpoint left out (secret rules, special files, …), symlinks, and entries
   * whose path a collection cannot hold: never sent, and never deleted from the store (a
   * path under one of them is unknown too).
   */
  readonly unknown: ReadonlySet<string>;
}

/** The sandbox's entries from a checkpoint of its collection directory and what that checkpoint left out. */
export function diskView(flat: FlatTree, excluded: readonly Exclusion[], maxPathBytes: number): DiskView {
  const entries = new Map<string, DiskEntry>();
  const unknown = new Set<string>();
  // A stripped setuid bit keeps the file: only real exclusions are unknown.
  for (const e of excluded) if (e.reason !== 'mode-stripped') unknown.add(e.path.replace(/\/$/, ''));
  for (const s of flat.symlinks) unknown.add(s.path);
  const storable = (path: string): boolean => {
    try {
      validateFolderPath(path, maxPathBytes);
      return true;
    } catch (error) {
      if (!isHoldfastError(error, 'INVALID_PATH')) throw error;
      unknown.add(path);
      return false;
    }
  };
  for (const d of flat.dirs) {
    if (d.path !== '' && storable(d.path)) entries.set(d.path, { kind: 'directory', signature: DIRECTORY });
  }
  for (const f of flat.files) {
    if (!storable(f.path)) continue;
    const executable = (f.mode & 0o100) !== 0;
    entries.set(f.path, {
      kind: 'file',
      signature: signature('file', f.sha256, executable),
      content: { sha256: f.sha256, size: f.size, chunks: f.chunks },
      executable,
    });
  }
  return { entries, unknown };
}

/** True when `path` or one of its ancestors is in `set`. */
export function underAny(path: string, set: ReadonlySet<string>): boolean {
  if (set.size === 0) return false;
  return set.has(path) || parentPaths(path).some((p) => set.has(p));
}

/**
 * Adopts what an incoming sync meant to write or remove, where the disk shows it happened
 * (DESIGN section 10: imported bytes are never mistaken for an agent's edit): an import only
 * where the disk signature equals the intended one, a removal only where the path is absent.
 * Everything else stays as the baseline had it, so a real edit still differs and is sent.
 */
export function reconcile(
  baseline: Readonly<Record<string, string>>,
  intents: SyncIntents,
  disk: ReadonlyMap<string, DiskEntry>,
): Record<string, string> {
  const next = { ...baseline };
  for (const [path, intended] of Object.entries(intents.imports)) if (disk.get(path)?.signature === intended) next[path] = intended;
  for (const path of intents.removals) if (!disk.has(path)) delete next[path];
  return next;
}

/** The SHA-256 a file signature names, or `null` for a directory, a removal or a malformed one. */
export function signedSha256(sig: string | undefined): string | null {
  if (sig === undefined || sig === MISSING) return null;
  try {
    const parsed: unknown = JSON.parse(sig);
    return Array.isArray(parsed) && parsed[0] === 'file' && typeof parsed[1] === 'string' ? parsed[1] : null;
  } catch {
    return null;
  }
}

/**
 * One change an outgoing sync sends, with the signature it brings the path to (the sandbox's
 * side). `mode` is a file whose bytes equal its baseline's and whose executable bit does not:
 * it sets the bit on whatever content the collection holds now, so a stale copy's bytes are
 * never published.
 */
export type OutgoingChange =
  | { readonly op: 'mkdir'; readonly path: string; readonly signature: string }
  | {
      readonly op: 'write';
      readonly path: string;
      readonly signature: string;
      readonly content: StoredContent;
      readonly executable: boolean;
    }
  | { readonly op: 'mode'; readonly path: string; readonly signature: string; readonly executable: boolean }
  | { readonly op: 'remove'; readonly path: string; readonly signature: typeof MISSING };

/**
 * What a stored pending operation of `change` is matched by: its signature, prefixed for a
 * mode change, so a write's operation id is never replayed as a mode change's (or back).
 */
export function pendingTag(change: OutgoingChange): string {
  return change.op === 'mode' ? `mode:${change.signature}` : change.signature;
}

/**
 * The changes that bring the store to the sandbox's side, in the order they must apply:
 * new or changed directories (shortest path first, so parents come before children), new or
 * changed files, then baseline entries gone from disk (shortest first; a path under one
 * already removed is skipped, as is one under a path the sandbox now holds as a file: that
 * write replaces the subtree). Entries whose signature equals the baseline are never sent:
 * an unchanged stale copy cannot overwrite a newer shared file. A file whose bytes equal the
 * baseline's but whose executable bit changed is a `mode` change: its bytes are never sent,
 * so a stale copy that was only `chmod`ed cannot overwrite a newer version either. Unknown
 * paths are left alone.
 */
export function planOutgoing(view: DiskView, baseline: Readonly<Record<string, string>>): OutgoingChange[] {
  const byLength = (a: string, b: string): number => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  const dirs: OutgoingChange[] = [];
  const files: OutgoingChange[] = [];
  const filesOnDisk = new Set<string>();
  for (const [path, entry] of view.entries) {
    if (entry.kind === 'file') filesOnDisk.add(path);
    if (baseline[path] === entry.signature || underAny(path, view.unknown)) continue;
    if (entry.kind === 'directory') dirs.push({ op: 'mkdir', path, signature: entry.signature });
    else if (signedSha256(baseline[path]) === entry.content.sha256) {
      files.push({ op: 'mode', path, signature: entry.signature, executable: entry.executable });
    } else files.push({ op: 'write', path, signature: entry.signature, content: entry.content, executable: entry.executable });
  }
  const removed = new Set<string>();
  const removals: OutgoingChange[] = [];
  for (const path of Object.keys(baseline).sort(byLength)) {
    if (view.entries.has(path) || underAny(path, view.unknown)) continue;
    if (parentPaths(path).some((p) => removed.has(p) || filesOnDisk.has(p))) continue;
    removed.add(path);
    removals.push({ op: 'remove', path, signature: MISSING });
  }
  dirs.sort((a, b) => byLength(a.path, b.path));
  files.sort((a, b) => byLength(a.path, b.path));
  return [...dirs, ...files, ...removals];
}

/** The baseline after `change` was applied (or found already applied). */
export function applied(baseline: Record<string, string>, change: OutgoingChange): void {
  // Only a directory has a subtree to drop: a file written over one, or a removed one, took it along.
  const wasDirectory = baseline[change.path] === DIRECTORY;
  if (change.op === 'remove') delete baseline[change.path];
  else baseline[change.path] = change.signature;
  if (change.op === 'mkdir' || !wasDirectory) return;
  for (const key of Object.keys(baseline)) if (key.startsWith(`${change.path}/`)) delete baseline[key];
}
