import path from 'node:path';
import { InputError } from '../errors.js';

/** Longest file or directory name, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 255;
/** Longest relative path, in UTF-8 bytes. */
export const MAX_PATH_BYTES = 4096;
/** Names Holdfast keeps for itself at any depth; never read from or written to a workspace. */
export const RESERVED_NAMES: ReadonlySet<string> = new Set(['.holdfast']);

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is rejected.
const CONTROL_RE = /[\u0000-\u001f\u007f]/;

/** Why `name` cannot be one entry of a workspace path, or undefined when it can. */
export function nameProblem(name: string): string | undefined {
  if (name === '' || name === '.' || name === '..') return 'empty, "." or ".." segment';
  if (name.includes('/')) return 'contains "/"';
  if (CONTROL_RE.test(name)) return 'contains a control character';
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) return `longer than ${MAX_NAME_BYTES} bytes`;
  if (RESERVED_NAMES.has(name)) return `"${name}" is reserved`;
  return undefined;
}

/**
 * Checks a workspace-relative POSIX path (`src/a.ts`) and returns its segments. Throws
 * `INVALID_PATH` for absolute paths, empty / `.` / `..` segments, control characters,
 * reserved segments and over-long names.
 */
export function splitRelativePath(rel: string): string[] {
  if (typeof rel !== 'string' || rel === '' || rel.startsWith('/') || Buffer.byteLength(rel) > MAX_PATH_BYTES) {
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

/** True when a symlink at `linkRel` pointing to `target` stays inside the root. */
export function symlinkStaysInside(linkRel: string, target: string): boolean {
  if (target === '' || target.startsWith('/')) return false;
  const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(linkRel), target));
  return resolved !== '..' && !resolved.startsWith('../') && !resolved.split('/').some((s) => RESERVED_NAMES.has(s));
}
