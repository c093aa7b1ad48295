import { createHash } from 'node:crypto';
import type { Sha256Hex } from '../../core/hash.js';
import { symlinkStaysInside } from '../../core/paths.js';
import { encodeTree, type TreeEntry } from '../../core/tree.js';
import { InputError } from '../../errors.js';
import type { ScannedDir, ScannedFile } from '../../workspace-fs/scan.js';
import type { DirIdentity, StatCache, StatCacheBuilder } from '../../workspace-fs/stat-cache.js';
import { comparePaths } from '../tree-walk.js';

/** Content ids of a file, as resolved by hashing or from the stat cache. */
export interface FileIds {
  readonly sha256: Sha256Hex;
  readonly chunks: readonly Sha256Hex[];
}

/** Content ids by path, as the tree build reads them (a map, or a view over several). */
export type FileIdsView = Pick<ReadonlyMap<string, FileIds>, 'get' | 'has'>;

/** One encoded tree object. */
export interface EncodedTree {
  readonly id: Sha256Hex;
  readonly bytes: Buffer;
}

/** What lets a directory keep its previous tree id without being encoded again. */
export interface TreeReuse {
  /** Last checkpoint's cache (tree ids by directory identity). */
  readonly cache: StatCache;
  /** Paths whose content came from the stat cache (unchanged since the last checkpoint). */
  readonly hits: ReadonlySet<string>;
  /** Where this checkpoint's directory identities and tree ids are recorded. */
  readonly next: StatCacheBuilder;
  /** Encode every directory afresh, reusing no cached tree id (identities are still recorded in `next`). */
  readonly encodeAll?: boolean;
  /**
   * Tree ids of the last committed build by directory object: a scan that took a directory
   * over whole from the one it was built from (an agent's delta) passes the very object, which
   * keeps its id when its files all came from the cache and its subdirectories kept theirs.
   */
  readonly known?: Pick<ReadonlyMap<ScannedDir, Sha256Hex>, 'get'>;
  /** Where every directory's tree id of this build is recorded, by directory object. */
  readonly built?: Pick<Map<ScannedDir, Sha256Hex>, 'set'>;
  /**
   * Directories whose whole subtree is settled (`SourceScan.settled`): one with an id in
   * `trees` keeps it without its files being looked at (they are not in `ids`), and the ids of
   * the directories under it go to `built` as they are; ignored with `encodeAll`.
   */
  readonly settled?: {
    readonly dirs: ReadonlySet<ScannedDir>;
    readonly trees: Pick<ReadonlyMap<ScannedDir, Sha256Hex>, 'get'>;
  };
}

/** The identity of a scanned directory as the stat cache records it. */
export function dirIdentityOf(dir: ScannedDir): DirIdentity {
  // Each name's UTF-16 units, then two zero bytes (one NUL unit): UTF-16 keeps a byte escape
  // apart from U+FFFD, which UTF-8 would merge. One string, hashed in one call.
  let text = '';
  for (const child of dir.children) text += `${child.name}\0`;
  const namesHash = createHash('sha256').update(text, 'utf16le').digest('hex').slice(0, 16);
  return { exactMtimeMs: dir.exactMtimeMs, ctimeMs: dir.ctimeMs, mode: dir.mode, namesHash };
}

/**
 * Whether `dir`'s children let it keep the tree id it had (the one rule of {@link buildTrees},
 * and of a source that settles subtrees before any file is looked at): every file unchanged
 * (`fileUnchanged`) and with no other hard link (which member leads a link group can change
 * without its own stat changing), every subdirectory reused (`subdirReused`), and no symlink
 * unless `symlinks` (a tree taken from the stat cache cannot vouch for one: its mtime can
 * change without its directory's).
 */
