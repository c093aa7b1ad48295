import fs from 'node:fs';
import path from 'node:path';
import { splitRelativePath } from '../../../core/paths.js';
import { InputError } from '../../../errors.js';
import { type ExcludeOptions, ExcludeRules } from '../../../rules/excludes.js';
import { listFiles, type ScanLimits, type ScannedDir, type ScanResult, scanWorkspace, unchangedSince } from '../../../workspace-fs/scan.js';
import { StatCache, StatCacheBuilder, type StatCacheHit } from '../../../workspace-fs/stat-cache.js';
import { type CachedIds, LIST_BATCH_MAX_ITEMS, type ProbeResult, SCAN_PART_BYTES, type ScanWire } from '../wire/protocol.js';
import type { HandlerReply, OpHandler, RequestContext } from './agent-server.js';
import type { AgentState } from './agent-state.js';
import { Fields } from './request-fields.js';
import { refuseUnlinkedDir } from './safe-fs.js';
import { scanDelta } from './scan-delta.js';

/** `probe {root?}`: what the engine needs to know before it relies on this sandbox. */
export function probe(state: AgentState): OpHandler {
  return ({ fields }) => {
    const root = fields.optionalAbsolutePath('root');
    let rootInfo: ProbeResult['root'] = null;
    if (root !== undefined) {
      const st = fs.statSync(root, { throwIfNoEntry: false });
      rootInfo = { exists: st !== undefined, isDirectory: st?.isDirectory() === true, writable: st !== undefined && canWrite(root) };
    }
    const result: ProbeResult = {
      root: rootInfo,
      freeBytes: freeBytes(root ?? state.stateDir),
      uid: process.getuid?.() ?? null,
      gid: process.getgid?.() ?? null,
      node: process.version,
      platform: process.platform,
      stateDir: state.stateDir,
    };
    return { result };
  };
}

