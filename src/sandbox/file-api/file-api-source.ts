import type { DigestOutcome } from '../../objects/content-workers.js';
import { type ExcludeOptions, ExcludeRules } from '../../rules/excludes.js';
import type { FileChunk, FileContent } from '../../snapshot/checkpoint/file-reader.js';
import type { FileIds } from '../../snapshot/checkpoint/tree-builder.js';
import { UntrustedSource } from '../../snapshot/checkpoint/untrusted-source.js';
import type { EndpointContext, SourceScan, WorkspaceSource } from '../../snapshot/workspace-source.js';
import { listFiles, type ScanLimits, type ScannedFile } from '../../workspace-fs/scan.js';
import { StatCache, type StatCacheBuilder, statCacheFile } from '../../workspace-fs/stat-cache.js';
import { readFilePieces, readWholeFile, unchangedThroughFiles } from './file-api-reads.js';
import { fileApiScan } from './file-api-scan.js';
import type { SandboxFiles } from './sandbox-files.js';

/** Where the host keeps the stat cache of one workspace reached through a file API (a host path; the key names no host directory). */
export function fileApiCacheFile(cacheDir: string, workspaceId: string, cacheKey: string): string {
  return statCacheFile(cacheDir, workspaceId, `/holdfast-files/${cacheKey}`);
}

/** What {@link FileApiWorkspaceSource} needs besides its endpoint context. */
export interface FileApiSourceConfig {
  readonly files: SandboxFiles;
  /** Names this workspace among the host's stat caches: stable for one sandbox, different across sandboxes (`provider/id/root`). */
  readonly cacheKey: string;
  /** Where the host keeps stat caches. */
  readonly cacheDir: string;
}

/**
 * A workspace reached through a sandbox's file API ({@link SandboxFiles}): the walk is the
 * API's listing checked by the host with the rules of a local scan (`fileApiScan`); file
 * bytes are read in bounded pieces, framed by their scanned sizes and stated again after the
 * read, and are secret-checked, hashed, chunked and compressed here.
 *
 * Nothing the API returns is trusted (DESIGN section 14). The stat cache lives on the host,
 * keyed by `cacheKey` and workspace; an id it offers is used only when it is what the host
 * recorded for that path (same size, same ids) in this workspace's base checkpoint.
 */
export class FileApiWorkspaceSource implements WorkspaceSource {
  readonly label: string;
  private readonly cacheFile: string;
  private readonly untrusted: UntrustedSource;

  constructor(
    private readonly config: FileApiSourceConfig,
    context: EndpointContext,
  ) {
    this.label = config.files.label;
    this.untrusted = new UntrustedSource(context.workspace.id, context.workers, context.baseFiles);
    this.cacheFile = fileApiCacheFile(config.cacheDir, context.workspace.id, config.cacheKey);
  }

  async scan(excludes: ExcludeOptions | undefined, limits: ScanLimits, base: string | null): Promise<SourceScan> {
    const rules = ExcludeRules.create(excludes);
    const scan = await fileApiScan(this.config.files, excludes, rules, limits);
    const loaded = base === null ? StatCache.empty() : StatCache.load(this.cacheFile);
    let usable = new Map<string, FileIds>();
    if (base !== null && loaded.base === base && loaded.size > 0) {
      const offers = listFiles(scan.root).flatMap((f) => {
        const hit = loaded.lookup(f.path, f, scan.startedAtMs);
        return hit === undefined ? [] : [{ path: f.path, size: f.size, ids: hit }];
      });
      usable = await this.untrusted.vouched(base, offers);
    }
    return { scan, lookup: (file) => usable.get(file.path), trees: StatCache.empty(), allowances: rules.allowances };
  }

  digest(files: readonly ScannedFile[]): Promise<DigestOutcome[]> {
    const api = this.config.files;
    return this.untrusted.digest(
      files,
      (async function* () {
        for (const f of files) yield { path: f.path, bytes: await readWholeFile(api, f) };
      })(),
    );
  }

  readLarge(file: ScannedFile, onChunk: (chunk: FileChunk) => Promise<void>): Promise<FileContent> {
    return this.untrusted.readLarge(file, readFilePieces(this.config.files, file), onChunk);
  }

  unchanged(scan: SourceScan, wasRead: (path: string) => boolean): Promise<boolean> {
    return unchangedThroughFiles(this.config.files, scan.scan.root, wasRead);
  }

  async saveCache(scan: SourceScan, next: StatCacheBuilder, ids: ReadonlyMap<string, FileIds>, base: string): Promise<void> {
    this.untrusted.remember(base, scan.scan.root, ids);
    next.save(this.cacheFile, base);
  }
}
