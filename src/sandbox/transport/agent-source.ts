import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ExcludeOptions } from '../../core/excludes.js';
import { findSecret } from '../../core/secrets.js';
import { isHoldfastError } from '../../errors.js';
import type { ContentWorkers, DigestOutcome } from '../../objects/content-workers.js';
import type { BaseFiles, RecordedFile } from '../../snapshot/base-files.js';
import { type FileChunk, type FileContent, readLargeFile } from '../../snapshot/file-reader.js';
import { listFiles, type ScanLimits, type ScannedFile } from '../../snapshot/scan.js';
import { StatCache, type StatCacheBuilder } from '../../snapshot/stat-cache.js';
import type { FileIds } from '../../snapshot/tree-builder.js';
import type { EndpointContext, SourceScan, WorkspaceSource } from '../../snapshot/workspace-source.js';
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

  private readonly workspaceId: string;
  private readonly workers: ContentWorkers;
  /** The host's record of base checkpoints' files. */
  private readonly baseFiles: BaseFiles;

  constructor(
    private readonly client: AgentClient,
    private readonly root: string,
    sandboxId: string,
    context: EndpointContext,
  ) {
    this.label = `sandbox ${sandboxId}:${root}`;
    this.workspaceId = context.workspace.id;
    this.workers = context.workers;
    this.baseFiles = context.baseFiles;
    this.cacheKey = agentCacheKey(this.workspaceId, root);
  }

  async scan(excludes: ExcludeOptions | undefined, limits: ScanLimits, base: string | null): Promise<SourceScan> {
    const agentScan = await this.client.scan({
      root: this.root,
      limits,
      cacheKey: this.cacheKey,
      ...(excludes === undefined ? {} : { excludes }),
      ...(base === null ? {} : { base }),
    });
    const usable = new Map<string, RecordedFile>();
    if (base !== null && agentScan.base === base && agentScan.cached.size > 0) {
      const recorded = await this.recordedFiles(base);
      const sizes = new Map(listFiles(agentScan.scan.root).map((f) => [f.path, f.size]));
      for (const [p, offered] of agentScan.cached) {
        const own = recorded.get(p);
        if (own !== undefined && own.size === sizes.get(p) && sameIds(own, offered)) usable.set(p, own);
      }
    }
    const scan: ExecScan = {
      scan: agentScan.scan,
      lookup: (file) => {
        const own = usable.get(file.path);
        return own === undefined ? undefined : { sha256: own.sha256, chunks: own.chunks };
      },
      trees: StatCache.empty(),
      allowances: agentScan.allowances,
      agentScan,
      allOffersTaken: usable.size === agentScan.cached.size,
    };
    return scan;
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
    for await (const got of this.client.readFiles(
      this.root,
      files.map((f) => ({ path: f.path, size: f.size })),
    )) {
      if (got.bytes === undefined) {
        outcomes.set(got.path, { kind: 'error', errno: 'ENOENT', message: `${got.path} changed or vanished since the scan` });
        continue;
      }
      // Secrets are checked before the bytes go anywhere else, as for a local file.
      const secret = findSecret(got.bytes);
      if (secret !== undefined) outcomes.set(got.path, { kind: 'secret', rule: secret.rule });
      else {
        buffers.push(got.bytes);
        order.push(got.path);
      }
    }
    const digested = await this.workers.digestBuffers(buffers);
    for (const [i, p] of order.entries()) outcomes.set(p, digested[i] as DigestOutcome);
    return files.map((f) => outcomes.get(f.path) ?? { kind: 'error', errno: 'ENOENT', message: `${f.path} was not returned by the agent` });
  }

  async readLarge(file: ScannedFile, onChunk: (chunk: FileChunk) => Promise<void>): Promise<FileContent> {
    // Spooled to a private host file, so the secret scan sees it whole before any chunk leaves.
    const spool = path.join(os.tmpdir(), `holdfast-spool-${randomBytes(8).toString('hex')}`);
    const fd = fs.openSync(spool, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
    try {
      try {
        let spooled = 0;
        for await (const piece of this.client.readStream(this.root, file.path)) {
          fs.writeSync(fd, piece);
          spooled += piece.length;
          // Grown past its scanned size: stop here (the size differs, so the checkpoint rescans), never fill the host's disk.
          if (spooled > file.size) break;
        }
      } finally {
        fs.closeSync(fd);
      }
      return await readLargeFile(spool, onChunk);
    } finally {
      fs.rmSync(spool, { force: true });
    }
  }

  async unchanged(scan: SourceScan, _wasRead: (path: string) => boolean): Promise<boolean> {
    // An offer the host refused was a file it read: then every file is looked at again.
    const { agentScan, allOffersTaken } = scan as ExecScan;
    return this.client.recheck(agentScan, { cachedWereUsed: allOffersTaken });
  }

  async saveCache(scan: SourceScan, _next: StatCacheBuilder, ids: ReadonlyMap<string, FileIds>, base: string): Promise<void> {
    const files = listFiles(scan.scan.root);
    // The ids are this host's own (hashed here, or taken from its record of the base), so they can vouch next time.
    const recorded = new Map<string, RecordedFile>();
    for (const f of files) {
      const got = ids.get(f.path);
      if (got !== undefined) recorded.set(f.path, { size: f.size, sha256: got.sha256, chunks: got.chunks });
    }
    this.baseFiles.remember(base, recorded);
    const entries = files.flatMap((f) => {
      const got = ids.get(f.path);
      return got === undefined
        ? []
        : [
            {
              path: f.path,
              size: f.size,
              mtimeMs: f.mtimeMs,
              ctimeMs: f.ctimeMs,
              ino: f.ino,
              mode: f.mode,
              sha256: got.sha256,
              chunks: got.chunks,
            },
          ];
    });
    await this.client.cacheUpdate({ cacheKey: this.cacheKey, base, racyAfterMs: scan.scan.startedAtMs, entries });
  }
}

function sameIds(a: FileIds, b: FileIds): boolean {
  return a.sha256 === b.sha256 && a.chunks.length === b.chunks.length && a.chunks.every((c, i) => c === b.chunks[i]);
}
