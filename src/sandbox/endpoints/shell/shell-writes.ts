import { randomBytes } from 'node:crypto';
import { bytesFromText } from '../../../core/name-bytes.js';
import { IntegrityError } from '../../../errors.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import {
  argBytes,
  expectSuccess,
  malformedAnswer,
  pathArg,
  runShell,
  SHELL_MAX_ARG_BYTES,
  SHELL_MAX_ARGV_BYTES,
  type ShellMode,
} from './shell-exec.js';
import { parseStatLine, S_IFMT, S_IFREG, STAT_FORMAT, type StatFields, statLines } from './stat-line.js';
import { tarCost, tarStream } from './tar-stream.js';

/** Raw bytes per base64 argument: a multiple of 3 (no padding inside a file) that encodes within {@link SHELL_MAX_ARG_BYTES}. */
export const ARG_RAW_BYTES = 3 * Math.floor((SHELL_MAX_ARG_BYTES - 8) / 4);
/** Argument bytes of a write exec kept for the script, staging path, nonce and runs. */
export const WRITE_FIXED_ARG_BYTES = 16 * 1024;
/** Raw file bytes one `args` exec carries at most. */
export const ARGS_EXEC_RAW_BYTES = Math.floor(((SHELL_MAX_ARGV_BYTES - WRITE_FIXED_ARG_BYTES) * 3) / 4) - 64 * 1024;
/**
 * Stdin bytes of one `stdin` exec of small files: the same bound as the agent's write batches
 * (4 MiB and {@link WRITE_EXEC_FILES} files), so what one batch may hold in flight is the same
 * whichever transport a sandbox gets.
 */
export const STDIN_EXEC_BYTES = 4 * 1024 * 1024;
/** Files completed per write exec (their verification is one `stat` and one `sha256sum`). */
export const WRITE_EXEC_FILES = 256;
/** dd block for stdin writes: whole blocks first, then the remainder. */
const DD_BLOCK_BYTES = 65536;

/**
 * Writes files into the staging directory `$1` (umask 077: owner-only until `chmod`). `$2` is
 * a nonce, `$3` the stat format, `$4` the chmod runs (`644:12 755:3`: modes of the completed
 * files, in order). Then ops, ended by a lone `--`:
 *   `w PATH Q R`  stdin's next Q blocks of 64 KiB and R bytes (dd reads exactly, never ahead);
 *   `b PATH K B64…` appends K base64 arguments, decoded by `base64 -d`;
 *   `T TIME`      sets the last path's mtime (`touch -d @…`) and completes it;
 *   `x`           extracts a tar stream of whole files from stdin (`tarStream`: one process for many files);
 *   `X K B64…`    extracts a tar stream from K base64 arguments;
 *   `t PATH TIME` sets a path's mtime (a time before 1970, which busybox tar cannot set);
 *   `P PATH`      completes a path a tar stream wrote.
 * Completed paths are kept after the `--` (the `set --` rotation, POSIX sh has no arrays). For
 * them it prints `sha256sum` lines, the nonce, one stat line each, the nonce.
 */
const WRITE_SCRIPT = `
d "$1"; cd "$p" || exit 3; n=$2; f=$3; m=$4; shift 4
umask 077
while [ "$1" != -- ]; do
  case $1 in
  w) d "$2"; q=$3; r=$4; shift 4
     : > "./$p" || exit 7
     if [ "$q" -gt 0 ]; then dd bs=${DD_BLOCK_BYTES} count="$q" iflag=fullblock 2>/dev/null >> "./$p" || exit 7; fi
     if [ "$r" -gt 0 ]; then dd bs="$r" count=1 iflag=fullblock 2>/dev/null >> "./$p" || exit 7; fi ;;
  b) d "$2"; k=$3; shift 3
     (i=0; while [ $i -lt "$k" ]; do printf %s "$1"; shift; i=$((i+1)); done) | base64 -d >> "./$p" || exit 7
     shift "$k" ;;
  T) touch -d "$2" "./$p" || exit 8; shift 2; set -- "$@" "./$p" ;;
  x) tar -xf - -C . 2>/dev/null || exit 7; shift ;;
  X) k=$2; shift 2
     (i=0; while [ $i -lt "$k" ]; do printf %s "$1"; shift; i=$((i+1)); done) | base64 -d | tar -xf - -C . 2>/dev/null || exit 7
     shift "$k" ;;
  t) d "$2"; touch -d "$3" "./$p" || exit 8; shift 3 ;;
  P) d "$2"; shift 2; set -- "$@" "./$p" ;;
  *) exit 2 ;;
  esac
done
shift
i=1
for run in $m; do
  s=; j=0; k=\${run#*:}
  while [ $j -lt "$k" ]; do s="$s \\"\\\${$i}\\""; i=$((i+1)); j=$((j+1)); done
  eval "chmod \${run%%:*} $s" || exit 9
done
if [ $# -gt 0 ]; then
  sha256sum "$@" || exit 10
  printf '%s\\n' "$n"
  stat -c "$f" "$@" || exit 11
fi
printf '%s\\n' "$n"
`;

