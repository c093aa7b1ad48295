/** The value every exclusion is reported as, and its one-line rendering for people. */

/**
 * Why an entry was left out of a checkpoint, or kept changed: `mode-stripped` (kept without
 * setuid, setgid or sticky) and `symlink-made-relative` (an absolute symlink into the
 * workspace, kept with the equivalent relative target; the rule is the original target).
 * `unreadable`: a file the source could not read (`rule` is the errno, `EACCES` or `EPERM`),
 * left out by a checkpoint with `onUnreadable: 'skip'`. `ExcludeRules` decides `secret-path`,
 * `cache`, `gitignore` and `user-rule`; the walker and file reader report the rest.
 */
export type ExclusionReason =
  | 'secret-path'
  | 'secret-content'
  | 'cache'
  | 'gitignore'
  | 'user-rule'
  | 'special-file'
  | 'symlink-escape'
  | 'too-large'
  | 'invalid-path'
  | 'entry-limit'
  | 'mode-stripped'
  | 'symlink-made-relative'
  | 'unreadable';

/** Every exclusion reason, for exhaustive rendering and validation. */
export const EXCLUSION_REASONS: readonly ExclusionReason[] = Object.freeze([
  'secret-path',
  'secret-content',
  'cache',
  'gitignore',
  'user-rule',
  'special-file',
  'symlink-escape',
  'too-large',
  'invalid-path',
  'entry-limit',
  'mode-stripped',
  'symlink-made-relative',
  'unreadable',
]);

/** One entry left out, with the reason and the rule that matched. */
export interface Exclusion {
  /** Workspace-relative POSIX path of the entry (a directory stands for everything under it). */
  readonly path: string;
  readonly reason: ExclusionReason;
  /**
   * What matched: a built-in rule (`.ssh/`, `.env.*`, `node_modules/`), a content rule id
   * (`pem-private-key`), `source:line:pattern` for a `.gitignore` rule, or the user pattern.
   */
  readonly rule: string;
}

const DESCRIPTIONS: Readonly<Record<ExclusionReason, (e: Exclusion) => string>> = {
  'secret-path': (e) => `credential path (${e.rule}); list it exactly in allowSecretPaths to keep it`,
  'secret-content': (e) => `content matches secret rule ${e.rule}; remove the secret to keep the file`,
  cache: (e) => `dependency or cache directory (${e.rule}); setup rebuilds it, or re-include it with include`,
  gitignore: (e) => `ignored by ${e.rule}`,
  'user-rule': (e) => `excluded by rule ${e.rule}`,
  'special-file': (e) => `not a regular file, directory or symlink (${e.rule})`,
  'symlink-escape': (e) => `symlink leads outside the workspace (${e.rule})`,
  'too-large': (e) => `file too large (${e.rule}); raise the file size limit to keep it`,
  'invalid-path': (e) => `name cannot be stored (${e.rule}); rename it`,
  'entry-limit': (e) => `past the entry limit (${e.rule}); raise the limit or exclude more`,
  'mode-stripped': (e) => `kept without setuid, setgid and sticky bits (${e.rule}); a restore never sets them`,
  'symlink-made-relative': (e) => `absolute symlink into the workspace (${e.rule}) kept as the equivalent relative link`,
  unreadable: (e) => `the file could not be read (${e.rule}); make it readable to keep it`,
};

/** One line for people: `path: why, and what to do about it`. */
export function describeExclusion(e: Exclusion): string {
  const describe = DESCRIPTIONS[e.reason];
  return `${e.path}: ${describe === undefined ? e.rule : describe(e)}`;
}
