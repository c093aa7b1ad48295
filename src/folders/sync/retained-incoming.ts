import path from 'node:path';
import { IntegrityError } from '../../errors.js';
import type { SandboxHandle } from '../../sandbox/sandbox-provider.js';
import { DIRECTORY } from './sync-plan.js';

/** The directory of the home where a download around retained entries is staged (`<home>/.holdfast-incoming/<scope>`). */
export const STAGING_DIR = '.holdfast-incoming';
/** Most argument bytes one apply command carries; more changes go in more commands. */
const MAX_APPLY_ARGV_BYTES = 64 * 1024;
/** The longest one apply command (or the staging clean-up) may take. */
const APPLY_TIMEOUT_MS = 60_000;

/**
 * Applies the staged download, run in `<home>/<scope>`: `$1` is the staging directory, then
 * one argument per change, `r:PATH` (remove), `d:PATH` (a directory) or `f:PATH` (a file moved
 * from the staging directory, replacing what is there). Paths are relative and prefixed with
 * `./`, so none is read as an option; POSIX `sh`, `rm`, `mkdir`, `mv` and `dirname` only.
 */
const APPLY_STAGED = `staging=$1; shift
for op do
  p=\${op#?:}
  case $op in
    r:*) rm -rf -- "./$p" ;;
    d:*) if [ -h "./$p" ] || [ ! -d "./$p" ]; then rm -rf -- "./$p" && mkdir -p -- "./$p"; fi ;;
    f:*) rm -rf -- "./$p" && mkdir -p -- "$(dirname -- "./$p")" && mv -f -- "$staging/$p" "./$p" ;;
  esac || exit 1
done`;

/** What a download around retained entries writes: imports and removals none of them touches. */
export interface RetainedPlan {
  readonly imports: Readonly<Record<string, string>>;
  readonly removals: readonly string[];
}

/**
 * Leaves out of a download (`imports`, `removals`: the listing's changes against the baseline)
 * every change that would touch a retained entry (one the sandbox holds and the store does not
 * have, e.g. a file its user cannot read): the entry itself, anything under it, and any removal
 * or file written over one of its parent directories. A directory above a retained entry may
 * still be made (it is already there).
 */
export function planAroundRetained(
  imports: Readonly<Record<string, string>>,
  removals: readonly string[],
  retained: readonly string[],
): RetainedPlan {
  const atOrUnder = (p: string): boolean => retained.some((k) => p === k || p.startsWith(`${k}/`));
  const above = (p: string): boolean => retained.some((k) => k.startsWith(`${p}/`));
  const kept: Record<string, string> = {};
  for (const [p, sig] of Object.entries(imports)) {
    if (atOrUnder(p) || (above(p) && sig !== DIRECTORY)) continue;
    kept[p] = sig;
  }
  return { imports: kept, removals: removals.filter((p) => !atOrUnder(p) && !above(p)) };
}

/**
 * Moves a staged download into `<home>/<scope>` path by path, leaving every other entry of the
 * directory where it is: removals first (shortest first), then directories (parents first),
 * then files (each replacing what is at its path), in commands of at most
 * {@link MAX_APPLY_ARGV_BYTES}; then removes the staging directory. Rejects with
 * `RESTORE_INCOMPLETE` when a command fails (what it moved stays moved: the caller's stored
 * intents let the next save tell imported bytes from edits).
 */
export async function applyStaged(sandbox: SandboxHandle, scope: string, plan: RetainedPlan, signal?: AbortSignal): Promise<void> {
  const staging = path.posix.join(sandbox.agentHome, STAGING_DIR, scope);
  const byLength = (a: string, b: string): number => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  const dirs = Object.keys(plan.imports).filter((p) => plan.imports[p] === DIRECTORY);
  const files = Object.keys(plan.imports).filter((p) => plan.imports[p] !== DIRECTORY);
  const ops = [
    ...[...plan.removals].sort(byLength).map((p) => `r:${p}`),
    ...dirs.sort(byLength).map((p) => `d:${p}`),
    ...files.sort(byLength).map((p) => `f:${p}`),
  ];
  const run = async (args: string[]): Promise<void> => {
    const got = await sandbox.run(['sh', '-c', APPLY_STAGED, 'sh', staging, ...args], {
      cwd: path.posix.join(sandbox.agentHome, scope),
      timeoutMs: APPLY_TIMEOUT_MS,
      ...(signal === undefined ? {} : { signal }),
    });
    if (got.code !== 0) {
      throw new IntegrityError(
        'RESTORE_INCOMPLETE',
        `the download into ${scope}/ around the entries kept there stopped (exit ${got.code}): ${got.stderr.toString('utf8').slice(0, 500)}`,
        { data: { scope } },
      );
    }
  };
  let batch: string[] = [];
  let bytes = 0;
  for (const op of ops) {
    const size = Buffer.byteLength(op) + 1;
    if (batch.length > 0 && bytes + size > MAX_APPLY_ARGV_BYTES) {
      await run(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(op);
    bytes += size;
  }
  if (batch.length > 0) await run(batch);
  await sandbox.run(['rm', '-rf', '--', staging], { timeoutMs: APPLY_TIMEOUT_MS, ...(signal === undefined ? {} : { signal }) });
}
