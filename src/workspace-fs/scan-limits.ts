import path from 'node:path';
import { hasSpecialBits, permissionBits } from '../core/modes.js';
import { MAX_PATH_BYTES, printable, symlinkStaysInside } from '../core/paths.js';
import { InputError } from '../errors.js';
import type { Exclusion } from '../rules/excludes.js';
import { findSecret } from '../rules/secrets.js';
import { withheldMarker } from '../rules/withhold-secrets.js';

/**
 * Names already found to hold no credential, remembered per process so that the scans of one
 * workspace, which meet the same names every time, check each name once; cleared whole when it
 * reaches {@link CLEAN_NAMES_MAX} (a name that holds a credential is never remembered).
 */
const cleanNames = new Set<string>();
/** Most names {@link cleanNames} remembers before it starts again. */
const CLEAN_NAMES_MAX = 200_000;

/** Whether `name` holds a credential (see `findSecret`), checking each clean name once per process. */
function secretIn(name: string): ReturnType<typeof findSecret> {
  if (cleanNames.has(name)) return undefined;
  const finding = findSecret(Buffer.from(name, 'utf8'));
  if (finding === undefined) {
    if (cleanNames.size >= CLEAN_NAMES_MAX) cleanNames.clear();
    cleanNames.add(name);
  }
  return finding;
}

/** Largest file a checkpoint takes; bigger ones are excluded with reason `too-large`. */
export const DEFAULT_MAX_FILE_BYTES = 1024 * 1024 * 1024;
/** Most files and symlinks one scan accepts; more fails with `LIMIT_EXCEEDED` (never a partial checkpoint). */
export const DEFAULT_MAX_ENTRIES = 100_000;

/** Most directories one scan accepts (the root not counted); more fails with `LIMIT_EXCEEDED`. */
export const DEFAULT_MAX_DIRS = 100_000;
/**
 * Most bytes of files one scan accepts in all; more fails with `LIMIT_EXCEEDED`. A hundred
 * files at the file limit: far above a real workspace, far below what a restore of a crafted
 * tree (one shared 1 GiB file under many names) could otherwise write to the host's disk.
 */
export const DEFAULT_MAX_TOTAL_BYTES = 100 * DEFAULT_MAX_FILE_BYTES;

/**
 * Limits applied by a scan, and by every restore and walk of a stored tree (which counts a
 * shared subtree each time it appears). Unset optional limits take their `DEFAULT_MAX_*`.
 */
export interface ScanLimits {
  readonly maxFileBytes: number;
  readonly maxEntries: number;
  readonly maxDirs?: number;
  readonly maxTotalBytes?: number;
}

/**
 * What one directory's subtree added to a walk's {@link ScanTally}: the directory itself and
 * everything under it, counted, with its exclusions in walk order. A later walk that takes the
 * subtree over unchanged adds exactly this ({@link ScanTally.adopt}).
 */
export interface SubtreeTally {
  readonly files: number;
  readonly dirs: number;
  readonly symlinks: number;
  readonly bytes: number;
  readonly excluded: readonly Exclusion[];
}

/** Where a walk's tally stood, to tell later what a subtree added ({@link ScanTally.since}). */
export interface TallyMark {
  readonly files: number;
  readonly dirs: number;
  readonly symlinks: number;
  readonly bytes: number;
  readonly excludedAt: number;
}

const NO_EXCLUSIONS: readonly Exclusion[] = Object.freeze([]);

/** Longest link target quoted in a report. */
const MAX_SHOWN_TARGET_CHARS = 200;

/** A link target as a report quotes it: printable and bounded. */
const shown = (target: string): string => printable(target).slice(0, MAX_SHOWN_TARGET_CHARS);

/**
 * What one walk of a workspace keeps and counts under a scan's limits: the one owner of those
 * rules, whether the walk reads the disk (`scanWorkspace`) or checks an agent's report of a
 * sandbox (`checkAgentScan`). Entries left out are reported in `excluded` with their reason
 * (names and targets made printable: they are the workspace's text); a limit passed throws
 * `LIMIT_EXCEEDED` (never a partial checkpoint).
 */
export class ScanTally {
  readonly excluded: Exclusion[] = [];
  files = 0;
  dirs = 0;
  symlinks = 0;
  bytes = 0;
  private readonly maxDirs: number;
  private readonly maxTotalBytes: number;

  /**
   * `subject` names the walked tree in errors: a directory, or `the sandbox`. `root` is the
   * absolute path of the walked root where its symlinks resolve (the host directory, or the
   * workspace root inside the sandbox): absolute link targets under it are kept, made
   * relative; without it every absolute target escapes.
   */
  constructor(
    private readonly limits: ScanLimits,
    private readonly subject: string,
    root?: string,
  ) {
    this.maxDirs = limits.maxDirs ?? DEFAULT_MAX_DIRS;
    this.maxTotalBytes = limits.maxTotalBytes ?? DEFAULT_MAX_TOTAL_BYTES;
    this.root = root === undefined ? undefined : path.posix.resolve(root);
  }

  private readonly root: string | undefined;

  /**
   * Whether the entry `name` at `relPath` is named by a credential (any content rule of the
   * secret scan, Holdfast's tokens included): then it is left out, with everything under it,
   * and reported `secret-content` with the name withheld (the report lists its directory and
   * {@link withheldMarker}), so the name reaches no tree, listing, sync or report. Checked
   * before any other rule of the entry.
   */
  secretName(relPath: string, name: string): boolean {
    const finding = secretIn(name);
    if (finding === undefined) return false;
    const parent = relPath.slice(0, Math.max(0, relPath.length - name.length - 1));
    const marker = withheldMarker(finding.rule);
    this.excluded.push({ path: parent === '' ? marker : `${parent}/${marker}`, reason: 'secret-content', rule: finding.rule });
    return true;
  }

