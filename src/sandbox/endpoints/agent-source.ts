import type { Sha256Hex } from '../../core/hash.js';
import type { DigestOutcome } from '../../objects/content-workers.js';
import type { ExcludeOptions } from '../../rules/excludes.js';
import type { FileChunk, FileContent } from '../../snapshot/checkpoint/file-reader.js';
import type { FileIds } from '../../snapshot/checkpoint/tree-builder.js';
import type { RecordedFile } from '../../snapshot/checkpoint/untrusted-source.js';
import { advanceRecord, UntrustedSource } from '../../snapshot/checkpoint/untrusted-source.js';
import type { EndpointContext, SourceScan, WorkspaceSource } from '../../snapshot/workspace-source.js';
import { listFilesOutside, type ScanLimits, type ScannedDir, type ScannedFile } from '../../workspace-fs/scan.js';
import { RACY_WINDOW_MS, StatCache, type StatCacheBuilder } from '../../workspace-fs/stat-cache.js';
import { subtreeFacts } from '../../workspace-fs/subtree-facts.js';
import { type AgentClient, type AgentScan, agentCacheKey } from '../agent/host/agent-client.js';
import type { HeldScan } from '../agent/host/held-scans.js';

/** A source scan that remembers the agent's scan for the second look and the cache update. */
interface ExecScan extends SourceScan {
  readonly agentScan: AgentScan;
  /** Every id the agent offered was taken (so the agent may skip those files in the second look). */
  readonly allOffersTaken: boolean;
  /** The head the scan was made against. */
  readonly base: string | null;
  readonly requestKey: string;
  /** Content ids taken without reading (offers the host vouched for, and files of adopted directories), by path. */
  readonly taken: ReadonlyMap<string, FileIds>;
  readonly dirTrees: { readonly known: ReadonlyMap<ScannedDir, Sha256Hex>; readonly built: Map<ScannedDir, Sha256Hex> };
  /** The held scan a delta answer was resolved against (its record moves forward on commit). */
  readonly held: HeldScan | undefined;
  /** Settled subtrees (see `SourceScan.settled`): adopted directories whose files are all the held record's. */
  readonly settledDirs: ReadonlySet<ScannedDir>;
}

/**
 * A workspace inside a sandbox, reached through the in-sandbox agent over exec. The agent
 * walks the tree and keeps its own stat cache (under its home, outside the workspace); file
 * bytes come over in protocol-sized batches and are secret-checked, hashed, chunked and
 * compressed on this side, exactly as for a local directory.
 *
 * Nothing the agent says is trusted (DESIGN section 14): its scan is checked by the client
 * with the rules of a local scan, and an object id it offers for an unchanged file is used
 * only when it is exactly what the host recorded for that path (same size, same ids) in this
 * workspace's base checkpoint; every other file's bytes are read and hashed here. So a
 * checkpoint references only objects its own workspace already held or whose bytes the host
 * saw (proof of possession): knowing an object's hash never grants its content.
 *
 * A turn's cost follows what changed: after a commit the connection keeps the host's own view
 * of it ({@link HeldScan}: the checked scan, the committed ids, the tree built for each
 * directory), and while that checkpoint is the head the next scan is asked as a delta against
 * it. Unchanged subtrees then arrive as stubs and are that view's directories, their files keep
 * the committed ids (unless racy against that scan) and their trees keep their ids; only the
 * changed directories travel, are checked and have their offers vouched for, and only the
 * files read are re-stated and sent back for the agent's cache. A lying stub can only give the
 * host its own earlier view of this workspace. Anything else (no held scan, another agent
 * process, another base or request, host exclusions in the held scan) takes the full path.
 */
export class AgentWorkspaceSource implements WorkspaceSource {
  readonly label: string;
  private readonly cacheKey: string;
  private readonly untrusted: UntrustedSource;

  constructor(
    private readonly client: AgentClient,
    private readonly root: string,
    sandboxId: string,
    context: EndpointContext,
  ) {
    this.label = `sandbox ${sandboxId}:${root}`;
    this.untrusted = new UntrustedSource(context.workspace.id, context.workers, context.baseFiles);
    this.cacheKey = agentCacheKey(context.workspace.id, root);
  }

