/**
 * The compiled `holdfast` as users of restic and git expect a command line to behave: a
 * version command, `help [cmd]`, shell completion generated from the program, `--quiet`,
 * Ctrl-C ending with 130, read-only commands that never create a store, and `latest` within a
 * workspace. Exit codes and error codes are asserted, never message text.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { environmentWithoutHoldfast, storeEnvironment } from './support/cli-env.js';
import { writeFile } from './support/trees.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;
const EXIT_INTERRUPTED = 130;
/** How long a child is given to reach the point where it waits before it is interrupted. */
const SETTLE_MS = 1500;
/** Longest a test waits for an interrupted child to end. */
const END_DEADLINE_MS = 20_000;

interface Result {
  readonly exit: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** `error.code` of a `--json` error document on stderr. */
  readonly code: string | undefined;
}

function errorCode(stderr: string): string | undefined {
  try {
    return (JSON.parse(stderr) as { error: { code: string } }).error.code;
  } catch {
    return undefined;
  }
}

/** Runs the compiled CLI with `args` in `cwd` under `env`. */
function holdfast(args: readonly string[], options: { cwd?: string; env?: Record<string, string> } = {}): Promise<Result> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { cwd: options.cwd ?? root, env: options.env ?? environmentWithoutHoldfast(), maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const exit = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        const signal = error === null ? null : ((error as { signal?: NodeJS.Signals }).signal ?? null);
        resolve({ exit, signal, stdout, stderr, code: errorCode(stderr) });
      },
    );
  });
}

/** Runs bash `script` (bash is on every machine this runs on). */
function bash(script: string): Promise<{ exit: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-c', script], (error, stdout, stderr) => {
      resolve({ exit: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
    });
  });
}

/** Whether `shell` is installed (zsh and fish may be absent: their checks then stop at the script's shape). */
function installed(shell: string): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => fs.existsSync(path.join(dir, shell)));
}

