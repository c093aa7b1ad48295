/**
 * `rules/`: what a checkpoint leaves out and what output withholds: the secret rules (paths and
 * contents), the built-in and caller excludes, and gitignore matching. Pure rules; the scans
 * that apply them live in `workspace-fs/`, `snapshot/` and `sandbox/endpoints/`.
 */
/**
 * What a checkpoint leaves out (DESIGN section 6), decided entry by entry during the walk.
 * Precedence: secret path -> `include` re-includes -> cache -> `.gitignore` -> user rules.
 * Secret paths yield only to an exact `allowSecretPaths` entry; everything else yields to
 * `include`. Every exclusion is returned as a value with its reason, so none is silent.
 */

import { splitRelativePath } from '../core/paths.js';
import { InputError } from '../errors.js';
import { BuiltinNames, type BuiltinRule, type NameTable } from './builtin-excludes.js';
import type { Exclusion } from './exclusion.js';
import { createMatcher, extendWithGitignore, type GitignoreMatcher, IncludeGates } from './gitignore-rules.js';

export { CACHE_EXCLUDES, SECRET_PATH_KEEP_SUFFIXES, SECRET_PATH_RULES } from './builtin-excludes.js';
export { describeExclusion, EXCLUSION_REASONS, type Exclusion, type ExclusionReason } from './exclusion.js';

/** Which paths a checkpoint includes. All fields are optional; the defaults are safe. */
export interface ExcludeOptions {
  /** Exclude `CACHE_EXCLUDES` (default true). */
  readonly cacheExcludes?: boolean;
  /** Extra exclusions in gitignore syntax, relative to the workspace root. */
  readonly exclude?: readonly string[];
  /**
   * Re-includes in gitignore syntax that override cache excludes, `.gitignore` and
   * `exclude` (never secret rules). A matched directory re-includes everything under it;
   * a pattern with a directory part (`node_modules/react/`) also opens the excluded
   * directories on its way.
   */
  readonly include?: readonly string[];
  /**
   * Honour `.gitignore` files at every depth with git's semantics (default false): the root's
   * `.git/info/exclude` applies below every `.gitignore`, and no rule applies to a `.git`
   * directory or anything inside one.
   */
  readonly gitignore?: boolean;
  /**
   * Exact workspace-relative paths (no globs; a trailing `/` is allowed) let past a secret
   * path rule. Each use is reported through `ExcludeRules.allowances`. Content rules still apply.
   */
  readonly allowSecretPaths?: readonly string[];
}

/** The rules for the entries of one directory. */
export interface DirectoryRules {
  /** Why entry `name` of this directory is excluded, or undefined to include it. */
  match(name: string, isDir: boolean): Exclusion | undefined;
}

/** State shared by every directory of one walk. */
interface WalkState {
  readonly names: BuiltinNames;
  readonly include: GitignoreMatcher | undefined;
  readonly gates: IncludeGates | undefined;
  readonly user: GitignoreMatcher | undefined;
  readonly allowed: ReadonlySet<string>;
  readonly allowances: Map<string, Exclusion>;
  /** The `.gitignore` rules in force in each directory that has its own `.gitignore`. */
  readonly gitignores: Map<string, GitignoreMatcher>;
  /** Excluded directories opened only for an `include` pattern, with their exclusion. */
  readonly opened: Map<string, Exclusion>;
}

/**
 * The exclusion rules of one walk. Create one per scan (`create` validates the options),
 * call `enter` for each directory before matching its entries, parents before children.
 * Calling `enter` again for the same directory (a second scan) re-reads its `.gitignore`.
 */
export class ExcludeRules {
  private constructor(
    private readonly state: WalkState,
    /** Whether the walker should read `.gitignore` files and pass them to `enter`. */
    readonly readsGitignore: boolean,
  ) {}

  /**
   * Compiles `options`. Throws `INVALID_INPUT` when a list is not a list of strings and
   * `INVALID_PATH` when an `allowSecretPaths` entry is not a valid relative path.
   */
  static create(options: ExcludeOptions = {}): ExcludeRules {
    const include = stringList(options.include, 'include');
    const exclude = stringList(options.exclude, 'exclude');
    const allowed = new Set(stringList(options.allowSecretPaths, 'allowSecretPaths').map(normaliseAllowedPath));
    const state: WalkState = {
      names: BuiltinNames.compile(options.cacheExcludes ?? true),
      include: include.length > 0 ? createMatcher().add(include) : undefined,
      gates: IncludeGates.compile(include),
      user: exclude.length > 0 ? createMatcher().add(exclude) : undefined,
      allowed,
      allowances: new Map(),
      gitignores: new Map(),
      opened: new Map(),
    };
    return new ExcludeRules(state, options.gitignore ?? false);
  }

