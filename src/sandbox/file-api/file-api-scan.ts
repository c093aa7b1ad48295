import { nameProblem } from '../../core/paths.js';
import { InputError, IntegrityError } from '../../errors.js';
import { CACHE_EXCLUDES } from '../../rules/builtin-excludes.js';
import { type ExcludeOptions, ExcludeRules, type Exclusion } from '../../rules/excludes.js';
import { INFO_EXCLUDE_PATH, ignoreFileTooLarge, ignoreText, MAX_IGNORE_FILE_BYTES } from '../../rules/ignore-files.js';
import { DEFAULT_MAX_DIRS, type ScanLimits, type ScannedDir, type ScanResult } from '../../workspace-fs/scan.js';
import { checkAgentScan } from '../agent/host/scan-check.js';
import type { FileStat, SandboxFiles } from './sandbox-files.js';

type WireEntry = Record<string, unknown> & { children?: WireEntry[] };

/**
 * Most entries one scan lists, whatever they are: the files and symlinks a scan may keep plus
 * the directories it may walk. A listing that goes on past it (an endless one, or a tree no
 * scan could keep) fails with `LIMIT_EXCEEDED` before more is held.
 */
export function maxListedEntries(limits: ScanLimits): number {
  return limits.maxEntries + (limits.maxDirs ?? DEFAULT_MAX_DIRS);
}

/** An answer no real directory gives: `INTEGRITY`, nothing saved. */
export function untrueListing(files: Pick<SandboxFiles, 'label'>, why: string): IntegrityError {
  return new IntegrityError(
    'INTEGRITY',
    `[files] ${files.label}: the file API's answer is not a real directory tree (${why}); nothing was saved`,
    {
      data: { source: 'files' },
    },
  );
}

/**
 * Walks the workspace through the file API and checks the answer with the rules of a local
 * scan (`checkAgentScan`, as an agent's or a shell's answer is checked): names are validated
 * before anything is asked about them (a name with `/`, an empty, `.` or `..` one is
 * `INTEGRITY`), the walk stops at {@link maxListedEntries} (`LIMIT_EXCEEDED`), directories the
 * built-in cache rules exclude at every depth are listed but never descended, symlinks are
 * read (never followed) and kept only when they stay inside; sockets, FIFOs and devices are
 * left out as `special-file`. With `gitignore`, the listed `.gitignore` files and
 * `.git/info/exclude` are read (bounded by `MAX_IGNORE_FILE_BYTES`: one over is
 * `LIMIT_EXCEEDED`) and applied on the host before any file is read.
 */
export async function fileApiScan(
  files: SandboxFiles,
  excludes: ExcludeOptions | undefined,
  rules: ExcludeRules,
  limits: ScanLimits,
): Promise<ScanResult> {
  const startedAtMs = Date.now();
  const top = await files.lstat('');
  if (top === undefined || top.type !== 'dir') {
    throw new InputError('INVALID_INPUT', `${files.label} is not a directory`, { data: { path: files.label } });
  }
  const walk = new Walk(files, limits, prunedNames(excludes));
  const root = dirEntry('', top);
  await walk.dir('', root);
  const texts = rules.readsGitignore ? await ignoreTexts(files, root) : undefined;
  const { scan } = checkAgentScan({ startedAtMs, root }, rules, limits, files.workspaceRoot ?? '', texts);
  const kept = keptDirs(scan.root);
  const specials = walk.specials.filter((e) => kept.has(parentOf(e.path)));
  return { ...scan, excluded: [...scan.excluded, ...specials] };
}

/** One walk: the listing's bound, and the special files it met. */
class Walk {
  private listed = 0;
  readonly specials: Exclusion[] = [];
  private readonly budget: number;

  constructor(
    private readonly files: SandboxFiles,
    limits: ScanLimits,
    private readonly pruned: ReadonlySet<string>,
  ) {
    this.budget = maxListedEntries(limits);
  }

