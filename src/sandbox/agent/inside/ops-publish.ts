import fs from 'node:fs';
import path from 'node:path';
import { ConflictError, InputError, NotFoundError } from '../../../errors.js';
import { checkKept, utimeOf } from '../../../workspace-fs/fs-exact.js';
import { StatCacheBuilder } from '../../../workspace-fs/stat-cache.js';
import type { PublishResult } from '../wire/protocol.js';
import type { OpHandler } from './agent-server.js';
import { type AgentState, faultPoint } from './agent-state.js';
import { BatchJournal, readStaged } from './batch-journal.js';
import { moveAsideBack, publishInside } from './publish-inside.js';
import { Fields } from './request-fields.js';
import { fsyncDir, removeTree, withResolver } from './safe-fs.js';
import { loadRecord, removeRecord, type StagingRecord, saveRecord, stagingPaths } from './staging-registry.js';

const exists = (p: string): boolean => fs.lstatSync(p, { throwIfNoEntry: false }) !== undefined;

/**
 * `publish {stagingId, target, base?}`: puts the staged tree in place; the previous copy is set
 * aside under a name derived from the staging id and removed only once the new tree is in. The
 * record says `publishing` before the first rename, so a process killed half-way is finished by
 * a re-sent `publish` (or undone by `stage-abort` while the new tree is not yet moving in).
 * `beside`: two renames of the directory itself. `inside` (the target is a mount point): the
 * old entries move aside, then the new ones in, each a rename. With `base` (the checkpoint id)
 * and a cache key, the stat cache is written from the staged files as they stand after
 * publishing, so the next checkpoint hashes nothing it does not have to. With `root` (the
 * checkpoint's root directory `{mode, mtimeMs}`) the target gets that mode and mtime last of
 * all, after everything that changes it, and both are read back (`INTEGRITY` when not kept;
 * a re-sent publish applies them again).
 */
export function publish(state: AgentState): OpHandler {
  return ({ fields }) => {
    const stagingId = fields.token('stagingId');
    const target = fields.absolutePath('target');
    const base = fields.optionalToken('base');
    const root = rootOf(fields.raw('root'));
    const record = loadRecord(state, stagingId);
    if (record === undefined || record.target !== target) {
      throw new NotFoundError(`no staging ${stagingId} for ${target}: begin a restore first`, { data: { stagingId, target } });
    }
    const { staging, old } = stagingPaths(record);
    const done = (replaced: boolean, alreadyPublished: boolean, cacheEntries: number): { result: PublishResult } => {
      if (root !== undefined) applyRoot(target, root);
      return { result: { target, replaced, alreadyPublished, cacheEntries } };
    };
    if (record.state === 'published') {
      tidy(record);
      return done(false, true, 0);
    }
    const startedAtMs = Date.now();
    const cache = (): number => saveStatCache(state, record, base, startedAtMs);
    if (!exists(staging)) {
      if (record.state !== 'publishing' || !exists(target)) throw new NotFoundError(`staging ${staging} is gone`, { data: { stagingId } });
      finish(state, record);
      return done(true, true, cache());
    }
    const journalDir = BatchJournal.dirOf(staging);
    if (record.state === 'staging') {
      // The list of staged files outlives the journal (removed below), so a re-sent publish can still write the cache.
      const list = path.join(journalDir, 'staged.tsv');
      if (exists(list)) fs.copyFileSync(list, state.stagedListFile(stagingId));
      record.state = 'publishing';
      if (record.layout === 'inside') record.step = 'aside';
      saveRecord(state, record);
    }
    // The staging root may already carry a read-only final mode; removing our journal from it must not fail.
    const rootMode = fs.lstatSync(staging).mode & 0o7777;
    fs.chmodSync(staging, rootMode | 0o700);
    removeTree(journalDir);
    fs.chmodSync(staging, rootMode);
    state.journals.delete(staging);
    if (record.layout === 'inside') publishInside(state, record, staging, old);
    else swapDirectory(target, staging, old);
    const replaced = exists(old) && fs.readdirSync(old).length > 0;
    fsyncDir(record.layout === 'inside' ? target : path.dirname(target));
    finish(state, record);
    return done(replaced, false, cache());
  };
}

/** The `root` field of a publish request: permission bits and a whole-millisecond mtime. */
function rootOf(raw: unknown): { mode: number; mtimeMs: number } | undefined {
  if (raw === undefined || raw === null) return undefined;
  const f = Fields.of(raw, 'publish root');
  return { mode: f.int('mode', 0, 0o777), mtimeMs: Math.floor(f.number('mtimeMs')) };
}

