/**
 * `sandbox/`: the `SandboxProvider` port and its providers (`providers/` local, bwrap,
 * docker); the in-sandbox agent split by side (`agent/` wire, host, inside); and
 * `endpoints/`, the one place a route to a sandbox's workspace is chosen (agent or shell);
 * `file-api/`, the port and route for sandboxes that expose their files through a file API.
 */
import type { Readable, Writable } from 'node:stream';
import type { SandboxFiles } from './file-api/sandbox-files.js';

/**
 * The port for replaceable compute. A SandboxProvider creates, finds and destroys sandboxes;
 * a {@link SandboxHandle} runs commands inside one. Holdfast never assumes a sandbox outlives
 * the call that found it: `get` may return `undefined` at any time, and the durable copy of a
 * workspace is the checkpoint, not the sandbox.
 *
 * Drivers live in `providers/`; `sandbox.contract.ts` is the behaviour every one of them must
 * show. Optional behaviour is declared in {@link SandboxCapabilities}, never discovered by
 * failing.
 */
export interface SandboxProvider {
  /** Provider name used in records, messages and `SandboxInfo.provider`, e.g. `local` or `bwrap`. */
  readonly name: string;

  /** What this provider can do; callers and the contract suite branch on it. */
  readonly capabilities: SandboxCapabilities;

  /**
   * Creates a fresh sandbox with an empty workspace and agent home and resolves once it accepts
   * `exec`. Rejects with `INVALID_INPUT` for a spec the provider cannot honour (for example an
   * `image` on a provider without images, or a malformed label or variable name), and with
   * `STORE_UNAVAILABLE` when the provider's machinery is missing or refuses to start (the
   * message says what to install or enable).
   */
  create(spec?: SandboxSpec): Promise<SandboxHandle>;

  /**
   * A handle on an existing sandbox, or `undefined` when there is none with this id: never
   * created, destroyed, or gone for any other reason. Never throws `NOT_FOUND`; ids from another
   * provider or of the wrong shape are simply not found. A sandbox that is `stopped` (see
   * {@link SandboxInfo.state}) is resumed first, so the handle accepts `exec` with the
   * filesystem as it was.
   */
  get(id: string): Promise<SandboxHandle | undefined>;

  /**
   * Destroys a sandbox: kills every process still running in it, then deletes its filesystem.
   * Idempotent: destroying a missing or already destroyed sandbox succeeds. Once it resolves,
   * `get(id)` returns `undefined` and handles obtained earlier refuse `exec` with `NOT_FOUND`.
   */
  destroy(id: string): Promise<void>;

  /** Every sandbox this provider currently holds, oldest first. */
  list(): Promise<SandboxInfo[]>;
}

/** Optional behaviour a provider declares. */
export interface SandboxCapabilities {
  /** Commands can be run with {@link SandboxHandle.exec}. */
  exec: boolean;
  /** `exec` accepts stdin (bytes, a stream, or `'pipe'`); without it stdin is always empty. */
  stdin: boolean;
  /**
   * A sandbox keeps its filesystem between execs and can be found again by id after the
   * creating process (here: the provider instance) is gone; a stopped one is started again by
   * `get` with its filesystem intact.
   */
  resume: boolean;
  /** The workspace is a directory on this host ({@link SandboxHandle.localPath}); the engine may read it directly instead of through exec. */
  localPath: boolean;
  /** The provider can snapshot and restore a sandbox itself (cloud VM snapshots); Holdfast may use them as a fast path. */
  nativeSnapshots: boolean;
  /** The provider promises the filesystem survives crashes of the sandbox and its host; without it Holdfast's checkpoint is the only durable copy. */
  durableFilesystem: boolean;
  /** `kill()`, `timeoutMs` and `signal` take down every process an exec started, background children included. */
  killableProcesses: boolean;
  /** A new sandbox cannot open network connections, not even to the host's own addresses (loopback inside the sandbox is allowed). */
  networkIsolation: boolean;
  /**
   * Which workspace roots a deployment may name: the path every sandbox's workspace is at (the
   * same in each, {@link SandboxHandle.workspaceRoot}), and a `workspaceRoot` inside it (itself
   * included) can be hosted. `null` when each sandbox's workspace is at a path of its own (a host
   * directory per sandbox), so a deployment can only use the default root. A deployment naming
   * a root the provider cannot host is refused when it is created.
   */
  workspaceRootsUnder: string | null;
  /**
   * The workspace is reachable through a byte-safe file API ({@link SandboxHandle.files}):
   * checkpoints and restores go through it, needing neither a byte-clean exec nor stdin.
   * Absent means false.
   */
  files?: boolean;
}

