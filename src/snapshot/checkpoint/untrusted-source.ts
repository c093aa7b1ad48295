import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isHoldfastError } from '../../errors.js';
import type { ContentWorkers, DigestOutcome } from '../../objects/content-workers.js';
import { findSecret } from '../../rules/secrets.js';
import { listFiles, type ScannedDir, type ScannedFile } from '../../workspace-fs/scan.js';
import type { BaseFiles, RecordedFile } from './base-files.js';
import { type FileChunk, type FileContent, readLargeFile } from './file-reader.js';
import type { FileIds } from './tree-builder.js';

/** The host's record of one file of a checkpoint (re-exported for the sources that keep one). */
export type { RecordedFile };

/**
 * What every workspace source outside this host's filesystem shares (a sandbox reached
 * through its agent or with a shell): the host decides what it can vouch for, and every byte
 * it did not vouch for is read, secret-checked and hashed here (DESIGN section 14).
 */
export class UntrustedSource {
  constructor(
    private readonly workspaceId: string,
    private readonly workers: ContentWorkers,
    /** The host's record of base checkpoints' files: the only ids an offer may match. */
    private readonly baseFiles: BaseFiles,
  ) {}

  /**
   * The offered ids (from a cache the source keeps, by path, with the size the scan saw) the
   * host can vouch for: exactly what it recorded for that path, size and ids, in this
   * workspace's `base`. So a source that fakes an unchanged stat can only claim its own
   * earlier content, and knowing an object's hash never grants its bytes. The base cannot be
   * walked: nothing is vouched for (every file is read), unless the store is down.
   */
  async vouched(base: string, offers: Iterable<{ path: string; size: number; ids: FileIds }>): Promise<Map<string, FileIds>> {
    const list = [...offers];
    const usable = new Map<string, FileIds>();
    if (list.length === 0) return usable;
    let recorded: ReadonlyMap<string, RecordedFile>;
    try {
      recorded = await this.baseFiles.of(base, this.workspaceId);
    } catch (error) {
      if (isHoldfastError(error, 'STORE_UNAVAILABLE')) throw error;
      return usable;
    }
    for (const offer of list) {
      const own = recorded.get(offer.path);
      if (own !== undefined && own.size === offer.size && sameIds(own, offer.ids))
        usable.set(offer.path, { sha256: own.sha256, chunks: own.chunks });
    }
    return usable;
  }

  /**
   * Digests `files` from what the source returned for them (`bytes` undefined: changed or
   * gone since the scan, or unreadable when `errno` says so, an outcome of that errno): secrets are checked before the bytes go anywhere else, then they
   * are hashed, chunked and compressed by the workers. A file the source did not return is
   * an `ENOENT` outcome, so the checkpoint rescans.
   */
  async digest(
    files: readonly ScannedFile[],
    read: AsyncIterable<{ readonly path: string; readonly bytes: Uint8Array | undefined; readonly errno?: 'EACCES' | 'EPERM' }>,
  ): Promise<DigestOutcome[]> {
    const outcomes = new Map<string, DigestOutcome>();
    const buffers: Uint8Array[] = [];
    const order: string[] = [];
    for await (const got of read) {
      if (got.bytes === undefined && got.errno !== undefined) {
        outcomes.set(got.path, { kind: 'error', errno: got.errno, message: `${got.path} cannot be read (${got.errno})` });
        continue;
      }
      if (got.bytes === undefined) {
        outcomes.set(got.path, { kind: 'error', errno: 'ENOENT', message: `${got.path} changed or vanished since the scan` });
        continue;
      }
      const secret = findSecret(got.bytes);
      if (secret !== undefined) outcomes.set(got.path, { kind: 'secret', rule: secret.rule });
      else {
        buffers.push(got.bytes);
        order.push(got.path);
      }
    }
    const digested = await this.workers.digestBuffers(buffers);
    for (const [i, p] of order.entries()) outcomes.set(p, digested[i] as DigestOutcome);
    return files.map(
      (f) => outcomes.get(f.path) ?? { kind: 'error', errno: 'ENOENT', message: `${f.path} was not returned by the source` },
    );
  }