/** Gives the published root its recorded mode and mtime, and checks it kept them. */
function applyRoot(target: string, root: { mode: number; mtimeMs: number }): void {
  fs.chmodSync(target, root.mode);
  fs.utimesSync(target, utimeOf(root.mtimeMs), utimeOf(root.mtimeMs));
  checkKept('', fs.lstatSync(target), root.mode, root.mtimeMs);
}

function swapDirectory(target: string, staging: string, old: string): void {
  const current = fs.lstatSync(target, { throwIfNoEntry: false });
  if (current !== undefined && !current.isDirectory()) throw new InputError('INVALID_INPUT', `${target} is not a directory`);
  if (current !== undefined) {
    fs.renameSync(target, old);
    faultPoint();
  }
  try {
    fs.renameSync(staging, target);
  } catch (error) {
    if (exists(old) && !exists(target)) fs.renameSync(old, target);
    throw error;
  }
  faultPoint();
}

function finish(state: AgentState, record: StagingRecord): void {
  record.state = 'published';
  delete record.step;
  saveRecord(state, record);
  tidy(record);
}

/** Removes what a publish leaves behind: the previous copy, an emptied staging dir, our own dir in the target. */
function tidy(record: StagingRecord): void {
  const { staging, old } = stagingPaths(record);
  removeTree(old);
  removeTree(staging);
  if (record.layout === 'inside') removeIfEmpty(path.dirname(staging));
}

/** Removes a directory only when empty (another staging may still use it). */
function removeIfEmpty(dir: string): void {
  try {
    fs.rmdirSync(dir);
  } catch {
    // Not empty, or already gone: either way nothing of ours is left to remove.
  }
}

/**
 * Records each staged file whose size, mode and mtime still match, with its stat after
 * publishing; then drops the staged list. Without a base or a cache key there is no cache to write.
 * A file completed with its stat read back (see `StagedFile.stat`) below the top level keeps
 * that stat: publishing renames only top-level entries (or the staging directory itself), which
 * changes no deeper file. Whatever changed such a file since would have changed its ctime too,
 * so its entry would simply miss at the next scan. Others are `lstat`ed now.
 */
function saveStatCache(state: AgentState, record: StagingRecord, base: string | undefined, startedAtMs: number): number {
  const list = state.stagedListFile(record.stagingId);
  if (base === undefined || record.cacheKey === null) {
    fs.rmSync(list, { force: true });
    return 0;
  }
  const builder = new StatCacheBuilder(startedAtMs);
  let n = 0;
  withResolver(record.target, (resolver) => {
    for (const f of readStaged(list).values()) {
      if (f.stat !== undefined && f.path.includes('/')) {
        const { size, mode, sha256, chunks } = f;
        builder.add(f.path, { size, mode, sha256, chunks, ...f.stat });
        n += 1;
        continue;
      }
      let st: fs.Stats | undefined;
      try {
        st = fs.lstatSync(resolver.at(resolver.resolve(f.path)), { throwIfNoEntry: false });
      } catch {
        continue;
      }
      if (st?.isFile() !== true || st.size !== f.size || (st.mode & 0o7777) !== f.mode || Math.floor(st.mtimeMs) !== f.mtimeMs) continue;
      builder.add(f.path, { ...f, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino });
      n += 1;
    }
  });
  builder.save(state.statCacheFile(record.cacheKey), base);
  fs.rmSync(list, { force: true });
  return n;
}

/**
 * `stage-abort {stagingId}`: removes the staging directory and forgets the id. If a publish was
 * interrupted while the old tree was being set aside, it is put back first. Once the new tree
 * has begun to move in (or is in), abort is refused with `CONFLICT`: send `publish` again.
 */
export function stageAbort(state: AgentState): OpHandler {
  return ({ fields }) => {
    const stagingId = fields.token('stagingId');
    const record = loadRecord(state, stagingId);
    if (record === undefined) return { result: { removed: false } };
    const { staging, old } = stagingPaths(record);
    const movingIn = record.layout === 'inside' ? record.step === 'in' : !exists(staging);
    if (record.state === 'published' || (record.state === 'publishing' && movingIn)) {
      throw new ConflictError('CONFLICT', `staging ${stagingId} is being published to ${record.target}: send publish again`, {
        data: { stagingId },
      });
    }
    if (record.state === 'publishing' && record.layout === 'inside') moveAsideBack(record, old);
    if (record.state === 'publishing' && record.layout === 'beside' && exists(old) && !exists(record.target)) {
      fs.renameSync(old, record.target);
    }
    removeTree(staging);
    removeIfEmpty(old);
    state.journals.delete(staging);
    fs.rmSync(state.stagedListFile(stagingId), { force: true });
    removeRecord(state, stagingId);
    if (record.layout === 'inside') removeIfEmpty(path.dirname(staging));
    return { result: { removed: true } };
  };
}
