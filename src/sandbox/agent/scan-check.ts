import type { DirectoryRules, ExcludeRules, Exclusion } from '../../core/excludes.js';
import { EXCLUSION_REASONS } from '../../core/exclusion.js';
import { hasSpecialBits, permissionBits } from '../../core/modes.js';
import { MAX_PATH_BYTES, nameProblem, printable, symlinkStaysInside } from '../../core/paths.js';
import { InputError, IntegrityError } from '../../errors.js';
import {
  DEFAULT_MAX_DIRS,
  DEFAULT_MAX_TOTAL_BYTES,
  type ScanLimits,
  type ScannedDir,
  type ScannedEntry,
  type ScanResult,
} from '../../snapshot/scan.js';

/** Exclusions an agent may report on its own; more are counted, not kept. */
export const MAX_AGENT_EXCLUSIONS = 10_000;
/** Longest exclusion rule text kept from an agent's report. */
const MAX_RULE_CHARS = 200;

/** A scan as the host accepts it. */
export interface CheckedScan {
  readonly scan: ScanResult;
  /** Exclusions the agent reported beyond {@link MAX_AGENT_EXCLUSIONS}, dropped from the report. */
  readonly agentExclusionsDropped: number;
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
 * - leaves out, with the reason a local scan gives, names a workspace cannot hold, escaping
 *   symlinks, files over `limits.maxFileBytes` and everything `rules` exclude (credential
 *   paths, caches, user rules; `.gitignore` files are the agent's to apply, since skipping
 *   them only keeps more of the sandbox's own files);
 * - recomputes every path from the names, keeps permission bits only (each stripped setuid,
 *   setgid or sticky bit is reported) and recounts files, directories, symlinks and bytes.
 *
 * The agent's own exclusions are kept as a report (known reasons only, strings bounded and
 * made printable); they decide nothing. Object ids the agent offers are not looked at here:
 * `ExecWorkspaceSource` takes ids only from the host's own record of the base checkpoint.
 */
export function checkAgentScan(raw: unknown, rules: ExcludeRules, limits: ScanLimits): CheckedScan {
  const wire = record(raw, 'scan');
  const startedAtMs = finite(wire.startedAtMs, 'startedAtMs');
  const checker = new ScanChecker(rules, limits);
  const rawRoot = record(wire.root, 'root');
  const root = checker.dirOf(rawRoot, '', '');
  checker.walk(rawRoot, root, rules.enter(''));
  const reported = agentExclusions(wire.excluded);
  return {
    scan: { root, ...checker.counts, excluded: [...checker.excluded, ...reported.kept], startedAtMs },
    agentExclusionsDropped: reported.dropped,
  };
}

/** One walk over a reported tree: what it kept, left out and counted. */
class ScanChecker {
  readonly excluded: Exclusion[] = [];
  readonly counts = { files: 0, dirs: 0, symlinks: 0, bytes: 0 };

  constructor(
    private readonly rules: ExcludeRules,
    private readonly limits: ScanLimits,
  ) {}