export function childrenAsCached(
  dir: ScannedDir,
  fileUnchanged: (file: ScannedFile) => boolean,
  subdirReused: (sub: ScannedDir) => boolean,
  symlinks = false,
): boolean {
  for (const child of dir.children) {
    if (
      child.type === 'dir' ? !subdirReused(child) : child.type === 'symlink' ? !symlinks : child.dev !== undefined || !fileUnchanged(child)
    )
      return false;
  }
  return true;
}

/**
 * Encodes the scanned directories bottom-up into tree objects. `ids` gives every included
 * file's content ids by path; files missing from it (excluded while reading, e.g. a secret
 * found in their content) are left out of their tree. With `reuse`, a directory whose stat
 * and included names are unchanged, whose files all came from the stat cache, whose
 * subdirectories were all reused and which holds no symlink (a symlink's mtime can change
 * without its directory's) keeps its cached tree id: nothing is encoded, and the tree is
 * known to exist. Returns the root id, the trees that were encoded and the ids that were reused. Every tree passes the
 * validation a restore applies (`INVALID_INPUT` otherwise, e.g. a setuid mode or an escaping
 * symlink a source reported): a checkpoint never stores a tree it could not restore.
 *
 * Hard links: included files that share an inode (`dev`, `ino`) form a group whose leader is
 * the member first in flatten order ({@link comparePaths}); every other member's entry names
 * the leader in `hardlink` ({@link linkGroups}). A directory holding a file with other links
 * is always encoded afresh: which member leads can change without its own stat changing.
 */
export function buildTrees(
  root: ScannedDir,
  ids: FileIdsView,
  reuse?: TreeReuse,
): { rootId: Sha256Hex; trees: EncodedTree[]; reused: Sha256Hex[]; hardlinks: number } {
  const trees: EncodedTree[] = [];
  const reused: Sha256Hex[] = [];
  const settled = reuse?.encodeAll === true ? undefined : reuse?.settled;
  const leaders = linkGroups(root, ids, settled?.dirs);
  const encodeDir = (dir: ScannedDir): { id: Sha256Hex; reused: boolean } => {
    // A settled subtree (no file racy, none linked, every id known to the source) keeps its tree whole.
    const whole = settled?.dirs.has(dir) === true ? settled.trees.get(dir) : undefined;
    if (whole !== undefined) {
      reused.push(whole);
      const built = reuse?.built;
      if (built !== undefined) {
        built.set(dir, whole);
        // The ids under it carry over too: the next build may take over any of its directories.
        const carry = (d: ScannedDir): void => {
          for (const c of d.children) {
            if (c.type !== 'dir') continue;
            const id = settled?.trees.get(c);
            if (id !== undefined) built.set(c, id);
            carry(c);
          }
        };
        carry(dir);
      }
      return { id: whole, reused: true };
    }
    // Children first (their ids go into this tree); then decide whether this tree can be reused
    // before building any entry objects for it.
    const subtrees = new Map<ScannedDir, Sha256Hex>();
    const reusedSubs = new Set<ScannedDir>();
    let subsKnown = true;
    for (const child of dir.children) {
      if (child.type !== 'dir') continue;
      const sub = encodeDir(child);
      subtrees.set(child, sub.id);
      if (sub.reused) reusedSubs.add(child);
      subsKnown &&= reuse?.known?.get(child) === sub.id;
    }
    const mayReuse = reuse !== undefined && reuse.encodeAll !== true;
    const hit = (file: ScannedFile): boolean => reuse?.hits.has(file.path) === true;
    const subReused = (sub: ScannedDir): boolean => reusedSubs.has(sub);
    // The very object of the last build, with the same file ids and subtrees: the same entries, symlinks included.
    const known = mayReuse && subsKnown && childrenAsCached(dir, hit, subReused, true) ? reuse.known?.get(dir) : undefined;
    const identity = reuse === undefined || !reuse.next.records ? undefined : dirIdentityOf(dir);
    const cached =
      known ??
      (mayReuse && identity !== undefined && childrenAsCached(dir, hit, subReused) ? reuse.cache.treeOf(dir.path, identity) : undefined);
    if (cached !== undefined) reused.push(cached);
    const id = cached ?? encodeAndKeep(entriesOf(dir, ids, subtrees, leaders), trees);
    if (identity !== undefined) reuse?.next.addDir(dir.path, identity, id, known === undefined && cached !== undefined);
    reuse?.built?.set(dir, id);
    return { id, reused: cached !== undefined };
  };
  return { rootId: encodeDir(root).id, trees, reused, hardlinks: leaders.size };
}

