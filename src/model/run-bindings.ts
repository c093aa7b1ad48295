/** What a run is bound to: the owners of the work folders it reaches, and the repositories checked out in its home. */

import { InputError } from '../errors.js';
import { FOLDER_SCOPES, type FolderScope } from './folder-scopes.js';
import { parseRepoBindings, type RepoBinding, type RepoBindingInput } from './repo-bindings.js';

/**
 * The owners a run is bound to (owner ids of the collections it may reach), each optional:
 * an absent owner means the run reaches no collection of that scope.
 */
export interface RunBindings {
  readonly task?: string;
  readonly agent?: string;
  readonly user?: string;
  readonly project?: string;
  /** Repositories checked out under `$HOME/repos/<name>` (see `parseRepoBindings`); they grant no collection. */
  readonly repos?: readonly RepoBinding[];
}

/** Longest owner id accepted in a binding. */
export const MAX_OWNER_ID_CHARS = 128;

/**
 * An owner id: printable ASCII without spaces, slashes or backslashes (it becomes a URL
 * segment and a sandbox folder name), starting with a letter or digit.
 */
const OWNER_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:@-]*$/;

/** Whether `value` is an acceptable owner id (see {@link parseRunBindings}). */
export function isOwnerId(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_OWNER_ID_CHARS && OWNER_ID_RE.test(value);
}

/**
 * Validates what a caller offers as a run's bindings: an object whose keys are among
 * {@link FOLDER_SCOPES} (or `repos`, validated by `parseRepoBindings`) and whose values are owner ids of at most {@link MAX_OWNER_ID_CHARS}
 * characters (letters, digits, `. _ : @ -`, starting with a letter or digit). Anything else is
 * `INVALID_INPUT` naming the field. An object without owners reads as no bindings (`undefined`).
 */
export function parseRunBindings(input: unknown): RunBindings | undefined {
  if (input === undefined || input === null) return undefined;
  if (typeof input !== 'object' || Array.isArray(input)) {
    throw new InputError('INVALID_INPUT', 'bindings must be an object of owner ids by scope (task, agent, user, project)', {
      data: { field: 'bindings' },
    });
  }
  const bindings: Record<string, string> = {};
  let repos: RepoBinding[] | undefined;
  for (const [scope, owner] of Object.entries(input)) {
    if (scope === 'repos') {
      repos = parseRepoBindings(owner);
      continue;
    }
    if (!(FOLDER_SCOPES as readonly string[]).includes(scope)) {
      throw new InputError('INVALID_INPUT', `bindings.${scope.slice(0, 64)}: the scopes are task, agent, user and project`, {
        data: { field: 'bindings' },
      });
    }
    if (owner === undefined) continue;
    if (!isOwnerId(owner)) {
      throw new InputError(
        'INVALID_INPUT',
        `bindings.${scope} must be an owner id of at most ${MAX_OWNER_ID_CHARS} letters, digits and . _ : @ - (starting with a letter or digit)`,
        { data: { field: `bindings.${scope}` } },
      );
    }
    bindings[scope] = owner;
  }
  if (repos !== undefined) return { ...bindings, repos };
  return Object.keys(bindings).length === 0 ? undefined : bindings;
}

/** What a caller may offer as bindings ({@link parseRunBindings} validates it); an `undefined` owner is no binding. */
export type RunBindingsInput = { readonly [S in FolderScope]?: string | undefined } & {
  readonly repos?: readonly RepoBindingInput[] | undefined;
};
