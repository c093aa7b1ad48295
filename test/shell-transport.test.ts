import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chooseTransport, NO_SCRATCH, ProbeCache, parseProbe, probeSandbox } from '../src/sandbox/endpoints/shell/probe.js';
import { parseScanAnswer } from '../src/sandbox/endpoints/shell/shell-scan.js';
import type { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { DockerSandboxProvider } from '../src/sandbox/providers/docker.js';
import type { SandboxHandle } from '../src/sandbox/sandbox-provider.js';
import { utimeOf } from '../src/workspace-fs/fs-exact.js';
import type { OpenedBackends } from './support/backends.js';
import { openBwrapBackends } from './support/bwrap-backends.js';
import { busyboxImage, expectDockerInstalled } from './support/docker-images.js';
import { codeOf } from './support/error-code.js';
import { bwrapWorkspaceOnHost, type ShellEndpointOptions, shellCheckpoint, shellRestore } from './support/shell-endpoints.js';
import { lyingHandle, withoutStdin } from './support/shell-handles.js';

const MiB = 1024 * 1024;
/** A name that is not UTF-8 (bytes FF FE), kept exactly. */
const BYTE_NAME = Buffer.concat([Buffer.from('bad-'), Buffer.from([0xff, 0xfe]), Buffer.from('.txt')]);
/** A name with a newline: Holdfast refuses control characters in names (`invalid-path`), the scan must still frame it. */
const NEWLINE_NAME = Buffer.from('new\nline.txt');
const TEN_MIB = randomBytes(10 * MiB);

/** Builds the fidelity fixture in `dir` on the host (the sandbox's disk), names as bytes. */
function fillFidelity(dir: string): void {
  const at = (...parts: Array<string | Buffer>): Buffer =>
    Buffer.concat(parts.map((p, i) => Buffer.concat([i === 0 ? Buffer.alloc(0) : Buffer.from('/'), Buffer.from(p)])));
  const root = Buffer.from(dir);
  fs.mkdirSync(at(root, 'src', 'deep'), { recursive: true });
  fs.mkdirSync(at(root, 'ro'));
  fs.mkdirSync(at(root, 'empty'));
  fs.writeFileSync(at(root, BYTE_NAME), 'not utf-8 name\n');
  fs.writeFileSync(at(root, NEWLINE_NAME), 'left out\n');
  fs.writeFileSync(at(root, 'empty.txt'), '');
  fs.writeFileSync(at(root, 'ten.bin'), TEN_MIB);
  fs.writeFileSync(at(root, 'src', 'a.txt'), 'alpha\n');
  fs.linkSync(at(root, 'src', 'a.txt'), at(root, 'src', 'b-link.txt'));
  fs.writeFileSync(at(root, 'src', 'deep', 'run.sh'), '#!/bin/sh\necho hi\n');
  fs.writeFileSync(at(root, 'ro', 'inside.txt'), 'in a read-only directory\n');
  fs.writeFileSync(at(root, 'readonly.txt'), 'r\n');
  fs.symlinkSync('src/a.txt', at(root, 'link'));
  fs.symlinkSync(Buffer.concat([Buffer.from('../'), BYTE_NAME]), at(root, 'src', 'to-bytes'));
  fs.symlinkSync('missing-target', at(root, 'dangling'));
  const times: Array<[Buffer, number, number | undefined]> = [
    [at(root, BYTE_NAME), Date.UTC(2024, 0, 2, 3, 4, 5, 678), 0o644],
    [at(root, 'empty.txt'), Date.UTC(2023, 5, 6, 7, 8, 9, 1), 0o600],
    [at(root, 'ten.bin'), Date.UTC(2022, 1, 2, 3, 4, 5, 999), 0o644],
    [at(root, 'src', 'a.txt'), Date.UTC(2021, 1, 2, 3, 4, 5, 250), 0o640],
    [at(root, 'src', 'deep', 'run.sh'), Date.UTC(1965, 1, 2, 3, 4, 5, 500), 0o755],
    [at(root, 'readonly.txt'), Date.UTC(2020, 1, 2, 3, 4, 5, 42), 0o444],
    [at(root, 'ro', 'inside.txt'), Date.UTC(2020, 2, 2, 3, 4, 5, 43), 0o644],
    [at(root, 'src', 'deep'), Date.UTC(2019, 1, 2, 3, 4, 5, 7), 0o700],
    [at(root, 'src'), Date.UTC(2019, 1, 2, 3, 4, 6, 8), 0o755],
    [at(root, 'ro'), Date.UTC(2019, 1, 2, 3, 4, 7, 9), 0o555],
    [at(root, 'empty'), Date.UTC(2019, 1, 2, 3, 4, 8, 10), 0o750],
    [root, Date.UTC(2018, 1, 2, 3, 4, 5, 6), 0o755],
  ];
  for (const [p, ms, mode] of times) {
    if (mode !== undefined) fs.chmodSync(p, mode);
    fs.utimesSync(p, utimeOf(ms), utimeOf(ms));
  }
  for (const [p, ms] of [
    [at(root, 'link'), Date.UTC(2017, 1, 2, 3, 4, 5, 111)],
    [at(root, 'src', 'to-bytes'), Date.UTC(2017, 1, 2, 3, 4, 5, 222)],
    [at(root, 'dangling'), Date.UTC(2017, 1, 2, 3, 4, 5, 333)],
  ] as const)
    fs.lutimesSync(p, utimeOf(ms), utimeOf(ms));
}

type Seen = { type: string; mode?: number; mtimeMs: number; sha256?: string; target?: string; inode?: string };

/** Everything under `dir` on the host, names as hex of their bytes: type, mode, whole-ms mtime, hash, target, and inode groups. */
function manifest(dir: string): Record<string, Seen> {
  const out: Record<string, Seen> = {};
  const inodes = new Map<string, string>();
  const walk = (abs: Buffer, rel: string): void => {
    for (const name of fs.readdirSync(abs, { encoding: 'buffer' }).sort(Buffer.compare)) {
      const p = Buffer.concat([abs, Buffer.from('/'), name]);
      const r = rel === '' ? name.toString('hex') : `${rel}/${name.toString('hex')}`;
      const st = fs.lstatSync(p, { bigint: false });
      const mtimeMs = Math.floor(st.mtimeMs);
      if (st.isDirectory()) {
        out[r] = { type: 'dir', mode: st.mode & 0o7777, mtimeMs };
        walk(p, r);
      } else if (st.isSymbolicLink())
        out[r] = { type: 'symlink', mtimeMs, target: fs.readlinkSync(p, { encoding: 'buffer' }).toString('hex') };
      else {
        const key = `${st.dev}:${st.ino}`;
        if (st.nlink > 1 && !inodes.has(key)) inodes.set(key, r);
        out[r] = {
          type: 'file',
          mode: st.mode & 0o7777,
          mtimeMs,
          sha256: createHash('sha256').update(fs.readFileSync(p)).digest('hex'),
          ...(st.nlink > 1 ? { inode: inodes.get(key) as string } : {}),
        };
      }
    }
  };
  walk(Buffer.from(dir), '');
  const root = fs.statSync(dir);
  out['.'] = { type: 'dir', mode: root.mode & 0o7777, mtimeMs: Math.floor(root.mtimeMs) };
  return out;
}

describe('shell transport through bwrap: fidelity, attacks, probe', () => {
  let b: OpenedBackends;
  let provider: BwrapSandboxProvider;
  let providerRoot: string;
  const made: string[] = [];
  const create = async (env?: Record<string, string>): Promise<SandboxHandle> => {
    const s = await provider.create(env === undefined ? {} : { env });
    made.push(s.id);
    return s;
  };

  beforeAll(async () => {
    ({ b, provider } = await openBwrapBackends());
    providerRoot = path.join(b.dir, 'sandboxes', 'bwrap');
  }, 60_000);
  afterAll(async () => {
    for (const id of made) await provider.destroy(id);
    await b?.cleanup();
  }, 60_000);

  for (const [mode, tar] of [
    ['stdin', true],
    ['args', true],
    ['stdin', false],
    ['args', false],
  ] as const) {
    it(`${mode}${tar ? ' with tar' : ', a write per file'}: checkpoint, destroy, restore into a fresh sandbox: bytes, modes, mtimes, byte names, links come back`, async () => {
      const options: ShellEndpointOptions = { mode, tar };
      const first = await create();
      const onHost = bwrapWorkspaceOnHost(providerRoot, first.id);
      fillFidelity(onHost);
      const before = manifest(onHost);
      delete before[NEWLINE_NAME.toString('hex')];
      const handle = mode === 'args' ? withoutStdin(first) : first;
      const ws = `fidelity-${mode}-${tar}`;
      const saved = await shellCheckpoint(b.snapshots, handle, ws, options);
      expect(saved.stats).toMatchObject({ files: 8, symlinks: 3, hardlinks: 1 });
      expect(saved.excluded).toContainEqual(expect.objectContaining({ reason: 'invalid-path' }));
      // Unchanged: the host's stat cache vouches for every file but the byte-named one (a stat
      // cache cannot hold a name that is not UTF-8, as for a local directory).
      const again = await shellCheckpoint(b.snapshots, handle, ws, options);
      expect(again.stats.filesHashed).toBe(1);
      expect(again.checkpoint.rootTree).toBe(saved.checkpoint.rootTree);

      await provider.destroy(first.id);
      const second = await create();
      const target = mode === 'args' ? withoutStdin(second) : second;
      const receipt = await shellRestore(b.snapshots, target, ws, options);
      expect(receipt).toMatchObject({ files: 8, symlinks: 3, verified: true, hardlinks: 1 });
      expect(manifest(bwrapWorkspaceOnHost(providerRoot, second.id))).toEqual(before);

      // What the restore wrote is in the host's cache: only the byte name is read again.
      const third = await shellCheckpoint(b.snapshots, target, ws, options);
      expect(third.checkpoint.rootTree).toBe(saved.checkpoint.rootTree);
      expect(third.stats.filesHashed).toBe(1);

      // Beside the target (not a mount point): staging is a sibling, published by rename.
      const copyRoot = `${second.agentHome}/copy`;
      await shellRestore(b.snapshots, target, ws, { ...options, root: copyRoot });
      expect(manifest(path.join(providerRoot, second.id, 'home', 'copy'))).toEqual(before);
      expect(fs.readdirSync(path.join(providerRoot, second.id, 'home')).filter((n) => n.startsWith('.holdfast'))).toEqual([]);
    }, 180_000);
  }

  /** A sandbox whose PATH puts attacker tools (`$HOME/evil/<tool>`, shell scripts) before the real ones. */
  const evilSandbox = async (tools: Record<string, string>): Promise<SandboxHandle> => {
    const s = await create({ PATH: '/home/agent/evil:/usr/bin:/bin' });
    const dir = path.join(providerRoot, s.id, 'home', 'evil');
    fs.mkdirSync(dir);
    for (const [name, body] of Object.entries(tools)) fs.writeFileSync(path.join(dir, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    fs.writeFileSync(path.join(providerRoot, s.id, 'workspace', 'a.txt'), 'alpha\n');
    fs.mkdirSync(path.join(providerRoot, s.id, 'workspace', 'dir'));
    fs.writeFileSync(path.join(providerRoot, s.id, 'workspace', 'dir', 'b.txt'), 'beta\n');
    return s;
  };
  const attack = (s: SandboxHandle, limits?: { maxEntries: number }) =>
    shellCheckpoint(b.snapshots, withoutStdin(s), `attack-${s.id}`, { mode: 'args' }, limits === undefined ? {} : { limits });
  /** A checkpoint with `gitignore` of a sandbox whose workspace also has a `.gitignore`. */
  const gitignoreAttack = (s: SandboxHandle) => {
    fs.writeFileSync(path.join(providerRoot, s.id, 'workspace', '.gitignore'), '*.log\n');
    return shellCheckpoint(b.snapshots, withoutStdin(s), `attack-${s.id}`, { mode: 'args' }, { excludes: { gitignore: true } });
  };

  it('a .gitignore read whose sizes do not match its bytes is INTEGRITY', async () => {
    // `wc` claims 999 bytes for anything under 10 (the .gitignore, not the scan's name list).
    const s = await evilSandbox({ wc: 'n=$(/usr/bin/wc "$@"); if [ "$n" -lt 10 ]; then echo 999; else echo "$n"; fi' });
    expect(await codeOf(gitignoreAttack(s))).toBe('INTEGRITY');
  }, 60_000);

  it('a .gitignore read past the bound it was given is LIMIT_EXCEEDED', async () => {
    const s = await evilSandbox({ head: '/usr/bin/head -c 2000000 /dev/zero' });
    expect(await codeOf(gitignoreAttack(s))).toBe('LIMIT_EXCEEDED');
  }, 60_000);

  it('a scan that lists more stat lines than names is INTEGRITY', async () => {
    const s = await evilSandbox({
      stat: '/usr/bin/stat "$@"; echo "81a4 1 1 2024-01-01 00:00:00.0 +0000 1 2024-01-01 00:00:00.0 +0000 9 9 1"',
    });
    expect(await codeOf(attack(s))).toBe('INTEGRITY');
  }, 60_000);

  it('a scan that names a path with a ".." segment is INTEGRITY', async () => {
    const s = await evilSandbox({ find: '/usr/bin/find "$@"; printf \'./../etc\\0\'' });
    expect(await codeOf(attack(s))).toBe('INTEGRITY');
  }, 60_000);

  it('an oversized scan answer is LIMIT_EXCEEDED, never held', async () => {
    const s = await evilSandbox({ find: '/usr/bin/find "$@"; head -c 100000000 /dev/zero | tr "\\0" a' });
    expect(await codeOf(attack(s, { maxEntries: 100 }))).toBe('LIMIT_EXCEEDED');
  }, 60_000);

  it('sizes that do not match the bytes: every read counts as changed, the checkpoint fails WORKSPACE_CHANGED', async () => {
    const s = await evilSandbox({ stat: `/usr/bin/stat "$@" | awk '$1 == "81a4" { $2 = $2 + 1 } { print }'` });
    expect(await codeOf(attack(s))).toBe('WORKSPACE_CHANGED');
  }, 60_000);

  it('a file that changes between the scan and its read: the checkpoint scans again and saves the new bytes', async () => {
    // The first `cat` of a read grows a.txt first (once), as a process in the sandbox would.
    const s = await evilSandbox({
      cat: 'if [ ! -e /home/agent/grown ] && [ "$#" -gt 1 ]; then : > /home/agent/grown; echo more >> /workspace/a.txt; fi; exec /usr/bin/cat "$@"',
    });
    const saved = await attack(s);
    expect(saved.stats.attempts).toBe(2);
    const parts: Uint8Array[] = [];
    for await (const part of b.snapshots.cat(saved.checkpoint.id, 'a.txt')) parts.push(part);
    expect(Buffer.concat(parts).toString()).toBe('alpha\nmore\n');
  }, 60_000);

  it('crafted answers no real tree gives are INTEGRITY: an entry outside any listed directory, an empty segment', () => {
    const answer = (names: string[], stats: string[]) => {
      const list = Buffer.from(names.map((n) => `${n}\0`).join(''), 'latin1');
      return Buffer.concat([Buffer.from(`1700000000.%N\n${list.length}\n`), list, Buffer.from(`${stats.join('\n')}\nN\nN\nok\n`)]);
    };
    const dir = '41ed 4096 1700000000 2023-11-14 22:13:20.5 +0000 1700000000 2023-11-14 22:13:20.5 +0000 2 3 2';
    const file = '81a4 3 1700000000 2023-11-14 22:13:20.5 +0000 1700000000 2023-11-14 22:13:20.5 +0000 4 3 1';
    expect(parseScanAnswer(answer(['.', './a'], [dir, file]), 'N')).not.toBe('moved');
    expect(() => parseScanAnswer(answer(['.', './a', './a/b'], [dir, file, file]), 'N')).toThrow(
      expect.objectContaining({ code: 'INTEGRITY' }),
    );
    expect(() => parseScanAnswer(answer(['.', './x//b'], [dir, file]), 'N')).toThrow(expect.objectContaining({ code: 'INTEGRITY' }));
    expect(() => parseScanAnswer(answer(['.', '/etc'], [dir, file]), 'N')).toThrow(expect.objectContaining({ code: 'INTEGRITY' }));
    expect(() => parseScanAnswer(answer(['.', './a'], [dir]), 'N')).toThrow(expect.objectContaining({ code: 'INTEGRITY' }));
  });

  it('probe: GNU tools and Node in bwrap; the transport follows stdin and Node; one probe per sandbox', async () => {
    const s = await create();
    const counted = withoutStdin(s);
    const cache = new ProbeCache();
    const probe = await cache.get(counted);
    await cache.get(counted);
    expect(counted.execs).toBe(1);
    cache.forget(s.provider, s.id);
    await cache.get(counted);
    expect(counted.execs).toBe(2);
    expect(probe).toMatchObject({ print0: true, ddFullblock: true, base64: true, mtimePrecision: 'ms', symlinkMtimes: true });
    expect(probe.node).toMatch(/^v\d+\./);
    expect(chooseTransport({ exec: true, stdin: true }, probe)).toBe('agent');
    expect(chooseTransport({ exec: true, stdin: false }, probe)).toBe('shell-args');
    expect(chooseTransport({ exec: true, stdin: true }, { ...probe, node: null })).toBe('shell-stdin');
    expect(chooseTransport({ exec: true, stdin: true }, { ...probe, node: 'v16.20.0' })).toBe('shell-stdin');
  }, 60_000);

  it('probe: a sandbox with a shell but no tools gets STORE_UNAVAILABLE listing what is missing', async () => {
    const s = await create({ PATH: '/home/agent/bin' });
    fs.mkdirSync(path.join(providerRoot, s.id, 'home', 'bin'));
    fs.symlinkSync('/bin/sh', path.join(providerRoot, s.id, 'home', 'bin', 'sh'));
    const probe = await probeSandbox(s);
    expect(probe.node).toBeNull();
    let error: unknown;
    try {
      chooseTransport({ exec: true, stdin: false }, probe);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      data: { missing: expect.arrayContaining(['find', 'stat', 'sha256sum', 'find -print0']) },
    });
    expect(() => parseProbe('probe=1\nsurprise=1\n')).toThrow(expect.objectContaining({ code: 'INTEGRITY' }));
  }, 60_000);

  it('cache directories are listed, not walked, and reported excluded; include reopens them', async () => {
    const s = await create();
    const ws = path.join(providerRoot, s.id, 'workspace');
    fs.mkdirSync(path.join(ws, 'node_modules', 'pkg'), { recursive: true });
    fs.mkdirSync(path.join(ws, 'src', '__pycache__'), { recursive: true });
    fs.writeFileSync(path.join(ws, 'node_modules', 'pkg', 'index.js'), 'x\n');
    fs.writeFileSync(path.join(ws, 'src', '__pycache__', 'a.pyc'), 'y\n');
    fs.writeFileSync(path.join(ws, 'src', 'a.py'), 'z\n');
    const options: ShellEndpointOptions = { mode: 'args' };
    const saved = await shellCheckpoint(b.snapshots, withoutStdin(s), `prune-${s.id}`, options);
    expect(saved.stats.files).toBe(1);
    expect(
      saved.excluded
        .filter((e) => e.reason === 'cache')
        .map((e) => e.path)
        .sort(),
    ).toEqual(['node_modules', 'src/__pycache__']);
    const opened = await shellCheckpoint(b.snapshots, withoutStdin(s), `prune-open-${s.id}`, options, {
      excludes: { include: ['node_modules/'] },
    });
    expect(opened.stats.files).toBe(2);
  }, 60_000);

  it('a workspace of more files than one command line may name (bwrap refuses 9,000 arguments) is checkpointed and restored in bounded execs', async () => {
    const s = await create();
    const ws = path.join(providerRoot, s.id, 'workspace');
    for (let d = 0; d < 10; d += 1) {
      fs.mkdirSync(path.join(ws, `d${d}`));
      for (let f = 0; f < 1000; f += 1) {
        const p = path.join(ws, `d${d}`, `f${f}`);
        fs.writeFileSync(p, `${d}/${f}\n`);
        // An hour old: outside the racy window, so the second checkpoint may trust the stat cache.
        fs.utimesSync(p, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000));
      }
    }
    const options: ShellEndpointOptions = { mode: 'args' };
    const saved = await shellCheckpoint(b.snapshots, withoutStdin(s), `many-${s.id}`, options);
    expect(saved.stats.files).toBe(10_000);
    const again = await shellCheckpoint(b.snapshots, withoutStdin(s), `many-${s.id}`, options);
    expect(again.stats.filesHashed).toBe(0);
    const into = await create();
    const receipt = await shellRestore(b.snapshots, withoutStdin(into), `many-${s.id}`, options);
    expect(receipt).toMatchObject({ files: 10_000, verified: true });
    expect(fs.readFileSync(path.join(providerRoot, into.id, 'workspace', 'd9', 'f999'), 'utf8')).toBe('9/999\n');
  }, 180_000);

  it('directories of many modes, read-only ones holding others: every mode and mtime comes back (one chmod per mode)', async () => {
    const s = await create();
    const ws = path.join(providerRoot, s.id, 'workspace');
    const modes = [0o700, 0o750, 0o755, 0o711, 0o500];
    const dirs: Array<[string, number]> = [];
    for (const [i, mode] of modes.entries()) for (let j = 0; j < 3; j += 1) dirs.push([`m${i}/d${j}`, mode]);
    // Read-only parents whose children get a mode sorted after theirs.
    dirs.push(['ro/inner', 0o700], ['ro/inner/deeper', 0o755], ['ro', 0o555]);
    for (const [rel] of dirs) fs.mkdirSync(path.join(ws, rel), { recursive: true });
    for (const [i] of modes.entries()) dirs.push([`m${i}`, 0o755]);
    fs.writeFileSync(path.join(ws, 'ro', 'inner', 'f.txt'), 'deep\n');
    for (const [k, [rel, mode]] of dirs.entries()) {
      fs.chmodSync(path.join(ws, rel), mode);
      const ms = Date.UTC(2020, 0, 1, 0, 0, k, 100 + k);
      fs.utimesSync(path.join(ws, rel), utimeOf(ms), utimeOf(ms));
    }
    const before = manifest(ws);
    const options: ShellEndpointOptions = { mode: 'stdin' };
    await shellCheckpoint(b.snapshots, s, `modes-${s.id}`, options);
    const into = await create();
    const receipt = await shellRestore(b.snapshots, into, `modes-${s.id}`, options);
    expect(receipt).toMatchObject({ files: 1, dirs: dirs.length, verified: true });
    expect(manifest(path.join(providerRoot, into.id, 'workspace'))).toEqual(before);
  }, 180_000);

  it('a restore whose writes fail while the next write exec is in flight leaves the target as it was and no staging behind', async () => {
    const s = await create();
    const ws = path.join(providerRoot, s.id, 'workspace');
    for (let d = 0; d < 4; d += 1) {
      fs.mkdirSync(path.join(ws, `d${d}`));
      for (let f = 0; f < 300; f += 1) fs.writeFileSync(path.join(ws, `d${d}`, `f${f}`), `${d}/${f}\n`);
    }
    const options: ShellEndpointOptions = { mode: 'stdin', tar: false };
    await shellCheckpoint(b.snapshots, s, `cut-${s.id}`, options);
    const into = await create();
    fs.writeFileSync(path.join(providerRoot, into.id, 'workspace', 'a.txt'), 'alpha\n');
    const onHost = bwrapWorkspaceOnHost(providerRoot, into.id);
    const before = manifest(onHost);
    // The second write exec's answer is a lie (a hash changed), while the third one is already running.
    let writes = 0;
    const lying = lyingHandle(into, 'dd bs=', (out) => {
      writes += 1;
      return writes === 2
        ? Buffer.from(
            out.toString('latin1').replace(/^[0-9a-f]/, (c) => (c === '0' ? '1' : '0')),
            'latin1',
          )
        : out;
    });
    await expect(shellRestore(b.snapshots, lying, `cut-${s.id}`, options, { replace: true })).rejects.toMatchObject({ code: 'INTEGRITY' });
    expect(writes).toBeGreaterThanOrEqual(3);
    // The workspace is a mount point: staging was made (and removed) inside it, which moved only its own mtime.
    const { '.': _root, ...after } = manifest(onHost);
    const { '.': _was, ...kept } = before;
    expect(after).toEqual(kept);
    const leftovers = (dir: string) => fs.readdirSync(dir).filter((n) => n.startsWith('.holdfast'));
    expect([...leftovers(onHost), ...leftovers(path.dirname(onHost))]).toEqual([]);
  }, 180_000);

  it('the no-stdin double refuses stdin: a stdin-mode target over it fails INVALID_INPUT', async () => {
    const s = await create();
    fs.writeFileSync(path.join(providerRoot, s.id, 'workspace', 'x.txt'), 'x\n');
    const ws = `nostdin-${s.id}`;
    await shellCheckpoint(b.snapshots, withoutStdin(s), ws, { mode: 'args' });
    const other = await create();
    expect(await codeOf(shellRestore(b.snapshots, withoutStdin(other), ws, { mode: 'stdin' }))).toBe('INVALID_INPUT');
  }, 60_000);
});

describe('shell transport in a busybox-only Docker container', () => {
  let b: OpenedBackends;
  let docker: DockerSandboxProvider;
  const create = async (): Promise<SandboxHandle> => docker.create();
  beforeAll(async () => {
    expectDockerInstalled();
    ({ b } = await openBwrapBackends());
    docker = new DockerSandboxProvider({ image: busyboxImage(), scope: `test-shell-${process.pid}-${randomBytes(3).toString('hex')}` });
  }, 60_000);
  afterAll(async () => {
    for (const info of (await docker?.list()) ?? []) await docker.destroy(info.id);
    await b?.cleanup();
  }, 60_000);

  it('probe: no Node, busybox, whole-second touch; shell with stdin or args', async () => {
    const c = await create();
    const probe = await probeSandbox(c);
    expect(probe).toMatchObject({
      node: null,
      busybox: true,
      print0: true,
      ddFullblock: true,
      base64: true,
      mtimePrecision: 's',
      symlinkMtimes: true,
    });
    expect(chooseTransport({ exec: true, stdin: true }, probe)).toBe('shell-stdin');
    expect(chooseTransport({ exec: true, stdin: false }, probe)).toBe('shell-args');
  }, 60_000);

  /** Makes the container's /tmp (a root-owned tmpfs the agent cannot chmod) unwritable for the agent, as root inside it. */
  const blockTmp = (c: SandboxHandle) => execFileSync('docker', ['exec', '-u', '0', c.id, 'chmod', '0555', '/tmp'], { stdio: 'ignore' });
  /** What is in `dir` inside the container. */
  const entries = async (c: SandboxHandle, dir: string) => (await c.run(['ls', '-A', dir])).stdout.toString().split('\n').filter(Boolean);

  it('probe: /tmp not writable (read-only root): the probe and the shell transport use $HOME as scratch; checkpoint and restore work', async () => {
    const from = await create();
    blockTmp(from);
    const fill = await from.run([
      'sh',
      '-c',
      '! mktemp && cd /workspace && printf "skip.txt\\n" > .gitignore && echo kept > kept.txt && echo no > skip.txt',
    ]);
    expect(fill.code).toBe(0);
    const probe = await probeSandbox(from);
    expect(probe).toMatchObject({ scratch: true, print0: true, ddFullblock: true, base64: true, mtimePrecision: 's' });
    expect(chooseTransport({ exec: true, stdin: true }, probe)).toBe('shell-stdin');
    const ws = `no-tmp-${from.id}`;
    const saved = await shellCheckpoint(b.snapshots, from, ws, { mode: 'stdin' }, { excludes: { gitignore: true } });
    expect(saved.stats.files).toBe(2);
    const into = await create();
    blockTmp(into);
    expect(await shellRestore(b.snapshots, withoutStdin(into), ws, { mode: 'args' })).toMatchObject({
      verified: true,
    });
    expect((await into.run(['cat', '/workspace/kept.txt'])).stdout.toString()).toBe('kept\n');
    expect(await entries(into, '/home/agent')).toEqual([]);
    expect(await entries(from, '/home/agent')).toEqual([]);
  }, 120_000);

  it('probe: no writable scratch anywhere: STORE_UNAVAILABLE names the missing scratch directory, not tools the sandbox has', async () => {
    const c = await create();
    blockTmp(c);
    expect((await c.run(['chmod', '0555', '/home/agent'])).code).toBe(0);
    const probe = await probeSandbox(c);
    expect(probe.scratch).toBe(false);
    let error: unknown;
    try {
      chooseTransport({ exec: true, stdin: true }, probe);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', data: { missing: [NO_SCRATCH] } });
  }, 60_000);

  it('millisecond mtimes into whole-second tools: the restore keeps whole seconds, verifies them so, and reports the precision lost', async () => {
    const from = await create();
    const into = await create();
    const fill = await from.run([
      'sh',
      '-c',
      'cd /workspace && echo hi > a.txt && mkdir d && echo there > d/b.txt && ln -s a.txt l && chmod 640 a.txt',
    ]);
    expect(fill.code).toBe(0);
    const options: ShellEndpointOptions = { mode: 'stdin' };
    // Files busybox makes carry nanoseconds: the checkpoint records their milliseconds.
    const saved = await shellCheckpoint(b.snapshots, from, 'bb-ms', options);
    expect(saved.stats.files).toBe(2);
    const receipt = await shellRestore(b.snapshots, into, 'bb-ms', options);
    expect(receipt).toMatchObject({ verified: true, mtimePrecisionMs: 1000 });
    expect(receipt.mtimesRounded).toBeGreaterThanOrEqual(3);
    // Bytes, modes and links came back exactly; mtimes to the second.
    const back = await shellCheckpoint(b.snapshots, into, 'bb-ms-copy', options);
    expect(back.stats).toMatchObject({ files: 2, symlinks: 1 });
    expect(back.checkpoint.rootTree).not.toBeNull();
    const listing = (
      await into.run(['sh', '-c', 'cd /workspace && stat -c "%n %a %s" a.txt d/b.txt && readlink l && cat a.txt d/b.txt'])
    ).stdout.toString();
    expect(listing).toBe('a.txt 640 3\nd/b.txt 644 6\na.txt\nhi\nthere\n');
    const wanted = await b.snapshots.ls(saved.checkpoint.id, 'a.txt');
    const got = await b.snapshots.ls(back.checkpoint.id, 'a.txt');
    const mtimeOf = (l: typeof wanted) => (l.kind === 'entry' ? (l.entry as { mtimeMs: number }).mtimeMs : Number.NaN);
    expect(mtimeOf(got)).toBe(Math.floor(mtimeOf(wanted) / 1000) * 1000);
  }, 120_000);

  it('busybox without stdin: a name that is not UTF-8, a name with a newline, a 10 MiB file, hard links and symlinks round-trip exactly', async () => {
    const from = await create();
    const into = await create();
    const fill = [
      'set -e; cd /workspace',
      "printf 'bytes\\n' > \"$(printf 'bad-\\377\\376.txt')\"",
      "printf 'left out\\n' > \"$(printf 'new\\nline')\"",
      ': > empty',
      'head -c 10485760 /dev/urandom > ten.bin',
      'mkdir -p d/e && echo deep > d/e/f.txt && ln d/e/f.txt d/linked.txt',
      'ln -s "$(printf \'../bad-\\377\\376.txt\')" d/to-bytes && ln -s d/e/f.txt top-link',
      'chmod 600 empty && chmod 750 d/e && chmod 555 d',
      'for p in * d/* d/e/* d/e; do touch -h -t 202001020304.05 "$p"; done; touch -t 201901020304.05 . d',
    ].join('\n');
    const made = await from.run(['sh', '-c', fill]);
    expect(made.code, made.stderr.toString()).toBe(0);
    const options: ShellEndpointOptions = { mode: 'args' };
    const saved = await shellCheckpoint(b.snapshots, withoutStdin(from), 'bb-fidelity', options);
    expect(saved.stats).toMatchObject({ files: 5, symlinks: 2, hardlinks: 1 });
    expect(saved.excluded).toContainEqual(expect.objectContaining({ reason: 'invalid-path' }));
    await docker.destroy(from.id);
    const receipt = await shellRestore(b.snapshots, withoutStdin(into), 'bb-fidelity', options);
    expect(receipt).toMatchObject({ files: 5, symlinks: 2, verified: true });
    // Names, bytes, modes, whole-second mtimes (links' and the root's too) and the hard link hash into the tree.
    const back = await shellCheckpoint(b.snapshots, withoutStdin(into), 'bb-fidelity-copy', options);
    expect(back.checkpoint.rootTree).toBe(saved.checkpoint.rootTree);
    expect(back.stats).toMatchObject({ hardlinks: 1 });
    const names = await into.run(['sh', '-c', 'find /workspace -maxdepth 1 | od -An -c | tr -s " "']);
    expect(names.stdout.toString()).toContain('b a d - 377 376');
  }, 180_000);
});
