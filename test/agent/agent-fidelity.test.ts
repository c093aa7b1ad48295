import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ObjectReader } from '../../src/objects/object-reader.js';
import { checkpointSandbox, restoreSandbox } from '../../src/sandbox/endpoints/sandbox-endpoints.js';
import type { BwrapSandboxHandle, BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import type { CheckpointResult } from '../../src/snapshot/checkpoint/checkpoint.js';
import { type FlatTree, flattenTree } from '../../src/snapshot/tree-walk.js';
import type { OpenedBackends } from '../support/backends.js';
import { openBwrapBackends } from '../support/bwrap-backends.js';
import { runNode } from '../support/sandbox-processes.js';

const PRE_1970_MS = Date.UTC(1960, 0, 1, 0, 0, 0, 123);
const FAR_FUTURE_MS = Date.UTC(2400, 0, 1, 0, 0, 0, 987);
const ROOT_MS = Date.UTC(1999, 11, 31, 23, 59, 59, 999);
/** Directory names of 200 bytes, 24 deep: a path of about 4,800 bytes, past PATH_MAX. */
const DEEP_SEGMENT = 'd'.repeat(200);
const DEEP_LEVELS = 24;

/**
 * Fills /workspace with what a checkpoint must keep exactly: a pre-1970 and a far-future
 * mtime, names that are not UTF-8 (a Latin-1 byte, a lone continuation byte), a file at a path
 * longer than PATH_MAX, a hard-link group of three across two directories, relative and
 * absolute-inside symlinks, a private directory, and a root with its own mode and mtime.
 * Deep paths are reached through /proc/self/fd, as the agent does.
 */
const FILL = `
const fs = require('fs');
const w = '/workspace', at = (ms) => String((ms + 0.5) / 1000);
const put = (p, text, mode, ms) => { fs.writeFileSync(p, text); fs.chmodSync(p, mode); fs.utimesSync(p, at(ms), at(ms)); };
put(w + '/old.bin', Buffer.from([0, 1, 2, 255, 254]), 0o640, ${PRE_1970_MS});
put(w + '/future.txt', 'from the future\\n', 0o600, ${FAR_FUTURE_MS});
const latin = Buffer.concat([Buffer.from(w + '/caf'), Buffer.from([0xe9]), Buffer.from('.txt')]);
put(latin, 'latin-1 name\\n', 0o644, ${PRE_1970_MS} + 5);
const oddDir = Buffer.concat([Buffer.from(w + '/dir-'), Buffer.from([0x80])]);
fs.mkdirSync(oddDir);
put(Buffer.concat([oddDir, Buffer.from('/inner-'), Buffer.from([0xff, 0x41])]), 'inner\\n', 0o644, 1700000000123);
fs.mkdirSync(w + '/h'); fs.mkdirSync(w + '/z');
put(w + '/h/a', 'one inode, three names\\n', 0o664, 1600000000456);
fs.linkSync(w + '/h/a', w + '/h/b'); fs.linkSync(w + '/h/a', w + '/z/c');
fs.symlinkSync('old.bin', w + '/rel');
fs.symlinkSync(w + '/h/a', w + '/abs');
fs.mkdirSync(w + '/sub'); fs.symlinkSync(w + '/old.bin', w + '/sub/abs-up');
let fd = fs.openSync(w, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
for (let i = 0; i < ${DEEP_LEVELS}; i++) {
  fs.mkdirSync('/proc/self/fd/' + fd + '/${DEEP_SEGMENT}');
  const next = fs.openSync('/proc/self/fd/' + fd + '/${DEEP_SEGMENT}', fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  fs.closeSync(fd); fd = next;
}
put('/proc/self/fd/' + fd + '/deep.txt', 'at the bottom\\n', 0o644, ${PRE_1970_MS} + 7);
fs.closeSync(fd);
fs.mkdirSync(w + '/private'); put(w + '/private/key', 'k', 0o600, 1500000000000);
fs.chmodSync(w + '/private', 0o700); fs.utimesSync(w + '/private', at(${PRE_1970_MS} + 9), at(${PRE_1970_MS} + 9));
fs.chmodSync(w, 0o750); fs.utimesSync(w, at(${ROOT_MS}), at(${ROOT_MS}));
`;

/**
 * Every entry under /workspace and the root itself, keyed by the hex of its path's bytes:
 * type, mode, whole-ms mtime, size, sha256, link count and inode, link target bytes. Walked
 * through /proc/self/fd so no path handed to a system call is long.
 */
const MANIFEST = `
const fs = require('fs'), crypto = require('crypto');
const out = {};
const root = fs.lstatSync('/workspace');
out[''] = { type: 'dir', mode: root.mode & 0o7777, mtimeMs: Math.floor(root.mtimeMs) };
(function walk(dir, rel) {
  for (const name of fs.readdirSync(dir, { encoding: 'buffer' })) {
    const p = Buffer.concat([dir, Buffer.from('/'), name]);
    const r = rel.length === 0 ? name : Buffer.concat([rel, Buffer.from('/'), name]);
    const st = fs.lstatSync(p), mtimeMs = Math.floor(st.mtimeMs);
    if (st.isSymbolicLink()) out[r.toString('hex')] = { type: 'symlink', mtimeMs, target: fs.readlinkSync(p, { encoding: 'buffer' }).toString('hex') };
    else if (st.isDirectory()) {
      out[r.toString('hex')] = { type: 'dir', mode: st.mode & 0o7777, mtimeMs };
      const fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      walk(Buffer.from('/proc/self/fd/' + fd), r);
      fs.closeSync(fd);
    } else {
      const sha256 = crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
      out[r.toString('hex')] = { type: 'file', mode: st.mode & 0o7777, mtimeMs, size: st.size, nlink: st.nlink, ino: st.ino, sha256 };
    }
  }
})(Buffer.from('/workspace'), Buffer.alloc(0));
process.stdout.write(JSON.stringify(out));
`;

type Manifest = Record<string, { type: string; ino?: number; target?: string; [k: string]: unknown }>;
const hex = (text: string): string => Buffer.from(text).toString('hex');

/** A manifest with each inode replaced by the first path (in byte order) that has it: link groups, not numbers. */
function byGroup(manifest: Manifest): Manifest {
  const firstOf = new Map<number, string>();
  for (const key of Object.keys(manifest).sort()) {
    const ino = manifest[key]?.ino;
    if (ino !== undefined && !firstOf.has(ino)) firstOf.set(ino, key);
  }
  const out: Manifest = {};
  for (const [key, e] of Object.entries(manifest))
    out[key] = e.ino === undefined ? e : { ...e, ino: firstOf.get(e.ino) as unknown as number };
  return out;
}

/** What a tree holds, path by path (paths as text with byte escapes). */
function entriesOf(flat: FlatTree): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const d of flat.dirs) out[d.path] = { dir: true, mode: d.mode, mtimeMs: d.mtimeMs };
  for (const f of flat.files) out[f.path] = { mode: f.mode, mtimeMs: f.mtimeMs, size: f.size, sha256: f.sha256, hardlink: f.hardlink };
  for (const s of flat.symlinks) out[s.path] = { target: s.target, mtimeMs: s.mtimeMs };
  return out;
}