/** One file of a write exec. */
export interface WriteItem {
  readonly path: string;
  readonly mode: number;
  readonly mtimeMs: number;
  /** `touch -d` argument. */
  readonly time: string;
  /** The file's bytes (stdin mode: sent on stdin; args mode: as base64 arguments). */
  readonly bytes: readonly Uint8Array[];
  readonly size: number;
  /** False for a piece of a large file that later execs go on appending to. */
  readonly complete: boolean;
  /** True when this exec continues a file an earlier exec began (append, do not truncate). */
  readonly append?: boolean;
}

/** One completed file as the sandbox read it back. */
export interface WrittenFile {
  readonly path: string;
  readonly sha256: string;
  readonly stat: StatFields;
}

/** Base64 arguments of raw bytes, each within {@link SHELL_MAX_ARG_BYTES}. */
function base64Args(raw: Buffer): string[] {
  const pieces: string[] = [];
  for (let at = 0; at < raw.length; at += ARG_RAW_BYTES) pieces.push(raw.subarray(at, at + ARG_RAW_BYTES).toString('base64'));
  return pieces;
}

/** The ops of one tar write exec: the stream (stdin, or base64 arguments), touches for times before 1970, then every path completed. */
function tarOpsOf(items: readonly WriteItem[], mode: ShellMode): { args: string[]; done: WriteItem[]; stdin?: Buffer[] } {
  const stream = tarStream(items);
  const args: string[] = [];
  let stdin: Buffer[] | undefined;
  if (mode === 'stdin') {
    args.push('x');
    stdin = stream;
  } else {
    const pieces = base64Args(Buffer.concat(stream));
    args.push('X', String(pieces.length), ...pieces);
  }
  for (const item of items) if (item.mtimeMs < 0) args.push('t', pathArg(item.path), item.time);
  for (const item of items) args.push('P', pathArg(item.path));
  return { args, done: [...items], ...(stdin === undefined ? {} : { stdin }) };
}

/** The ops and arguments of one write exec. */
function opsOf(items: readonly WriteItem[], mode: ShellMode): { args: string[]; done: WriteItem[] } {
  const args: string[] = [];
  const done: WriteItem[] = [];
  for (const item of items) {
    const p = pathArg(item.path);
    if (mode === 'stdin') {
      if (item.append === true) throw new Error('stdin writes stream a file whole');
      args.push('w', p, String(Math.floor(item.size / DD_BLOCK_BYTES)), String(item.size % DD_BLOCK_BYTES));
    } else {
      const pieces = base64Args(Buffer.concat(item.bytes as Uint8Array[]));
      // A fresh file starts empty even with no bytes: `b` with no pieces appends nothing to a new file.
      args.push('b', p, String(pieces.length), ...pieces);
    }
    if (item.complete) {
      args.push('T', item.time);
      done.push(item);
    }
  }
  return { args, done };
}

/** The chmod runs of completed files (they must be ordered so equal modes are adjacent for few runs). */
function modeRuns(done: readonly WriteItem[]): string {
  const runs: string[] = [];
  let last = -1;
  let count = 0;
  for (const d of done) {
    if (d.mode !== last && count > 0) {
      runs.push(`${last.toString(8)}:${count}`);
      count = 0;
    }
    last = d.mode;
    count += 1;
  }
  if (count > 0) runs.push(`${last.toString(8)}:${count}`);
  return runs.join(' ');
}

/**
 * Runs one write exec in `staging` and returns each completed file as the sandbox read it back
 * (its `sha256sum` and stat, for the caller to check). `stdin` mode streams the bytes; `args`
 * mode never passes stdin (every byte in arguments of bounded size).
 */