/**
 * The hard-link groups among the included files of a scan: for every member but the leader,
 * the leader's path. A group needs two included members; it is broken (its members kept as
 * plain files) when they disagree on content, size, mode or mtime, which only a change while
 * the checkpoint read them can cause (one inode has one of each).
 */
export function linkGroups(root: ScannedDir, ids: FileIdsView, settled?: ReadonlySet<ScannedDir>): Map<string, string> {
  const groups = new Map<string, ScannedFile[]>();
  const visit = (dir: ScannedDir): void => {
    // A settled subtree holds no file with other links.
    if (settled?.has(dir) === true) return;
    for (const child of dir.children) {
      if (child.type === 'dir') visit(child);
      else if (child.type === 'file' && child.dev !== undefined && ids.has(child.path)) {
        const key = `${child.dev}:${child.ino}`;
        const group = groups.get(key);
        if (group === undefined) groups.set(key, [child]);
        else group.push(child);
      }
    }
  };
  visit(root);
  const leaders = new Map<string, string>();
  for (const group of groups.values()) {
    if (group.length < 2) continue;
    group.sort((a, b) => comparePaths(a.path, b.path));
    const [leader, ...members] = group as [ScannedFile, ...ScannedFile[]];
    const sha = ids.get(leader.path)?.sha256;
    const same = (f: ScannedFile): boolean =>
      ids.get(f.path)?.sha256 === sha &&
      f.size === leader.size &&
      f.mode === leader.mode &&
      Math.floor(f.mtimeMs) === Math.floor(leader.mtimeMs);
    if (!members.every(same)) continue;
    for (const m of members) leaders.set(m.path, leader.path);
  }
  return leaders;
}

function entriesOf(
  dir: ScannedDir,
  ids: FileIdsView,
  subtrees: ReadonlyMap<ScannedDir, Sha256Hex>,
  leaders: ReadonlyMap<string, string>,
): TreeEntry[] {
  const entries: TreeEntry[] = [];
  for (const child of dir.children) {
    if (child.type === 'dir') {
      entries.push({ name: child.name, type: 'dir', mode: child.mode, mtimeMs: child.mtimeMs, tree: subtrees.get(child) as Sha256Hex });
    } else if (child.type === 'symlink') {
      // The scan (or the host's check of an agent's scan) already excluded escaping links; a
      // tree is never written with one, whatever its source reported.
      if (!symlinkStaysInside(child.path, child.target))
        throw new InputError('INVALID_INPUT', `symlink ${child.path} leads outside the workspace`, { data: { path: child.path } });
      entries.push({ name: child.name, type: 'symlink', target: child.target, mtimeMs: child.mtimeMs });
    } else {
      const leader = child.dev === undefined ? undefined : leaders.get(child.path);
      // A member carries its leader's content ids: one inode, one content, one entry shape.
      const content = ids.get(leader ?? child.path);
      if (content === undefined || !ids.has(child.path)) continue;
      const file = {
        name: child.name,
        type: 'file',
        mode: child.mode,
        size: child.size,
        mtimeMs: Math.floor(child.mtimeMs),
        sha256: content.sha256,
        chunks: content.chunks,
      } as const;
      entries.push(leader === undefined ? file : { ...file, hardlink: leader });
    }
  }
  return entries;
}

function encodeAndKeep(entries: TreeEntry[], trees: EncodedTree[]): Sha256Hex {
  const tree = encodeTree(entries);
  trees.push(tree);
  return tree.id;
}