/**
 * Resource bounds of one sandbox. Every field is optional; a provider with resource controls
 * (docker) applies its defaults for those left out, providers without them (local, bwrap)
 * ignore the bounds.
 */
export interface SandboxLimits {
  /** Memory of all processes together, in bytes (no swap on top). */
  readonly memoryBytes?: number | undefined;
  /** CPU time as a number of CPUs, fractions allowed (`0.5`). */
  readonly cpus?: number | undefined;
  /** Most processes and threads alive at once. */
  readonly pids?: number | undefined;
}

/** What a new sandbox should look like. Every field is optional. */
export interface SandboxSpec {
  /**
   * The caller's id for the new sandbox: 1-64 of `a-z 0-9 -`, starting with a letter (the rule
   * provider names follow: `SANDBOX_ID_PATTERN`). One that is malformed is `INVALID_INPUT`; one
   * already taken (by a sandbox of this provider, or by anything the provider's namespace holds,
   * such as another container's name on the docker daemon) is `ALREADY_EXISTS`, and nothing is
   * created. Absent: a fresh `sbx-<16 hex>`.
   */
  readonly id?: string;
  /** Provider-specific base image. Providers without images reject it with `INVALID_INPUT`. */
  readonly image?: string;
  /** Variables present in every exec of this sandbox, on top of the provider's allowlist (PATH, HOME, LANG, TERM; bwrap adds PWD). Nothing else of the host's environment reaches a command. */
  readonly env?: Readonly<Record<string, string>>;
  /** Free-form metadata kept with the sandbox and returned by `list`; keys `[A-Za-z0-9._/-]`, at most 64 labels. */
  readonly labels?: Readonly<Record<string, string>>;
  /** Resource bounds; see {@link SandboxLimits}. */
  readonly limits?: SandboxLimits;
}

/** One sandbox as reported by {@link SandboxProvider.list}. */
export interface SandboxInfo {
  id: string;
  provider: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  labels: Record<string, string>;
  /** `running` accepts exec now; `stopped` exists but must be resumed by the provider first. */
  state: 'running' | 'stopped';
}

/** Options for {@link SandboxHandle.exec}. */
export interface ExecOptions {
  /**
   * Standard input: bytes or a string (UTF-8) written then closed; a stream piped in; or
   * `'pipe'` to get a writable {@link ExecProcess.stdin}. Absent: stdin is empty (`/dev/null`).
   */
  stdin?: Uint8Array | string | NodeJS.ReadableStream | 'pipe';
  /** Extra variables for this exec, over the sandbox's own. */
  env?: Record<string, string>;
  /** Working directory inside the sandbox; relative paths resolve against `workspaceRoot` (the default). One that does not exist makes the command fail to start (non-zero exit). */
  cwd?: string;
  /** Kills the command's whole process tree after this many milliseconds; `exit` then reports `timedOut: true`. */
  timeoutMs?: number;
  /** Aborting kills the whole process tree, like a timeout (but `timedOut` stays false). */
  signal?: AbortSignal;
}

/** Options for {@link SandboxHandle.run}: those of exec plus an output bound. */
export interface RunOptions extends ExecOptions {
  /** Most bytes of stdout + stderr together that `run` buffers; default {@link MAX_RUN_OUTPUT_BYTES}. */
  maxOutputBytes?: number;
}

