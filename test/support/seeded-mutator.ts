/**
 * Seeded mutations of a workspace on this host, one per step: new files (some old-dated),
 * appends, same-size rewrites with the mtime put back, renames of files and directories, hard
 * links, deletes of files and directories, new directories, chmod and symlinks. The same seed
 * gives the same changes, so a failing run can be replayed.
 */
import fs from 'node:fs';
import path from 'node:path';
import { rng } from './secret-samples.js';
import { seededBytes } from './trees.js';

/** Long enough ago that no stat cache counts a file as racy. */
export const OLD_S = Date.UTC(2024, 1, 2, 3, 4, 5) / 1000;

export class SeededMutator {
  private readonly next: () => number;
  private n = 0;

  constructor(
    private readonly root: string,
    seed: number,
  ) {
    this.next = rng(seed);
  }

  private pick<T>(list: readonly T[]): T | undefined {
    return list.length === 0 ? undefined : list[this.next() % list.length];
  }

  private entries(kind: 'file' | 'dir'): string[] {
    const out: string[] = [];
    const walk = (rel: string): void => {
      for (const name of fs.readdirSync(path.join(this.root, rel))) {
        const p = rel === '' ? name : `${rel}/${name}`;
        const st = fs.lstatSync(path.join(this.root, p));
        if (st.isDirectory()) {
          if (kind === 'dir') out.push(p);
          walk(p);
        } else if (st.isFile() && kind === 'file') out.push(p);
      }
    };
    walk('');
    return out.sort();
  }

  private dirOrRoot(): string {
    return this.next() % 3 === 0 ? '' : (this.pick(this.entries('dir')) ?? '');
  }

  private fresh(prefix: string): string {
    this.n += 1;
    const dir = this.dirOrRoot();
    return dir === '' ? `${prefix}${this.n}` : `${dir}/${prefix}${this.n}`;
  }

  private old(p: string): void {
    fs.utimesSync(path.join(this.root, p), OLD_S + this.n, OLD_S + this.n);
  }

  /** Makes the starting tree: a few directories of small files, all old. */
  seed(): void {
    for (const d of ['a', 'a/b', 'a/b/c', 'd', 'e']) fs.mkdirSync(path.join(this.root, d), { recursive: true });
    for (let i = 0; i < 30; i += 1) {
      const p = this.fresh('f');
      fs.writeFileSync(path.join(this.root, p), seededBytes(1 + (this.next() % 3000), `seed-${i}`));
      this.old(p);
    }
  }

  /** One seeded change; returns what it did. */
  step(): string {
    const abs = (p: string): string => path.join(this.root, p);
    const file = this.pick(this.entries('file'));
    const op = this.next() % 12;
    if (op === 0 || file === undefined) {
      const p = this.fresh('new');
      fs.writeFileSync(abs(p), seededBytes(this.next() % 5000, `new-${this.n}`));
      if (this.next() % 2 === 0) this.old(p);
      return `write ${p}`;
    }
    if (op === 1) {
      fs.appendFileSync(abs(file), `line ${this.n}\n`);
      return `append ${file}`;
    }
    if (op === 2) {
      // Same size, same mtime (`touch -r` of its old self): only ctime tells.
      const st = fs.statSync(abs(file));
      const bytes = fs.readFileSync(abs(file));
      if (bytes.length === 0) return 'skip (empty)';
      bytes[0] = (bytes[0] as number) ^ 0xff;
      fs.writeFileSync(abs(file), bytes);
      fs.utimesSync(abs(file), st.atime, st.mtime);
      return `same-size rewrite ${file}`;
    }
    if (op === 3) {
      const to = this.fresh('mv');
      fs.renameSync(abs(file), abs(to));
      return `rename ${file} -> ${to}`;
    }
    if (op === 4) {
      const dir = this.pick(this.entries('dir'));
      if (dir === undefined) return 'skip (no dir)';
      this.n += 1;
      const to = `moved${this.n}`;
      fs.renameSync(abs(dir), abs(to));
      return `rename dir ${dir} -> ${to}`;
    }
    if (op === 5) {
      const to = this.fresh('ln');
      fs.linkSync(abs(file), abs(to));
      return `hard link ${file} -> ${to}`;
    }
    if (op === 6) {
      fs.rmSync(abs(file));
      return `delete ${file}`;
    }
    if (op === 7) {
      const dir = this.pick(this.entries('dir'));
      if (dir === undefined || this.next() % 3 !== 0) return 'skip (kept dirs)';
      fs.rmSync(abs(dir), { recursive: true });
      return `delete dir ${dir}`;
    }
    if (op === 8) {
      const p = this.fresh('dir');
      fs.mkdirSync(abs(p));
      return `mkdir ${p}`;
    }
    if (op === 9) {
      fs.chmodSync(abs(file), this.next() % 2 === 0 ? 0o755 : 0o600);
      return `chmod ${file}`;
    }
    if (op === 10) {
      const p = this.fresh('sym');
      const target = path.relative(path.dirname(abs(p)), abs(file));
      fs.symlinkSync(target, abs(p));
      return `symlink ${p} -> ${target}`;
    }
    return 'nothing';
  }
}