  /**
   * Reads one large file from `pieces` into a private host spool first, so the secret scan
   * sees it whole before any chunk leaves, then chunks it to `onChunk`. A file that grows past
   * its scanned size is cut there (its size differs, so the checkpoint rescans): never fills
   * the host's disk.
   */
  async readLarge(
    file: ScannedFile,
    pieces: AsyncIterable<Uint8Array>,
    onChunk: (chunk: FileChunk) => Promise<void>,
  ): Promise<FileContent> {
    const spool = path.join(os.tmpdir(), `holdfast-spool-${randomBytes(8).toString('hex')}`);
    const fd = fs.openSync(spool, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
    try {
      try {
        let spooled = 0;
        for await (const piece of pieces) {
          fs.writeSync(fd, piece);
          spooled += piece.length;
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

  /**
   * After the commit: remembers the ids of the checkpoint's files (hashed here, or taken from
   * the host's record of the base) so they can vouch next time; returns the files with theirs.
   */
  remember(
    base: string,
    root: ScannedDir,
    ids: ReadonlyMap<string, FileIds>,
  ): { files: Array<{ file: ScannedFile; ids: FileIds }>; record: Map<string, RecordedFile> } {
    const recorded = new Map<string, RecordedFile>();
    const out: Array<{ file: ScannedFile; ids: FileIds }> = [];
    for (const file of listFiles(root)) {
      const got = ids.get(file.path);
      if (got === undefined) continue;
      recorded.set(file.path, { size: file.size, sha256: got.sha256, chunks: got.chunks });
      out.push({ file, ids: got });
    }
    this.baseFiles.remember(base, recorded);
    return { files: out, record: recorded };
  }

  /** After a commit told against `from`: `record` (moved forward by {@link advanceRecord}) is `to`'s files now. */
  rememberMoved(from: string, to: string, record: ReadonlyMap<string, RecordedFile>): void {
    this.baseFiles.forget(from);
    this.baseFiles.remember(to, record);
  }
}

/**
 * Moves `record` (the host's record of checkpoint `from`'s files, held by the caller) forward
 * to checkpoint `to`, in place and touching only what changed: every file of `before` outside
 * the `settled` subtrees of `after` is dropped, then every file of `after` outside them that
 * has ids in `own` is set. The settled subtrees are the very directories of `before`, whose
 * files `record` has. Returns `record`.
 */
export function advanceRecord(
  record: Map<string, RecordedFile>,
  before: ScannedDir,
  after: ScannedDir,
  settled: ReadonlySet<ScannedDir>,
  own: ReadonlyMap<string, FileIds>,
): Map<string, RecordedFile> {
  const walk = (old: ScannedDir | undefined, now: ScannedDir | undefined): void => {
    if (now !== undefined && settled.has(now)) return;
    const nowDirs = new Map<string, ScannedDir>();
    for (const c of now?.children ?? []) if (c.type === 'dir') nowDirs.set(c.name, c);
    const oldDirs = new Set<string>();
    for (const c of old?.children ?? []) {
      if (c.type === 'file') record.delete(c.path);
      else if (c.type === 'dir') {
        oldDirs.add(c.name);
        walk(c, nowDirs.get(c.name));
      }
    }
    for (const c of now?.children ?? []) {
      if (c.type === 'file') {
        const got = own.get(c.path);
        if (got !== undefined) record.set(c.path, { size: c.size, sha256: got.sha256, chunks: got.chunks });
      } else if (c.type === 'dir' && !oldDirs.has(c.name)) walk(undefined, c);
    }
  };
  walk(before, after);
  return record;
}

function sameIds(a: FileIds, b: FileIds): boolean {
  return a.sha256 === b.sha256 && a.chunks.length === b.chunks.length && a.chunks.every((c, i) => c === b.chunks[i]);
}
