import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IntegrityError } from '../../errors.js';
import { checkKept, utimeOf } from '../../workspace-fs/fs-exact.js';

describe('utimeOf and checkKept', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-utime-'));
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('sets every millisecond exactly, before 1970, today and in 2400, on files, directories and symlinks', () => {
    const f = path.join(dir, 'f');
    const d = path.join(dir, 'd');
    const l = path.join(dir, 'l');
    fs.writeFileSync(f, 'x');
    fs.mkdirSync(d);
    fs.symlinkSync('f', l);
    const bases = [Date.UTC(1902, 0, 1), Date.UTC(1960, 0, 1), -1000, 0, Date.UTC(2024, 0, 1), Date.UTC(2400, 0, 1)];
    for (const base of bases) {
      for (let ms = 0; ms < 1000; ms += 37) {
        const t = utimeOf(base + ms);
        fs.utimesSync(f, t, t);
        fs.utimesSync(d, t, t);
        fs.lutimesSync(l, t, t);
        for (const p of [f, d, l]) expect(Math.floor(fs.lstatSync(p).mtimeMs)).toBe(base + ms);
      }
    }
  });

  it('names the field a target did not keep (INTEGRITY, data path and field)', () => {
    const f = path.join(dir, 'g');
    fs.writeFileSync(f, 'x');
    fs.chmodSync(f, 0o640);
    const t = utimeOf(5000);
    fs.utimesSync(f, t, t);
    const st = fs.lstatSync(f);
    expect(() => checkKept('g', st, 0o640, 5000)).not.toThrow();
    const failure = (mode: number | undefined, mtimeMs: number): unknown => {
      try {
        checkKept('g', st, mode, mtimeMs);
      } catch (error) {
        return error;
      }
      return undefined;
    };
    for (const [mode, mtime, field] of [
      [0o644, 5000, 'mode'],
      [0o640, 5001, 'mtime'],
      [undefined, 4999, 'mtime'],
    ] as const) {
      const error = failure(mode, mtime);
      expect(error).toBeInstanceOf(IntegrityError);
      expect((error as IntegrityError).code).toBe('INTEGRITY');
      expect((error as IntegrityError).data).toEqual({ path: 'g', field });
    }
  });
});
