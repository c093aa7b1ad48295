import type { Readable } from 'node:stream';
import {
  createExecBackedGit,
  type ExecResult,
  type ProcessOptions,
  type SandboxFs,
  type SpawnHandle,
  type SandboxCapabilities as TanStackCapabilities,
  type SandboxHandle as TanStackSandboxHandle,
  type SandboxProvider as TanStackSandboxProvider,
  UnsupportedCapabilityError,
} from '@tanstack/ai-sandbox';
import { InputError } from '../errors.js';
import type { RunResult, SandboxHandle, SandboxProvider } from '../sandbox/sandbox-provider.js';
import { shellQuote, TANSTACK_WORKSPACE_ROOT } from './command-handle.js';

/** The label a sandbox made for TanStack carries: the key `ensure` asked to use as its id. */
export const TANSTACK_KEY_LABEL = 'tanstack.key';
/** Most bytes of a file `fs.write` sends through exec arguments when the sandbox takes no stdin. */
export const MAX_ARGS_WRITE_BYTES = 64 * 1024;
/** Longest command line passed as one `sh -c` argument, in bytes (Linux allows 128 KiB per argument). */
const MAX_COMMAND_ARG_BYTES = 96 * 1024;
/** Signals `SpawnHandle.kill` accepts besides SIGKILL (sent with `kill` inside the sandbox). */
const SIGNALS = new Set(['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGKILL']);

/** Which Holdfast handle and provider stand behind a TanStack handle this module made. */
export const holdfastBacking = new WeakMap<TanStackSandboxHandle, { handle: SandboxHandle; provider: SandboxProvider }>();

/**
 * Holdfast's sandboxes (a `local`, `bwrap` or `docker` {@link SandboxProvider}) as a TanStack
 * `SandboxProvider`. `create` makes a Holdfast sandbox (TanStack's caller-chosen `id`, which
 * providers MAY ignore, is kept as the {@link TANSTACK_KEY_LABEL} label: Holdfast providers mint
 * their own ids); `resume` finds it by id (`null` when it is gone); `destroy` is idempotent.
 * Handles run commands with `sh -c` in the workspace (TanStack's `/workspace` paths are mapped
 * to the sandbox's real root), read and write bytes exactly, spawn background processes with
 * their pid, and keep `env.set` variables for later commands. Ports, network policy, fork and
 * snapshots are not offered here (`withHoldfastDurability` adds snapshots).
 */
export function holdfastSandboxProvider(provider: SandboxProvider): TanStackSandboxProvider {
  const capabilities = (): TanStackCapabilities => ({
    fs: true,
    exec: true,
    env: true,
    ports: false,
    backgroundProcesses: true,
    writableStdin: provider.capabilities.stdin,
    snapshots: false,
    networkPolicy: false,
    durableFilesystem: provider.capabilities.durableFilesystem,
    fork: false,
  });
  return {
    name: provider.name,
    capabilities,
    async create(input) {
      const handle = await provider.create({
        ...(input.env === undefined ? {} : { env: input.env }),
        ...(input.id === undefined ? {} : { labels: { [TANSTACK_KEY_LABEL]: input.id } }),
      });
      return tanstackHandle(provider, handle, capabilities());
    },
    async resume(input) {
      const handle = await provider.get(input.id);
      return handle === undefined ? null : tanstackHandle(provider, handle, capabilities());
    },
    async destroy(input) {
      await provider.destroy(input.id);
    },
  };
}

