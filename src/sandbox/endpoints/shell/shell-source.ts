import type { DigestOutcome } from '../../../objects/content-workers.js';
import { type ExcludeOptions, ExcludeRules } from '../../../rules/excludes.js';
import type { FileChunk, FileContent } from '../../../snapshot/checkpoint/file-reader.js';
import type { FileIds } from '../../../snapshot/checkpoint/tree-builder.js';
import { UntrustedSource } from '../../../snapshot/checkpoint/untrusted-source.js';
import type { EndpointContext, SourceScan, WorkspaceSource } from '../../../snapshot/workspace-source.js';
import { listFiles, type ScanLimits, type ScannedFile } from '../../../workspace-fs/scan.js';
import { StatCache, type StatCacheBuilder, statCacheFile } from '../../../workspace-fs/stat-cache.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import { readPieces, readWhole, type ShellRead, unchangedInSandbox } from './shell-reads.js';
import { shellScan } from './shell-scan.js';

/** Where the host keeps the stat cache of one workspace in one sandbox (a host path; the key names no host directory). */
export function shellCacheFile(
  cacheDir: string,
  workspaceId: string,
  handle: Pick<SandboxHandle, 'provider' | 'id'>,
  root: string,
): string {
  return statCacheFile(cacheDir, workspaceId, `/holdfast-shell/${handle.provider}/${handle.id}${root}`);
}

/** What {@link ShellWorkspaceSource} needs besides its endpoint context. */
export interface ShellSourceConfig {
  readonly handle: SandboxHandle;
  /** The workspace root inside the sandbox (absolute). */
  readonly root: string;
  /** Where the host keeps stat caches (`defaultCacheDir()` for the CLI's). */
  readonly cacheDir: string;
}

/**
 * A workspace inside a sandbox reached with nothing but a POSIX shell and coreutils or busybox
 * over exec (no agent, no Node, no stdin: paths travel in bounded arguments, bytes come back on
 * stdout). The walk is `find -print0` and `stat` (`shellScan`), checked by the host with the
 * rules of a local scan; file bytes come over in batches framed by their scanned sizes and
 * re-stated after the read, and are secret-checked, hashed, chunked and compressed here.
 *
 * Nothing the sandbox prints is trusted (DESIGN section 14). The stat cache lives on the host,
 * keyed by provider, sandbox, root and workspace; an id it offers is used only when it is what
 * the host recorded for that path (same size, same ids) in this workspace's base checkpoint,
 * so a sandbox that fakes an unchanged stat can only claim its own earlier content.
 */
export class ShellWorkspaceSource implements WorkspaceSource {
  readonly label: string;
  private readonly cacheFile: string;
  private readonly untrusted: UntrustedSource;

  constructor(
    private readonly config: ShellSourceConfig,
    context: EndpointContext,
  ) {
    this.label = `sandbox ${config.handle.id}:${config.root}`;
    this.untrusted = new UntrustedSource(context.workspace.id, context.workers, context.baseFiles);
    this.cacheFile = shellCacheFile(config.cacheDir, context.workspace.id, config.handle, config.root);
  }

  async scan(excludes: ExcludeOptions | undefined, limits: ScanLimits, base: string | null): Promise<SourceScan> {
    const rules = ExcludeRules.create(excludes);
    const scan = await shellScan(this.config.handle, this.config.root, excludes, rules, limits);
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
    return this.untrusted.digest(files, pathed(readWhole(this.config.handle, this.config.root, files)));
  }

  readLarge(file: ScannedFile, onChunk: (chunk: FileChunk) => Promise<void>): Promise<FileContent> {
    return this.untrusted.readLarge(file, readPieces(this.config.handle, this.config.root, file), onChunk);
  }

  async unchanged(scan: SourceScan, wasRead: (path: string) => boolean): Promise<boolean> {
    return unchangedInSandbox(this.config.handle, this.config.root, scan.scan.root, wasRead);
  }

  async saveCache(scan: SourceScan, next: StatCacheBuilder, ids: ReadonlyMap<string, FileIds>, base: string): Promise<void> {
    this.untrusted.remember(base, scan.scan.root, ids);
    next.save(this.cacheFile, base);
  }
}

/** `readWhole`'s answers as the path-and-bytes records `UntrustedSource.digest` reads. */
async function* pathed(read: AsyncIterable<ShellRead>): AsyncGenerator<{ path: string; bytes: Buffer | undefined; errno?: 'EACCES' }> {
  for await (const [file, bytes, errno] of read) yield errno === undefined ? { path: file.path, bytes } : { path: file.path, bytes, errno };
}
