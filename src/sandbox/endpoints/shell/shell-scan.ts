import { randomBytes } from 'node:crypto';
import { textFromBytes } from '../../../core/name-bytes.js';
import { ConflictError } from '../../../errors.js';
import { CACHE_EXCLUDES } from '../../../rules/builtin-excludes.js';
import type { ExcludeOptions, ExcludeRules, Exclusion } from '../../../rules/excludes.js';
import { INFO_EXCLUDE_PATH, ignoreText } from '../../../rules/ignore-files.js';
import type { ScanLimits, ScannedDir, ScanResult } from '../../../workspace-fs/scan.js';
import { maxScanBytes } from '../../agent/host/agent-client.js';
import { checkAgentScan } from '../../agent/host/scan-check.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import { expectSuccess, MAKE_SCRATCH_FILE, malformedAnswer, pathArg, runShell } from './shell-exec.js';
import { readIgnoreFiles } from './shell-ignore-files.js';
import { parseStatLine, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG, STAT_FORMAT, type StatFields, statLines } from './stat-line.js';

/** Scans made before giving up on a tree whose entries keep vanishing under `stat`. */
export const SHELL_SCAN_ATTEMPTS = 3;

/**
 * Walks the tree at `$1` and prints, in this order: the sandbox's clock (epoch seconds, with
 * nanoseconds where `date` has `%N`: busybox prints the `%N` as it is); the
 * byte length of the name list; the list (`find -print0`: names are bytes, NUL-framed); one
 * stat line per name, in list order; the nonce `$2`; each symlink's target and a newline, in
 * list order (its length is its stat size); the nonce; `ok`, or `moved` when an entry
 * vanished between `find` and `stat`/`readlink` (the host scans again). Arguments from `$4` on
 * are directory names excluded at every depth (`node_modules`, …): listed, never descended,
 * so the host reports them excluded without the sandbox walking them.
 */
const SCAN_SCRIPT = `
d "$1"; cd "$p" || exit 3
n=$2; f=$3; shift 3
o=
for x do shift; set -- "$@" $o -name "$x"; o=-o; done
${MAKE_SCRATCH_FILE}
trap 'rm -f "$t"' EXIT
date +%s.%N
if [ $# -gt 0 ]; then find . \\( "$@" \\) -type d -prune -print0 -o -print0 > "$t" || exit 5
else find . -print0 > "$t" || exit 5; fi
wc -c < "$t"
cat "$t"
s=ok
xargs -0 stat -c "$f" < "$t" 2>/dev/null || s=moved
printf '%s\\n' "$n"
xargs -0 sh -c 'for l do if [ -h "$l" ]; then readlink "$l" || exit 1; fi; done' sh < "$t" 2>/dev/null || s=moved
printf '%s\\n%s\\n' "$n" "$s"
`;

/**
 * Directory names the rules exclude at every depth whatever their parent: the cache
 * directories, unless `include` patterns could reopen one (then everything is walked).
 */
