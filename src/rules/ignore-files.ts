/**
 * The files a walk with `gitignore: true` reads (DESIGN section 6), and how their texts reach
 * `ExcludeRules.enter`, shared by the local walk, the agent (which runs it) and the shell
 * transport (which fetches the files and applies them on the host), so all three keep the
 * same paths.
 */
import { InputError } from '../errors.js';

/**
 * Longest `.gitignore` (or `.git/info/exclude`) a walk reads. Hand-written and template files
 * are a few KiB; one past this is generated or crafted, and reading it unbounded from a
 * sandbox would let the sandbox decide how much the host holds.
 */
export const MAX_IGNORE_FILE_BYTES = 1024 * 1024;

/** The per-repository exclude file, relative to the workspace root; read at the root only. */
export const INFO_EXCLUDE_PATH = '.git/info/exclude';

/**
 * The ignore text for directory `relDir`: its own `.gitignore`, and at the root
 * `.git/info/exclude` first (git ranks it below every `.gitignore`; in one list a later line
 * wins, so the root's `.gitignore` still overrides it). Undefined when there is neither.
 */
export function ignoreText(relDir: string, own: string | undefined, infoExclude: string | undefined): string | undefined {
  const info = relDir === '' ? infoExclude : undefined;
  if (info === undefined) return own;
  return own === undefined ? info : `${info}\n${own}`;
}

/** `LIMIT_EXCEEDED` for an ignore file over {@link MAX_IGNORE_FILE_BYTES} (`data.path`: workspace-relative). */
export function ignoreFileTooLarge(relPath: string, bytes: number): InputError {
  return new InputError(
    'LIMIT_EXCEEDED',
    `${relPath} is ${bytes} bytes, over the ${MAX_IGNORE_FILE_BYTES} bytes a .gitignore may have: shorten it, or checkpoint without gitignore`,
    { data: { path: relPath, bytes, limit: MAX_IGNORE_FILE_BYTES } },
  );
}
