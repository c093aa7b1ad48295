import { randomBytes } from 'node:crypto';
import { permissionBits } from '../../../core/modes.js';
import { hasByteEscapes } from '../../../core/name-bytes.js';
import { HoldfastError } from '../../../errors.js';
import type { ScannedDir, ScannedFile } from '../../../workspace-fs/scan.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import { expectSuccess, groupByArgBytes, malformedAnswer, pathArg, runShell } from './shell-exec.js';
import { parseStatLine, S_IFDIR, S_IFMT, S_IFREG, STAT_FORMAT, type StatFields, statLines } from './stat-line.js';

/** Bytes of one piece of a large file: one exec each. */
export const SHELL_READ_PIECE_BYTES = 16 * 1024 * 1024;
/** Stat line bytes allowed per path in an answer (a real line is under 150). */
const STAT_LINE_BYTES = 256;
/** Fixed argument bytes of a read (script, root, nonce, format), bounded generously. */
const READ_FIXED_ARG_BYTES = 8 * 1024;

/**
 * With `$4` = `coded`, turns the arguments from the 5th on into `./path` parameters (`d`
 * decodes each). Rebuilding the list costs the square of its length in sh, so only the rare
 * groups of byte-escaped names are coded, at most {@link MAX_CODED_PATHS} each; plain names
 * come as `./path` already (`plain`).
 */
export const DECODE_PATHS = `e=$4; shift 4; if [ "$e" = coded ]; then k=$#; while [ "$k" -gt 0 ]; do d "$1"; shift; set -- "$@" "./$p"; k=$((k-1)); done; fi`;
/** Byte-escaped paths decoded per exec (see {@link DECODE_PATHS}). */
const MAX_CODED_PATHS = 128;

/**
 * `items` in exec-sized groups with their path arguments: plain names (the common case) as
 * `./path`, names holding byte escapes in small groups of their own, decoded in the sandbox
 * ({@link DECODE_PATHS}); no group holds more than `maxItems`.
 */
export function pathGroups<T>(
  items: readonly T[],
  pathOf: (item: T) => string,
  maxItems = Infinity,
): Array<{ items: T[]; encoding: 'plain' | 'coded'; args: string[] }> {
  const plain = items.filter((i) => !hasByteEscapes(pathOf(i)));
  const coded = items.filter((i) => hasByteEscapes(pathOf(i)));
  const plainArg = (i: T) => `./${pathOf(i)}`;
  const codedArg = (i: T) => pathArg(pathOf(i));
  return [
    ...groupByArgBytes(plain, (i) => [plainArg(i)], READ_FIXED_ARG_BYTES, maxItems).map((g) => ({
      items: g,
      encoding: 'plain' as const,
      args: g.map(plainArg),
    })),
    ...groupByArgBytes(coded, (i) => [codedArg(i)], READ_FIXED_ARG_BYTES, Math.min(MAX_CODED_PATHS, maxItems)).map((g) => ({
      items: g,
      encoding: 'coded' as const,
      args: g.map(codedArg),
    })),
  ];
}

/**
 * `$1` root, `$2` nonce, `$3` stat format, `$4` plain|coded, then paths. Prints the files' bytes back to back,
 * a newline and the nonce line, one stat line per file taken after the read, the nonce, and
 * `ok`, or `moved` when a file could not be read or stated (the host treats the batch as changed).
 */
const READ_SCRIPT = `
d "$1"; cd "$p" || exit 3; n=$2; f=$3
${DECODE_PATHS}
s=ok
cat "$@" 2>/dev/null || s=moved
printf '\\n%s\\n' "$n"
stat -c "$f" "$@" 2>/dev/null || s=moved
printf '%s\\n%s\\n' "$n" "$s"
`;

/** Exit status of a piece read whose file the sandbox user may not read. */
const UNREADABLE_EXIT = 13;

/**
 * `$1` root, `$2` nonce, `$3` stat format, `$4` path, `$5` first MiB, `$6` MiB count: one
 * piece, the nonce line, a stat line; exit {@link UNREADABLE_EXIT} for a file it may not read.
 */
const PIECE_SCRIPT = `
d "$1"; cd "$p" || exit 3; d "$4"
[ -f "./$p" ] && [ ! -r "./$p" ] && exit ${UNREADABLE_EXIT}
dd if="./$p" bs=1048576 skip="$5" count="$6" 2>/dev/null || exit 6
printf '\\n%s\\n' "$2"
stat -c "$3" "./$p"
`;

/**
 * `$1` root, `$2` nonce, `$3` unused, `$4` plain|coded, then paths: a line per path, `u` for a
 * regular file the sandbox user may not read (`test -r`, the access check of its own `open`),
 * `r` otherwise; then the nonce. Asked only after a batch read failed.
 */