  async dir(rel: string, into: WireEntry): Promise<void> {
    const subdirs: Array<[string, WireEntry]> = [];
    for await (const e of this.files.list(rel)) {
      this.listed += 1;
      if (this.listed > this.budget) {
        throw new InputError('LIMIT_EXCEEDED', `[files] ${this.files.label} lists more than ${this.budget} entries; nothing was saved`, {
          data: { limit: this.budget, source: 'files' },
        });
      }
      const name = e?.name;
      if (typeof name !== 'string' || name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0'))
        throw untrueListing(this.files, 'a name is empty, ".", ".." or holds "/"');
      const path = rel === '' ? name : `${rel}/${name}`;
      // A name a scan refuses is passed on as it is, never asked about: the check reports it.
      const asked = nameProblem(name) === undefined;
      switch (e.type) {
        case 'dir': {
          const entry = dirEntry(name, e);
          into.children?.push(entry);
          if (asked && !this.pruned.has(name)) subdirs.push([path, entry]);
          break;
        }
        case 'file':
          into.children?.push({
            type: 'file',
            name,
            mode: e.mode,
            size: e.size,
            mtimeMs: e.mtimeMs,
            ctimeMs: e.ctimeMs,
            ino: e.ino,
            ...(e.nlink > 1 ? { dev: e.dev } : {}),
          });
          break;
        case 'symlink':
          into.children?.push({ type: 'symlink', name, target: asked ? await this.files.readlink(path) : '', mtimeMs: e.mtimeMs });
          break;
        case 'other':
          this.specials.push({ path, reason: 'special-file', rule: 'socket, FIFO or device' });
          break;
        default:
          throw untrueListing(this.files, 'an entry has an unknown type');
      }
    }
    for (const [path, entry] of subdirs) await this.dir(path, entry);
  }
}

function dirEntry(name: string, st: FileStat): WireEntry {
  return { type: 'dir', name, mode: st.mode, mtimeMs: st.mtimeMs, exactMtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, children: [] };
}

/** Directory names the built-in cache rules exclude at every depth (listed, never walked), unless `include` patterns could reopen one. */
function prunedNames(excludes: ExcludeOptions | undefined): Set<string> {
  if ((excludes?.include?.length ?? 0) > 0) return new Set();
  // A rules object of its own: matching here must not touch the scan's state (allowances, ignore files).
  const top = ExcludeRules.create({ ...excludes, gitignore: false }).enter('');
  return new Set(
    CACHE_EXCLUDES.filter((r) => /^[^/*?[\\]+\/$/.test(r))
      .map((r) => r.slice(0, -1))
      .filter((name) => top.match(name, true) !== undefined),
  );
}

/** The ignore text of each listed directory that has one, as `checkAgentScan` takes them. */
async function ignoreTexts(files: SandboxFiles, root: WireEntry): Promise<Map<string, string>> {
  const paths = gitignoresOf(root, '');
  if (isListedFile(root, INFO_EXCLUDE_PATH)) paths.push(INFO_EXCLUDE_PATH);
  const read = new Map<string, string>();
  for (const p of paths) {
    const bytes = await files.read(p, 0, MAX_IGNORE_FILE_BYTES + 1);
    if (bytes.length > MAX_IGNORE_FILE_BYTES) throw ignoreFileTooLarge(p, bytes.length);
    read.set(p, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('utf8'));
  }
  const out = new Map<string, string>();
  for (const [file, text] of read) if (file !== INFO_EXCLUDE_PATH) out.set(parentOf(file), text);
  const atRoot = ignoreText('', out.get(''), read.get(INFO_EXCLUDE_PATH));
  if (atRoot !== undefined) out.set('', atRoot);
  return out;
}

/** Paths of the regular `.gitignore` files of a listed tree, outside any `.git` directory (git reads none there). */
function gitignoresOf(dir: WireEntry, prefix: string, out: string[] = []): string[] {
  for (const e of dir.children ?? []) {
    if (e.type === 'file' && e.name === '.gitignore') out.push(`${prefix}.gitignore`);
    else if (e.type === 'dir' && e.name !== '.git') gitignoresOf(e, `${prefix}${e.name as string}/`, out);
  }
  return out;
}

function isListedFile(root: WireEntry, rel: string): boolean {
  let at: WireEntry | undefined = root;
  const names = rel.split('/');
  for (const [i, name] of names.entries()) {
    at = at?.children?.find((c) => c.name === name && c.type === (i === names.length - 1 ? 'file' : 'dir'));
  }
  return at !== undefined;
}

function keptDirs(dir: ScannedDir, out = new Set<string>()): Set<string> {
  out.add(dir.path);
  for (const c of dir.children) if (c.type === 'dir') keptDirs(c, out);
  return out;
}

function parentOf(p: string): string {
  const i = p.lastIndexOf('/');
  return i < 0 ? '' : p.slice(0, i);
}
