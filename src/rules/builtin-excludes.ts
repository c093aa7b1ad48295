/**
 * The built-in path rules (DESIGN section 6) and the name tables that apply them. The rule
 * strings use gitignore notation and are reported verbatim as `Exclusion.rule`; the tables
 * are derived from them once, so a walk decides most entries with one `Map` lookup.
 */

/**
 * Conventional credential locations, excluded at any depth and never re-included by
 * `include`: only an exact `allowSecretPaths` entry lets one through. A trailing `/` means
 * directories only; `parent/name` means `name` directly inside a directory called `parent`;
 * `.env.*` is every name starting `.env.` except those ending in a {@link SECRET_PATH_KEEP_SUFFIXES} entry.
 */
export const SECRET_PATH_RULES: readonly string[] = Object.freeze([
  '.ssh/',
  '.aws/',
  '.gnupg/',
  '.netrc',
  '.git-credentials',
  '.docker/config.json',
  // Files that hold nothing but credentials: PostgreSQL and PyPI passwords, kubeconfig
  // tokens and client keys, the Terraform CLI's API tokens, Azure CLI token caches.
  '.pgpass',
  '.pypirc',
  '.kube/config',
  '.terraform.d/credentials.tfrc.json',
  '.azure/accessTokens.json',
  '.azure/msal_token_cache.json',
  // gcloud's credentials under `.config/gcloud/` (its `configurations/` are plain settings).
  'gcloud/application_default_credentials.json',
  'gcloud/credentials.db',
  'gcloud/access_tokens.db',
  'gcloud/legacy_credentials/',
  '.env',
  '.env.*',
  'id_rsa',
  'id_dsa',
  'id_ecdsa',
  'id_ed25519',
  // The FIDO-backed variants ssh-keygen writes are private-key handles too.
  'id_ecdsa_sk',
  'id_ed25519_sk',
]);

/** Name endings that mark a `.env.*` file as a template meant to be shared (`.env.example`). */
export const SECRET_PATH_KEEP_SUFFIXES: readonly string[] = Object.freeze(['.example', '.sample', '.template']);

/**
 * Dependency and cache directories, excluded at any depth unless `cacheExcludes` is false or
 * an `include` pattern re-includes them: a replacement sandbox rebuilds them from setup commands.
 */
export const CACHE_EXCLUDES: readonly string[] = Object.freeze([
  'node_modules/',
  '.cache/',
  '__pycache__/',
  '.venv/',
  '.pytest_cache/',
  '.turbo/',
  '.next/cache/',
]);

/** One built-in rule as the name tables hold it. */
export interface BuiltinRule {
  /** The rule string from `SECRET_PATH_RULES` or `CACHE_EXCLUDES`. */
  readonly rule: string;
  readonly reason: 'secret-path' | 'cache';
  readonly dirOnly: boolean;
}

interface ParsedRule extends BuiltinRule {
  readonly parent: string | undefined;
  readonly name: string;
  readonly prefix: boolean;
}

function parseRule(rule: string, reason: BuiltinRule['reason']): ParsedRule {
  const dirOnly = rule.endsWith('/');
  const body = dirOnly ? rule.slice(0, -1) : rule;
  const slash = body.lastIndexOf('/');
  const parent = slash < 0 ? undefined : body.slice(0, slash);
  const last = body.slice(slash + 1);
  const prefix = last.endsWith('.*');
  if (parent?.includes('/') || last === '' || last.includes('*') !== prefix) {
    throw new Error(`built-in exclude rule "${rule}" uses a form the name tables cannot apply`);
  }
  return { rule, reason, dirOnly, parent, name: prefix ? last.slice(0, -1) : last, prefix };
}

/** Decides the built-in rules for the entries of one directory. */
export class NameTable {
  constructor(
    private readonly names: ReadonlyMap<string, BuiltinRule>,
    private readonly prefixes: readonly ParsedRule[],
  ) {}

  /** The built-in rule that excludes entry `name`, if any. */
  lookup(name: string, isDir: boolean): BuiltinRule | undefined {
    const hit = this.names.get(name);
    if (hit !== undefined && (isDir || !hit.dirOnly)) return hit;
    for (const rule of this.prefixes) {
      if (name.startsWith(rule.name) && (isDir || !rule.dirOnly) && !hasKeepSuffix(name)) return rule;
    }
    return undefined;
  }
}

function hasKeepSuffix(name: string): boolean {
  return SECRET_PATH_KEEP_SUFFIXES.some((suffix) => name.endsWith(suffix));
}

/** Name tables for every parent directory name, built once per `ExcludeRules`. */
export class BuiltinNames {
  private constructor(
    private readonly anywhere: NameTable,
    private readonly byParent: ReadonlyMap<string, NameTable>,
  ) {}

  /** Tables for the secret rules, plus the cache rules when `cacheExcludes` is on. */
  static compile(cacheExcludes: boolean): BuiltinNames {
    const parsed = [
      ...SECRET_PATH_RULES.map((r) => parseRule(r, 'secret-path')),
      ...(cacheExcludes ? CACHE_EXCLUDES.map((r) => parseRule(r, 'cache')) : []),
    ];
    const exact = (rules: readonly ParsedRule[]): Map<string, BuiltinRule> =>
      new Map(rules.filter((r) => !r.prefix).map((r) => [r.name, { rule: r.rule, reason: r.reason, dirOnly: r.dirOnly }]));
    const global = parsed.filter((r) => r.parent === undefined);
    const prefixes = global.filter((r) => r.prefix);
    const byParent = new Map<string, NameTable>();
    for (const parent of new Set(parsed.map((r) => r.parent))) {
      if (parent === undefined) continue;
      // Context rules go last so they win over a global rule of the same name.
      const names = new Map([...exact(global), ...exact(parsed.filter((r) => r.parent === parent))]);
      byParent.set(parent, new NameTable(names, prefixes));
    }
    return new BuiltinNames(new NameTable(exact(global), prefixes), byParent);
  }

  /** The table for entries of a directory whose own name is `parentName` (`''` for the root). */
  forParent(parentName: string): NameTable {
    return this.byParent.get(parentName) ?? this.anywhere;
  }
}