const ACCESS_SCRIPT = `
d "$1"; cd "$p" || exit 3; n=$2
${DECODE_PATHS}
for x; do if [ -f "$x" ] && [ ! -r "$x" ]; then echo u; else echo r; fi; done
printf '%s\\n' "$n"
`;

/** `$1` root, `$2` nonce, `$3` stat format, `$4` plain|coded, then paths: one stat line per path, the nonce, `ok` or `moved`. */
const STAT_SCRIPT = `
d "$1"; cd "$p" || exit 3; n=$2; f=$3
${DECODE_PATHS}
s=ok
stat -c "$f" "$@" 2>/dev/null || s=moved
printf '%s\\n%s\\n' "$n" "$s"
`;

/** The files of a failed batch read that the sandbox user may not read, by {@link ACCESS_SCRIPT}. */
async function unreadableOf(
  handle: SandboxHandle,
  root: string,
  group: readonly ScannedFile[],
  encoding: 'plain' | 'coded',
  paths: readonly string[],
): Promise<Set<ScannedFile>> {
  const nonce = randomBytes(12).toString('hex');
  const args = [pathArg(root), nonce, '-', encoding, ...paths];
  const ran = await runShell(handle, ACCESS_SCRIPT, args, { maxOutputBytes: 2 * group.length + 64 });
  const text = expectSuccess(handle, 'a read-access check', ran).stdout.toString('latin1');
  const lines = text.split('\n');
  if (lines.length !== group.length + 2 || lines[group.length] !== nonce || lines[group.length + 1] !== '') {
    throw malformedAnswer('read-access check', `expected ${group.length} lines and the nonce`);
  }
  const locked = new Set<ScannedFile>();
  for (const [i, f] of group.entries()) {
    const mark = lines[i];
    if (mark === 'u') locked.add(f);
    else if (mark !== 'r') throw malformedAnswer('read-access check', `line ${i + 1} is neither r nor u`);
  }
  return locked;
}

/** True when a file's stat now is the one its scan recorded (the checks of a local second look). */
export function sameFile(st: StatFields, f: ScannedFile): boolean {
  return (
    (st.mode & S_IFMT) === S_IFREG &&
    st.size === f.size &&
    st.mtimeMs === f.mtimeMs &&
    st.ctimeMs === f.ctimeMs &&
    st.ino === f.ino &&
    permissionBits(st.mode) === permissionBits(f.mode)
  );
}

function sameDir(st: StatFields, d: ScannedDir): boolean {
  return (st.mode & S_IFMT) === S_IFDIR && st.mtimeMs === d.exactMtimeMs && st.ctimeMs === d.ctimeMs && permissionBits(st.mode) === d.mode;
}

/** One file as {@link readWhole} yields it: its bytes, or none with the errno of a file the sandbox user may not read. */
export type ShellRead = readonly [file: ScannedFile, bytes: Buffer | undefined, errno?: 'EACCES'];

/**
 * Reads whole files in bounded execs; yields each file's bytes, or `undefined` when it is not
 * exactly what the scan saw (the bytes are framed by the scanned sizes, so a file that changed
 * size, or a batch whose framing or stat after the read disagrees, counts as changed). When a
 * batch fails, its files are checked for read access: those the sandbox user may not read come
 * back with `EACCES` (the checkpoint fails or skips them by its policy), the others are read
 * again without them, so one locked file never reads as a workspace that keeps changing.
 */
export async function* readWhole(handle: SandboxHandle, root: string, files: readonly ScannedFile[]): AsyncGenerator<ShellRead> {
  for (const { items: group, encoding, args: paths } of pathGroups(files, (f) => f.path)) {
    const nonce = randomBytes(12).toString('hex');
    const total = group.reduce((n, f) => n + f.size, 0);
    const maxOutputBytes = total + (group.length + 4) * STAT_LINE_BYTES;
    const args = [pathArg(root), nonce, STAT_FORMAT, encoding, ...paths];
    const out = expectSuccess(handle, 'a file read', await runShell(handle, READ_SCRIPT, args, { maxOutputBytes })).stdout;
    const mark = Buffer.from(`\n${nonce}\n`);
    const framed = out.length >= total + mark.length && out.subarray(total, total + mark.length).equals(mark);
    const text = framed ? out.toString('latin1', total + mark.length) : '';
    if (!framed || !text.endsWith(`${nonce}\nok\n`)) {
      const locked = await unreadableOf(handle, root, group, encoding, paths);
      for (const f of group) if (locked.has(f)) yield [f, undefined, 'EACCES'];
      const rest = group.filter((f) => !locked.has(f));
      // Fewer files each time: the batch read again without the locked ones ends.
      if (locked.size > 0) yield* readWhole(handle, root, rest);
      else for (const f of rest) yield [f, undefined];
      continue;
    }
    const { lines } = statLines(text, nonce, group.length, 'file read');
    let at = 0;
    for (const [i, f] of group.entries()) {
      const bytes = out.subarray(at, at + f.size);
      at += f.size;
      yield [f, sameFile(parseStatLine(lines[i] as string, 'file read'), f) ? Buffer.from(bytes) : undefined];
    }
  }
}

