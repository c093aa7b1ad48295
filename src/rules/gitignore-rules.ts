/**
 * gitignore plumbing for `ExcludeRules`: rebasing a nested `.gitignore` onto the workspace
 * root, and telling which excluded directories an `include` pattern needs the walk to open.
 */
import ignore from 'ignore';

/** A compiled gitignore rule set (the `ignore` package's matcher). */
export type GitignoreMatcher = ignore.Ignore;

/** Creates an empty matcher; `add` patterns to it. */
export function createMatcher(): GitignoreMatcher {
  return ignore();
}

/** Removes trailing spaces that are not escaped with a backslash, as git does. */
export function trimTrailingSpaces(line: string): string {
  let end = line.length;
  while (end > 0 && line[end - 1] === ' ' && line[end - 2] !== '\\') end -= 1;
  return line.slice(0, end);
}

const GLOB_SPECIAL_RE = /[\\*?[\]!#]/g;

function escapeGlob(literal: string): string {
  return literal.replace(GLOB_SPECIAL_RE, '\\$&');
}

/**
 * Rewrites one line of the `.gitignore` in `baseDir` so that, matched against paths relative
 * to the workspace root, it selects exactly what git selects with it relative to `baseDir`.
 * An anchored pattern (one with a slash before its end) gets the directory as a prefix; an
 * unanchored one gets the directory followed by a `**` segment, which matches at any depth
 * including none. Special characters in the directory name are escaped. Returns undefined
 * for blank lines and comments.
 */
export function rebaseGitignoreLine(line: string, baseDir: string): string | undefined {
  if (line === '' || line.startsWith('#')) return undefined;
  const negate = line.startsWith('!') ? '!' : '';
  const body = trimTrailingSpaces(negate === '' ? line : line.slice(1));
  const core = body.endsWith('/') ? body.slice(0, -1) : body;
  if (core === '') return undefined;
  if (baseDir === '') return negate + body;
  const anchored = core.includes('/');
  const rest = core.startsWith('/') ? body.slice(1) : body;
  return `${negate}${escapeGlob(baseDir)}/${anchored ? '' : '**/'}${rest}`;
}

/**
 * Adds the rules of the `.gitignore` found in `baseDir` to a copy of `inherited` (the
 * rules of its ancestors). Later rules win in gitignore, so deeper files override
 * shallower ones, as in git. Each rule is marked `path:line:pattern`, the form
 * `git check-ignore -v` prints. Returns `inherited` itself when the file has no rules.
 */
export function extendWithGitignore(inherited: GitignoreMatcher | undefined, text: string, baseDir: string): GitignoreMatcher | undefined {
  const source = baseDir === '' ? '.gitignore' : `${baseDir}/.gitignore`;
  const patterns: { pattern: string; mark: string }[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const pattern = rebaseGitignoreLine(line, baseDir);
    if (pattern !== undefined) patterns.push({ pattern, mark: `${source}:${index + 1}:${line}` });
  });
  if (patterns.length === 0) return inherited;
  const matcher = createMatcher();
  if (inherited !== undefined) matcher.add(inherited);
  return matcher.add(patterns);
}

type SegmentTest = ((name: string) => boolean) | 'any-depth';

/**
 * The directories an `include` pattern reaches into. git cannot re-include a path whose
 * parent is excluded, because it never opens that parent; `include: ['node_modules/react/']`
 * must therefore open `node_modules/` to reach `react/`. Only patterns with a directory part
 * (`a/b`, `/a/b`, `a/**` + `/b`) open anything: an unanchored pattern (`*.log`) could match
 * inside every excluded directory, and opening them all would defeat the excludes. An opened
 * directory's other entries stay excluded, reported with the directory's own reason.
 */
export class IncludeGates {
  private constructor(private readonly gates: readonly (readonly SegmentTest[])[]) {}

  /** Compiles the gates of `patterns`; undefined when none of them opens a directory. */
  static compile(patterns: readonly string[]): IncludeGates | undefined {
    const gates: SegmentTest[][] = [];
    for (const raw of patterns) {
      let pattern = trimTrailingSpaces(raw);
      if (pattern === '' || pattern.startsWith('#') || pattern.startsWith('!')) continue;
      if (pattern.endsWith('/')) pattern = pattern.slice(0, -1);
      if (pattern.startsWith('/')) pattern = pattern.slice(1);
      const segments = pattern.split('/');
      if (segments.length < 2 || segments[0] === '**') continue;
      gates.push(segments.map(compileSegment));
    }
    return gates.length === 0 ? undefined : new IncludeGates(gates);
  }

  /** True when some pattern can match a path strictly inside directory `dirPath`. */
  opensInto(dirPath: string): boolean {
    const parts = dirPath.split('/');
    return this.gates.some((gate) => {
      for (let i = 0; i < parts.length; i += 1) {
        const test = gate[i];
        if (test === undefined) return false;
        if (test === 'any-depth') return true;
        if (!test(parts[i] as string)) return false;
      }
      return gate.length > parts.length;
    });
  }
}

function compileSegment(segment: string): SegmentTest {
  if (segment === '**') return 'any-depth';
  if (!/[*?[\\]/.test(segment)) return (name) => name === segment;
  const matcher = createMatcher().add(segment);
  return (name) => matcher.ignores(name);
}
