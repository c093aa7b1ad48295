import { bytesFromText, hasByteEscapes, textFromBytes } from '../../core/name-bytes.js';
import { shellQuote } from '../../core/shell-quote.js';
import { InputError, StoreError } from '../../errors.js';
import { parseStatLine, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG, STAT_FORMAT, type StatFields } from '../endpoints/shell/stat-line.js';
import { untrueListing } from './file-api-scan.js';
import type { FileStat, ListedEntry, SandboxFiles } from './sandbox-files.js';

/**
 * The slice of a TanStack AI sandbox handle (`@tanstack/ai-sandbox` `SandboxHandle`) this
 * adapter uses: its byte-safe `fs` and its text-only `process.exec`. Declared here so Holdfast
 * needs no TanStack package at run time.
 */
export interface TanStackSandboxSlice {
  readonly id: string;
  readonly provider: string;
  /** The real path behind the virtual `/workspace` (local-process, Daytona, Vercel); absent when they are one. */
  readonly workspaceRoot?: string;
  readonly fs: {
    readBytes(path: string): Promise<Uint8Array>;
    write(path: string, data: string | Uint8Array): Promise<void>;
    list(path: string): Promise<Array<{ name: string; type: string }>>;
    mkdir(path: string): Promise<void>;
    remove(path: string): Promise<void>;
    rename(from: string, to: string): Promise<void>;
  };
  readonly process: {
    exec(command: string, options?: { cwd?: string }): Promise<{ stdout: string; stderr: string; exitCode: number }>;
  };
}

/** TanStack's virtual workspace root: `fs` paths under it map to the sandbox's workspace. */
export const TANSTACK_WORKSPACE_ROOT = '/workspace';
/** Names stated per exec while listing (their arguments stay far below any exec's limit). */
const STATS_PER_EXEC = 128;

/**
 * {@link SandboxFiles} over a TanStack AI sandbox. Bytes go through its file API (`readBytes`,
 * `write(Uint8Array)`, `list`, `mkdir`, `rename`, `remove`); what that API lacks (`lstat`,
 * modes, times, symlinks, hard links, appending) goes through its text-only exec, whose answers
 * are numbers and hex (`stat -c`, `readlink | od`), so nothing byte-sensitive crosses it. Names
 * that are not UTF-8 reach commands as `printf` octal escapes; TanStack's `list` cannot carry
 * them (its names are strings), so listing a directory holding one fails with `INVALID_PATH`.
 *
 * TanStack's `readBytes` reads a whole file: a ranged `read` reads the file and keeps the range,
 * so a file of N pieces is read N times (`FILE_API_READ_BYTES` each). Its `write` follows
 * symlinks inside the sandbox; the host never relies on it (every file is stated and hashed
 * after it lands), and nothing of it reaches the host.
 */
export class TanStackFiles implements SandboxFiles {
  readonly label: string;
  readonly workspaceRoot: string;

  constructor(private readonly sandbox: TanStackSandboxSlice) {
    this.workspaceRoot = sandbox.workspaceRoot ?? TANSTACK_WORKSPACE_ROOT;
    this.label = `sandbox ${sandbox.id}:${this.workspaceRoot}`;
  }

  async *list(dir: string): AsyncIterable<ListedEntry> {
    const listed = await this.sandbox.fs.list(virtual(dir));
    for (let i = 0; i < listed.length; i += STATS_PER_EXEC) {
      const group = listed.slice(i, i + STATS_PER_EXEC).map((e) => e.name);
      const stats = await this.statAll(group.map((n) => (dir === '' ? n : `${dir}/${n}`)));
      for (const [k, name] of group.entries()) {
        const st = stats[k];
        if (st !== undefined) yield { name, ...st };
        else if (name.includes('\ufffd'))
          throw new InputError(
            'INVALID_PATH',
            `${this.label}: ${dir || '/'} holds a name that is not UTF-8, which TanStack's fs cannot carry`,
            {
              data: { path: dir },
            },
          );
      }
    }
  }

  async lstat(rel: string): Promise<FileStat | undefined> {
    return (await this.statAll([rel]))[0];
  }

  async read(rel: string, offset: number, length: number): Promise<Uint8Array> {
    const whole = await this.sandbox.fs.readBytes(virtual(rel));
    return whole.subarray(offset, offset + length);
  }

