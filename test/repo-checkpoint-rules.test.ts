import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Sha256Hex } from '../src/core/hash.js';
import { REPO_EXCLUDES, refuseUnsupportedCheckout } from '../src/git/repo-rules.js';
import { type Holdfast, openHoldfast } from '../src/index.js';
import { ObjectReader } from '../src/objects/object-reader.js';
import type { Snapshots } from '../src/snapshot/snapshots.js';
import { hostGit, seedRemote, storedBytes } from './support/git-fixture.js';
import { ALNUM, generator, HEX } from './support/secret-samples.js';

/** What actions/checkout writes into a git config: base64 of `x-access-token:<installation token>`. */
const INSTALLATION_TOKEN = `ghs_${generator(20261202)(ALNUM, 36)}`;
const EXTRAHEADER = `AUTHORIZATION: basic ${Buffer.from(`x-access-token:${INSTALLATION_TOKEN}`).toString('base64')}`;
const CONFIG_WITH_HEADER = `[core]\n\tbare = false\n[http "https://github.com/"]\n\textraheader = ${EXTRAHEADER}\n`;

/**
 * What a repository checkpoint keeps and refuses, on host checkouts (the rules are the same
 * through every endpoint: `onScan` sees the scan the engine got).
 */
describe('repository checkpoint rules', () => {
  let dir: string;
  let hf: Holdfast;
  let snapshots: Snapshots;
  let url: string;
  let checkout: string;
  let n = 0;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-repo-rules-'));
    hf = await openHoldfast({
      meta: `sqlite:${path.join(dir, 'store', 'meta.db')}`,
      blobs: `file:${path.join(dir, 'store', 'blobs')}`,
      cacheDir: path.join(dir, 'store', 'cache'),
    });
    snapshots = hf.repositories.repoSnapshots;
    url = seedRemote(dir);
  });
  afterAll(async () => {
    await hf?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    n += 1;
    checkout = path.join(dir, `checkout-${n}`);
    hostGit(dir, ['clone', '--quiet', '--no-hardlinks', url, checkout]);
  });

  const capture = (workspace = `ws-${n}`, onScan = refuseUnsupportedCheckout) =>
    snapshots.checkpoint({ dir: checkout, workspace, excludes: REPO_EXCLUDES, onScan });
  const paths = async (workspace: string) => {
    const out = path.join(dir, 'out', workspace);
    await snapshots.restore({ dir: out, workspace });
    return (fs.readdirSync(out, { recursive: true }) as string[]).sort();
  };

  it('keeps .git but its config and hooks; applies .gitignore outside .git only, and .git/info/exclude', async () => {
    fs.appendFileSync(path.join(checkout, '.gitignore'), 'logs/\n*.pack\nobjects\n');
    fs.writeFileSync(path.join(checkout, '.git', 'info', 'exclude'), 'local-only.txt\n!kept-by-gitignore.txt\n');
    fs.appendFileSync(path.join(checkout, '.gitignore'), '!local-override.txt\n');
    for (const f of ['local-only.txt', 'untracked.txt', 'local-override.txt']) fs.writeFileSync(path.join(checkout, f), 'x\n');
    fs.mkdirSync(path.join(checkout, '.cache'));
    fs.writeFileSync(path.join(checkout, '.cache', 'tracked-cache'), 'kept: no built-in cache rule\n');
    hostGit(checkout, ['repack', '-a', '-d', '-q']);
    const result = await capture();
    const kept = await paths(`ws-${n}`);
    expect(kept).toEqual(
      expect.arrayContaining([
        '.git/HEAD',
        '.git/index',
        '.git/logs/HEAD',
        '.git/packed-refs',
        '.git/info/exclude',
        'untracked.txt',
        '.cache/tracked-cache',
        'local-override.txt',
      ]),
    );
    expect(kept.some((p) => p.startsWith('.git/objects/pack/') && p.endsWith('.pack'))).toBe(true);
    expect(kept).not.toContain('.git/config');
    expect(kept.some((p) => p.startsWith('.git/hooks'))).toBe(false);
    expect(kept).not.toContain('local-only.txt');
    expect(result.excluded.map((e) => e.path)).toEqual(expect.arrayContaining(['.git/config', '.git/hooks', 'local-only.txt']));
    // Unchanged pack files cost nothing the second time.
    fs.writeFileSync(path.join(checkout, 'untracked.txt'), 'changed\n');
    const again = await capture();
    expect(again.stats.rawBytesWritten).toBeLessThan(4096);
  });

  it.each([
    ['index.lock', (c: string) => fs.writeFileSync(path.join(c, '.git', 'index.lock'), ''), 'REPOSITORY_BUSY'],
    ['a ref lock', (c: string) => fs.writeFileSync(path.join(c, '.git', 'refs', 'heads', 'main.lock'), ''), 'REPOSITORY_BUSY'],
    [
      'alternates',
      (c: string) => fs.writeFileSync(path.join(c, '.git', 'objects', 'info', 'alternates'), '/elsewhere\n'),
      'REPOSITORY_UNSUPPORTED',
    ],
    [
      'a .git file',
      (c: string) => {
        fs.renameSync(path.join(c, '.git'), path.join(c, '..', `gitdir-${path.basename(c)}`));
        fs.writeFileSync(path.join(c, '.git'), `gitdir: ../gitdir-${path.basename(c)}\n`);
      },
      'REPOSITORY_UNSUPPORTED',
    ],
    ['a hard link', (c: string) => fs.linkSync(path.join(c, 'a.txt'), path.join(c, 'b.txt')), 'REPOSITORY_UNSUPPORTED'],
    ['an escaping symlink', (c: string) => fs.symlinkSync('../../etc/passwd', path.join(c, 'out')), 'REPOSITORY_UNSUPPORTED'],
    ['a symlink into .git', (c: string) => fs.symlinkSync('.git/HEAD', path.join(c, 'head-link')), 'REPOSITORY_UNSUPPORTED'],
  ])('refuses a checkout with %s and keeps the previous head', async (_name, damage, code) => {
    const workspace = `ws-${n}`;
    const first = await capture(workspace);
    damage(checkout);
    await expect(capture(workspace)).rejects.toMatchObject({ code });
    const ws = await snapshots.workspace(workspace, false);
    expect(ws.headCheckpointId).toBe(first.checkpoint.id);
    expect((await snapshots.log(workspace))[0]).toMatchObject({ status: 'failed', error: { code } });
  });

  it('stores no git config of a submodule, a linked worktree or a nested repository, nor their credentials', async () => {
    const placed = [
      '.git/modules/sub/config',
      '.git/modules/sub/modules/inner/config',
      '.git/worktrees/w1/config.worktree',
      '.git/worktrees/w1/config',
      'vendor/lib/.git/config',
    ];
    for (const p of placed) {
      fs.mkdirSync(path.dirname(path.join(checkout, p)), { recursive: true });
      fs.writeFileSync(path.join(checkout, p), CONFIG_WITH_HEADER);
    }
    fs.mkdirSync(path.join(checkout, '.git', 'modules', 'sub', 'hooks'), { recursive: true });
    fs.writeFileSync(path.join(checkout, '.git', 'modules', 'sub', 'hooks', 'post-checkout'), '#!/bin/sh\necho hook\n', { mode: 0o755 });
    const result = await capture();
    const kept = await paths(`ws-${n}`);
    for (const p of [...placed, '.git/modules/sub/hooks']) expect(kept).not.toContain(p);
    const reader = new ObjectReader(hf.blobs, hf.meta);
    const all = Buffer.concat(await storedBytes(reader, result.checkpoint.rootTree as Sha256Hex));
    for (const secret of [EXTRAHEADER, INSTALLATION_TOKEN, 'extraheader']) expect(all.includes(secret)).toBe(false);
  });

  it('a workspace checkpoint withholds a git config holding an Authorization header, at any depth', async () => {
    const ws = path.join(dir, `workspace-${n}`);
    hostGit(dir, ['clone', '--quiet', url, path.join(ws, 'projects', 'app')]);
    fs.appendFileSync(path.join(ws, 'projects', 'app', '.git', 'config'), `[http "https://github.com/"]\n\textraheader = ${EXTRAHEADER}\n`);
    fs.writeFileSync(
      path.join(ws, 'notes.txt'),
      `curl -H 'Authorization: Basic ${Buffer.from(`bot:${INSTALLATION_TOKEN}`).toString('base64')}'\n`,
    );
    const result = await hf.snapshots.checkpoint({ dir: ws, workspace: `plain-${n}` });
    expect(
      result.excluded
        .filter((e) => e.reason === 'secret-content')
        .map((e) => e.path)
        .sort(),
    ).toEqual(['notes.txt', 'projects/app/.git/config']);
    const reader = new ObjectReader(hf.blobs, hf.meta);
    const all = Buffer.concat(await storedBytes(reader, result.checkpoint.rootTree as Sha256Hex));
    for (const secret of [EXTRAHEADER, INSTALLATION_TOKEN]) expect(all.includes(secret)).toBe(false);
  });

  it('a workspace checkpoint withholds a git config whose extraHeader carries any other credential header', async () => {
    const ws = path.join(dir, `workspace-hdr-${n}`);
    const headers = [
      `PRIVATE-TOKEN: ${generator(20261203)(ALNUM, 26)}`,
      `"X-Auth-Token: ${generator(20261204)(HEX, 40)}"`,
      `Cookie: session=${generator(20261205)(ALNUM, 32)}7`,
    ];
    for (const [i, header] of headers.entries()) {
      hostGit(dir, ['clone', '--quiet', url, path.join(ws, `repo-${i}`)]);
      fs.appendFileSync(path.join(ws, `repo-${i}`, '.git', 'config'), `[http "https://git.example.com/"]\n\textraHeader = ${header}\n`);
    }
    const result = await hf.snapshots.checkpoint({ dir: ws, workspace: `plain-hdr-${n}` });
    expect(
      result.excluded
        .filter((e) => e.reason === 'secret-content')
        .map((e) => [e.path, e.rule])
        .sort(),
    ).toEqual(headers.map((_, i) => [`repo-${i}/.git/config`, 'git-extraheader']));
    const reader = new ObjectReader(hf.blobs, hf.meta);
    const all = Buffer.concat(await storedBytes(reader, result.checkpoint.rootTree as Sha256Hex));
    for (const header of headers) expect(all.includes(header.replace(/^"|"$/g, '').split(': ')[1] as string)).toBe(false);
  });

  it('refuses a tree that changes between the scan and the second look (WORKSPACE_CHANGED)', async () => {
    let k = 0;
    const changing = (scan: Parameters<typeof refuseUnsupportedCheckout>[0]) => {
      refuseUnsupportedCheckout(scan);
      k += 1;
      fs.writeFileSync(path.join(checkout, `appeared-${k}.txt`), 'x\n');
    };
    await expect(capture(`ws-${n}`, changing)).rejects.toMatchObject({ code: 'WORKSPACE_CHANGED' });
  });
});
