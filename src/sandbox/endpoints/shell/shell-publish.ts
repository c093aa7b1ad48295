import { randomBytes } from 'node:crypto';
import { IntegrityError } from '../../../errors.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import { expectSuccess, groupByArgBytes, malformedAnswer, pathArg, runShell, SHELL_REBUILT_ITEMS } from './shell-exec.js';
import { parseStatLine, S_IFDIR, S_IFMT, STAT_FORMAT, statLines } from './stat-line.js';

/** How staging sits by the target: `beside` (a sibling, swapped by rename) or `inside` (the target is a mount point: entries move one by one). */
export type StagingLayout = 'beside' | 'inside';

/**
 * Looks at the target `$1` and prepares staging: prints `absent`, `empty`, `non-empty` or
 * `not-dir`, then the layout. `beside` when the target is absent or on the same device as its
 * parent (so it can be renamed) and the parent takes a new directory; `inside` otherwise (a
 * mount point, like a sandbox's /workspace). `$2` is the staging name, created owner-only.
 */
const BEGIN_SCRIPT = `
d "$1"; t=$p; d "$2"; s=$p
par=$(dirname "$t")
if [ -h "$t" ] || { [ -e "$t" ] && [ ! -d "$t" ]; }; then echo not-dir; exit 0; fi
if [ -d "$t" ]; then
  if [ -n "$(ls -A "$t" | grep -v '^\\.holdfast-stage-' | head -c 1)" ]; then echo non-empty; else echo empty; fi
else
  mkdir -p "$par" || exit 4
  echo absent
fi
if { [ ! -d "$t" ] || [ "$(stat -c %d "$t")" = "$(stat -c %d "$par")" ]; } && mkdir -m 700 "$par/$s" 2>/dev/null; then echo beside; exit 0; fi
mkdir -p "$t" && mkdir -m 700 "$t/$s" || exit 5
echo inside
`;

/**
 * Sets mtimes, then modes: `$1` base directory, `$2` nonce, `$3` stat format, `$4` the chmod
 * runs (`755:40 700:2`: modes of the paths, in order; see `chmodOrder`), then triples PATH MODE
 * TIME (an empty TIME leaves the mtime). Each mtime is set in order, then one `chmod` per run
 * (one process per mode, not per directory). Prints one stat line per path, the nonce.
 */
const APPLY_SCRIPT = `
d "$1"; cd "$p" || exit 3; n=$2; f=$3; m=$4; shift 4
k=$(($# / 3))
while [ "$k" -gt 0 ]; do
  d "$1"
  if [ -n "$3" ]; then touch -d "$3" "./$p" || exit 8; fi
  shift 3; set -- "$@" "./$p"; k=$((k-1))
done
i=1
for run in $m; do
  s=; j=0; k=\${run#*:}
  while [ $j -lt "$k" ]; do s="$s \\"\\\${$i}\\""; i=$((i+1)); j=$((j+1)); done
  eval "chmod \${run%%:*} $s" || exit 8
done
if [ $# -gt 0 ]; then stat -c "$f" "$@" || exit 11; fi
printf '%s\\n' "$n"
`;
/**
 * Swaps staging in. `$1` layout, `$2` target, `$3` staging, `$4` old-copy name. Beside: the
 * target (if any) is renamed to the old name, staging to the target, then the old copy is
 * removed. Inside: every entry of the target but Holdfast's own moves into the old directory
 * (owner write first, as moving a directory rewrites its `..`), then every staged entry into
 * the target, then the old directory is removed. The old copy is never removed before the new
 * one is in place. Prints `published`.
 */
const SWAP_SCRIPT = `
d "$2"; t=$p; d "$3"; s=$p; d "$4"; o=$p
gone() { chmod -R u+rwx "$1" 2>/dev/null; rm -rf "$1"; }
if [ "$1" = beside ]; then
  par=$(dirname "$t")
  if [ -e "$t" ] || [ -h "$t" ]; then chmod u+w "$t"; mv "$t" "$par/$o" || exit 6; fi
  mv "$par/$s" "$t" || exit 7
  gone "$par/$o"
else
  mkdir -m 700 "$t/$o" || exit 6
  for e in "$t"/* "$t"/.[!.]* "$t"/..?*; do
    case \${e##*/} in .holdfast-stage-*) continue ;; esac
    { [ -e "$e" ] || [ -h "$e" ]; } || continue
    [ -d "$e" ] && [ ! -h "$e" ] && chmod u+w "$e"
    mv "$e" "$t/$o/" || exit 7
  done
  for e in "$t/$s"/* "$t/$s"/.[!.]* "$t/$s"/..?*; do
    { [ -e "$e" ] || [ -h "$e" ]; } || continue
    mv "$e" "$t/" || exit 8
  done
  rmdir "$t/$s" || exit 9
  gone "$t/$o"
fi
echo published
`;

/** Removes staging (and an old copy a failed swap left): `$1` target, `$2` staging name, `$3` layout. */
const ABORT_SCRIPT = `
d "$1"; t=$p; d "$2"; s=$p
if [ "$3" = beside ]; then at=$(dirname "$t")/$s; else at=$t/$s; fi
if [ -e "$at" ]; then chmod -R u+rwx "$at" 2>/dev/null; rm -rf "$at" || exit 4; fi
echo aborted
`;