  /**
   * Returns the rules for the entries of `relDir` (`''` for the root). `gitignoreText` is
   * the directory's `.gitignore`, read by the walker only when `readsGitignore` is true.
   */
  enter(relDir: string, gitignoreText?: string): DirectoryRules {
    const { state } = this;
    const parentSlash = relDir.lastIndexOf('/');
    const inherited = relDir === '' ? undefined : nearestGitignore(state.gitignores, parentSlash < 0 ? '' : relDir.slice(0, parentSlash));
    // Git never applies ignore rules to its own directory or anything in it (nor reads a `.gitignore` there).
    const own = isGitDirectory(relDir)
      ? undefined
      : this.readsGitignore && gitignoreText !== undefined
        ? extendWithGitignore(inherited, gitignoreText, relDir)
        : inherited;
    if (own !== inherited && own !== undefined) state.gitignores.set(relDir, own);
    else state.gitignores.delete(relDir);
    const opened = state.opened.get(relDir);
    state.opened.delete(relDir);
    return new RulesForDirectory(
      state,
      relDir === '' ? '' : `${relDir}/`,
      state.names.forParent(relDir.slice(parentSlash + 1)),
      own,
      opened,
    );
  }

  /**
   * Secret-path matches let through by `allowSecretPaths` so far, one per path, as the
   * exclusions they would have been. Report them with the exclusions: an allowance is
   * never silent.
   */
  get allowances(): readonly Exclusion[] {
    return [...this.state.allowances.values()];
  }
}

/** True for a `.git` directory at any depth, or a directory inside one. */
function isGitDirectory(relDir: string): boolean {
  return relDir === '.git' || relDir.startsWith('.git/') || relDir.endsWith('/.git') || relDir.includes('/.git/');
}

function nearestGitignore(map: ReadonlyMap<string, GitignoreMatcher>, dir: string): GitignoreMatcher | undefined {
  let current = dir;
  for (;;) {
    const found = map.get(current);
    if (found !== undefined || current === '') return found;
    const slash = current.lastIndexOf('/');
    current = slash < 0 ? '' : current.slice(0, slash);
  }
}

class RulesForDirectory implements DirectoryRules {
  /** True when only built-in rules can apply, so `match` needs no path string at all. */
  private readonly builtinOnly: boolean;

  constructor(
    private readonly state: WalkState,
    private readonly prefix: string,
    private readonly names: NameTable,
    private readonly gitignore: GitignoreMatcher | undefined,
    /** Set when this directory is excluded and was opened only to reach an `include`d path. */
    private readonly opened: Exclusion | undefined,
  ) {
    this.builtinOnly = state.include === undefined && state.user === undefined && gitignore === undefined && opened === undefined;
  }

  match(name: string, isDir: boolean): Exclusion | undefined {
    const builtin = this.names.lookup(name, isDir);
    if (builtin?.reason !== 'secret-path') return this.matchOverridable(name, isDir, builtin);
    const path = this.prefix + name;
    const exclusion: Exclusion = { path, reason: 'secret-path', rule: builtin.rule };
    if (!this.state.allowed.has(path)) return exclusion;
    this.state.allowances.set(path, exclusion);
    return this.matchOverridable(name, isDir, undefined);
  }

  private matchOverridable(name: string, isDir: boolean, cache: BuiltinRule | undefined): Exclusion | undefined {
    if (this.builtinOnly) return cache === undefined ? undefined : { path: this.prefix + name, reason: 'cache', rule: cache.rule };
    const { state } = this;
    const path = this.prefix + name;
    // The matcher tells directories from files by a trailing slash, as `git check-ignore` does.
    const probe = isDir ? `${path}/` : path;
    const excluded =
      (this.opened === undefined ? undefined : { path, reason: this.opened.reason, rule: this.opened.rule }) ??
      (cache === undefined ? undefined : { path, reason: 'cache', rule: cache.rule }) ??
      ruleMatch(name === '.git' && isDir ? undefined : this.gitignore, probe, path, 'gitignore') ??
      ruleMatch(state.user, probe, path, 'user-rule');
    // A decision from an earlier scan must not outlive a changed `.gitignore`.
    if (isDir) state.opened.delete(path);
    if (excluded === undefined || state.include?.ignores(probe) === true) return undefined;
    if (isDir && state.gates?.opensInto(path) === true) {
      state.opened.set(path, excluded);
      return undefined;
    }
    return excluded;
  }
}

function ruleMatch(
  matcher: GitignoreMatcher | undefined,
  probe: string,
  path: string,
  reason: 'gitignore' | 'user-rule',
): Exclusion | undefined {
  if (matcher === undefined) return undefined;
  const result = matcher.test(probe);
  if (!result.ignored || result.rule === undefined) return undefined;
  return { path, reason, rule: result.rule.mark ?? result.rule.pattern };
}

function stringList(value: unknown, field: string): readonly string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) {
    throw new InputError('INVALID_INPUT', `excludes.${field} must be a list of strings`, { data: { field } });
  }
  return value as readonly string[];
}

function normaliseAllowedPath(entry: string): string {
  const path = entry.endsWith('/') ? entry.slice(0, -1) : entry;
  return splitRelativePath(path).join('/');
}
