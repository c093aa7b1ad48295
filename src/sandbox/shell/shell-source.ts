import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type ExcludeOptions, ExcludeRules } from '../../core/excludes.js';
import { findSecret } from '../../core/secrets.js';
import { isHoldfastError } from '../../errors.js';
import type { ContentWorkers, DigestOutcome } from '../../objects/content-workers.js';
import type { BaseFiles, RecordedFile } from '../../snapshot/base-files.js';
import { type FileChunk, type FileContent, readLargeFile } from '../../snapshot/file-reader.js';
import { listFiles, type ScanLimits, type ScannedFile } from '../../snapshot/scan.js';
import { StatCache, type StatCacheBuilder, type StatCacheHit, statCacheFile } from '../../snapshot/stat-cache.js';
import type { FileIds } from '../../snapshot/tree-builder.js';
import type { EndpointContext, SourceScan, WorkspaceSource } from '../../snapshot/workspace-source.js';
import type { SandboxHandle } from '../sandbox-provider.js';
import { readPieces, readWhole, unchangedInSandbox } from './shell-reads.js';
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

  private readonly workspaceId: string;
  private readonly workers: ContentWorkers;
  private readonly baseFiles: BaseFiles;

  constructor(
    private readonly config: ShellSourceConfig,
    context: EndpointContext,
  ) {
    this.label = `sandbox ${config.handle.id}:${config.root}`;
    this.workspaceId = context.workspace.id;
    this.workers = context.workers;
    this.baseFiles = context.baseFiles;
    this.cacheFile = shellCacheFile(config.cacheDir, this.workspaceId, config.handle, config.root);
  }

  async scan(excludes: ExcludeOptions | undefined, limits: ScanLimits, base: string | null): Promise<SourceScan> {
    const rules = ExcludeRules.create(excludes);
    const scan = await shellScan(this.config.handle, this.config.root, excludes, rules, limits);
    const loaded = base === null ? StatCache.empty() : StatCache.load(this.cacheFile);
    const usable = new Map<string, StatCacheHit>();
    if (base !== null && loaded.base === base && loaded.size > 0) {
      const offered = listFiles(scan.root).flatMap((f) => {
        const hit = loaded.lookup(f.path, f, scan.startedAtMs);
        return hit === undefined ? [] : [[f, hit] as const];
      });
      const recorded = offered.length === 0 ? new Map<string, RecordedFile>() : await this.recordedFiles(base);
      for (const [f, hit] of offered) {
        const own = recorded.get(f.path);
        if (own !== undefined && own.size === f.size && sameIds(own, hit)) usable.set(f.path, hit);
      }
    }
    return { scan, lookup: (file) => usable.get(file.path), trees: StatCache.empty(), allowances: rules.allowances };
  }

  /** The host's record of the base's files; none when the base cannot be walked (its files are then read). */
  private async recordedFiles(base: string): Promise<ReadonlyMap<string, RecordedFile>> {
    try {
      return await this.baseFiles.of(base, this.workspaceId);
    } catch (error) {
      if (isHoldfastError(error, 'STORE_UNAVAILABLE')) throw error;
      return new Map();
    }
  }

  async digest(files: readonly ScannedFile[]): Promise<DigestOutcome[]> {
    const outcomes = new Map<string, DigestOutcome>();
    const buffers: Uint8Array[] = [];
    const order: string[] = [];
    for await (const [file, bytes] of readWhole(this.config.handle, this.config.root, files)) {
      if (bytes === undefined) {
        outcomes.set(file.path, { kind: 'error', errno: 'ENOENT', message: `${file.path} changed or vanished since the scan` });
        continue;
      }
      // Secrets are checked before the bytes go anywhere else, as for a local file.
      const secret = findSecret(bytes);
      if (secret !== undefined) outcomes.set(file.path, { kind: 'secret', rule: secret.rule });
      else {
        buffers.push(bytes);
        order.push(file.path);
      }
    }
    const digested = await this.workers.digestBuffers(buffers);
    for (const [i, p] of order.entries()) outcomes.set(p, digested[i] as DigestOutcome);
    return files.map((f) => outcomes.get(f.path) ?? { kind: 'error', errno: 'ENOENT', message: `${f.path} was not read` });
  }

  async readLarge(file: ScannedFile, onChunk: (chunk: FileChunk) => Promise<void>): Promise<FileContent> {
    // Spooled to a private host file, so the secret scan sees it whole before any chunk leaves.
    const spool = path.join(os.tmpdir(), `holdfast-spool-${randomBytes(8).toString('hex')}`);
    const fd = fs.openSync(spool, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
    try {
      try {
        for await (const piece of readPieces(this.config.handle, this.config.root, file)) fs.writeSync(fd, piece);
      } finally {
        fs.closeSync(fd);
      }
      return await readLargeFile(spool, onChunk);
    } finally {
      fs.rmSync(spool, { force: true });
    }
  }

  async unchanged(scan: SourceScan, wasRead: (path: string) => boolean): Promise<boolean> {
    return unchangedInSandbox(this.config.handle, this.config.root, scan.scan.root, wasRead);
  }

  async saveCache(scan: SourceScan, next: StatCacheBuilder, ids: ReadonlyMap<string, FileIds>, base: string): Promise<void> {
    // The ids are this host's own (hashed here, or taken from its record of the base), so they can vouch next time.
    const recorded = new Map<string, RecordedFile>();
    for (const f of listFiles(scan.scan.root)) {
      const got = ids.get(f.path);
      if (got !== undefined) recorded.set(f.path, { size: f.size, sha256: got.sha256, chunks: got.chunks });
    }
    this.baseFiles.remember(base, recorded);
    next.save(this.cacheFile, base);
  }
}

function sameIds(a: FileIds, b: FileIds): boolean {
  return a.sha256 === b.sha256 && a.chunks.length === b.chunks.length && a.chunks.every((c, i) => c === b.chunks[i]);
}
