import { randomBytes } from 'node:crypto';

/**
 * Docker has no API to kill an exec, and an exec's processes do not get a process group of
 * their own (there is no terminal for job control). So every exec is tagged: its environment
 * carries `HOLDFAST_EXEC_TAG=<random>`, which every process it starts inherits, and killing it
 * means SIGSTOPping, round by round until no new one appears, every process of the container
 * that carries the tag or descends from one that does (which also catches a child that cleared
 * its environment), then SIGKILLing them all. Stopping first means nothing can fork past the
 * sweep; orphans re-parented to the container's init are still found by their tag. What
 * escapes: a process that both clears its environment and re-parents away before the sweep
 * (a deliberate double-fork daemon); `destroy` still ends it with the container.
 *
 * The sweep needs only a POSIX sh, `kill`, `grep` and /proc, which every image Holdfast runs
 * in has.
 */

/** The environment variable naming an exec's processes. */
export const EXEC_TAG_VARIABLE = 'HOLDFAST_EXEC_TAG';
/** Rounds of the stop sweep; each one catches processes forked during the previous one. */
const SWEEP_ROUNDS = 32;

/** A fresh tag for one exec. */
export function newExecTag(): string {
  return randomBytes(12).toString('hex');
}

/**
 * `sweep TAG SELF`: stops, round by round, every process whose environment holds the tag
 * (one `grep -z` over all of /proc) or whose parent is already stopped, except the sweeping
 * shell SELF; then kills them all. The sweeping shell itself must carry no tag, or the
 * subshells it forks would be swept too. It holds no single quote, so the wrapper can quote it.
 */
const SWEEP_FUNCTION = `sweep() {
  t=$1; self=$2; all=" "; i=0
  while [ $i -lt ${SWEEP_ROUNDS} ]; do
    new=""
    for f in $(grep -slzxF "${EXEC_TAG_VARIABLE}=$t" /proc/[0-9]*/environ); do
      p=\${f#/proc/}; p=\${p%/environ}
      case "$all$new " in *" $p "*) ;; *) [ "$p" = "$self" ] || new="$new $p" ;; esac
    done
    for d in /proc/[0-9]*; do
      p=\${d#/proc/}
      case "$all$new " in *" $p "*) continue ;; esac
      st=""; read -r st 2>/dev/null < "$d/stat" || continue
      set -- \${st##*) }
      case "$all$new " in *" $2 "*) [ "$p" = "$self" ] || new="$new $p" ;; esac
    done
    [ -z "$new" ] && break
    kill -STOP $new 2>/dev/null
    all="$all\${new# } "
    i=$((i + 1))
  done
  set -- $all
  [ $# -gt 0 ] && kill -KILL "$@" 2>/dev/null
  return 0
}`;

/**
 * The argv every exec runs: `sh -c WRAPPER holdfast-exec CWD ARGV…`. It enters CWD (exit 126
 * when it cannot), runs ARGV in the foreground with the exec's stdio, then replaces itself with
 * an untagged shell (`env -u`) that sweeps what the command left behind (an exec never outlives
 * its command) and exits with the command's status.
 */
export function wrappedArgv(cwd: string, argv: readonly string[]): string[] {
  const script = `cd "$1" || exit 126
shift
"$@"
s=$?
exec env -u ${EXEC_TAG_VARIABLE} sh -c '${SWEEP_FUNCTION}
sweep "$1" $$; exit "$2"' holdfast-sweep "$${EXEC_TAG_VARIABLE}" "$s"`;
  return ['sh', '-c', script, 'holdfast-exec', cwd, ...argv];
}

/** The argv of the exec that kills every process of the exec tagged `tag`. */
export function killArgv(tag: string): string[] {
  return ['sh', '-c', `${SWEEP_FUNCTION}\nsweep "$1" $$`, 'holdfast-kill', tag];
}

/**
 * Finds the wrapper of the exec tagged with the first argument (the tagged process whose argv
 * holds `holdfast-exec`), then prints the pid of its child, the command; prints nothing while
 * there is none (not started yet, or already gone). The helper carries no tag itself.
 */
const COMMAND_PID_SCRIPT = `t=$1; w=""
for f in $(grep -slzxF "${EXEC_TAG_VARIABLE}=$t" /proc/[0-9]*/environ); do
  p=\${f#/proc/}; p=\${p%/environ}
  grep -qzxF holdfast-exec "/proc/$p/cmdline" 2>/dev/null && w=$p
done
[ -n "$w" ] || exit 0
for d in /proc/[0-9]*; do
  st=""; read -r st 2>/dev/null < "$d/stat" || continue
  set -- \${st##*) }
  [ "$2" = "$w" ] && { echo "\${d#/proc/}"; exit 0; }
done
exit 0`;

/** The argv of the exec that prints the pid of the command of the exec tagged `tag` (see {@link COMMAND_PID_SCRIPT}). */
export function commandPidArgv(tag: string): string[] {
  return ['sh', '-c', COMMAND_PID_SCRIPT, 'holdfast-pid', tag];
}

/**
 * The argv of the exec that sends `signal` (a name without `SIG`, as `kill -s` takes it) to
 * every process of the exec tagged `tag` but its wrapper, which must stay to report the
 * command's status and sweep what it leaves.
 */
export function signalArgv(tag: string, signal: string): string[] {
  const script = `t=$1; s=$2; all=""
for f in $(grep -slzxF "${EXEC_TAG_VARIABLE}=$t" /proc/[0-9]*/environ); do
  p=\${f#/proc/}; p=\${p%/environ}
  grep -qzxF holdfast-exec "/proc/$p/cmdline" 2>/dev/null || all="$all $p"
done
[ -n "$all" ] && kill -s "$s" $all 2>/dev/null
exit 0`;
  return ['sh', '-c', script, 'holdfast-signal', tag, signal];
}
