/**
 * A work folder's flat listing as a tree, and the checkbox selection rules of the Files tab:
 * selecting a directory selects everything under it; unselecting a path unselects what is
 * under it and every directory above it; what goes to the trash is only the top-most
 * selected paths (a directory takes its subtree with it, as one unit).
 */

/** One node: a listed row, or a directory implied by a path below it. */
export interface TreeNode {
  readonly path: string;
  readonly name: string;
  readonly kind: 'file' | 'directory';
  readonly children: TreeNode[];
}

/** The tree of `paths` (directories first, then by name); parents missing from the listing are made up. */
export function buildTree(rows: readonly { readonly path: string; readonly kind: 'file' | 'directory' }[]): TreeNode[] {
  const roots: TreeNode[] = [];
  const byPath = new Map<string, TreeNode>();
  const nodeFor = (path: string, kind: 'file' | 'directory'): TreeNode => {
    const existing = byPath.get(path);
    if (existing !== undefined) return existing;
    const slash = path.lastIndexOf('/');
    const node: TreeNode = { path, name: path.slice(slash + 1), kind, children: [] };
    byPath.set(path, node);
    (slash < 0 ? roots : nodeFor(path.slice(0, slash), 'directory').children).push(node);
    return node;
  };
  for (const row of rows) nodeFor(row.path, row.kind);
  const order = (nodes: TreeNode[]): void => {
    nodes.sort((a, b) => (a.kind === b.kind ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.kind === 'directory' ? -1 : 1));
    for (const n of nodes) order(n.children);
  };
  order(roots);
  return roots;
}

/** Whether `path` lies strictly under directory `dir`. */
export function isUnder(path: string, dir: string): boolean {
  return path.startsWith(`${dir}/`);
}

/** The selection after checking (`checked`) or unchecking `path`, among `allPaths`. */
export function toggleSelection(selected: ReadonlySet<string>, allPaths: readonly string[], path: string, checked: boolean): Set<string> {
  const next = new Set(selected);
  const subtree = allPaths.filter((p) => p === path || isUnder(p, path));
  if (checked) {
    for (const p of subtree) next.add(p);
  } else {
    for (const p of subtree) next.delete(p);
    for (const p of [...next]) if (isUnder(path, p)) next.delete(p);
  }
  return next;
}

/** The selected paths no other selected path contains: what a trash moves, each as one unit. */
export function topMost(selected: ReadonlySet<string>): string[] {
  const all = [...selected].sort();
  return all.filter((p) => !all.some((q) => q !== p && isUnder(p, q)));
}

/** The trash rows that are units (no trashed row of the same deletion above them): the ones Restore brings back. */
export function trashUnits<T extends { readonly path: string; readonly deletedAt: number | null }>(rows: readonly T[]): T[] {
  return rows.filter((row) => !rows.some((other) => other !== row && other.deletedAt === row.deletedAt && isUnder(row.path, other.path)));
}
