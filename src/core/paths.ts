import path from 'node:path';
import { InputError } from '../errors.js';
import { byteLength, isCanonicalName, showEscapes } from './name-bytes.js';

/** Longest file or directory name, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 255;
/**
 * Longest workspace-relative path, in bytes. Linux has no limit on a path's total length, only
 * on what one system call takes (PATH_MAX, 4,096): deeper paths are reached relative to an
 * open directory. The bound keeps every path Holdfast holds in memory small.
 */
export const MAX_PATH_BYTES = 32 * 1024;
/** Longest symlink target, in bytes: what the kernel stores for one link (PATH_MAX less its NUL). */
export const MAX_LINK_TARGET_BYTES = 4095;
/** Names Holdfast keeps for itself at any depth; never read from or written to a workspace. */
export const RESERVED_NAMES: ReadonlySet<string> = new Set(['.holdfast']);

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is rejected.
const CONTROL_RE = /[\u0000-\u001f\u007f]/;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is replaced.
const CONTROL_ALL_RE = /[\u0000-\u001f\u007f]/g;

/**
 * `text` (a name, a link target, a message from a sandbox) with every control character shown
 * as `?` and every byte that is not UTF-8 as `\xNN`, fit for a report or a log line.
 */
export function printable(text: string): string {
  return showEscapes(text.replace(CONTROL_ALL_RE, '?'));
}

/** Why `name` cannot be one entry of a workspace path, or undefined when it can. */
export function nameProblem(name: string): string | undefined {
  if (name === '' || name === '.' || name === '..') return 'empty, "." or ".." segment';
  if (name.includes('/')) return 'contains "/"';
  if (CONTROL_RE.test(name)) return 'contains a control character';
  if (!isCanonicalName(name)) return 'not the text of any byte string (a stray surrogate)';
  if (byteLength(name) > MAX_NAME_BYTES) return `longer than ${MAX_NAME_BYTES} bytes`;
  if (RESERVED_NAMES.has(name)) return `"${name}" is reserved`;
  return undefined;
}

/**
 * Checks a workspace-relative POSIX path (`src/a.ts`) and returns its segments. Throws
 * `INVALID_PATH` for absolute paths, empty / `.` / `..` segments, control characters,
 * reserved segments and over-long names.
 */
export function splitRelativePath(rel: string): string[] {
  if (typeof rel !== 'string' || rel === '' || rel.startsWith('/') || byteLength(rel) > MAX_PATH_BYTES) {
    throw new InputError('INVALID_PATH', `invalid path "${String(rel)}": use a relative POSIX path of at most ${MAX_PATH_BYTES} bytes`, {
      data: { path: rel },
    });
  }
  const segments = rel.split('/');
  for (const segment of segments) {
    const problem = nameProblem(segment);
    if (problem !== undefined) throw new InputError('INVALID_PATH', `invalid path "${rel}": ${problem}`, { data: { path: rel } });
  }
  return segments;
}

/** Resolves a validated relative path inside `root`; the one way paths reach the filesystem. */
export function resolveWithin(root: string, rel: string): string {
  return path.join(root, ...splitRelativePath(rel));
}

/**
 * Why `target` cannot be a stored symlink target whatever the link's path, or undefined when
 * it can: it must be relative, non-empty, at most {@link MAX_LINK_TARGET_BYTES}, and of the form
 * `../../a/b` in its raw bytes: `..` (and `.`) segments only before the first name, every
 * name valid and not reserved. Empty segments (`a//b`, a trailing `/`) are allowed; the
 * kernel skips them.
 */
export function symlinkTargetProblem(target: string): string | undefined {
  if (typeof target !== 'string' || target === '') return 'empty target';
  if (target.startsWith('/')) return 'absolute target';
  if (byteLength(target) > MAX_LINK_TARGET_BYTES) return `target longer than ${MAX_LINK_TARGET_BYTES} bytes`;
  let named = false;
  for (const segment of target.split('/')) {
    if (segment === '') continue;
    if (segment === '..' || segment === '.') {
      if (named) return `"${segment}" after a name`;
      continue;
    }
    const problem = nameProblem(segment);
    if (problem !== undefined) return `segment ${problem}`;
    named = true;
  }
  return undefined;
}

/** How many leading `..` segments a target that passed {@link symlinkTargetProblem} climbs. */
function climbs(target: string): number {
  return target.split('/').filter((s) => s === '..').length;
}

/**
 * True when a symlink at `linkRel` pointing to `target` stays inside the root, however the
 * kernel resolves it. The rule is {@link symlinkTargetProblem} plus: the leading `..` count
 * does not exceed the link's depth (the number of directories above it inside the root).
 *
 * Why this is sound, unlike normalising `dirname(link)/target`: the kernel resolves a
 * relative target from the real directory that holds the link, which lies `depth` levels
 * below the root; each leading `..` then moves to a real parent, so at most `depth` of them
 * stop at the root at worst. After that only names follow: a name that is a directory keeps
 * the walk inside, and a name that is a symlink is itself confined by this same rule, so it
 * lands inside too (by induction on the kernel's bounded resolution depth). Because no `..`
 * may follow a name, the walk never climbs out of a place a symlink led it to: `d/up2 ->
 * up/..` with `d/up -> ..` is refused, though it normalises lexically to `d`.
 */
export function symlinkStaysInside(linkRel: string, target: string): boolean {
  if (symlinkTargetProblem(target) !== undefined) return false;
  const depth = linkRel.split('/').length - 1;
  return climbs(target) <= depth;
}

/** Whether the POSIX path `inner` is `outer` or lies below it (lexically: `..`-named entries like `..cache` are inside). */
export function posixWithin(inner: string, outer: string): boolean {
  const rel = path.posix.relative(outer, inner);
  return rel === '' || (!posixEscapes(rel) && !path.posix.isAbsolute(rel));
}

/** Whether a `path.posix.relative` result leads upwards. */
export function posixEscapes(rel: string): boolean {
  return rel === '..' || rel.startsWith('../');
}
