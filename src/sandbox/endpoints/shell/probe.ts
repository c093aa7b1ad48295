import { StoreError } from '../../../errors.js';
import type { SandboxCapabilities, SandboxHandle } from '../../sandbox-provider.js';
import { expectSuccess, malformedAnswer, pathArg, runShell } from './shell-exec.js';
import type { MtimePrecision } from './shell-target.js';

/** Tools every shell transport mode runs. */
export const SHELL_TOOLS = Object.freeze([
  'find',
  'stat',
  'xargs',
  'cat',
  'dd',
  'sha256sum',
  'touch',
  'chmod',
  'ln',
  'readlink',
  'mktemp',
  'mv',
  'rm',
  'mkdir',
  'rmdir',
  'ls',
  'grep',
  'head',
  'wc',
  'date',
  'dirname',
  'tr',
] as const);
/** Tools the transport uses when present (`tar`: many small files per process on restore). */
export const SHELL_OPTIONAL_TOOLS = Object.freeze(['tar'] as const);
/** Oldest Node major the in-sandbox agent runs on. */
export const AGENT_MIN_NODE_MAJOR = 18;
/** Most bytes a probe answer may have. */
const MAX_PROBE_BYTES = 4096;

/**
 * One exec, no stdin: what the sandbox has. Prints `key=value` lines only: `node` (its
 * version), `busybox`, `tool` (each present one), and the features the transport relies on
 * or that decide fidelity, each tried on a scratch directory: `print0` (`find -print0`),
 * `fullblock` (`dd iflag=fullblock`), `base64` (`base64 -d`), `touch-ms` (`touch -d @s.fff`
 * kept to the millisecond, as `stat` shows it), `touch-symlink` (`touch -h`). The scratch
 * directory is the first of `$TMPDIR` (or /tmp), the workspace's parent (`$2`) and `$HOME`
 * where `mktemp -d` succeeds (`scratch=1`; the same order as {@link MAKE_SCRATCH_FILE}); with
 * none writable, nothing after the tool list can be tried and `scratch=0` says so.
 */
const PROBE_SCRIPT = `
echo probe=1
if command -v node >/dev/null 2>&1; then echo "node=$(node --version 2>/dev/null | head -c 32 | tr -cd 'v0-9.')"; fi
if busybox true >/dev/null 2>&1; then echo busybox=1; fi
for t in $1; do if command -v "$t" >/dev/null 2>&1; then echo "tool=$t"; fi; done
d "$2"; w=$(dirname "$p")
t=$(mktemp -d 2>/dev/null || mktemp -d -p "$w" 2>/dev/null || mktemp -d -p "$HOME" 2>/dev/null) || { echo scratch=0; exit 0; }
echo scratch=1
trap 'rm -rf "$t"' EXIT
: > "$t/f"
[ "$(find "$t/f" -print0 2>/dev/null | tr '\\0' '|')" = "$t/f|" ] && echo print0=1
[ "$(echo xy | dd bs=1 count=2 iflag=fullblock 2>/dev/null)" = xy ] && echo fullblock=1
[ "$(echo eHk= | base64 -d 2>/dev/null)" = xy ] && echo base64=1
touch -d @1.5 "$t/f" 2>/dev/null && case $(stat -c %y "$t/f" 2>/dev/null) in *:01.5*) echo touch-ms=1 ;; esac
ln -s f "$t/l" 2>/dev/null && touch -h -d @2 "$t/l" 2>/dev/null && [ "$(stat -c %Y "$t/l")" = 2 ] && echo touch-symlink=1
`;

/** What a sandbox has, as its probe reported it (checked strictly: the sandbox is untrusted). */
export interface SandboxProbe {
  /** `node --version` (e.g. `v20.11.1`), or null without Node. */
  readonly node: string | null;
  readonly busybox: boolean;
  /** Which of {@link SHELL_TOOLS} and {@link SHELL_OPTIONAL_TOOLS} are on PATH. */
  readonly tools: ReadonlySet<string>;
  readonly print0: boolean;
  readonly ddFullblock: boolean;
  readonly base64: boolean;
  /** What `touch` can set: milliseconds, or whole seconds only (busybox). */
  readonly mtimePrecision: MtimePrecision;
  /** `touch -h` sets a symlink's own mtime. */
  readonly symlinkMtimes: boolean;
  /** `tar` is there (restores write small files through one tar stream per exec). */
  readonly tar: boolean;
  /**
   * A scratch directory was writable ($TMPDIR or /tmp, the workspace's parent, or `$HOME`).
   * False: the features above could not be tried (they read false) and no shell mode can run;
   * with `mktemp` there, the lack of scratch space is what {@link shellMissing} reports.
   */
  readonly scratch: boolean;
}

/** What {@link shellMissing} lists when no scratch directory is writable (the probe could try nothing else). */
export const NO_SCRATCH = 'a writable scratch directory ($TMPDIR or /tmp, the workspace parent, $HOME)';

/** Runs the probe (one exec, no stdin, bounded answer). An answer with anything unexpected is `INTEGRITY`. */
export async function probeSandbox(handle: SandboxHandle): Promise<SandboxProbe> {
  const result = expectSuccess(
    handle,
    'the probe',
    await runShell(handle, PROBE_SCRIPT, [[...SHELL_TOOLS, ...SHELL_OPTIONAL_TOOLS].join(' '), pathArg(handle.workspaceRoot)], {
      maxOutputBytes: MAX_PROBE_BYTES,
    }),
  );
  return parseProbe(result.stdout.toString('latin1'));
}