  async write(rel: string, bytes: Uint8Array, options: { readonly append: boolean }): Promise<void> {
    if (!options.append) {
      await this.sh(`if [ -e ${arg(rel)} ] || [ -h ${arg(rel)} ]; then exit 17; fi`);
      await this.sandbox.fs.write(virtual(rel), bytes);
      await this.sh(`chmod 600 ${arg(rel)}`);
      return;
    }
    const part = `${rel}.holdfast-part`;
    await this.sandbox.fs.write(virtual(part), bytes);
    await this.sh(`cat ${arg(part)} >> ${arg(rel)} && rm -f ${arg(part)}`);
  }

  async mkdir(rel: string): Promise<void> {
    await this.sh(`mkdir -m 700 ${arg(rel)}`);
  }

  async rename(from: string, to: string): Promise<void> {
    await this.sandbox.fs.rename(virtual(from), virtual(to));
  }

  async remove(rel: string): Promise<void> {
    await this.sandbox.fs.remove(virtual(rel));
  }

  async readlink(rel: string): Promise<string> {
    const hex = await this.sh(`readlink ${arg(rel)} | od -An -v -tx1`);
    const bytes = Buffer.from(hex.replace(/\s+/g, ''), 'hex');
    // readlink ends its answer with a newline.
    return textFromBytes(bytes.subarray(0, Math.max(0, bytes.length - 1)));
  }

  async symlink(target: string, rel: string): Promise<void> {
    await this.sh(`ln -s -- ${quotedBytes(target)} ${arg(rel)}`);
  }

  async link(existing: string, rel: string): Promise<void> {
    await this.sh(`ln ${arg(existing)} ${arg(rel)}`);
  }

  async chmod(rel: string, mode: number): Promise<void> {
    await this.sh(`if [ -h ${arg(rel)} ]; then exit 40; fi; chmod ${mode.toString(8)} ${arg(rel)}`);
  }

  async utimes(rel: string, mtimeMs: number): Promise<void> {
    await this.sh(`touch -h -d @${(mtimeMs / 1000).toFixed(3)} ${arg(rel)}`);
  }

  /** Each path's `lstat` in one exec (`undefined` for one that is not there). */
  private async statAll(paths: readonly string[]): Promise<Array<FileStat | undefined>> {
    const script = paths
      .map((p) => `if [ -e ${arg(p)} ] || [ -h ${arg(p)} ]; then stat -c '${STAT_FORMAT}' ${arg(p)} || exit 9; else echo -; fi`)
      .join('\n');
    const lines = (await this.sh(script)).split('\n');
    if (lines.length !== paths.length + 1 || lines[paths.length] !== '')
      throw untrueListing(this, 'a stat answer has the wrong number of lines');
    return paths.map((_, i) => (lines[i] === '-' ? undefined : statOf(parseStatLine(lines[i] as string, 'file API stat'))));
  }

  /** Runs `script` with `sh` in the workspace root; its stdout, or `STORE_UNAVAILABLE` when it fails. */
  private async sh(script: string): Promise<string> {
    const r = await this.sandbox.process.exec(script, { cwd: TANSTACK_WORKSPACE_ROOT });
    if (r.exitCode !== 0) {
      throw new StoreError(`${this.label}: a file command failed (exit ${r.exitCode}): ${r.stderr.slice(0, 200)}`, {
        data: { exitCode: r.exitCode },
      });
    }
    return r.stdout;
  }
}

/** TanStack's `fs` path of a workspace path. */
function virtual(rel: string): string {
  return rel === '' ? TANSTACK_WORKSPACE_ROOT : `${TANSTACK_WORKSPACE_ROOT}/${rel}`;
}

/** A workspace path as one shell word, relative to the root (`./…`), byte escapes as `printf` octal. */
function arg(rel: string): string {
  return quotedBytes(rel === '' ? '.' : `./${rel}`);
}

/** `text` as one shell word: single-quoted, or (holding byte escapes) rebuilt by `printf` from octal escapes. */
function quotedBytes(text: string): string {
  if (!hasByteEscapes(text)) return shellQuote(text);
  const octal = [...bytesFromText(text)].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('');
  return `"$(printf '${octal}')"`;
}

function statOf(st: StatFields): FileStat {
  const kind = st.mode & S_IFMT;
  const type = kind === S_IFREG ? 'file' : kind === S_IFDIR ? 'dir' : kind === S_IFLNK ? 'symlink' : 'other';
  return {
    type,
    mode: st.mode & 0o7777,
    size: st.size,
    mtimeMs: st.mtimeMs,
    ctimeMs: st.ctimeMs,
    ino: st.ino,
    dev: st.dev,
    nlink: st.nlink,
  };
}