/**
 * Streams one file in pieces of {@link SHELL_READ_PIECE_BYTES} (one exec each), never more
 * than its scanned size plus one piece; stops early when a piece comes back short or the
 * file's stat moved (the caller sees a size that differs from the scan).
 */
export async function* readPieces(handle: SandboxHandle, root: string, file: ScannedFile): AsyncGenerator<Buffer> {
  const mib = SHELL_READ_PIECE_BYTES / (1024 * 1024);
  for (let offset = 0; offset < file.size; offset += SHELL_READ_PIECE_BYTES) {
    const nonce = randomBytes(12).toString('hex');
    const expected = Math.min(SHELL_READ_PIECE_BYTES, file.size - offset);
    const args = [pathArg(root), nonce, STAT_FORMAT, pathArg(file.path), String(offset / (1024 * 1024)), String(mib)];
    const ran = await runShell(handle, PIECE_SCRIPT, args, { maxOutputBytes: SHELL_READ_PIECE_BYTES + 2 * STAT_LINE_BYTES });
    if (ran.code === UNREADABLE_EXIT && !ran.timedOut) {
      // As the agent's stream says it: the checkpoint fails or skips the file by its policy.
      throw new HoldfastError('FORBIDDEN', `[shell] ${file.path} cannot be read by the sandbox user (EACCES)`, {
        data: { path: file.path, errno: 'EACCES' },
      });
    }
    const out = expectSuccess(handle, 'a file read', ran).stdout;
    const mark = Buffer.from(`\n${nonce}\n`);
    const framed = out.length > expected + mark.length && out.subarray(expected, expected + mark.length).equals(mark);
    const line = framed ? out.toString('latin1', expected + mark.length).replace(/\n$/, '') : '';
    if (!framed || !sameFile(parseStatLine(line, 'file read'), file)) {
      // Short or moved: hand back one byte too many, so the size differs and the checkpoint scans again.
      yield Buffer.alloc(file.size - offset + 1);
      return;
    }
    yield Buffer.from(out.subarray(0, expected));
  }
}

/** The second look: every directory, and each file `wasRead`, stated again and compared with the scan. */
export async function unchangedInSandbox(
  handle: SandboxHandle,
  root: string,
  top: ScannedDir,
  wasRead: (p: string) => boolean,
): Promise<boolean> {
  const items: Array<ScannedDir | ScannedFile> = [];
  const walk = (dir: ScannedDir): void => {
    items.push(dir);
    for (const e of dir.children) {
      if (e.type === 'dir') walk(e);
      else if (e.type === 'file' && wasRead(e.path)) items.push(e);
    }
  };
  walk(top);
  for (const { items: group, encoding, args: paths } of pathGroups(items, (e) => e.path)) {
    const nonce = randomBytes(12).toString('hex');
    const args = [pathArg(root), nonce, STAT_FORMAT, encoding, ...paths];
    const out = expectSuccess(
      handle,
      'the second look',
      await runShell(handle, STAT_SCRIPT, args, { maxOutputBytes: (group.length + 4) * STAT_LINE_BYTES }),
    ).stdout.toString('latin1');
    if (!out.endsWith(`${nonce}\nok\n`)) return false;
    const { lines } = statLines(out, nonce, group.length, 'second look');
    for (const [i, e] of group.entries()) {
      const st = parseStatLine(lines[i] as string, 'second look');
      if (e.type === 'dir' ? !sameDir(st, e) : !sameFile(st, e)) return false;
    }
  }
  return true;
}

/** Each path's stat under `root` now, in order; undefined when one could not be stated (it moved). */
export async function statInSandbox(handle: SandboxHandle, root: string, paths: readonly string[]): Promise<StatFields[] | undefined> {
  const out: StatFields[] = new Array(paths.length);
  for (const { items: group, encoding, args: groupArgs } of pathGroups([...paths.keys()], (i) => paths[i] as string)) {
    const nonce = randomBytes(12).toString('hex');
    const args = [pathArg(root), nonce, STAT_FORMAT, encoding, ...groupArgs];
    const text = expectSuccess(
      handle,
      'a stat',
      await runShell(handle, STAT_SCRIPT, args, { maxOutputBytes: (group.length + 4) * STAT_LINE_BYTES }),
    ).stdout.toString('latin1');
    if (!text.endsWith(`${nonce}\nok\n`)) return undefined;
    const lines = statLines(text, nonce, group.length, 'stat').lines;
    for (const [k, i] of group.entries()) out[i] = parseStatLine(lines[k] as string, 'stat');
  }
  return out;
}
