import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryFiles } from '../src/sandbox/file-api/directory-files.js';
import { fileApiEndpoints } from '../src/sandbox/file-api/file-api-endpoints.js';
import type { ListedEntry, SandboxFiles } from '../src/sandbox/file-api/sandbox-files.js';
import { BACKENDS } from './support/backends.js';
import { codeOf } from './support/error-code.js';

type Backend = Awaited<ReturnType<(typeof BACKENDS)[number]['open']>>;

/** A real node:fs file API with some calls replaced: what a sandbox's file API that lies answers. */
function lying(inner: SandboxFiles, over: Partial<SandboxFiles>): SandboxFiles {
  return {
    label: inner.label,
    list: (d) => inner.list(d),
    lstat: (p) => inner.lstat(p),
    read: (p, o, l) => inner.read(p, o, l),
    write: (p, b, o) => inner.write(p, b, o),
    mkdir: (p) => inner.mkdir(p),
    rename: (a, b) => inner.rename(a, b),
    remove: (p) => inner.remove(p),
    readlink: (p) => inner.readlink(p),
    symlink: (t, p) => inner.symlink(t, p),
    link: (a, b) => inner.link(a, b),
    chmod: (p, m) => inner.chmod(p, m),
    utimes: (p, t) => inner.utimes(p, t),
    ...over,
  };
}

/** Every file under `dir` with its bytes (what a target holds). */
function contents(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const p = rel === '' ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else out[p] = e.isSymbolicLink() ? `-> ${fs.readlinkSync(path.join(dir, p))}` : fs.readFileSync(path.join(dir, p), 'hex');
    }
  };
  walk('');
  return out;
}

