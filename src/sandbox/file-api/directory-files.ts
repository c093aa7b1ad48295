import fs from 'node:fs';
import path from 'node:path';
import { bytesFromText, textFromBytes } from '../../core/name-bytes.js';
import { splitRelativePath } from '../../core/paths.js';
import { IntegrityError } from '../../errors.js';
import { utimeOf } from '../../workspace-fs/fs-exact.js';
import type { FileStat, ListedEntry, SandboxFiles } from './sandbox-files.js';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_APPEND, O_DIRECTORY, O_NOFOLLOW } = fs.constants;
/** Inode and device numbers beyond 2^53 are kept modulo it (they are only compared). */
const SAFE_MODULUS = 2n ** 53n;

/**
 * {@link SandboxFiles} over a directory on this host, with `node:fs`: the file API of a
 * sandbox whose workspace is a mounted volume, and the reference adapter the port's tests run.
 *
 * The directory may be shared with code Holdfast does not trust, so no call follows a symlink
 * anywhere in a path, the way `openat(2)` with `O_NOFOLLOW` would not: every directory on the
 * way is opened (`O_DIRECTORY | O_NOFOLLOW`) relative to the one before, and the last name is
 * reached through `/proc/self/fd/<fd>/` (Linux). A symlink swapped in for a directory fails the
 * call with `INTEGRITY` instead of leading outside the root.
 */
export class DirectoryFiles implements SandboxFiles {
  readonly label: string;
  readonly workspaceRoot: string;

  constructor(root: string) {
    this.workspaceRoot = path.resolve(root);
    this.label = this.workspaceRoot;
  }

  async *list(dir: string): AsyncIterable<ListedEntry> {
    const names = await this.at(dir, (at) => fs.promises.readdir(at, { encoding: 'buffer' }), true);
    for (const raw of names) {
      const name = textFromBytes(raw);
      const st = await this.lstat(dir === '' ? name : `${dir}/${name}`);
      if (st !== undefined) yield { name, ...st };
    }
  }

  async lstat(rel: string): Promise<FileStat | undefined> {
    try {
      return statOf(await this.at(rel, (at) => fs.promises.lstat(at, { bigint: true })));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async read(rel: string, offset: number, length: number): Promise<Uint8Array> {
    return this.at(rel, async (at) => {
      const fd = await fs.promises.open(at, O_RDONLY | O_NOFOLLOW);
      try {
        const buf = Buffer.alloc(length);
        let got = 0;
        while (got < length) {
          const { bytesRead } = await fd.read(buf, got, length - got, offset + got);
          if (bytesRead === 0) break;
          got += bytesRead;
        }
        return buf.subarray(0, got);
      } finally {
        await fd.close();
      }
    });
  }

  async write(rel: string, bytes: Uint8Array, options: { readonly append: boolean }): Promise<void> {
    const flags = O_WRONLY | O_NOFOLLOW | (options.append ? O_APPEND : O_CREAT | O_EXCL);
    await this.at(rel, async (at) => {
      const fd = await fs.promises.open(at, flags, 0o600);
      try {
        await fd.write(bytes);
      } finally {
        await fd.close();
      }
    });
  }

  async mkdir(rel: string): Promise<void> {
    await this.at(rel, (at) => fs.promises.mkdir(at, { mode: 0o700 }));
  }

  async rename(from: string, to: string): Promise<void> {
    await this.at(from, (a) => this.at(to, (b) => fs.promises.rename(a, b)));
  }

  async remove(rel: string): Promise<void> {
    // `rm` unlinks symlinks it meets and never descends through them.
    await this.at(rel, (at) => fs.promises.rm(at, { recursive: true, force: true }));
  }

  async readlink(rel: string): Promise<string> {
    return textFromBytes(await this.at(rel, (at) => fs.promises.readlink(at, { encoding: 'buffer' })));
  }

  async symlink(target: string, rel: string): Promise<void> {
    await this.at(rel, (at) => fs.promises.symlink(bytesFromText(target), at));
  }

  async link(existing: string, rel: string): Promise<void> {
    await this.at(existing, (a) => this.at(rel, (b) => fs.promises.link(a, b)));
  }

  async chmod(rel: string, mode: number): Promise<void> {
    // Through a descriptor opened without following, so a symlink's target is never changed.
    await this.at(rel, async (at) => {
      const st = await fs.promises.lstat(at);
      const fd = await fs.promises.open(at, O_RDONLY | O_NOFOLLOW | (st.isDirectory() ? O_DIRECTORY : 0));
      try {
        await fd.chmod(mode);
      } finally {
        await fd.close();
      }
    });
  }

  async utimes(rel: string, mtimeMs: number): Promise<void> {
    const time = utimeOf(mtimeMs);
    await this.at(rel, (at) => fs.promises.lutimes(at, time, time));
  }

  /**
   * Runs `use` with a path that names `rel` under the root without following a symlink on the
   * way: each directory before the last name is opened `O_NOFOLLOW`, relative to its parent's
   * descriptor. With `whole`, `rel` itself is opened so too (a directory to list).
   */
  private async at<T>(rel: string, use: (at: Buffer) => Promise<T>, whole = false): Promise<T> {
    const names = rel === '' ? [] : splitRelativePath(rel);
    // The root itself is the operator's path: reached as it is (a descriptor's magic link would be a symlink to `lstat`).
    if (names.length === 0 && !whole) return use(Buffer.from(this.workspaceRoot));
    const walk = whole ? names : names.slice(0, -1);
    const opened: fs.promises.FileHandle[] = [];
    try {
      let via: Buffer = Buffer.from(this.workspaceRoot);
      opened.push(await fs.promises.open(via, O_RDONLY | O_DIRECTORY));
      for (const name of walk) {
        via = join(opened[opened.length - 1] as fs.promises.FileHandle, name);
        try {
          opened.push(await fs.promises.open(via, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code !== 'ELOOP' && code !== 'ENOTDIR') throw error;
          throw new IntegrityError('INTEGRITY', `${this.label}: ${rel} goes through a symlink or a file; refused`, {
            data: { path: rel, field: 'type' },
          });
        }
      }
      const last = opened[opened.length - 1] as fs.promises.FileHandle;
      const leaf = whole ? undefined : names[names.length - 1];
      return await use(leaf === undefined ? Buffer.from(`/proc/self/fd/${last.fd}`) : join(last, leaf));
    } finally {
      for (const fd of opened.reverse()) await fd.close();
    }
  }
}

function join(dir: fs.promises.FileHandle, name: string): Buffer {
  return Buffer.concat([Buffer.from(`/proc/self/fd/${dir.fd}/`), bytesFromText(name)]);
}

function statOf(st: fs.BigIntStats): FileStat {
  const type = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'other';
  return {
    type,
    mode: Number(st.mode & 0o7777n),
    size: Number(st.size),
    mtimeMs: millis(st.mtimeNs),
    ctimeMs: millis(st.ctimeNs),
    ino: Number(st.ino % SAFE_MODULUS),
    dev: Number(st.dev % SAFE_MODULUS),
    nlink: Number(st.nlink),
  };
}

/** Milliseconds from nanoseconds, with the fraction, as Node computes `mtimeMs`. */
function millis(ns: bigint): number {
  const whole = ns / 1_000_000n;
  const rest = ns % 1_000_000n;
  return Number(whole) + Number(rest) / 1e6;
}