export async function writeInSandbox(
  handle: SandboxHandle,
  staging: string,
  items: readonly WriteItem[],
  mode: ShellMode,
  options: { readonly stdin?: AsyncIterable<Uint8Array>; readonly tar?: boolean; readonly signal?: AbortSignal | undefined } = {},
): Promise<WrittenFile[]> {
  const nonce = randomBytes(12).toString('hex');
  const ops: { args: string[]; done: WriteItem[]; stdin?: Buffer[] } = options.tar === true ? tarOpsOf(items, mode) : opsOf(items, mode);
  const { args, done } = ops;
  const all = [pathArg(staging), nonce, STAT_FORMAT, modeRuns(done), ...args, '--'];
  const tarInput = ops.stdin;
  const input: Iterable<Uint8Array> | AsyncIterable<Uint8Array> | undefined =
    mode === 'args' ? undefined : (tarInput ?? options.stdin ?? items.flatMap((i) => i.bytes));
  const out = expectSuccess(
    handle,
    'a file write',
    await runShell(handle, WRITE_SCRIPT, all, {
      maxOutputBytes: done.reduce((n, d) => n + 2 * bytesFromText(d.path).length + 400, 256),
      ...(input === undefined ? {} : { stdin: input }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    }),
  ).stdout;
  return parseWriteAnswer(
    out,
    nonce,
    done.map((d) => d.path),
  );
}

/** Parses `sha256sum` lines (GNU escapes odd names with a leading `\`, busybox prints them raw) and the stat lines. */
export function parseWriteAnswer(out: Buffer, nonce: string, paths: readonly string[]): WrittenFile[] {
  if (paths.length === 0) {
    if (out.toString('latin1') !== `${nonce}\n`) throw malformedAnswer('write', 'an empty write printed something');
    return [];
  }
  let pos = 0;
  const hashes: string[] = [];
  for (const p of paths) {
    const escaped = out[pos] === 0x5c;
    if (escaped) pos += 1;
    const hex = out.toString('latin1', pos, pos + 64);
    if (!/^[0-9a-f]{64}$/.test(hex) || out.toString('latin1', pos + 64, pos + 66) !== '  ')
      throw malformedAnswer('write', 'a sha256sum line is malformed');
    pos += 66;
    if (escaped) {
      const nl = out.indexOf(0x0a, pos);
      if (nl < 0) throw malformedAnswer('write', 'a sha256sum line has no end');
      pos = nl + 1;
    } else {
      const name = Buffer.concat([Buffer.from('./'), bytesFromText(p), Buffer.from('\n')]);
      if (!out.subarray(pos, pos + name.length).equals(name)) throw malformedAnswer('write', 'a sha256sum line names another file');
      pos += name.length;
    }
    hashes.push(hex);
  }
  const text = out.toString('latin1', pos);
  if (!text.startsWith(`${nonce}\n`)) throw malformedAnswer('write', 'the hash section has no end');
  const { lines, rest } = statLines(text.slice(nonce.length + 1), nonce, paths.length, 'write');
  if (nonce.length + 1 + rest !== text.length) throw malformedAnswer('write', 'the answer goes on after its end');
  return paths.map((p, i) => ({ path: p, sha256: hashes[i] as string, stat: parseStatLine(lines[i] as string, 'write') }));
}

/** The check of a completed file where it landed: its bytes, mode and mtime, each `INTEGRITY` with `{path, field}`. */
export function checkWritten(
  written: WrittenFile,
  want: { readonly sha256: string; readonly mode: number; readonly mtimeMs: number },
  mtimeKept: (wantMs: number, gotMs: number) => boolean,
): void {
  const { stat } = written;
  const field =
    written.sha256 !== want.sha256 || (stat.mode & S_IFMT) !== S_IFREG
      ? 'content'
      : (stat.mode & 0o7777) !== want.mode
        ? 'mode'
        : !mtimeKept(want.mtimeMs, stat.mtimeMs)
          ? 'mtime'
          : undefined;
  if (field === undefined) return;
  throw new IntegrityError('INTEGRITY', `the sandbox did not keep the ${field} of ${written.path}`, {
    data: { path: written.path, field },
  });
}

/** Argument bytes a write item costs in an exec (for batching): its path, ops and, in args mode, its bytes as base64. */
export function argCost(item: Pick<WriteItem, 'path' | 'size'>, mode: ShellMode, tar: boolean): number {
  const base = argBytes(pathArg(item.path)) + 48;
  const raw = tar ? tarCost(item) : item.size;
  return mode === 'args' ? base + Math.ceil(raw / 3) * 4 + Math.ceil(raw / ARG_RAW_BYTES + 1) * 2 : base;
}
