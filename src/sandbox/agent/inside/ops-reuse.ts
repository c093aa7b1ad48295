import fs from 'node:fs';
import { splitRelativePath } from '../../../core/paths.js';
import { StatCache } from '../../../workspace-fs/stat-cache.js';
import { LIST_BATCH_MAX_ITEMS, type ReuseFile } from '../wire/protocol.js';
import type { HandlerReply, OpHandler, RequestContext } from './agent-server.js';
import type { AgentState } from './agent-state.js';
import type { StagedFile } from './batch-journal.js';
import { Fields } from './request-fields.js';
import { hashFile, NoFollowResolver } from './safe-fs.js';
import { openStaging } from './staging-registry.js';

/** While reusing (hashing may take a while) a progress part goes out this often, so the client knows the agent is alive. */
const PROGRESS_EVERY_MS = 2000;

/**
 * `stage-reuse {stagingId, files[]}`: the warm restore of restore.ts `reuseUnchanged`. Each
 * file of the existing target whose size, mode and whole-millisecond mtime match, and whose
 * content hash matches (from the agent's stat cache when it vouches for the file, otherwise by
 * hashing it), is hard-linked into staging, so only what differs is sent. Links never change
 * the old inode, and a later write to the same path replaces the link rather than writing
 * through it. Idempotent: a re-sent request links the same files again. Missing parent
 * directories are created (0700; their `dir` op sets mode and mtime later). Paths may hold
 * byte escapes and be longer than one system call takes (the resolvers reach them). Members of
 * a hard-link group are not asked for: they are linked to their leader in staging.
 */
export function stageReuse(state: AgentState): OpHandler {
  return async (ctx: RequestContext): Promise<HandlerReply> => {
    const { fields } = ctx;
    const stagingId = fields.token('stagingId');
    const files = fields.array('files', LIST_BATCH_MAX_ITEMS).map(reuseFile);
    const { record, staging, journal } = openStaging(state, stagingId);
    const cache = record.cacheKey === null ? StatCache.empty() : StatCache.load(state.statCacheFile(record.cacheKey));
    const from = new NoFollowResolver(record.target);
    const to = new NoFollowResolver(staging);
    const reused: string[] = [];
    const staged: StagedFile[] = [];
    let lastProgress = Date.now();
    try {
      for (const file of files) {
        if (linkIfUnchanged(file, from, to, cache)) {
          reused.push(file.path);
          staged.push(file);
        }
        if (Date.now() - lastProgress >= PROGRESS_EVERY_MS) {
          lastProgress = Date.now();
          await ctx.part({ progress: { files: reused.length } });
        }
      }
    } finally {
      from.close();
      to.close();
    }
    journal.addStaged(staged);
    return { result: { reused } };
  };
}

function linkIfUnchanged(file: ReuseFile, from: NoFollowResolver, to: NoFollowResolver, cache: StatCache): boolean {
  let source: string | Buffer;
  try {
    source = from.at(from.resolve(file.path));
  } catch {
    return false;
  }
  const st = fs.lstatSync(source, { throwIfNoEntry: false });
  if (
    st === undefined ||
    !st.isFile() ||
    st.size !== file.size ||
    (st.mode & 0o7777) !== file.mode ||
    Math.floor(st.mtimeMs) !== file.mtimeMs
  ) {
    return false;
  }
  const identity = { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, mode: st.mode & 0o7777 };
  const known = cache.lookup(file.path, identity, Date.now());
  if ((known?.sha256 ?? hashFile(source)) !== file.sha256) return false;
  const dest = to.at(to.resolveCreatingParents(file.path));
  const there = fs.lstatSync(dest, { throwIfNoEntry: false });
  if (there?.isDirectory() === true) return false;
  if (there !== undefined) fs.unlinkSync(dest);
  fs.linkSync(source, dest);
  return true;
}

function reuseFile(raw: unknown, i: number): ReuseFile {
  const f = Fields.of(raw, `stage-reuse files[${i}]`);
  const sha256 = f.sha256('sha256');
  const chunks = f.sha256s('chunks', 1_000_000);
  return {
    path: splitRelativePath(f.string('path')).join('/'),
    size: f.int('size'),
    mode: f.int('mode', 0, 0o7777),
    mtimeMs: f.number('mtimeMs'),
    sha256,
    chunks,
  };
}