  walk(raw: Record<string, unknown>, into: ScannedDir, dirRules: DirectoryRules): void {
    const where = into.path === '' ? '/' : into.path;
    const children = raw.children;
    if (!Array.isArray(children)) throw malformed(`${where}: children is not a list`);
    const seen = new Set<string>();
    for (const item of children) {
      const child = record(item, `an entry of ${where}`);
      const name = child.name;
      if (typeof name !== 'string') throw malformed(`${where}: an entry has no name`);
      if (seen.has(name)) throw malformed(`${where}: two entries named ${JSON.stringify(printable(name))}`);
      seen.add(name);
      const relPath = into.path === '' ? name : `${into.path}/${name}`;
      const problem = nameProblem(name);
      if (problem !== undefined) {
        this.excluded.push({ path: printable(relPath).slice(0, MAX_PATH_BYTES), reason: 'invalid-path', rule: problem });
        continue;
      }
      if (Buffer.byteLength(relPath) > MAX_PATH_BYTES) throw malformed(`a path is longer than ${MAX_PATH_BYTES} bytes`);
      const entry = this.entryOf(child, name, relPath);
      const rule = dirRules.match(name, entry.type === 'dir');
      if (rule !== undefined) this.excluded.push(rule);
      else if (this.keep(entry)) {
        if (entry.type === 'dir') this.walk(child, entry, this.rules.enter(relPath));
        into.children.push(entry);
      }
    }
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

  /** Counts an entry a local scan would keep; reports and drops the others. */
  private keep(entry: ScannedEntry): boolean {
    const { counts, limits } = this;
    if (entry.type === 'dir') {
      counts.dirs += 1;
      const maxDirs = limits.maxDirs ?? DEFAULT_MAX_DIRS;
      if (counts.dirs > maxDirs) throw tooMany('directories', maxDirs);
      return true;
    }
    if (entry.type === 'file') {
      if (entry.size > limits.maxFileBytes) {
        this.excluded.push({ path: entry.path, reason: 'too-large', rule: `larger than ${limits.maxFileBytes} bytes` });
        return false;
      }
      counts.files += 1;
      counts.bytes += entry.size;
      const maxTotalBytes = limits.maxTotalBytes ?? DEFAULT_MAX_TOTAL_BYTES;
      if (counts.bytes > maxTotalBytes) throw tooMany('bytes of files', maxTotalBytes);
    } else {
      if (!symlinkStaysInside(entry.path, entry.target)) {
        const rule = `points outside the workspace (${printable(entry.target).slice(0, MAX_RULE_CHARS)})`;
        this.excluded.push({ path: entry.path, reason: 'symlink-escape', rule });
        return false;
      }
      counts.symlinks += 1;
    }
    if (counts.files + counts.symlinks > limits.maxEntries) throw tooMany('files and symlinks', limits.maxEntries);
    return true;
  }

  private entryOf(raw: Record<string, unknown>, name: string, relPath: string): ScannedEntry {
    switch (raw.type) {
      case 'dir':
        return this.dirOf(raw, name, relPath);
      case 'file':
        return {
          type: 'file',
          name,
          path: relPath,
          mode: this.modeOf(raw.mode, relPath),
          size: count(raw.size, `${relPath}: size`),
          mtimeMs: finite(raw.mtimeMs, `${relPath}: mtimeMs`),
          ctimeMs: finite(raw.ctimeMs, `${relPath}: ctimeMs`),
          ino: count(raw.ino, `${relPath}: ino`),
        };
      case 'symlink': {
        const target = raw.target;
        if (typeof target !== 'string' || target.includes('\0') || Buffer.byteLength(target) > MAX_PATH_BYTES)
          throw malformed(`${relPath}: bad symlink target`);
        return { type: 'symlink', name, path: relPath, target, mtimeMs: Math.floor(finite(raw.mtimeMs, `${relPath}: mtimeMs`)) };
      }
      default:
        throw malformed(`${relPath}: unknown entry type`);
    }
  }

  /** Permission bits only, as a local scan keeps them; a stripped bit is reported. */
  private modeOf(raw: unknown, relPath: string): number {
    if (!Number.isInteger(raw) || (raw as number) < 0 || (raw as number) > 0o7777) throw malformed(`${relPath || '/'}: bad mode`);
    const mode = raw as number;
    if (hasSpecialBits(mode)) this.excluded.push(modeStripped(relPath, mode));
    return permissionBits(mode);
  }
}

function tooMany(what: string, limit: number): InputError {
  return new InputError('LIMIT_EXCEEDED', `the sandbox holds more than ${limit} ${what}; raise the limit or exclude some`, {
    data: { limit, what, source: 'agent' },
  });
}

/** The report of a stripped setuid, setgid or sticky bit. */
function modeStripped(relPath: string, mode: number): Exclusion {
  return { path: relPath, reason: 'mode-stripped', rule: `mode ${mode.toString(8)} kept as ${permissionBits(mode).toString(8)}` };
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
    kept.push({ path: printable(e.path).slice(0, MAX_PATH_BYTES), reason, rule: printable(e.rule).slice(0, MAX_RULE_CHARS) });
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