/** What `begin` found at the target. */
export interface BeginAnswer {
  readonly previous: 'absent' | 'empty' | 'non-empty' | 'not-dir';
  readonly layout: StagingLayout;
}

/** Looks at the target and creates staging (see BEGIN_SCRIPT). */
export async function beginInSandbox(handle: SandboxHandle, target: string, stagingName: string): Promise<BeginAnswer> {
  const out = expectSuccess(
    handle,
    'the restore begin',
    await runShell(handle, BEGIN_SCRIPT, [pathArg(target), pathArg(stagingName)], { maxOutputBytes: 256 }),
  ).stdout.toString('latin1');
  const m = /^(absent|empty|non-empty|not-dir)\n(?:(beside|inside)\n)?$/.exec(out);
  if (m === null) throw malformedAnswer('restore begin', 'unexpected words');
  return { previous: m[1] as BeginAnswer['previous'], layout: (m[2] ?? 'beside') as StagingLayout };
}

/** A directory (or the root, path `''`) to give its mode and mtime. */
export interface DirToApply {
  readonly path: string;
  readonly mode: number;
  /** Absent: the mtime is left as it is. */
  readonly mtimeMs?: number;
  readonly time?: string;
}

/**
 * Applies mtimes under `base` in the order given, then modes (see {@link chmodOrder}), and reads
 * each back: a mode or mtime the sandbox did not keep is `INTEGRITY` with `{path, field}`.
 */
export async function applyDirs(
  handle: SandboxHandle,
  base: string,
  dirs: readonly DirToApply[],
  mtimeKept: (wantMs: number, gotMs: number) => boolean,
): Promise<void> {
  const argsOf = (d: DirToApply) => [pathArg(d.path), d.mode.toString(8), d.time ?? ''];
  for (const given of groupByArgBytes(dirs, argsOf, 8 * 1024, SHELL_REBUILT_ITEMS)) {
    const { group, runs } = chmodOrder(given);
    const nonce = randomBytes(12).toString('hex');
    const args = [pathArg(base), nonce, STAT_FORMAT, runs, ...group.flatMap(argsOf)];
    const out = expectSuccess(
      handle,
      'setting directory modes',
      await runShell(handle, APPLY_SCRIPT, args, { maxOutputBytes: (group.length + 2) * 256 }),
    );
    const { lines } = statLines(out.stdout.toString('latin1'), nonce, group.length, 'directory modes');
    for (const [i, d] of group.entries()) {
      const st = parseStatLine(lines[i] as string, 'directory modes');
      const field =
        (st.mode & S_IFMT) !== S_IFDIR || (st.mode & 0o7777) !== d.mode
          ? 'mode'
          : d.mtimeMs !== undefined && !mtimeKept(d.mtimeMs, st.mtimeMs)
            ? 'mtime'
            : undefined;
      if (field !== undefined) {
        throw new IntegrityError('INTEGRITY', `the sandbox did not keep the ${field} of ${d.path === '' ? 'the root' : d.path}`, {
          data: { path: d.path, field },
        });
      }
    }
  }
}

/**
 * The order in which one exec of {@link APPLY_SCRIPT} sets `dirs`' modes, with one `chmod` per
 * run of equal modes (`755:40 700:2`): a mode change moves no mtime, and a directory keeps being
 * reachable while its owner may search it, so directories whose mode lets the owner search them
 * go first, grouped by mode; the others keep the order given (children before parents) and come
 * last, so none is made unreachable before what lies under it is done. Every mtime is set
 * before any mode, in that same order.
 */
function chmodOrder(dirs: readonly DirToApply[]): { group: DirToApply[]; runs: string } {
  const searchable = dirs.filter((d) => (d.mode & 0o100) !== 0).sort((a, b) => a.mode - b.mode);
  const group = [...searchable, ...dirs.filter((d) => (d.mode & 0o100) === 0)];
  const runs: string[] = [];
  for (let i = 0; i < group.length; ) {
    const mode = (group[i] as DirToApply).mode;
    let j = i;
    while (j < group.length && (group[j] as DirToApply).mode === mode) j += 1;
    runs.push(`${mode.toString(8)}:${j - i}`);
    i = j;
  }
  return { group, runs: runs.join(' ') };
}

/** Swaps staging in (see SWAP_SCRIPT). */
export async function swapInSandbox(
  handle: SandboxHandle,
  layout: StagingLayout,
  target: string,
  stagingName: string,
  oldName: string,
): Promise<void> {
  const out = expectSuccess(
    handle,
    'the restore publish',
    await runShell(handle, SWAP_SCRIPT, [layout, pathArg(target), pathArg(stagingName), pathArg(oldName)], { maxOutputBytes: 256 }),
  );
  if (out.stdout.toString('latin1') !== 'published\n') throw malformedAnswer('publish', 'unexpected words');
}

/** Removes staging; safe more than once. */
export async function abortInSandbox(handle: SandboxHandle, target: string, stagingName: string, layout: StagingLayout): Promise<void> {
  expectSuccess(
    handle,
    'the restore abort',
    await runShell(handle, ABORT_SCRIPT, [pathArg(target), pathArg(stagingName), layout], { maxOutputBytes: 256 }),
  );
}
