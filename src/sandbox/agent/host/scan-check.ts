import { byteLength } from '../../../core/name-bytes.js';
import { MAX_LINK_TARGET_BYTES, MAX_PATH_BYTES, nameProblem, printable } from '../../../core/paths.js';
import { IntegrityError } from '../../../errors.js';
import type { DirectoryRules, ExcludeRules, Exclusion } from '../../../rules/excludes.js';
import { EXCLUSION_REASONS } from '../../../rules/exclusion.js';
import { withholdSecrets } from '../../../rules/withhold-secrets.js';
import type { ScannedDir, ScannedEntry, ScanResult } from '../../../workspace-fs/scan.js';
import { type ScanLimits, ScanTally } from '../../../workspace-fs/scan-limits.js';
import { subtreeFacts } from '../../../workspace-fs/subtree-facts.js';

/** Exclusions an agent may report on its own; more are counted, not kept. */
export const MAX_AGENT_EXCLUSIONS = 10_000;
/** Longest exclusion rule text kept from an agent's report. */
const MAX_RULE_CHARS = 200;

/** A scan as the host accepts it. */
export interface CheckedScan {
  readonly scan: ScanResult;
  /** Exclusions the agent reported beyond {@link MAX_AGENT_EXCLUSIONS}, dropped from the report. */
  readonly agentExclusionsDropped: number;
  /** Exclusions the host's own check added (an honest agent leaves none: it applies the same rules). */
  readonly hostExclusions: number;
  /** Directories of `previous` a delta answer stubbed, taken over whole (they are in `scan.root`, the very objects). */
  readonly adopted: readonly ScannedDir[];
}

/**
 * Checks a scan reported by an in-sandbox agent with the rules of a local scan, trusting
 * nothing in it (DESIGN section 14): the agent and its staged file are controlled by the code
 * the sandbox runs, so its answer may be crafted. The host walks the reported tree itself and
 *
 * - refuses what no real directory can hold (a value of the wrong type, two entries of one
 *   name, a path longer than {@link MAX_PATH_BYTES}) with `INTEGRITY`, and more files and
 *   symlinks, directories or bytes than the limits allow with `LIMIT_EXCEEDED`, so the
 *   checkpoint fails and the head stays;
 * - leaves out, with the reason a local scan gives, entries named by a credential and links
 *   whose target holds one (never shown in the report), names a workspace cannot hold, escaping
 *   symlinks, files over `limits.maxFileBytes` and everything `rules` exclude (credential
 *   paths, caches, user rules; `.gitignore` files are the agent's to apply, since skipping
 *   them only keeps more of the sandbox's own files; a caller that fetched them itself, as
 *   the shell transport does, passes their texts as `ignoreTexts`, keyed by directory, each
 *   as `ignoreText` combines them);
 * - recomputes every path from the names, keeps permission bits only (each stripped setuid,
 *   setgid or sticky bit is reported) and recounts files, directories, symlinks and bytes;
 * - stores an absolute symlink target under the workspace root inside the sandbox
 *   (`sandboxRoot`) as the equivalent relative one, as a local scan does (`ScanTally.addSymlink`);
 * - keeps a file's `dev` only as a claim: hard links are recorded by the checkpoint among
 *   included files whose read content, size, mode and mtime agree (`linkGroups`), so a claim
 *   across different files, or naming an inode outside, links nothing wrong.
 *
 * The agent's own exclusions are kept as a report (known reasons only, strings bounded, made
 * printable, a credential in them withheld); they decide nothing. Object ids the agent offers are not looked at here:
 * `ExecWorkspaceSource` takes ids only from the host's own record of the base checkpoint.
 *
 * With `previous` (the root of a scan this host checked earlier, with the same rules, limits
 * and root, whose host exclusions were none), a directory sent as a stub (`{type: 'dir', name,
 * same: true}`, the root too) is that scan's directory at the same path, taken over whole and
 * counted against the limits again: the agent can only make the host see its own earlier view
 * of this workspace. A stub with no such directory is `INTEGRITY`, as is any stub without `previous`.
 */