describe('a file API that lies is refused, and the last good state stays', () => {
  let b: Backend;
  let dir: string;
  let real: DirectoryFiles;
  let head: string;
  const ws = 'attacks';

  beforeAll(async () => {
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    dir = fs.mkdtempSync(path.join(b.dir, 'ws-'));
    fs.mkdirSync(path.join(dir, 'src'));
    fs.writeFileSync(path.join(dir, 'src/a.txt'), 'alpha\n');
    fs.writeFileSync(path.join(dir, 'b.txt'), 'bravo\n');
    real = new DirectoryFiles(dir);
    head = (await b.snapshots.checkpoint({ workspace: ws, source: fileApiEndpoints(real).source })).checkpoint.id;
  }, 60_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  const checkpointThrough = (files: SandboxFiles) => b.snapshots.checkpoint({ workspace: ws, source: fileApiEndpoints(files).source });
  const headNow = async () => (await b.snapshots.restorePoint(ws)).checkpoint.id;

  it('a read that returns more bytes than asked for fails the checkpoint with INTEGRITY; the head stays', async () => {
    const files = lying(real, { read: async (p, o, l) => Buffer.concat([Buffer.from(await real.read(p, o, l)), Buffer.alloc(l + 1)]) });
    expect(await codeOf(checkpointThrough(files))).toBe('INTEGRITY');
    expect(await headNow()).toBe(head);
  });

  it('a file whose read has another size than its lstat fails with WORKSPACE_CHANGED; the head stays', async () => {
    const files = lying(real, { read: async (p, o, l) => (await real.read(p, o, l)).subarray(0, 2) });
    expect(await codeOf(checkpointThrough(files))).toBe('WORKSPACE_CHANGED');
    expect(await headNow()).toBe(head);
  });

  for (const name of ['../../etc/passwd', 'src/a.txt', '..', '.', '']) {
    it(`a listed name ${JSON.stringify(name)} fails with INTEGRITY before anything is read; the head stays`, async () => {
      const asked: string[] = [];
      const files = lying(real, {
        list: async function* (d) {
          for await (const e of real.list(d)) yield d === '' && e.name === 'b.txt' ? { ...e, name } : e;
        },
        read: async (p, o, l) => {
          asked.push(p);
          return real.read(p, o, l);
        },
      });
      expect(await codeOf(checkpointThrough(files))).toBe('INTEGRITY');
      expect(asked).toEqual([]);
      expect(await headNow()).toBe(head);
    });
  }

  it('a symlink that escapes is left out with its reason, never followed', async () => {
    const files = lying(real, {
      list: async function* (d) {
        yield* real.list(d);
        if (d === '') yield { ...((await real.lstat('b.txt')) as ListedEntry), name: 'escape', type: 'symlink', size: 14 };
      },
      readlink: async (p) => (p === 'escape' ? '../../../../etc' : real.readlink(p)),
    });
    const result = await checkpointThrough(files);
    expect(result.excluded.find((x) => x.path === 'escape')?.reason).toBe('symlink-escape');
    head = result.checkpoint.id;
  });

  it('an endless listing fails with LIMIT_EXCEEDED; the head stays', async () => {
    const files = lying(real, {
      list: async function* (d) {
        const st = (await real.lstat('b.txt')) as ListedEntry;
        for (let i = 0; d === ''; i += 1) yield { ...st, name: `f${i}` };
      },
    });
    const r = b.snapshots.checkpoint({
      workspace: ws,
      source: fileApiEndpoints(files).source,
      limits: { maxEntries: 1000, maxFileBytes: 1 << 20, maxDirs: 100 },
    });
    expect(await codeOf(r)).toBe('LIMIT_EXCEEDED');
    expect(await headNow()).toBe(head);
  });

  it('bytes that change between list and read fail with WORKSPACE_CHANGED; the head stays', async () => {
    let n = 0;
    const files = lying(real, {
      read: async (p, o, l) => {
        // Another writer rewrites the file each time it is read: its stat moves under the read.
        fs.writeFileSync(path.join(dir, p), `changed ${n++}\n`.padEnd(6, 'x').slice(0, 6));
        return real.read(p, o, l);
      },
    });
    expect(await codeOf(checkpointThrough(files))).toBe('WORKSPACE_CHANGED');
    expect(await headNow()).toBe(head);
    fs.writeFileSync(path.join(dir, 'b.txt'), 'bravo\n');
    fs.writeFileSync(path.join(dir, 'src/a.txt'), 'alpha\n');
  });

  describe('restores', () => {
    let target: string;
    let before: Record<string, string>;
    beforeAll(() => {
      target = fs.mkdtempSync(path.join(b.dir, 'target-'));
      fs.writeFileSync(path.join(target, 'mine.txt'), 'keep me\n');
      before = contents(target);
    });
    const restoreThrough = (files: SandboxFiles) =>
      b.snapshots.restore({ workspace: ws, checkpoint: head, replace: true, target: fileApiEndpoints(files).target });

    it('bytes read back that differ from those written fail with INTEGRITY; the target is as it was', async () => {
      const t = new DirectoryFiles(target);
      const files = lying(t, { read: async (p, o, l) => Buffer.from(await t.read(p, o, l)).fill(0x41) });
      expect(await codeOf(restoreThrough(files))).toBe('INTEGRITY');
      expect(contents(target)).toEqual(before);
    });

    it('a size read back that differs from the one written fails with INTEGRITY; the target is as it was', async () => {
      const t = new DirectoryFiles(target);
      const files = lying(t, {
        lstat: async (p) => {
          const st = await t.lstat(p);
          return st?.type === 'file' ? { ...st, size: st.size + 1 } : st;
        },
      });
      expect(await codeOf(restoreThrough(files))).toBe('INTEGRITY');
      expect(contents(target)).toEqual(before);
    });

    it('a directory swapped for a symlink out of the target is never written through (INTEGRITY); outside and target stay', async () => {
      const outside = fs.mkdtempSync(path.join(b.dir, 'outside-'));
      const t = new DirectoryFiles(target);
      // The sandbox answers mkdir by planting a symlink to a host directory outside the workspace.
      const files = lying(t, {
        mkdir: async (p) => (p.endsWith('/src') ? fs.symlinkSync(outside, path.join(target, p)) : t.mkdir(p)),
        lstat: async (p) => {
          const st = await t.lstat(p);
          return p.endsWith('/src') && st !== undefined ? { ...st, type: 'dir' } : st;
        },
      });
      expect(await codeOf(restoreThrough(files))).toBe('INTEGRITY');
      expect(fs.readdirSync(outside)).toEqual([]);
      expect(contents(target)).toEqual(before);
    });

    it('a restore through the honest API lands the checkpoint', async () => {
      const receipt = await restoreThrough(new DirectoryFiles(target));
      expect(receipt.verified).toBe(true);
      expect(contents(target)).toEqual({
        'b.txt': Buffer.from('bravo\n').toString('hex'),
        'src/a.txt': Buffer.from('alpha\n').toString('hex'),
      });
    });
  });
});
