import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ExcludeRules } from '../../../rules/excludes.js';
import { DEFAULT_MAX_ENTRIES, DEFAULT_MAX_FILE_BYTES, type ScanResult, scanWorkspace } from '../../../workspace-fs/scan.js';
import type { FullScanReason } from '../wire/protocol.js';
import { type WatchedScan, Watches } from './workspace-watch.js';

const limits = { maxFileBytes: DEFAULT_MAX_FILE_BYTES, maxEntries: DEFAULT_MAX_ENTRIES };
const OLD = new Date(Date.UTC(2024, 1, 2, 3, 4, 5));

/** What a scan says, without its start time: equal for two scans of the same tree. */
const shape = (r: ScanResult) => ({ ...r, startedAtMs: 0 });

describe('workspace watches', () => {
  let tmp: string;
  let root: string;
  let stateDir: string;
  const rules = ExcludeRules.create({});

  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-watch-'));
    root = path.join(tmp, 'ws');
    stateDir = path.join(tmp, 'state');
    for (const d of ['a/b/c', 'd', 'e']) fs.mkdirSync(path.join(root, d), { recursive: true });
    for (const f of ['a/one', 'a/b/two', 'a/b/c/three', 'd/four', 'e/five', 'top']) {
      fs.writeFileSync(path.join(root, f), `${f}\n`);
      fs.utimesSync(path.join(root, f), OLD, OLD);
    }
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** A scan through `watches`, checked against a plain full scan of the same tree. */
  async function scan(watches: Watches, fingerprint = 'same'): Promise<WatchedScan> {
    const watch = await watches.root(root);
    if (watch === undefined) throw new Error('not watched');
    const got = await watch.scan(rules, limits, fingerprint);
    expect(shape(got.result)).toEqual(shape(scanWorkspace(root, rules, limits)));
    return got;
  }

  const reasonOf = (s: WatchedScan): FullScanReason | 'delta' => (s.report.mode === 'delta' ? 'delta' : (s.report.reason ?? 'first'));

  it('reads only the directories with events and their ancestors; the rest are the very objects of the last scan', async () => {
    const watches = new Watches(stateDir, {});
    const first = await scan(watches);
    expect(reasonOf(first)).toBe('first');
    expect(first.report.dirsRead).toBe(6);
    const quiet = await scan(watches);
    expect(quiet.report).toEqual({ mode: 'delta', dirsRead: 1 });
    fs.appendFileSync(path.join(root, 'a/b/two'), 'more\n');
    const changed = await scan(watches);
    expect(changed.report).toEqual({ mode: 'delta', dirsRead: 3 });
    const dir = (r: ScanResult, p: string) => r.root.children.find((c) => c.name === p);
    expect(dir(changed.result, 'd')).toBe(dir(quiet.result, 'd'));
    expect(dir(changed.result, 'a')).not.toBe(dir(quiet.result, 'a'));
    expect(changed.touched('a/b/two')).toBe(true);
    expect(changed.touched('a/one')).toBe(false);
  });

  it('an edit that keeps size and mtime is read again: its directory is re-read and the file is never vouched for', async () => {
    const watches = new Watches(stateDir, {});
    await scan(watches);
    const file = path.join(root, 'd/four');
    const st = fs.statSync(file);
    fs.writeFileSync(file, 'D/FOUR\n');
    fs.utimesSync(file, st.atime, st.mtime);
    const after = await scan(watches);
    expect(after.report.mode).toBe('delta');
    expect(after.touched('d/four')).toBe(true);
  });

  it('a renamed or removed directory, an ignore file, a new hard link or another request is a full scan', async () => {
    const watches = new Watches(stateDir, {});
    await scan(watches);
    fs.renameSync(path.join(root, 'a/b'), path.join(root, 'a/bb'));
    expect(reasonOf(await scan(watches))).toBe('moved');
    fs.rmSync(path.join(root, 'e'), { recursive: true });
    expect(reasonOf(await scan(watches))).toBe('moved');
    fs.writeFileSync(path.join(root, 'd/.gitignore'), 'four\n');
    expect(reasonOf(await scan(watches))).toBe('ignore-rules');
    fs.linkSync(path.join(root, 'top'), path.join(root, 'd/top-link'));
    expect(reasonOf(await scan(watches))).toBe('hard-link');
    expect(reasonOf(await scan(watches, 'other request'))).toBe('request-changed');
    expect(reasonOf(await scan(watches, 'other request'))).toBe('delta');
  });

  it('a directory replaced under the same name, and a root replaced, are read afresh', async () => {
    const watches = new Watches(stateDir, {});
    await scan(watches);
    fs.rmSync(path.join(root, 'd'), { recursive: true });
    fs.mkdirSync(path.join(root, 'd'));
    fs.writeFileSync(path.join(root, 'd/new'), 'new\n');
    await scan(watches);
    fs.appendFileSync(path.join(root, 'd/new'), 'again\n');
    expect(reasonOf(await scan(watches))).toBe('delta');
    fs.renameSync(root, `${root}-old`);
    fs.cpSync(`${root}-old`, root, { recursive: true });
    expect(reasonOf(await scan(watches))).toBe('moved');
  });

  it('a file written through a link from outside the root is seen: a directory holding linked files is read every time', async () => {
    const outside = path.join(tmp, 'outside');
    fs.writeFileSync(outside, 'before\n');
    fs.linkSync(outside, path.join(root, 'd/linked'));
    const watches = new Watches(stateDir, {});
    await scan(watches);
    fs.appendFileSync(outside, 'after\n');
    const after = await scan(watches);
    expect(after.report.mode).toBe('delta');
    const d = after.result.root.children.find((c) => c.name === 'd');
    const linked = d?.type === 'dir' ? d.children.find((c) => c.name === 'linked') : undefined;
    expect(linked?.type === 'file' ? linked.size : -1).toBe('before\nafter\n'.length);
  });

  it('more events than the queue holds between barriers count as an overflow: every root scans fully', async () => {
    const watches = new Watches(stateDir, { HOLDFAST_AGENT_WATCH_QUEUE: '8' });
    await scan(watches);
    expect(reasonOf(await scan(watches))).toBe('delta');
    for (let i = 0; i < 10; i += 1) fs.writeFileSync(path.join(root, `e/n${i}`), `${i}`);
    expect(reasonOf(await scan(watches))).toBe('overflow');
  });

  it('a watch limit turns watching off for the root: every scan is full and still right', async () => {
    const watches = new Watches(stateDir, { HOLDFAST_AGENT_WATCH_MAX_DIRS: '3' });
    expect(reasonOf(await scan(watches))).toBe('watch-limit');
    fs.appendFileSync(path.join(root, 'a/b/c/three'), 'x');
    expect(reasonOf(await scan(watches))).toBe('off');
    expect(reasonOf(await scan(watches))).toBe('off');
  });

  it('a verifying full scan on schedule reports what the watches missed (an mmap write raises no event)', async () => {
    const watches = new Watches(stateDir, { HOLDFAST_AGENT_WATCH_VERIFY_EVERY: '3' });
    await scan(watches);
    expect(reasonOf(await scan(watches))).toBe('delta');
    const file = path.join(root, 'a/b/c/three');
    const script = 'import mmap,sys\nf=open(sys.argv[1],"r+b")\nm=mmap.mmap(f.fileno(),0)\nm[0:1]=b"T"\nm.flush()\nm.close()\nf.close()';
    execFileSync('python3', ['-c', script, file]);
    expect(fs.readFileSync(file, 'utf8')).toBe('T/b/c/three\n');
    // Without an event the delta scan cannot know (the scan is still checked against a full one, so look at it apart).
    const watch = await watches.root(root);
    const missedByDelta = await watch?.scan(rules, limits, 'same');
    expect(missedByDelta?.report.mode).toBe('delta');
    const verify = await scan(watches);
    expect(verify.report).toEqual({ mode: 'full', reason: 'verify', dirsRead: 6, missed: 1 });
  });

  it('the second look: quiet with no event since the scan, not once anything moved', async () => {
    const watches = new Watches(stateDir, {});
    const watch = await watches.root(root);
    const first = await watch?.scan(rules, limits, 'same');
    expect(await watch?.quietSince(first?.result as ScanResult)).toBe(true);
    fs.appendFileSync(path.join(root, 'e/five'), '!');
    expect(await watch?.quietSince(first?.result as ScanResult)).toBe(false);
    const second = await watch?.scan(rules, limits, 'same');
    expect(await watch?.quietSince(first?.result as ScanResult)).toBe(false);
    expect(await watch?.quietSince(second?.result as ScanResult)).toBe(true);
  });
});