function canWrite(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** Free bytes on the filesystem holding `p` (or its nearest existing ancestor); null before Node 18.15. */
function freeBytes(p: string): number | null {
  if (typeof fs.statfsSync !== 'function') return null;
  for (let dir = p; ; dir = path.dirname(dir)) {
    try {
      const s = fs.statfsSync(dir);
      return s.bavail * s.bsize;
    } catch {
      if (dir === path.dirname(dir)) return null;
    }
  }
}

/**
 * `scan {root, excludes, limits, cacheKey?, base?, since?}`: the engine's own `scanWorkspace`
 * run in the sandbox, plus the ids the agent's stat cache vouches for. With `since`, a scan
 * this process made with the same root, excludes and limits, the tree is told as a delta
 * against it (`scanDelta`: unchanged subtrees as stubs, cached ids only for files outside
 * them); an unknown `since` gets a full answer. The result is JSON text sent as parts of at
 * most {@link SCAN_PART_BYTES}; the final frame says how many bytes it had.
 */
export function scan(state: AgentState): OpHandler {
  return async (ctx: RequestContext): Promise<HandlerReply> => {
    const { fields } = ctx;
    const root = fields.absolutePath('root');
    const rules = ExcludeRules.create(excludeOptions(fields.raw('excludes')));
    const limitFields = Fields.of(fields.raw('limits'), 'scan limits');
    const limits: ScanLimits = { maxFileBytes: limitFields.int('maxFileBytes', 0), maxEntries: limitFields.int('maxEntries', 1) };
    const cacheKey = fields.optionalToken('cacheKey');
    const base = fields.optionalString('base');
    refuseUnlinkedDir(root);
    const since = fields.optionalToken('since');
    const fingerprint = JSON.stringify([root, fields.raw('excludes') ?? null, fields.raw('limits') ?? null, cacheKey ?? null]);
    const watch = await state.watches.root(root);
    const watched = await watch?.scan(rules, limits, fingerprint);
    const result = watched?.result ?? scanWorkspace(root, rules, limits);
    const before = since === undefined ? undefined : state.recall(since);
    const delta = before?.root === root && before.fingerprint === fingerprint ? scanDelta(result.root, before.scan.root) : undefined;
    const cache = cacheKey === undefined ? StatCache.empty() : state.statCache(cacheKey);
    const hits = new Map<string, StatCacheHit>();
    // Files under a stub need no offer (the host keeps their committed ids), so only the files sent are looked up.
    if (cache.base !== undefined && (base === undefined || base === cache.base)) {
      for (const file of delta?.sent ?? listFiles(result.root)) {
        // A file with an event since the last scan is read again, whatever its stat says (an edit keeping size and mtime).
        if (watched?.touched(file.path) === true) continue;
        const hit = cache.lookup(file.path, file, result.startedAtMs);
        if (hit !== undefined) hits.set(file.path, hit);
      }
    }
    const cached: Array<CachedIds & { path: string }> = [];
    for (const file of delta?.sent ?? listFiles(result.root)) {
      const hit = hits.get(file.path);
      if (hit !== undefined) cached.push({ path: file.path, sha256: hit.sha256, chunks: hit.chunks });
    }
    const wire: ScanWire = {
      ...result,
      // A stub root (nothing changed) travels as it is; the host resolves it against the scan it holds.
      root: (delta?.root ?? result.root) as ScannedDir,
      scanId: state.rememberScan({ root, scan: result, cached: new Set(cached.map((c) => c.path)), fingerprint }),
      base: cache.base ?? null,
      cached,
      ...(delta === undefined ? {} : { delta: true }),
      ...(watched === undefined ? {} : { watch: watched.report }),
      allowances: rules.allowances,
    };
    const json = Buffer.from(JSON.stringify(wire), 'utf8');
    for (let at = 0; at < json.length; at += SCAN_PART_BYTES) {
      await ctx.part({ at }, json.subarray(at, at + SCAN_PART_BYTES));
    }
    return { result: { scanId: wire.scanId, bytes: json.length } };
  };
}

function excludeOptions(raw: unknown): ExcludeOptions {
  if (raw === undefined || raw === null) return {};
  const f = Fields.of(raw, 'scan excludes');
  const lists = ['exclude', 'include', 'allowSecretPaths'] as const;
  const out: { -readonly [K in keyof ExcludeOptions]: ExcludeOptions[K] } = {};
  for (const name of lists) if (f.raw(name) !== undefined) out[name] = f.strings(name, 100_000);
  if (f.raw('cacheExcludes') !== undefined) out.cacheExcludes = f.boolean('cacheExcludes', true);
  if (f.raw('gitignore') !== undefined) out.gitignore = f.boolean('gitignore', false);
  return out;
}

/**
 * `recheck {root, scanId, cachedWereUsed?, read?}`: the second look (`unchangedSince`) against a
 * scan this process made. With `read` (the files the engine read, every other file's ids it
 * took from a cache that vouches for exactly the scanned stat) only those files are re-stated,
 * as the engine does locally; with `cachedWereUsed` (the engine took every cached id the scan
 * sent) every file but those is. Otherwise every file is.
 */
export function recheck(state: AgentState): OpHandler {
  return async ({ fields }) => {
    const root = fields.absolutePath('root');
    const remembered = state.recall(fields.token('scanId'));
    // A scan from another agent process is unknown: answering "changed" makes the engine rescan.
    if (remembered === undefined) return { result: { unchanged: false, known: false } };
    if (remembered.root !== root) {
      throw new InputError('INVALID_INPUT', `scan ${fields.token('scanId')} was of ${remembered.root}, not ${root}`, { data: { root } });
    }
    // No event since the scan and no doubt: unchanged without a look at the disk. Anything else is looked at, as without watches.
    if ((await state.watches.existing(root)?.quietSince(remembered.scan)) === true) return { result: { unchanged: true, known: true } };
    if (fields.raw('read') !== undefined) {
      const read = new Set(fields.strings('read', LIST_BATCH_MAX_ITEMS));
      return { result: { unchanged: unchangedSince(root, remembered.scan, (p) => read.has(p)), known: true } };
    }
    const skip = fields.boolean('cachedWereUsed', false) ? remembered.cached : new Set<string>();
    return { result: { unchanged: unchangedSince(root, remembered.scan, (p) => !skip.has(p)), known: true } };
  };
}

/**
 * `cache-update {cacheKey, updateId, base, racyAfterMs, entries[], final, since?}`: the ids the
 * engine computed, after a successful commit, sent in parts. Without `since` the final part
 * replaces the cache file atomically with the entries. With `since` (the checkpoint's scan,
 * made by this process against this cache) the engine sends only the files it read: they are
 * appended to the cache under the new base (`StatCacheBuilder.appendTo`), every line before
 * them staying (a line whose file changed no longer matches any stat); once the file holds
 * more than two lines per file of the scan (plus a slack: `StatCache.mayGrow`) it is written
 * afresh: the lines the cache vouches for in that scan, then the entries. An unknown `since`
 * answers `known: false` and saves nothing. Racy entries are dropped (`StatCacheBuilder`), so
 * the cache never vouches for a file that may still change within the same timestamp.
 */
export function cacheUpdate(state: AgentState): OpHandler {
  return ({ fields }) => {
    const cacheKey = fields.token('cacheKey');
    const updateId = fields.token('updateId');
    const base = fields.token('base');
    const racyAfterMs = fields.number('racyAfterMs');
    const since = fields.optionalToken('since');
    const entries = fields.array('entries', LIST_BATCH_MAX_ITEMS).map((raw, i) => cacheEntry(raw, i));
    const kept = since === undefined ? undefined : state.recall(since);
    if (since !== undefined && kept === undefined && !state.hasCacheUpdate(updateId)) {
      return { result: { entries: 0, saved: false, known: false } };
    }
    const open = state.cacheUpdate(updateId, () => ({
      cacheKey,
      builder: new StatCacheBuilder(racyAfterMs),
      entries: 0,
      ...(kept === undefined ? {} : { since: kept.scan }),
    }));
    if (open.cacheKey !== cacheKey) throw new InputError('INVALID_INPUT', `cache update ${updateId} is for another cache key`);
    for (const e of entries) open.builder.add(e.path, e);
    open.entries += entries.length;
    const final = fields.boolean('final', false);
    if (final) {
      saveCache(state, cacheKey, base, racyAfterMs, open.builder, open.since);
      state.closeCacheUpdate(updateId);
    }
    return { result: { entries: open.entries, saved: final, known: true } };
  };
}

function saveCache(
  state: AgentState,
  cacheKey: string,
  base: string,
  racyAfterMs: number,
  read: StatCacheBuilder,
  since?: ScanResult,
): void {
  const file = state.statCacheFile(cacheKey);
  if (since === undefined) {
    read.save(file, base);
    return;
  }
  const live = state.statCache(cacheKey);
  if (live.mayGrow(since.files)) {
    const text = read.appendTo(file, base);
    if (text !== undefined) state.statCacheAppended(cacheKey, base, text);
    return;
  }
  const fresh = new StatCacheBuilder(racyAfterMs);
  for (const f of listFiles(since.root)) {
    const hit = live.lookup(f.path, f, since.startedAtMs);
    if (hit !== undefined) fresh.add(f.path, hit);
  }
  fresh.save(file, base);
  read.appendTo(file, base);
}

function cacheEntry(raw: unknown, i: number) {
  const f = Fields.of(raw, `cache-update entries[${i}]`);
  const sha256 = f.sha256('sha256');
  const chunks = f.sha256s('chunks', 1_000_000);
  return {
    path: splitRelativePath(f.string('path')).join('/'),
    size: f.int('size'),
    mtimeMs: f.number('mtimeMs'),
    ctimeMs: f.number('ctimeMs'),
    ino: f.int('ino'),
    mode: f.int('mode', 0, 0o7777),
    sha256,
    chunks,
  };
}
