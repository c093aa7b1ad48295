import { randomBytes } from 'node:crypto';
import { bytesFromText } from '../../../core/name-bytes.js';
import { IntegrityError } from '../../../errors.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import { expectSuccess, groupByArgBytes, malformedAnswer, pathArg, runShell, SHELL_REBUILT_ITEMS } from './shell-exec.js';
import { parseStatLine, S_IFLNK, S_IFMT, STAT_FORMAT, statLines } from './stat-line.js';

/** Fixed argument bytes of these execs (script, staging, nonce, format), bounded generously. */
const FIXED_ARG_BYTES = 8 * 1024;
/** Output bytes allowed per stat line. */
const STAT_LINE_BYTES = 256;

/** `$1` staging, then directory paths, parents first: `mkdir -m 700` each (owner-only until publish). */
const MKDIR_SCRIPT = `
d "$1"; cd "$p" || exit 3; shift
k=$#; while [ "$k" -gt 0 ]; do d "$1"; shift; set -- "$@" "./$p"; k=$((k-1)); done
mkdir -m 700 "$@" || exit 7
echo made
`;

/** `$1` staging, `$2` nonce, `$3` stat format, then pairs LEADER MEMBER: `ln` each, then a stat line for every leader and member, the nonce. */
const LINK_SCRIPT = `
d "$1"; cd "$p" || exit 3; n=$2; f=$3; shift 3
k=$(($# / 2))
while [ "$k" -gt 0 ]; do
  d "$1"; l=./$p; d "$2"; ln "$l" "./$p" || exit 7
  shift 2; set -- "$@" "$l" "./$p"; k=$((k-1))
done
stat -c "$f" "$@" || exit 11
printf '%s\\n' "$n"
`;

/**
 * `$1` staging, `$2` nonce, `$3` stat format, then triples PATH TARGET TIME: `ln -s` each and
 * set its own mtime (`touch -h`). Prints a stat line per link, the nonce, each link's target
 * as `readlink` reads it and a newline, the nonce.
 */
const SYMLINK_SCRIPT = `
d "$1"; cd "$p" || exit 3; n=$2; f=$3; shift 3
k=$(($# / 3))
while [ "$k" -gt 0 ]; do
  d "$1"; l=./$p; d "$2"
  ln -s -- "$p" "$l" && touch -h -d "$3" "$l" || exit 7
  shift 3; set -- "$@" "$l"; k=$((k-1))
done
stat -c "$f" "$@" || exit 11
printf '%s\\n' "$n"
for l do readlink "$l" || exit 12; done
printf '%s\\n' "$n"
`;

/** Creates directories in staging, parents first, owner-only. */
export async function mkdirsInSandbox(handle: SandboxHandle, staging: string, dirs: readonly string[]): Promise<void> {
  for (const group of groupByArgBytes(dirs, (d) => [pathArg(d)], FIXED_ARG_BYTES, SHELL_REBUILT_ITEMS)) {
    const out = expectSuccess(
      handle,
      'creating directories',
      await runShell(handle, MKDIR_SCRIPT, [pathArg(staging), ...group.map(pathArg)], { maxOutputBytes: 64 }),
    );
    if (out.stdout.toString('latin1') !== 'made\n') throw malformedAnswer('mkdir', 'unexpected words');
  }
}

/** Makes each member a hard link to its leader and checks both name one inode (`INTEGRITY`, field `hardlink`). */
export async function linkInSandbox(
  handle: SandboxHandle,
  staging: string,
  pairs: ReadonlyArray<{ path: string; leader: string }>,
): Promise<void> {
  const argsOf = (m: { path: string; leader: string }) => [pathArg(m.leader), pathArg(m.path)];
  for (const group of groupByArgBytes(pairs, argsOf, FIXED_ARG_BYTES, SHELL_REBUILT_ITEMS)) {
    const nonce = randomBytes(12).toString('hex');
    const out = expectSuccess(
      handle,
      'hard links',
      await runShell(handle, LINK_SCRIPT, [pathArg(staging), nonce, STAT_FORMAT, ...group.flatMap(argsOf)], {
        maxOutputBytes: (2 * group.length + 2) * STAT_LINE_BYTES,
      }),
    );
    const { lines } = statLines(out.stdout.toString('latin1'), nonce, 2 * group.length, 'hard links');
    for (const [i, m] of group.entries()) {
      const leader = parseStatLine(lines[2 * i] as string, 'hard links');
      const member = parseStatLine(lines[2 * i + 1] as string, 'hard links');
      if (leader.ino !== member.ino || leader.dev !== member.dev) {
        throw new IntegrityError('INTEGRITY', `hard link ${m.path} does not name ${m.leader}'s inode`, {
          data: { path: m.path, field: 'hardlink' },
        });
      }
    }
  }
}

/** A symlink to create, with the `touch -d` argument for its mtime. */
export interface SymlinkToMake {
  readonly path: string;
  readonly target: string;
  readonly mtimeMs: number;
  readonly time: string;
}

/** Creates symlinks with their mtimes and checks each one's target and mtime as read back (`INTEGRITY`, `{path, field}`). */
export async function symlinkInSandbox(
  handle: SandboxHandle,
  staging: string,
  links: readonly SymlinkToMake[],
  mtimeKept: (wantMs: number, gotMs: number) => boolean,
): Promise<void> {
  const argsOf = (l: SymlinkToMake) => [pathArg(l.path), pathArg(l.target), l.time];
  for (const group of groupByArgBytes(links, argsOf, FIXED_ARG_BYTES, SHELL_REBUILT_ITEMS)) {
    const nonce = randomBytes(12).toString('hex');
    const targets = group.map((l) => bytesFromText(l.target));
    const out = expectSuccess(
      handle,
      'symlinks',
      await runShell(handle, SYMLINK_SCRIPT, [pathArg(staging), nonce, STAT_FORMAT, ...group.flatMap(argsOf)], {
        maxOutputBytes: (group.length + 2) * STAT_LINE_BYTES + targets.reduce((n, t) => n + t.length + 1, 0),
      }),
    ).stdout;
    const { lines, rest } = statLines(out.toString('latin1'), nonce, group.length, 'symlinks');
    let pos = rest;
    for (const [i, l] of group.entries()) {
      const st = parseStatLine(lines[i] as string, 'symlinks');
      const want = Buffer.concat([targets[i] as Buffer, Buffer.from('\n')]);
      const field =
        (st.mode & S_IFMT) !== S_IFLNK || !out.subarray(pos, pos + want.length).equals(want)
          ? 'target'
          : !mtimeKept(l.mtimeMs, st.mtimeMs)
            ? 'mtime'
            : undefined;
      if (field !== undefined)
        throw new IntegrityError('INTEGRITY', `the sandbox did not keep the ${field} of symlink ${l.path}`, {
          data: { path: l.path, field },
        });
      pos += want.length;
    }
    if (out.toString('latin1', pos) !== `${nonce}\n`) throw malformedAnswer('symlinks', 'the answer goes on after its end');
  }
}