describe('fidelity through the in-sandbox agent (bwrap): what a checkpoint keeps comes back exactly', () => {
  let b: OpenedBackends;
  let provider: BwrapSandboxProvider;
  let source: BwrapSandboxHandle;
  let original: Manifest;
  let taken: CheckpointResult;

  beforeAll(async () => {
    ({ b, provider } = await openBwrapBackends());
    source = (await provider.create()) as BwrapSandboxHandle;
    await runNode(source, FILL);
    original = JSON.parse(await runNode(source, MANIFEST)) as Manifest;
    taken = await checkpointSandbox(b.snapshots, { sandbox: source.id, workspace: 'fidelity' });
  }, 120_000);
  afterAll(async () => {
    if (source !== undefined) await provider.destroy(source.id);
    await b?.cleanup();
  });

  /** The original manifest as a restore must give it back: absolute links inside come back relative. */
  function expected(): Manifest {
    return byGroup({
      ...original,
      [hex('abs')]: { ...(original[hex('abs')] as Manifest[string]), target: hex('h/a') },
      [hex('sub/abs-up')]: { ...(original[hex('sub/abs-up')] as Manifest[string]), target: hex('../old.bin') },
    });
  }

  it('the checkpoint records the root, the link group and the links made relative', async () => {
    const stats = taken.checkpoint.stats as { root?: unknown; hardlinks?: unknown; excludedByReason?: Record<string, number> };
    expect(stats.root).toEqual({ mode: 0o750, mtimeMs: ROOT_MS });
    expect(stats.hardlinks).toBe(2);
    expect(stats.excludedByReason?.['symlink-made-relative']).toBe(2);
    expect(original['']).toEqual({ type: 'dir', mode: 0o750, mtimeMs: ROOT_MS });
    expect(original[hex('old.bin')]?.mtimeMs).toBe(PRE_1970_MS);
    expect(original[hex('future.txt')]?.mtimeMs).toBe(FAR_FUTURE_MS);
    expect(original[hex('h/a')]?.nlink).toBe(3);
    // The fixture holds what it claims: a path past PATH_MAX and names that are not UTF-8.
    const deep = Object.keys(original).filter((k) => k.endsWith(hex('/deep.txt')));
    expect(deep.map((k) => k.length / 2 > 4096)).toEqual([true]);
    expect(original[`${hex('caf')}e9${hex('.txt')}`]?.type).toBe('file');
  });

  it('the tree holds what the local engine stores for the same directory (absolute links aside)', async () => {
    const local = await b.snapshots.checkpoint({ workspace: 'fidelity-local', dir: path.join(source.hostDiskPath, 'workspace') });
    const reader = new ObjectReader(b.blobs, b.meta);
    const viaAgent = entriesOf(await flattenTree(reader, taken.checkpoint.rootTree as string));
    const viaDisk = entriesOf(await flattenTree(reader, local.checkpoint.rootTree as string));
    // On the host the workspace is not at /workspace: its absolute links point outside there.
    expect(local.excluded.filter((e) => e.reason === 'symlink-escape').map((e) => e.path)).toEqual(['abs', 'sub/abs-up']);
    expect(viaAgent.abs).toEqual({ target: 'h/a', mtimeMs: original[hex('abs')]?.mtimeMs });
    expect(viaAgent['sub/abs-up']).toEqual({ target: '../old.bin', mtimeMs: original[hex('sub/abs-up')]?.mtimeMs });
    const { abs: _a, 'sub/abs-up': _b, ...rest } = viaAgent;
    expect(rest).toEqual(viaDisk);
    expect(viaAgent['h/b']).toMatchObject({ hardlink: 'h/a' });
    expect(viaAgent['z/c']).toMatchObject({ hardlink: 'h/a' });
    expect(viaAgent['caf\udce9.txt']).toMatchObject({ mtimeMs: PRE_1970_MS + 5 });
    expect((taken.checkpoint.stats as { root?: unknown }).root).toEqual((local.checkpoint.stats as { root?: unknown }).root);
  });

  it('restores into a fresh sandbox: bytes, modes, mtimes to the ms, names, deep paths, link groups and the root', async () => {
    const target = (await provider.create()) as BwrapSandboxHandle;
    try {
      const receipt = await restoreSandbox(b.snapshots, { sandbox: target.id, workspace: 'fidelity', replace: true });
      expect(receipt.hardlinks).toBe(2);
      expect(receipt.excluded?.byReason['symlink-made-relative']).toBe(2);
      expect(receipt.verified).toBe(true);
      expect(byGroup(JSON.parse(await runNode(target, MANIFEST)) as Manifest)).toEqual(expected());
    } finally {
      await provider.destroy(target.id);
    }
  }, 120_000);

  it('restores over the same workspace (warm): the leader is reused, members linked again, the old tree removed', async () => {
    await runNode(source, `require('fs').writeFileSync('/workspace/future.txt', 'changed')`);
    const receipt = await restoreSandbox(b.snapshots, { sandbox: source.id, workspace: 'fidelity', replace: true });
    expect(receipt.filesReused).toBeGreaterThan(0);
    expect(receipt.hardlinks).toBe(2);
    expect(byGroup(JSON.parse(await runNode(source, MANIFEST)) as Manifest)).toEqual(expected());
    // A checkpoint of the restored workspace stores the same tree as the first one.
    const again = await checkpointSandbox(b.snapshots, { sandbox: source.id, workspace: 'fidelity' });
    expect(again.checkpoint.rootTree).toBe(taken.checkpoint.rootTree);
  }, 120_000);
});
