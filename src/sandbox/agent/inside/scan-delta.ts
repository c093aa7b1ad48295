import type { ScannedDir, ScannedEntry, ScannedFile } from '../../../workspace-fs/scan.js';
import type { StubDir } from '../wire/protocol.js';

/** A scan as it travels against an earlier one: the directories that changed, the rest as stubs. */
export interface ScanDelta {
  /** The new root, or a stub when nothing under it changed. */
  readonly root: ScannedDir | StubDir;
  /** Files outside every stub: the only ones whose cached ids travel with the delta. */
  readonly sent: ScannedFile[];
  /** The directories of `now` sent as stubs (each identical, subtree and all, to its namesake in `before`). */
  readonly stubbed: ScannedDir[];
}

/**
 * The scan `now` told against `before` (the scan the host holds, made by this process with the
 * same root, rules and limits): every directory whose whole subtree is identical to the one at
 * the same path in `before` (its own stat, and every entry under it with every stat field) is
 * sent as a {@link StubDir}, so an unchanged subtree costs one line. Anything that differs in the
 * least travels in full, so a stub never hides a change this scan saw.
 */
export function scanDelta(now: ScannedDir, before: ScannedDir): ScanDelta {
  const sent: ScannedFile[] = [];
  const stubbed: ScannedDir[] = [];
  const tell = (dir: ScannedDir, old: ScannedDir | undefined): ScannedDir | StubDir => {
    if (old !== undefined && (dir === old || sameTree(dir, old))) {
      stubbed.push(dir);
      return { type: 'dir', name: dir.name, same: true };
    }
    const olds = new Map<string, ScannedEntry>();
    for (const c of old?.children ?? []) olds.set(c.name, c);
    const children: Array<ScannedEntry | StubDir> = [];
    for (const child of dir.children) {
      if (child.type === 'dir') {
        const was = olds.get(child.name);
        children.push(tell(child, was?.type === 'dir' ? was : undefined));
      } else {
        if (child.type === 'file') sent.push(child);
        children.push(child);
      }
    }
    return { ...dir, children: children as ScannedEntry[] };
  };
  return { root: tell(now, before), sent, stubbed };
}

function sameTree(a: ScannedDir, b: ScannedDir): boolean {
  if (a.mode !== b.mode || a.exactMtimeMs !== b.exactMtimeMs || a.ctimeMs !== b.ctimeMs || a.mtimeMs !== b.mtimeMs) return false;
  if (a.children.length !== b.children.length) return false;
  for (let i = 0; i < a.children.length; i += 1) {
    const x = a.children[i] as ScannedEntry;
    const y = b.children[i] as ScannedEntry;
    if (x.name !== y.name || x.type !== y.type) return false;
    if (x.type === 'dir') {
      if (x !== y && !sameTree(x, y as ScannedDir)) return false;
    } else if (x.type === 'file') {
      const f = y as ScannedFile;
      if (
        x.size !== f.size ||
        x.mtimeMs !== f.mtimeMs ||
        x.ctimeMs !== f.ctimeMs ||
        x.ino !== f.ino ||
        x.mode !== f.mode ||
        x.dev !== f.dev
      )
        return false;
    } else if (y.type !== 'symlink' || x.target !== y.target || x.mtimeMs !== y.mtimeMs) return false;
  }
  return true;
}