  async scan(excludes: ExcludeOptions | undefined, limits: ScanLimits, base: string | null): Promise<SourceScan> {
    const requestKey = JSON.stringify([this.root, excludes ?? null, limits, this.cacheKey]);
    const held = this.deltaBase(requestKey, base);
    const agentScan = await this.client.scan(
      {
        root: this.root,
        limits,
        cacheKey: this.cacheKey,
        ...(excludes === undefined ? {} : { excludes }),
        ...(base === null ? {} : { base }),
        ...(held === undefined ? {} : { since: held.scanId }),
      },
      held?.scan.root,
    );
    const taken = new Map<string, FileIds>();
    const adopted = new Set<ScannedDir>(agentScan.delta ? agentScan.adopted : []);
    const settledDirs = new Set<ScannedDir>();
    const resolvedAgainst = held !== undefined && agentScan.delta ? held : undefined;
    if (resolvedAgainst !== undefined && adopted.size > 0) {
      // A file of an adopted directory has the stat the held scan saw: its committed ids, unless racy then.
      // A subtree with no racy file and no hard link is settled whole (its facts are remembered per directory object).
      const { record, trees } = resolvedAgainst;
      const racyFrom = resolvedAgainst.scan.startedAtMs - RACY_WINDOW_MS;
      const settle = (dir: ScannedDir): void => {
        const facts = subtreeFacts(dir);
        if (facts.newestFileMtimeMs < racyFrom && !facts.linked && trees.get(dir) !== undefined) {
          settledDirs.add(dir);
          return;
        }
        for (const c of dir.children) {
          if (c.type === 'dir') settle(c);
          else if (c.type === 'file') {
            const ids = record.get(c.path);
            if (ids !== undefined && c.mtimeMs < racyFrom) taken.set(c.path, { sha256: ids.sha256, chunks: ids.chunks });
          }
        }
      };
      for (const dir of adopted) settle(dir);
    }
    let vouched = 0;
    if (base !== null && agentScan.base === base && agentScan.cached.size > 0) {
      // Offers count only for files the answer showed (outside adopted directories).
      const offers: Array<{ path: string; size: number; ids: FileIds }> = [];
      for (const f of listFilesOutside(agentScan.scan.root, adopted)) {
        const ids = agentScan.cached.get(f.path);
        if (ids !== undefined) offers.push({ path: f.path, size: f.size, ids });
      }
      const usable = await this.untrusted.vouched(base, offers);
      vouched = usable.size;
      for (const [p, ids] of usable) taken.set(p, ids);
    }
    const known = resolvedAgainst?.trees ?? new Map<ScannedDir, Sha256Hex>();
    const scan: ExecScan = {
      scan: agentScan.scan,
      lookup: (file) => taken.get(file.path),
      trees: StatCache.empty(),
      statCache: false,
      dirTrees: { known, built: new Map() },
      held: resolvedAgainst,
      settledDirs,
      ...(agentScan.watch === undefined ? {} : { report: agentScan.watch }),
      ...(resolvedAgainst === undefined || settledDirs.size === 0
        ? {}
        : { settled: { dirs: settledDirs, ids: resolvedAgainst.record, trees: known } }),
      allowances: agentScan.allowances,
      agentScan,
      allOffersTaken: vouched === agentScan.cached.size,
      base,
      requestKey,
      taken,
    };
    return scan;
  }

  /** The held scan a delta may be asked against: same request, its checkpoint still the head, no host exclusions in it. */
  private deltaBase(requestKey: string, base: string | null): HeldScan | undefined {
    const held = this.client.held.get(this.cacheKey);
    if (held === undefined || base === null || held.base !== base || held.requestKey !== requestKey) return undefined;
    return held;
  }

  digest(files: readonly ScannedFile[]): Promise<DigestOutcome[]> {
    return this.untrusted.digest(
      files,
      this.client.readFiles(
        this.root,
        files.map((f) => ({ path: f.path, size: f.size })),
      ),
    );
  }

  readLarge(file: ScannedFile, onChunk: (chunk: FileChunk) => Promise<void>): Promise<FileContent> {
    return this.untrusted.readLarge(file, this.client.readStream(this.root, file.path), onChunk);
  }

  async unchanged(scan: SourceScan, wasRead: (path: string) => boolean): Promise<boolean> {
    // Only the files read are re-stated (every other one's ids are what its scanned stat vouches for);
    // when they are too many for one request, every file not taken from an offer is.
    const { agentScan, allOffersTaken, settledDirs } = scan as ExecScan;
    const read = listFilesOutside(agentScan.scan.root, settledDirs).flatMap((f) => (wasRead(f.path) ? [f.path] : []));
    return this.client.recheck(agentScan, { cachedWereUsed: allOffersTaken, read });
  }

  async saveCache(scan: SourceScan, _next: StatCacheBuilder, ids: ReadonlyMap<string, FileIds>, base: string): Promise<void> {
    const exec = scan as ExecScan;
    const { agentScan, held } = exec;
    let kept: Array<{ file: ScannedFile; ids: FileIds }>;
    let record: Map<string, RecordedFile>;
    if (held !== undefined) {
      // Told against the held scan: its record moves forward by what changed, and only the files looked at are sent.
      record = advanceRecord(held.record, held.scan.root, scan.scan.root, exec.settledDirs, ids);
      this.untrusted.rememberMoved(held.base, base, record);
      kept = listFilesOutside(scan.scan.root, exec.settledDirs).flatMap((file) => {
        const got = ids.get(file.path);
        return got === undefined ? [] : [{ file, ids: got }];
      });
    } else ({ files: kept, record } = this.untrusted.remember(base, scan.scan.root, ids));
    // The next scan may be a delta against this one only if the host's check added nothing of its own to it.
    if (agentScan.hostExclusions === 0) {
      this.client.held.set(this.cacheKey, {
        scanId: agentScan.scanId,
        requestKey: exec.requestKey,
        scan: agentScan.scan,
        base,
        record,
        trees: exec.dirTrees.built,
      });
    } else this.client.held.drop(this.cacheKey);
    const entry = ({ file: f, ids: got }: (typeof kept)[number]) => ({
      path: f.path,
      size: f.size,
      mtimeMs: f.mtimeMs,
      ctimeMs: f.ctimeMs,
      ino: f.ino,
      mode: f.mode,
      sha256: got.sha256,
      chunks: got.chunks,
    });
    const racyAfterMs = scan.scan.startedAtMs;
    // The agent's cache vouched for this scan against the same base: it keeps those lines, and gets only the files read.
    if (exec.base !== null && agentScan.base === exec.base) {
      const read = kept.filter((k) => !exec.taken.has(k.file.path)).map(entry);
      if (await this.client.cacheUpdate({ cacheKey: this.cacheKey, base, racyAfterMs, entries: read, since: agentScan.scanId })) return;
    }
    await this.client.cacheUpdate({ cacheKey: this.cacheKey, base, racyAfterMs, entries: kept.map(entry) });
  }
}