/** Starts the CLI, sends SIGINT once it has settled, and resolves with how it ended. */
async function interrupted(args: readonly string[], env: Record<string, string>): Promise<{ code: number | null; signal: string | null }> {
  const child: ChildProcess = spawn(process.execPath, [bin, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const ended = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  child.kill('SIGINT');
  const deadline = setTimeout(() => child.kill('SIGKILL'), END_DEADLINE_MS);
  try {
    return await ended;
  } finally {
    clearTimeout(deadline);
  }
}

const packageVersion = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;

describe('holdfast as restic and git users expect (compiled bin)', () => {
  let dir: string;

  beforeAll(() => {
    expect(fs.existsSync(bin), `${bin} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-cli-conventions-'));
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("keeps the compiled code of its chunks in node's compile cache where node has one (22.1+), and runs the same where it has none", async () => {
    const tmp = fs.mkdtempSync(path.join(dir, 'tmp-'));
    const env: Record<string, string> = { ...environmentWithoutHoldfast(), TMPDIR: tmp };
    delete env.NODE_COMPILE_CACHE;
    expect(await holdfast(['--version'], { env })).toMatchObject({ exit: 0, stdout: `${packageVersion}\n` });
    const cache = path.join(tmp, 'node-compile-cache');
    const entries = (d: string): string[] =>
      fs.existsSync(d)
        ? fs
            .readdirSync(d, { recursive: true, withFileTypes: true })
            .filter((e) => e.isFile())
            .map((e) => e.name)
        : [];
    const nodeModule = (await import('node:module')).default as { enableCompileCache?: unknown };
    const hasCompileCache = typeof nodeModule.enableCompileCache === 'function';
    if (hasCompileCache) expect(entries(cache).length).toBeGreaterThan(0);
    else expect(entries(cache)).toEqual([]);
  });

  it('holdfast version and --version print the package version; version --json adds the runtime', async () => {
    expect(await holdfast(['version'])).toMatchObject({ exit: 0, stdout: `${packageVersion}\n` });
    expect(await holdfast(['--version'])).toMatchObject({ exit: 0, stdout: `${packageVersion}\n` });
    const json = await holdfast(['version', '--json']);
    expect(json.exit).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({
      version: packageVersion,
      node: process.versions.node,
      platform: process.platform,
      arch: process.arch,
    });
  });

  it('holdfast help [cmd] exits 0 at every depth; help for a command that does not exist is a usage error', async () => {
    for (const args of [['help'], ['help', 'log'], ['help', 'token'], ['token', 'help', 'create'], ['help', 'completion']]) {
      const result = await holdfast(args);
      expect({ args, exit: result.exit, printed: result.stdout.length > 0 }).toEqual({ args, exit: 0, printed: true });
    }
    expect((await holdfast(['help', 'no-such-command'])).exit).toBe(EXIT_USAGE);
    // A group without its subcommand is still a usage error.
    expect((await holdfast(['token'])).exit).toBe(EXIT_USAGE);
  });

  it('completion bash loads into bash (complete -p) and completes commands, subcommands and options', async () => {
    const script = path.join(dir, 'holdfast.bash');
    const generated = await holdfast(['completion', 'bash']);
    expect(generated.exit).toBe(0);
    fs.writeFileSync(script, generated.stdout);
    const complete = (words: string[]) => {
      const quoted = words.map((w) => `'${w}'`).join(' ');
      return `COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; COMPREPLY=(); _holdfast; printf '%s\\n' "\${COMPREPLY[*]}"`;
    };
    const run = await bash(
      [
        `source '${script}'`,
        'complete -p holdfast',
        complete(['holdfast', 'works']),
        complete(['holdfast', 'token', '']),
        complete(['holdfast', '--store', '/somewhere', 'run', 'sh']),
        complete(['holdfast', 'ls', '--work']),
        complete(['holdfast', 'help', 'compl']),
        // compgen itself, over the words the script offers at the top level.
        `compgen -W "$(_holdfast_subcommands '')" -- chec`,
      ].join('\n'),
    );
    expect(run.stderr).toBe('');
    expect(run.exit).toBe(0);
    const [completeLine, ...replies] = run.stdout.trimEnd().split('\n');
    expect(completeLine).toMatch(/^complete .*-F _holdfast holdfast$/);
    expect(replies).toEqual(['workspaces', 'create list revoke help', 'show', '--workspace', 'completion', 'checkpoint']);
  });

  it('completion zsh and fish are well-formed (checked by the shell itself where it is installed)', async () => {
    const zsh = await holdfast(['completion', 'zsh']);
    expect(zsh.exit).toBe(0);
    expect(zsh.stdout.split('\n')[0]).toBe('#compdef holdfast');
    expect(zsh.stdout).toContain('compdef _holdfast holdfast');
    const fish = await holdfast(['completion', 'fish']);
    expect(fish.exit).toBe(0);
    expect(fish.stdout).toMatch(/^complete -c holdfast .* -a token /m);
    // Every fish block that opens closes.
    const opened = fish.stdout.match(/^\s*(function|switch|for|if) /gm)?.length ?? 0;
    expect(fish.stdout.match(/^\s*end$/gm)?.length).toBe(opened);
    expect((await holdfast(['completion', 'tcsh'])).exit).toBe(EXIT_USAGE);
    if (installed('zsh')) {
      const file = path.join(dir, '_holdfast');
      fs.writeFileSync(file, zsh.stdout);
      const checked = await new Promise<number>((resolve) => {
        execFile('zsh', ['-n', file], (error) => resolve(error === null ? 0 : Number(error.code)));
      });
      expect(checked).toBe(0);
    }
    if (installed('fish')) {
      const file = path.join(dir, 'holdfast.fish');
      fs.writeFileSync(file, fish.stdout);
      const offered = await new Promise<string>((resolve, reject) => {
        execFile('fish', ['-c', `source '${file}'; complete -C 'holdfast token '`], (error, stdout) =>
          error === null ? resolve(stdout) : reject(error),
        );
      });
      expect(offered.split('\n').map((line) => line.split('\t')[0])).toEqual(expect.arrayContaining(['create', 'list', 'revoke']));
    }
  });

  it('--quiet leaves out notes on stderr, never the result', async () => {
    const store = path.join(dir, 'quiet-store');
    const loud = await holdfast(['--store', store, 'token', 'create']);
    expect(loud.exit).toBe(0);
    expect(loud.stderr).not.toBe('');
    const quiet = await holdfast(['--store', store, '--quiet', 'token', 'create']);
    expect(quiet).toMatchObject({ exit: 0, stderr: '' });
    expect(quiet.stdout.trim()).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    // An error is never quiet.
    const failed = await holdfast(['--store', store, '--quiet', '--json', 'log', '-w', 'missing']);
    expect({ exit: failed.exit, code: failed.code }).toEqual({ exit: EXIT_FAILURE, code: 'NOT_FOUND' });
  });

  it('Ctrl-C (SIGINT) ends a command with exit 130, not by the signal', async () => {
    const env = storeEnvironment(path.join(dir, 'interrupt-store'));
    // Waits on its stdin, which stays open.
    const upload = await interrupted(['folder', 'put', '--scope', 'task', '--owner', 'T1', 'notes.txt'], env);
    expect(upload).toEqual({ code: EXIT_INTERRUPTED, signal: null });
    const created = await holdfast(['sandbox', 'create', '-p', 'local'], { env });
    expect(created.exit).toBe(0);
    const id = created.stdout.trim();
    try {
      // The command in the sandbox is stopped first; the CLI still ends as interrupted.
      const exec = await interrupted(['sandbox', 'exec', '-p', 'local', id, '--', 'sleep', '30'], env);
      expect(exec).toEqual({ code: EXIT_INTERRUPTED, signal: null });
    } finally {
      await holdfast(['sandbox', 'destroy', '-p', 'local', id], { env });
    }
  });

  it('read-only commands in a directory without a store create none: NOT_FOUND, exit 1', async () => {
    const empty = fs.mkdtempSync(path.join(dir, 'empty-'));
    const commands = [
      ['workspaces'],
      ['log', '-w', 'w'],
      ['ls', 'latest'],
      ['ls', 'latest', '-w', 'w'],
      ['cat', 'latest', 'a.txt'],
      ['diff', 'latest', 'latest'],
      ['verify'],
      ['run', 'ls'],
      ['run', 'show', 'latest'],
      ['user', 'ls', '-t', 'default'],
      ['token', 'list'],
      ['deployment', 'ls'],
      ['folder', 'ls', '--scope', 'task', '--owner', 'T1'],
      ['folder', 'get', '--scope', 'task', '--owner', 'T1', '-o', path.join(empty, 'out'), 'a.txt'],
      ['folder', 'sync', '--scope', 'task', '--owner', 'T1'],
    ];
    for (const args of commands) {
      const result = await holdfast(['--json', ...args], { cwd: empty });
      expect({ args, exit: result.exit, code: result.code }).toEqual({ args, exit: EXIT_FAILURE, code: 'NOT_FOUND' });
      expect({ args, left: fs.readdirSync(empty) }).toEqual({ args, left: [] });
    }
    // --store naming a directory that does not exist: the same, and it is not created.
    const named = path.join(empty, 'no-store');
    const result = await holdfast(['--json', '--store', named, 'workspaces'], { cwd: empty });
    expect({ exit: result.exit, code: result.code }).toEqual({ exit: EXIT_FAILURE, code: 'NOT_FOUND' });
    expect(fs.existsSync(named)).toBe(false);
    // A command that writes still creates the store it is pointed at.
    expect((await holdfast(['--json', 'init'], { cwd: empty })).exit).toBe(0);
    expect((await holdfast(['--json', 'workspaces'], { cwd: empty })).exit).toBe(0);
  });

  it('ls / cat / diff latest -w WORKSPACE: the head of that workspace, not the newest checkpoint of the tenant', async () => {
    const store = path.join(dir, 'latest-store');
    const mine = path.join(dir, 'ws-mine');
    const other = path.join(dir, 'ws-other');
    writeFile(mine, 'only-in-mine.txt', 'mine\n');
    writeFile(other, 'only-in-other.txt', 'other\n');
    const take = async (src: string, workspace: string) => {
      const result = await holdfast(['--store', store, '--json', 'checkpoint', src, '-w', workspace]);
      expect(result.exit).toBe(0);
      return (JSON.parse(result.stdout) as { id: string }).id;
    };
    const mineId = await take(mine, 'mine');
    const otherId = await take(other, 'other');
    const names = async (args: string[]) => {
      const result = await holdfast(['--store', store, '--json', 'ls', ...args]);
      expect({ args, exit: result.exit }).toEqual({ args, exit: 0 });
      return (JSON.parse(result.stdout) as { entries: { name: string }[] }).entries.map((e) => e.name);
    };
    expect(await names(['latest'])).toEqual(['only-in-other.txt']);
    expect(await names(['latest', '-w', 'mine'])).toEqual(['only-in-mine.txt']);
    expect(await names([mineId.slice(0, 12), '-w', 'mine'])).toEqual(['only-in-mine.txt']);
    const cat = await holdfast(['--store', store, 'cat', 'latest', 'only-in-mine.txt', '-w', 'mine']);
    expect(cat).toMatchObject({ exit: 0, stdout: 'mine\n' });
    const diff = await holdfast(['--store', store, '--json', 'diff', mineId, 'latest', '-w', 'mine']);
    expect({ exit: diff.exit, changes: JSON.parse(diff.stdout) }).toEqual({ exit: 0, changes: [] });
    // Another workspace's checkpoint is not in this one.
    const foreign = await holdfast(['--store', store, '--json', 'ls', otherId, '-w', 'mine']);
    expect({ exit: foreign.exit, code: foreign.code }).toEqual({ exit: EXIT_FAILURE, code: 'NOT_FOUND' });
    const missing = await holdfast(['--store', store, '--json', 'ls', 'latest', '-w', 'nowhere']);
    expect({ exit: missing.exit, code: missing.code }).toEqual({ exit: EXIT_FAILURE, code: 'NOT_FOUND' });
  });
});