function prunedNames(excludes: ExcludeOptions | undefined, rules: ExcludeRules): string[] {
  if ((excludes?.include?.length ?? 0) > 0) return [];
  const top = rules.enter('');
  return CACHE_EXCLUDES.filter((r) => /^[^/*?[\\]+\/$/.test(r))
    .map((r) => r.slice(0, -1))
    .filter((name) => top.match(name, true) !== undefined);
}

type WireEntry = Record<string, unknown> & { children?: WireEntry[] };

/**
 * Scans `root` in the sandbox with a shell, `find` and `stat`, and checks the answer with the
 * rules of a local scan ({@link checkAgentScan}, the same check an agent's answer gets): the
 * sandbox is untrusted, so an answer that no real tree gives (an entry whose parent is not a
 * directory, an empty, `.` or `..` segment, a stat line count that differs from the names) is
 * `INTEGRITY`, one longer than the limits allow `LIMIT_EXCEEDED`. Sockets, FIFOs and devices
 * are left out as `special-file`. With `gitignore`, the `.gitignore` files the listing holds
 * (regular files, outside `.git`) and `.git/info/exclude` are fetched in one batched read
 * ({@link readIgnoreFiles}) and applied by the host's walk of the listing, before any file is
 * read, so the result is the one a local or agent scan gives; one over the bound is
 * `LIMIT_EXCEEDED`.
 */
export async function shellScan(
  handle: SandboxHandle,
  root: string,
  excludes: ExcludeOptions | undefined,
  rules: ExcludeRules,
  limits: ScanLimits,
): Promise<ScanResult> {
  const pruned = prunedNames(excludes, rules);
  for (let attempt = 1; attempt <= SHELL_SCAN_ATTEMPTS; attempt += 1) {
    const nonce = randomBytes(12).toString('hex');
    const result = expectSuccess(
      handle,
      'the workspace scan',
      await runShell(handle, SCAN_SCRIPT, [pathArg(root), nonce, STAT_FORMAT, ...pruned], { maxOutputBytes: maxScanBytes(limits) }),
    );
    const wire = parseScanAnswer(result.stdout, nonce);
    if (wire === 'moved') continue;
    const texts = rules.readsGitignore ? await ignoreTexts(handle, root, wire.tree.root) : undefined;
    const { scan } = checkAgentScan(wire.tree, rules, limits, root, texts);
    const kept = keptDirs(scan.root);
    const specials = wire.specials.filter((e) => kept.has(parentOf(e.path)));
    return { ...scan, excluded: [...scan.excluded, ...specials] };
  }
  throw new ConflictError('WORKSPACE_CHANGED', `sandbox ${handle.id}:${root} kept changing during ${SHELL_SCAN_ATTEMPTS} scans`, {
    data: { attempts: SHELL_SCAN_ATTEMPTS },
  });
}

/** The ignore text of each directory of the listing that has one, as `checkAgentScan` takes them. */
async function ignoreTexts(handle: SandboxHandle, root: string, top: WireEntry): Promise<Map<string, string>> {
  const files = [...gitignoresOf(top, ''), INFO_EXCLUDE_PATH];
  const read = await readIgnoreFiles(handle, root, files);
  const out = new Map<string, string>();
  for (const [file, text] of read) if (file !== INFO_EXCLUDE_PATH) out.set(parentOf(file), text);
  const atRoot = ignoreText('', out.get(''), read.get(INFO_EXCLUDE_PATH));
  if (atRoot !== undefined) out.set('', atRoot);
  return out;
}

/** Paths of the regular `.gitignore` files in a listed tree, outside any `.git` directory (git reads none there). */
function gitignoresOf(dir: WireEntry, prefix: string, out: string[] = []): string[] {
  for (const e of dir.children ?? []) {
    if (typeof e.name !== 'string') continue;
    if (e.type === 'file' && e.name === '.gitignore') out.push(`${prefix}.gitignore`);
    else if (e.type === 'dir' && e.name !== '.git') gitignoresOf(e, `${prefix}${e.name}/`, out);
  }
  return out;
}

/** What one scan answer holds: the tree in the shape an agent reports it, and the special files left out. */
export interface ScanAnswer {
  readonly tree: { startedAtMs: number; root: WireEntry };
  readonly specials: Exclusion[];
}

/** Parses the scan script's output (exported for the attack tests); `moved` when it says an entry vanished. */
export function parseScanAnswer(out: Buffer, nonce: string): ScanAnswer | 'moved' {
  const tail = `\n${nonce}\n`;
  const at = out.lastIndexOf(tail);
  const status = at < 0 ? '' : out.subarray(at + tail.length).toString('latin1');
  if (status === 'moved\n') return 'moved';
  if (status !== 'ok\n') throw malformedAnswer('scan', 'no status at the end');
  let pos = 0;
  const line = (): string => {
    const nl = out.indexOf(0x0a, pos);
    if (nl < 0 || nl - pos > 24) throw malformedAnswer('scan', 'a header line is missing');
    const text = out.toString('latin1', pos, nl).trim();
    pos = nl + 1;
    return text;
  };
  const clock = line();
  const listBytes = line();
  const time = /^(\d{1,15})\.(?:(\d{9})|%N)$/.exec(clock);
  if (time === null || !/^\d{1,15}$/.test(listBytes)) throw malformedAnswer('scan', 'a header number is malformed');
  const listEnd = pos + Number(listBytes);
  if (listEnd > at || out[listEnd - 1] !== 0) throw malformedAnswer('scan', 'the name list is cut short');
  const names = splitNul(out.subarray(pos, listEnd));
  const afterList = out.toString('latin1', listEnd, at + tail.length);
  const { lines, rest } = statLines(afterList, nonce, names.length, 'scan');
  const stats = lines.map((l) => parseStatLine(l, 'scan'));
  const targets = { buf: out, pos: listEnd + rest, end: at + 1 };
  const built = buildTree(names, stats, targets);
  if (targets.pos !== targets.end) throw malformedAnswer('scan', 'the symlink targets do not match their sizes');
  // The sandbox's own clock, as its mtimes: a file changed in the second before the scan began is racy.
  const startedAtMs = Number(time[1]) * 1000 + (time[2] === undefined ? 0 : Math.floor(Number(time[2]) / 1e6));
  return { tree: { startedAtMs, root: built.root }, specials: built.specials };
}

function splitNul(list: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let start = 0; start < list.length; ) {
    const end = list.indexOf(0, start);
    out.push(list.subarray(start, end));
    start = end + 1;
  }
  return out;
}

/** Builds the agent-shaped tree from the list, its stat lines and the targets section (consumed in place). */
function buildTree(
  names: readonly Buffer[],
  stats: readonly StatFields[],
  targets: { buf: Buffer; pos: number; end: number },
): { root: WireEntry; specials: Exclusion[] } {
  const first = stats[0];
  if (names[0]?.toString('latin1') !== '.' || first === undefined || (first.mode & S_IFMT) !== S_IFDIR)
    throw malformedAnswer('scan', 'the list does not start with the root directory');
  const root = dirEntry('', first);
  const dirs = new Map<string, WireEntry>([['', root]]);
  const specials: Exclusion[] = [];
  for (let i = 1; i < names.length; i += 1) {
    const raw = names[i] as Buffer;
    const st = stats[i] as StatFields;
    if (raw.length < 3 || raw[0] !== 0x2e || raw[1] !== 0x2f) throw malformedAnswer('scan', 'a path is not under the root');
    const rel = raw.subarray(2);
    const slash = rel.lastIndexOf(0x2f);
    const nameBytes = rel.subarray(slash + 1);
    const parentKey = slash < 0 ? '' : rel.toString('latin1', 0, slash);
    const nameKey = nameBytes.toString('latin1');
    // find never prints an empty, `.` or `..` segment, and lists a directory before what it holds.
    if (nameKey === '' || nameKey === '.' || nameKey === '..') throw malformedAnswer('scan', 'a path has an empty, "." or ".." segment');
    const parent = dirs.get(parentKey);
    if (parent === undefined) throw malformedAnswer('scan', 'an entry is listed outside any directory of the list');
    const name = textFromBytes(nameBytes);
    const type = st.mode & S_IFMT;
    let entry: WireEntry;
    if (type === S_IFDIR) {
      entry = dirEntry(name, st);
      dirs.set(rel.toString('latin1'), entry);
    } else if (type === S_IFREG) {
      entry = { type: 'file', name, mode: st.mode & 0o7777, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino };
      if (st.nlink > 1) entry.dev = st.dev;
    } else if (type === S_IFLNK) {
      const end = targets.pos + st.size;
      if (end >= targets.end || targets.buf[end] !== 0x0a) throw malformedAnswer('scan', 'a symlink target does not match its size');
      entry = { type: 'symlink', name, target: textFromBytes(targets.buf.subarray(targets.pos, end)), mtimeMs: st.mtimeMs };
      targets.pos = end + 1;
    } else {
      specials.push({ path: textFromBytes(rel), reason: 'special-file', rule: 'socket, FIFO or device' });
      continue;
    }
    (parent.children as WireEntry[]).push(entry);
  }
  return { root, specials };
}

function dirEntry(name: string, st: StatFields): WireEntry {
  return { type: 'dir', name, mode: st.mode & 0o7777, mtimeMs: st.mtimeMs, exactMtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, children: [] };
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