/** Default bound on what {@link SandboxHandle.run} holds in memory. */
export const MAX_RUN_OUTPUT_BYTES = 64 * 1024 * 1024;

/** How a command ended. */
export interface ExecExit {
  /** Exit status, or `null` when the command (or, for bwrap, the sandbox process) died of a signal. */
  code: number | null;
  /** Name of the killing signal (`SIGKILL`), or `null`. */
  signal: string | null;
  /** True when `timeoutMs` elapsed and the process tree was killed. */
  timedOut: boolean;
}

/**
 * A running command. Output is streamed: the caller must consume `stdout` and `stderr` (or
 * `resume()` them), otherwise the command blocks once the pipe buffers fill. A command that
 * cannot be started (missing executable or cwd) still yields an ExecProcess whose exit code is
 * non-zero; `exec` itself throws only for bad input or a sandbox that is gone.
 */
export interface ExecProcess {
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Writable stdin, present only with `stdin: 'pipe'`; end it to send EOF. */
  readonly stdin: Writable | undefined;
  /**
   * Resolves when the command has exited (output may still sit unread in `stdout`/`stderr`).
   * Processes it left behind are killed with it: an exec never outlives its command. Rejects
   * only when the host cannot start processes at all.
   */
  readonly exit: Promise<ExecExit>;
  /**
   * The command's process id as seen inside the sandbox (what `echo $$` prints in `sh -c`),
   * once it has started; `undefined` when it never started or ended before its id was learnt.
   * Never rejects.
   */
  readonly pid: Promise<number | undefined>;
  /**
   * Sends `signal` (default `SIGKILL`; one of {@link EXEC_SIGNALS}) to the command. `SIGKILL`
   * kills the whole process tree now, background children included; any other signal goes to
   * the command and the processes it started (its process group or exec), which may handle it
   * (a `trap` in a shell) and exit in their own time. An unknown signal is `INVALID_INPUT`,
   * thrown here. Safe to call more than once or after exit (then it does nothing).
   */
  kill(signal?: ExecSignal): void;
}

/** The signals {@link ExecProcess.kill} delivers. */
export const EXEC_SIGNALS = Object.freeze(['SIGKILL', 'SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'] as const);
/** One of {@link EXEC_SIGNALS}. */
export type ExecSignal = (typeof EXEC_SIGNALS)[number];

/** What {@link SandboxHandle.run} resolves with. */
export interface RunResult {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
}

/** A live reference to one sandbox. Cheap to obtain; holds no resources itself. */
export interface SandboxHandle {
  readonly id: string;
  readonly provider: string;
  /** Absolute path of the workspace as commands inside the sandbox see it (`/workspace` for bwrap). */
  readonly workspaceRoot: string;
  /** The home directory inside the sandbox (`HOME`); outside the workspace, so it is not checkpointed with it. */
  readonly agentHome: string;
  /** Host path of the workspace, set only when `capabilities.localPath`. */
  readonly localPath?: string;
  /** The workspace's file API, rooted at `workspaceRoot`; set only when `capabilities.files` (see `file-api/sandbox-files.ts`). */
  readonly files?: SandboxFiles;
  /** The labels the sandbox was created with ({@link SandboxSpec.labels}); `get` returns them too. */
  readonly labels: Readonly<Record<string, string>>;

  /**
   * Runs `argv` directly (no shell: arguments are passed as they are). Throws `INVALID_INPUT`
   * for an empty argv or bad options, `NOT_FOUND` when the sandbox has been destroyed. A
   * provider that can only learn asynchronously that the sandbox is gone (docker: removed by
   * someone else) rejects `exit` with `NOT_FOUND` instead.
   */
  exec(argv: readonly string[], options?: ExecOptions): ExecProcess;

  /**
   * Buffered convenience over `exec`: resolves once the command has exited with everything it
   * printed. More than `maxOutputBytes` of output kills the command and rejects with
   * `LIMIT_EXCEEDED`.
   */
  run(argv: readonly string[], options?: RunOptions): Promise<RunResult>;
}