export function checkAgentScan(
  raw: unknown,
  rules: ExcludeRules,
  limits: ScanLimits,
  sandboxRoot: string,
  ignoreTexts: ReadonlyMap<string, string> = new Map(),
  previous?: ScannedDir,
): CheckedScan {
  const wire = record(raw, 'scan');
  const startedAtMs = finite(wire.startedAtMs, 'startedAtMs');
  const checker = new ScanChecker(rules, new ScanTally(limits, 'the sandbox', sandboxRoot), ignoreTexts);
  const rawRoot = record(wire.root, 'root');
  let root: ScannedDir;
  if (rawRoot.same === true) {
    if (previous === undefined) throw malformed('/: a stub with no earlier scan');
    root = previous;
    checker.adoptChildren(previous);
    checker.adopted.push(previous);
  } else {
    root = checker.dirOf(rawRoot, '', '');
    checker.walk(rawRoot, root, rules.enter('', ignoreTexts.get('')), previous);
  }
  const reported = agentExclusions(wire.excluded);
  const { tally } = checker;
  return {
    scan: { root, ...tally.counts, excluded: [...tally.excluded, ...reported.kept], startedAtMs },
    agentExclusionsDropped: reported.dropped,
    hostExclusions: tally.excluded.length,
    adopted: checker.adopted,
  };
}

/** One walk over a reported tree: the shape checks here, the scan's rules and counts in its {@link ScanTally}. */
class ScanChecker {
  readonly adopted: ScannedDir[] = [];

  constructor(
    private readonly rules: ExcludeRules,
    readonly tally: ScanTally,
    private readonly ignoreTexts: ReadonlyMap<string, string>,
  ) {}

  walk(raw: Record<string, unknown>, into: ScannedDir, dirRules: DirectoryRules, before?: ScannedDir): void {
    const where = into.path === '' ? '/' : into.path;
    const children = raw.children;
    if (!Array.isArray(children)) throw malformed(`${where}: children is not a list`);
    const seen = new Set<string>();
    let earlier: Map<string, ScannedEntry> | undefined;
    for (const item of children) {
      const child = record(item, `an entry of ${where}`);
      const name = child.name;
      if (typeof name !== 'string') throw malformed(`${where}: an entry has no name`);
      if (seen.has(name)) throw malformed(`${where}: two entries named ${JSON.stringify(printable(name))}`);
      seen.add(name);
      const relPath = into.path === '' ? name : `${into.path}/${name}`;
      if (this.tally.secretName(relPath, name)) continue;
      const problem = nameProblem(name);
      if (problem !== undefined) {
        this.tally.invalidName(relPath, problem);
        continue;
      }
      // A UTF-16 unit is at most 3 bytes: only a path that could be too long is measured.
      if (relPath.length * 3 > MAX_PATH_BYTES && byteLength(relPath) > MAX_PATH_BYTES)
        throw malformed(`a path is longer than ${MAX_PATH_BYTES} bytes`);
      earlier ??= before === undefined ? undefined : new Map(before.children.map((c) => [c.name, c]));
      const was = earlier?.get(name);
      if (child.same === true) {
        if (child.type !== 'dir' || was?.type !== 'dir') throw malformed(`${relPath}: a stub with no earlier directory`);
        const rule = dirRules.match(name, true);
        if (rule !== undefined) this.tally.excluded.push(rule);
        else {
          this.adopt(was);
          into.children.push(was);
        }
        continue;
      }
      const entry = this.entryOf(child, name, relPath);
      const rule = dirRules.match(name, entry.type === 'dir');
      if (rule !== undefined) this.tally.excluded.push(rule);
      else if (entry.type === 'dir') {
        this.tally.addDir();
        this.walk(child, entry, this.rules.enter(relPath, this.ignoreTexts.get(relPath)), was?.type === 'dir' ? was : undefined);
        into.children.push(entry);
      } else if (entry.type === 'file') {
        if (this.tally.addFile(relPath, entry.size)) into.children.push(entry);
      } else {
        // The tally's rule for targets: relative ones that stay inside as they are, absolute ones under the root made relative.
        const target = this.tally.addSymlink(relPath, entry.target);
        if (target !== undefined) into.children.push({ ...entry, target });
      }
    }
  }

  /** Takes over a directory of the earlier checked scan (a stub's), counting it and everything under it. */
  adopt(dir: ScannedDir): void {
    this.tally.addDir();
    this.adoptChildren(dir);
    this.adopted.push(dir);
  }

  /**
   * Counts what an earlier checked directory holds against this scan's limits (it passed the
   * same rules and limits then, the request being the same): its {@link subtreeFacts},
   * remembered per directory object, so an unchanged subtree costs nothing to count again.
   */
  adoptChildren(dir: ScannedDir): void {
    const facts = subtreeFacts(dir);
    this.tally.adopt({ files: facts.files, dirs: facts.dirs, symlinks: facts.symlinks, bytes: facts.bytes, excluded: [] });
  }

