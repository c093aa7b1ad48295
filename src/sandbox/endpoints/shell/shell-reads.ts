import { randomBytes } from 'node:crypto';
import { permissionBits } from '../../../core/modes.js';
import { hasByteEscapes } from '../../../core/name-bytes.js';
import type { ScannedDir, ScannedFile } from '../../../workspace-fs/scan.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import { expectSuccess, groupByArgBytes, pathArg, runShell } from './shell-exec.js';
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

/** `$1` root, `$2` nonce, `$3` stat format, `$4` path, `$5` first MiB, `$6` MiB count: one piece, the nonce line, a stat line. */
const PIECE_SCRIPT = `
d "$1"; cd "$p" || exit 3; d "$4"
dd if="./$p" bs=1048576 skip="$5" count="$6" 2>/dev/null || exit 6
printf '\\n%s\\n' "$2"
stat -c "$3" "./$p"
`;

/** `$1` root, `$2` nonce, `$3` stat format, `$4` plain|coded, then paths: one stat line per path, the nonce, `ok` or `moved`. */
const STAT_SCRIPT = `
d "$1"; cd "$p" || exit 3; n=$2; f=$3
${DECODE_PATHS}
s=ok
stat -c "$f" "$@" 2>/dev/null || s=moved
printf '%s\\n%s\\n' "$n" "$s"
`;

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

/**
 * Reads whole files in bounded execs; yields each file's bytes, or `undefined` when it is not
 * exactly what the scan saw (the bytes are framed by the scanned sizes, so a file that changed
 * size, or a batch whose framing or stat after the read disagrees, counts as changed).
 */
export async function* readWhole(
  handle: SandboxHandle,
  root: string,
  files: readonly ScannedFile[],
): AsyncGenerator<[ScannedFile, Buffer | undefined]> {
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
      for (const f of group) yield [f, undefined];
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
    const out = expectSuccess(
      handle,
      'a file read',
      await runShell(handle, PIECE_SCRIPT, args, { maxOutputBytes: SHELL_READ_PIECE_BYTES + 2 * STAT_LINE_BYTES }),
    ).stdout;
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