function tanstackHandle(provider: SandboxProvider, handle: SandboxHandle, capabilities: TanStackCapabilities): TanStackSandboxHandle {
  const root = handle.localPath ?? handle.workspaceRoot;
  const extraEnv: Record<string, string> = {};
  const at = (p: string): string => {
    if (p === TANSTACK_WORKSPACE_ROOT || p.startsWith(`${TANSTACK_WORKSPACE_ROOT}/`)) return root + p.slice(TANSTACK_WORKSPACE_ROOT.length);
    return p.startsWith('/') ? p : `${root}/${p}`;
  };
  const run = (argv: readonly string[], options: ProcessOptions = {}, stdin?: Uint8Array): Promise<RunResult> =>
    handle.run(argv, {
      cwd: at(options.cwd ?? root),
      env: { ...extraEnv, ...options.env },
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      ...(stdin === undefined ? {} : { stdin }),
    });
  const must = async (argv: readonly string[], what: string, stdin?: Uint8Array): Promise<RunResult> => {
    const result = await run(argv, {}, stdin);
    if (result.code !== 0) {
      throw new InputError('INVALID_INPUT', `${what} failed in sandbox ${handle.id}: ${result.stderr.toString('utf8').slice(0, 512)}`, {
        data: { sandbox: handle.id, code: result.code },
      });
    }
    return result;
  };
  const exec = async (command: string, options?: ProcessOptions): Promise<ExecResult> => {
    // Linux bounds one argument to 128 KiB: a longer command line goes in as a script on stdin (run with stdin closed).
    const long = Buffer.byteLength(command) > MAX_COMMAND_ARG_BYTES && provider.capabilities.stdin;
    const result = long
      ? await run(
          ['sh', '-c', 'f=$(mktemp) || exit 125; cat > "$f"; sh "$f" </dev/null; rc=$?; rm -f "$f"; exit $rc'],
          options,
          Buffer.from(command),
        )
      : await run(['sh', '-c', command], options);
    return {
      stdout: result.stdout.toString('utf8'),
      stderr: result.stderr.toString('utf8'),
      exitCode: result.code ?? 128 + 9,
    };
  };
  const process = { exec, spawn: (command: string, options?: ProcessOptions) => spawn(handle, at, extraEnv, command, options) };
  const fs: SandboxFs = {
    read: async (p) => (await must(['cat', '--', at(p)], `reading ${p}`)).stdout.toString('utf8'),
    readBytes: async (p) => new Uint8Array((await must(['cat', '--', at(p)], `reading ${p}`)).stdout),
    async write(p, data) {
      const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
      const target = at(p);
      if (provider.capabilities.stdin) {
        await must(['sh', '-c', 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', 'sh', target], `writing ${p}`, bytes);
        return;
      }
      if (bytes.length > MAX_ARGS_WRITE_BYTES) {
        throw new InputError(
          'LIMIT_EXCEEDED',
          `sandbox ${handle.id} takes no stdin: files up to ${MAX_ARGS_WRITE_BYTES} bytes can be written`,
          {
            data: { bytes: bytes.length, max: MAX_ARGS_WRITE_BYTES },
          },
        );
      }
      await must(
        ['sh', '-c', 'mkdir -p -- "$(dirname -- "$1")" && printf %s "$2" | base64 -d > "$1"', 'sh', target, bytes.toString('base64')],
        `writing ${p}`,
      );
    },
    async list(p) {
      const dir = at(p);
      const out = (await must(['find', dir, '-mindepth', '1', '-maxdepth', '1', '-printf', '%y\\t%f\\0'], `listing ${p}`)).stdout.toString(
        'utf8',
      );
      return out
        .split('\0')
        .filter((line) => line !== '')
        .map((line) => {
          const name = line.slice(2);
          return { name, path: `${p.replace(/\/+$/, '')}/${name}`, type: line.startsWith('d') ? ('dir' as const) : ('file' as const) };
        });
    },
    mkdir: async (p) => void (await must(['mkdir', '-p', '--', at(p)], `making ${p}`)),
    remove: async (p) => void (await must(['rm', '-rf', '--', at(p)], `removing ${p}`)),
    rename: async (from, to) => void (await must(['mv', '--', at(from), at(to)], `renaming ${from}`)),
    exists: async (p) => (await run(['test', '-e', at(p)])).code === 0,
  };
  const tanstack: TanStackSandboxHandle = {
    id: handle.id,
    provider: provider.name,
    workspaceRoot: root,
    capabilities,
    fs,
    git: createExecBackedGit(process, root),
    process,
    ports: {
      connect: () => Promise.reject(new UnsupportedCapabilityError(provider.name, 'ports', 'Holdfast sandboxes expose no ports')),
    },
    env: {
      set: async (vars) => {
        Object.assign(extraEnv, vars);
      },
    },
    destroy: () => provider.destroy(handle.id),
  };
  holdfastBacking.set(tanstack, { handle, provider });
  return tanstack;
}

async function* decoded(stream: Readable): AsyncIterable<string> {
  const decoder = new TextDecoder();
  for await (const chunk of stream) {
    const text = decoder.decode(chunk as Buffer, { stream: true });
    if (text !== '') yield text;
  }
  const rest = decoder.decode();
  if (rest !== '') yield rest;
}

/** Reads the first line of `stream` (the pid the wrapper printed) and hands back the stream after it. */
function splitFirstLine(stream: Readable): { first: Promise<string>; rest: AsyncIterable<string> } {
  let resolveFirst: (line: string) => void = () => undefined;
  const first = new Promise<string>((resolve) => {
    resolveFirst = resolve;
  });
  async function* rest(): AsyncIterable<string> {
    let head = '';
    let found = false;
    for await (const text of decoded(stream)) {
      if (found) {
        yield text;
        continue;
      }
      head += text;
      const nl = head.indexOf('\n');
      if (nl === -1) continue;
      found = true;
      resolveFirst(head.slice(0, nl));
      if (nl + 1 < head.length) yield head.slice(nl + 1);
    }
    if (!found) resolveFirst(head);
  }
  return { first, rest: rest() };
}

async function spawn(
  handle: SandboxHandle,
  at: (p: string) => string,
  extraEnv: Record<string, string>,
  command: string,
  options: ProcessOptions = {},
): Promise<SpawnHandle> {
  // The wrapper prints its pid (the command's, after exec) on the first stdout line.
  const proc = handle.exec(['sh', '-c', 'echo $$; exec sh -c "$1"', 'sh', command], {
    cwd: at(options.cwd ?? handle.localPath ?? handle.workspaceRoot),
    env: { ...extraEnv, ...options.env },
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    stdin: 'pipe',
  });
  const { first, rest } = splitFirstLine(proc.stdout);
  // Start consuming so the pid line arrives; the rest is buffered by the generator's consumer.
  const iterator = rest[Symbol.asyncIterator]();
  const pending = iterator.next();
  const pidText = await Promise.race([first, proc.exit.then(() => first)]);
  const pid = Number(pidText);
  async function* stdout(): AsyncIterable<string> {
    const head = await pending;
    if (head.done === true) return;
    yield head.value;
    for (;;) {
      const next = await iterator.next();
      if (next.done === true) return;
      yield next.value;
    }
  }
  return {
    pid: Number.isSafeInteger(pid) ? pid : -1,
    stdout: stdout(),
    stderr: decoded(proc.stderr),
    stdin: {
      write: (data) =>
        new Promise<void>((resolve, reject) => {
          proc.stdin?.write(data, (error) => (error ? reject(error) : resolve()));
        }),
      end: async () => {
        proc.stdin?.end();
      },
    },
    wait: async () => {
      const exit = await proc.exit;
      return exit.code ?? 128 + 9;
    },
    async kill(signal) {
      const name = typeof signal === 'number' ? undefined : (signal ?? 'SIGKILL');
      if (name === undefined || name === 'SIGKILL' || !SIGNALS.has(name) || !Number.isSafeInteger(pid)) {
        proc.kill();
        return;
      }
      await handle.run(['sh', '-c', `kill -s ${name.slice(3)} ${shellQuote(String(pid))}`]);
    },
  };
}