  dirOf(raw: Record<string, unknown>, name: string, relPath: string): ScannedDir {
    const where = relPath === '' ? '/' : relPath;
    if (raw.type !== 'dir') throw malformed(`${where}: not a directory`);
    return {
      type: 'dir',
      name,
      path: relPath,
      mode: this.modeOf(raw.mode, relPath),
      mtimeMs: Math.floor(finite(raw.mtimeMs, `${where}: mtimeMs`)),
      exactMtimeMs: finite(raw.exactMtimeMs, `${where}: exactMtimeMs`),
      ctimeMs: finite(raw.ctimeMs, `${where}: ctimeMs`),
      children: [],
    };
  }

  private entryOf(raw: Record<string, unknown>, name: string, relPath: string): ScannedEntry {
    switch (raw.type) {
      case 'dir':
        return this.dirOf(raw, name, relPath);
      case 'file': {
        const file = {
          type: 'file',
          name,
          path: relPath,
          mode: this.modeOf(raw.mode, relPath),
          size: count(raw.size, `${relPath}: size`),
          mtimeMs: finite(raw.mtimeMs, `${relPath}: mtimeMs`),
          ctimeMs: finite(raw.ctimeMs, `${relPath}: ctimeMs`),
          ino: count(raw.ino, `${relPath}: ino`),
        } as const;
        // `dev` (with `ino`) is a claim of hard links: the checkpoint links only included
        // members whose content, size, mode and mtime turn out equal (`linkGroups`).
        return raw.dev === undefined ? file : { ...file, dev: count(raw.dev, `${relPath}: dev`) };
      }
      case 'symlink': {
        const target = raw.target;
        if (typeof target !== 'string' || target.includes('\0') || byteLength(target) > MAX_LINK_TARGET_BYTES)
          throw malformed(`${relPath}: bad symlink target`);
        return { type: 'symlink', name, path: relPath, target, mtimeMs: Math.floor(finite(raw.mtimeMs, `${relPath}: mtimeMs`)) };
      }
      default:
        throw malformed(`${relPath}: unknown entry type`);
    }
  }

  /** A `stat` mode's low bits as a scan reports them (anything else is not a mode), kept as a scan keeps them. */
  private modeOf(raw: unknown, relPath: string): number {
    if (!Number.isInteger(raw) || (raw as number) < 0 || (raw as number) > 0o7777) throw malformed(`${relPath || '/'}: bad mode`);
    return this.tally.mode(relPath, raw as number);
  }
}

/** The agent's own exclusions as a report: known reasons only, bounded strings, bounded count. */
function agentExclusions(raw: unknown): { kept: Exclusion[]; dropped: number } {
  if (raw === undefined) return { kept: [], dropped: 0 };
  if (!Array.isArray(raw)) throw malformed('excluded is not a list');
  const kept: Exclusion[] = [];
  for (const item of raw.slice(0, MAX_AGENT_EXCLUSIONS)) {
    const e = record(item, 'an exclusion');
    const reason = EXCLUSION_REASONS.find((r) => r === e.reason);
    if (reason === undefined || typeof e.path !== 'string' || typeof e.rule !== 'string') throw malformed('an exclusion is malformed');
    // The agent's text: a credential in it is withheld whole, as in any report.
    const [path, rule] = [printable(e.path).slice(0, MAX_PATH_BYTES), printable(e.rule).slice(0, MAX_RULE_CHARS)].map(
      (text) => withholdSecrets(text).value as string,
    );
    kept.push({ path: path as string, reason, rule: rule as string });
  }
  return { kept, dropped: Math.max(0, raw.length - MAX_AGENT_EXCLUSIONS) };
}

function record(raw: unknown, what: string): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw malformed(`${what} is not an object`);
  return raw as Record<string, unknown>;
}

function finite(raw: unknown, what: string): number {
  if (typeof raw !== 'number' || !Number.isFinite(raw)) throw malformed(`${what} is not a number`);
  return raw;
}

function count(raw: unknown, what: string): number {
  if (!Number.isSafeInteger(raw) || (raw as number) < 0) throw malformed(`${what} is not a count`);
  return raw as number;
}

function malformed(why: string): IntegrityError {
  return new IntegrityError('INTEGRITY', `[agent] the sandbox's scan answer is not a real directory tree (${why}); nothing was saved`, {
    data: { source: 'agent' },
  });
}
