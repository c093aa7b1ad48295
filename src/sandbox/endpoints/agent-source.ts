import type { DigestOutcome } from '../../objects/content-workers.js';
import type { ExcludeOptions } from '../../rules/excludes.js';
import type { FileChunk, FileContent } from '../../snapshot/checkpoint/file-reader.js';
import type { FileIds } from '../../snapshot/checkpoint/tree-builder.js';
import { UntrustedSource } from '../../snapshot/checkpoint/untrusted-source.js';
import type { EndpointContext, SourceScan, WorkspaceSource } from '../../snapshot/workspace-source.js';
import { listFiles, type ScanLimits, type ScannedFile } from '../../workspace-fs/scan.js';
import { StatCache, type StatCacheBuilder } from '../../workspace-fs/stat-cache.js';
import { type AgentClient, type AgentScan, agentCacheKey } from '../agent/host/agent-client.js';

/** A source scan that remembers the agent's scan id for the second look. */
interface ExecScan extends SourceScan {
  readonly agentScan: AgentScan;
  /** Every id the agent offered was taken (so the agent may skip those files in the second look). */
  readonly allOffersTaken: boolean;
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
    const agentScan = await this.client.scan({
      root: this.root,
      limits,
      cacheKey: this.cacheKey,
      ...(excludes === undefined ? {} : { excludes }),
      ...(base === null ? {} : { base }),
    });
    let usable = new Map<string, FileIds>();
    if (base !== null && agentScan.base === base && agentScan.cached.size > 0) {
      const sizes = new Map(listFiles(agentScan.scan.root).map((f) => [f.path, f.size]));
      const offers = [...agentScan.cached].flatMap(([p, ids]) => {
        const size = sizes.get(p);
        return size === undefined ? [] : [{ path: p, size, ids }];
      });
      usable = await this.untrusted.vouched(base, offers);
    }
    const scan: ExecScan = {
      scan: agentScan.scan,
      lookup: (file) => usable.get(file.path),
      trees: StatCache.empty(),
      allowances: agentScan.allowances,
      agentScan,
      allOffersTaken: usable.size === agentScan.cached.size,
    };
    return scan;
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

  async unchanged(scan: SourceScan, _wasRead: (path: string) => boolean): Promise<boolean> {
    // An offer the host refused was a file it read: then every file is looked at again.
    const { agentScan, allOffersTaken } = scan as ExecScan;
    return this.client.recheck(agentScan, { cachedWereUsed: allOffersTaken });
  }

  async saveCache(scan: SourceScan, _next: StatCacheBuilder, ids: ReadonlyMap<string, FileIds>, base: string): Promise<void> {
    const entries = this.untrusted.remember(base, scan.scan.root, ids).map(({ file: f, ids: got }) => ({
      path: f.path,
      size: f.size,
      mtimeMs: f.mtimeMs,
      ctimeMs: f.ctimeMs,
      ino: f.ino,
      mode: f.mode,
      sha256: got.sha256,
      chunks: got.chunks,
    }));
    await this.client.cacheUpdate({ cacheKey: this.cacheKey, base, racyAfterMs: scan.scan.startedAtMs, entries });
  }
}