  /** Reports a name a workspace path cannot hold (`problem` from `nameProblem`). */
  invalidName(relPath: string, problem: string): void {
    this.excluded.push({ path: printable(relPath).slice(0, MAX_PATH_BYTES), reason: 'invalid-path', rule: problem });
  }

  /** The permission bits of `mode`; a stripped setuid, setgid or sticky bit is reported (`mode-stripped`). */
  mode(relPath: string, mode: number): number {
    const bits = permissionBits(mode);
    if (hasSpecialBits(mode)) {
      this.excluded.push({
        path: relPath,
        reason: 'mode-stripped',
        rule: `mode ${(mode & 0o7777).toString(8)} kept as ${bits.toString(8)}`,
      });
    }
    return bits;
  }

  /** Counts a directory. */
  addDir(): void {
    this.dirs += 1;
    if (this.dirs > this.maxDirs) throw this.tooMany('directories', this.maxDirs);
  }

  /** Counts a file of `size` bytes; false (reported `too-large`) when it is over the file limit. */
  addFile(relPath: string, size: number): boolean {
    if (size > this.limits.maxFileBytes) {
      this.excluded.push({ path: relPath, reason: 'too-large', rule: `larger than ${this.limits.maxFileBytes} bytes` });
      return false;
    }
    this.files += 1;
    this.bytes += size;
    if (this.bytes > this.maxTotalBytes) throw this.tooMany('bytes of files', this.maxTotalBytes);
    this.checkEntries();
    return true;
  }

  /**
   * Counts a symlink at `relPath` and returns the target to store, or undefined when it is
   * left out (reported `secret-content` when the target holds a credential, which the report
   * never shows; else `symlink-escape`). A relative target is stored as it is when it stays
   * inside ({@link symlinkStaysInside}). An absolute target that lies inside the root
   * (lexically, after `.` and `..` are resolved; the root itself counts) is stored as the
   * equivalent target relative to the link's directory, when that passes the same rule, and
   * reported (`symlink-made-relative`, rule: the original target): a restore elsewhere then
   * still points into the restored tree. Any other target escapes.
   */
  addSymlink(relPath: string, target: string): string | undefined {
    const finding = findSecret(Buffer.from(target, 'utf8'));
    if (finding !== undefined) {
      this.excluded.push({ path: relPath, reason: 'secret-content', rule: finding.rule });
      return undefined;
    }
    const stored = target.startsWith('/') ? this.madeRelative(relPath, target) : target;
    if (stored === undefined || !symlinkStaysInside(relPath, stored)) {
      this.excluded.push({ path: relPath, reason: 'symlink-escape', rule: `points outside the workspace (${shown(target)})` });
      return undefined;
    }
    if (stored !== target) this.excluded.push({ path: relPath, reason: 'symlink-made-relative', rule: shown(target) });
    this.symlinks += 1;
    this.checkEntries();
    return stored;
  }

  /** The relative form of absolute `target` from `relPath`'s directory, or undefined when it lies outside the root. */
  private madeRelative(relPath: string, target: string): string | undefined {
    const root = this.root;
    if (root === undefined) return undefined;
    const resolved = path.posix.resolve(target);
    const inside = resolved === root || resolved.startsWith(root === '/' ? '/' : `${root}/`);
    if (!inside) return undefined;
    const cut = relPath.lastIndexOf('/');
    const from = cut < 0 ? root : path.posix.join(root, relPath.slice(0, cut));
    return path.posix.relative(from, resolved) || '.';
  }

  /** Where the tally stands now. */
  mark(): TallyMark {
    return { files: this.files, dirs: this.dirs, symlinks: this.symlinks, bytes: this.bytes, excludedAt: this.excluded.length };
  }

  /** What was added since `mark`. */
  since(mark: TallyMark): SubtreeTally {
    return {
      files: this.files - mark.files,
      dirs: this.dirs - mark.dirs,
      symlinks: this.symlinks - mark.symlinks,
      bytes: this.bytes - mark.bytes,
      excluded: this.excluded.length === mark.excludedAt ? NO_EXCLUSIONS : this.excluded.slice(mark.excludedAt),
    };
  }

  /**
   * Adds a subtree an earlier walk counted (taken over unchanged), under the same limits and
   * with the same `LIMIT_EXCEEDED` a walk of it would throw.
   */
  adopt(subtree: SubtreeTally): void {
    this.dirs += subtree.dirs;
    if (this.dirs > this.maxDirs) throw this.tooMany('directories', this.maxDirs);
    this.files += subtree.files;
    this.symlinks += subtree.symlinks;
    this.bytes += subtree.bytes;
    if (this.bytes > this.maxTotalBytes) throw this.tooMany('bytes of files', this.maxTotalBytes);
    this.checkEntries();
    for (const e of subtree.excluded) this.excluded.push(e);
  }

  /** The counts, as a `ScanResult` carries them. */
  get counts(): { files: number; dirs: number; symlinks: number; bytes: number } {
    return { files: this.files, dirs: this.dirs, symlinks: this.symlinks, bytes: this.bytes };
  }

  private checkEntries(): void {
    if (this.files + this.symlinks > this.limits.maxEntries) throw this.tooMany('files and symlinks', this.limits.maxEntries);
  }

  private tooMany(what: string, limit: number): InputError {
    return new InputError('LIMIT_EXCEEDED', `${this.subject} has more than ${limit} ${what}; raise the limit or exclude some`, {
      data: { limit, what },
    });
  }
}