/** Parses a probe answer strictly (exported for tests). */
export function parseProbe(text: string): SandboxProbe {
  const lines = text.split('\n');
  if (lines.pop() !== '' || lines[0] !== 'probe=1') throw malformedAnswer('probe', 'it does not start as a probe');
  let node: string | null = null;
  const tools = new Set<string>();
  const flags = new Set<string>();
  let scratch: boolean | undefined;
  for (const line of lines.slice(1)) {
    const eq = line.indexOf('=');
    const key = line.slice(0, eq);
    const value = line.slice(eq + 1);
    if (key === 'node' && /^v\d{1,4}\.\d{1,4}\.\d{1,4}$/.test(value) && node === null) node = value;
    else if (key === 'tool' && [...SHELL_TOOLS, ...SHELL_OPTIONAL_TOOLS].includes(value as 'tar') && !tools.has(value)) tools.add(value);
    else if (['busybox', 'print0', 'fullblock', 'base64', 'touch-ms', 'touch-symlink'].includes(key) && value === '1' && !flags.has(key))
      flags.add(key);
    else if (key === 'node' && value === '') continue;
    else if (key === 'scratch' && (value === '0' || value === '1') && scratch === undefined) scratch = value === '1';
    else throw malformedAnswer('probe', 'an unknown line');
  }
  return {
    node,
    busybox: flags.has('busybox'),
    tools,
    print0: flags.has('print0'),
    ddFullblock: flags.has('fullblock'),
    base64: flags.has('base64'),
    mtimePrecision: flags.has('touch-ms') ? 'ms' : 's',
    symlinkMtimes: flags.has('touch-symlink'),
    tar: tools.has('tar'),
    // An answer without the line comes from a sandbox that stopped before it: nothing was tried there.
    scratch: scratch === true,
  };
}

/** How Holdfast reaches a sandbox's workspace. */
export type Transport = 'agent' | 'shell-stdin' | 'shell-args';

/** What a shell mode lacks in `probe` (empty: it can run). */
export function shellMissing(probe: SandboxProbe, mode: 'stdin' | 'args'): string[] {
  // Without scratch space the features were never tried: listing them would send the user after tools they have.
  if (!probe.scratch && probe.tools.has('mktemp')) return [NO_SCRATCH];
  const missing: string[] = SHELL_TOOLS.filter((t) => !probe.tools.has(t));
  if (!probe.print0) missing.push('find -print0');
  if (mode === 'stdin' && !probe.ddFullblock) missing.push('dd iflag=fullblock');
  if (mode === 'args' && !probe.base64) missing.push('base64 -d');
  return missing;
}

/**
 * The transport for a sandbox: the agent when it has Node >= {@link AGENT_MIN_NODE_MAJOR} and
 * the provider streams stdin; else the shell with stdin when the provider streams it and the
 * tools are there; else the shell over arguments alone. None fits: `STORE_UNAVAILABLE` listing
 * what is missing (only {@link NO_SCRATCH} when the probe had no scratch space to try the tools in).
 */
export function chooseTransport(capabilities: Pick<SandboxCapabilities, 'exec' | 'stdin'>, probe: SandboxProbe): Transport {
  requireExec(capabilities);
  const major = probe.node === null ? 0 : Number(probe.node.slice(1).split('.')[0]);
  if (capabilities.stdin && major >= AGENT_MIN_NODE_MAJOR) return 'agent';
  if (capabilities.stdin && shellMissing(probe, 'stdin').length === 0) return 'shell-stdin';
  const missing = shellMissing(probe, 'args');
  if (missing.length === 0) return 'shell-args';
  if (missing.length === 1 && missing[0] === NO_SCRATCH) {
    throw new StoreError(
      `the sandbox has neither Node >= ${AGENT_MIN_NODE_MAJOR}${capabilities.stdin ? '' : ' with stdin'} nor ${NO_SCRATCH} for the shell transport: make /tmp writable or point TMPDIR at a writable directory`,
      { data: { missing } },
    );
  }
  throw new StoreError(
    `the sandbox has neither Node >= ${AGENT_MIN_NODE_MAJOR}${capabilities.stdin ? '' : ' with stdin'} nor the shell tools Holdfast needs: missing ${missing.join(', ')}; install coreutils or busybox`,
    { data: { missing } },
  );
}

/** Throws `STORE_UNAVAILABLE` for a provider that cannot run commands: no transport can reach its workspace (check it before probing). */
export function requireExec(capabilities: Pick<SandboxCapabilities, 'exec'>): void {
  if (!capabilities.exec)
    throw new StoreError('the provider cannot run commands (exec): Holdfast cannot reach its workspace', { data: { missing: ['exec'] } });
}

/** Probes a {@link ProbeCache} keeps at most. */
const MAX_REMEMBERED_PROBES = 10_000;

/**
 * Probes each sandbox once and remembers the answer, keyed by provider and sandbox id; call
 * {@link ProbeCache.forget} when a sandbox is destroyed (a new one may reuse nothing of it).
 * A failed probe is not remembered.
 */
export class ProbeCache {
  private readonly probes = new Map<string, Promise<SandboxProbe>>();

  constructor(private readonly maxEntries = MAX_REMEMBERED_PROBES) {}

  /** The probe of `handle`'s sandbox, running it the first time. */
  get(handle: SandboxHandle): Promise<SandboxProbe> {
    const key = `${handle.provider}\0${handle.id}`;
    let got = this.probes.get(key);
    if (got === undefined) {
      got = probeSandbox(handle);
      // Oldest first out: a sandbox gone without `forget` costs a probe again at most, never memory without bound.
      if (this.probes.size >= this.maxEntries) this.probes.delete(this.probes.keys().next().value as string);
      this.probes.set(key, got);
      got.catch(() => this.probes.delete(key));
    }
    return got;
  }

  /** Forgets a sandbox's probe (after `destroy`). */
  forget(provider: string, id: string): void {
    this.probes.delete(`${provider}\0${id}`);
  }
}
