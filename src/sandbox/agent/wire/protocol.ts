/**
 * The framed protocol between Holdfast and its in-sandbox agent (DESIGN section 8), shared by
 * both sides. A frame is `u32 BE bodyLength | u32 BE headerLength | header (UTF-8 JSON) |
 * payload (raw bytes)`, where `bodyLength = headerLength + payloadLength`. Requests carry a
 * numeric `id` and an `op`; every response echoes the `id` and is either a part
 * (`more: true`, for streamed results), a final `result`, or a final `error`.
 *
 * Ops (request fields -> result; `+payload` where bytes travel):
 * - `hello {version}` -> {@link HelloResult}; must come first, a version mismatch is refused.
 * - `probe {root?}` -> {@link ProbeResult}.
 * - `scan {root, excludes?, limits, cacheKey?, base?, since?}` -> parts `{at}` + JSON of {@link ScanWire}, then `{scanId, bytes}`.
 * - `recheck {root, scanId, cachedWereUsed?, read?}` -> `{unchanged, known}`.
 * - `read {root, paths[]}` -> `{files: ReadFileHeader[]}` +payload (the bytes back to back).
 * - `read-stream {root, path, chunkBytes?}` -> parts `{at}` +payload, then `{size}`.
 * - `cancel {target}` -> `{}` (answered at once; the target request ends with `CANCELLED`).
 * - `cache-update {cacheKey, updateId, base, racyAfterMs, entries[], final, since?}` -> `{entries, saved, known}`.
 * - `stage-begin {stagingId, target, replace?, cacheKey?}` -> {@link StageBeginResult}.
 * - `write {stagingId, batchId, ops[]}` +payload -> {@link WriteResult}.
 * - `stage-reuse {stagingId, files[]}` -> parts `{progress}`, then `{reused: string[]}`.
 * - `publish {stagingId, target, base?, root?}` -> {@link PublishResult}.
 * - `stage-abort {stagingId}` -> `{removed}`.
 */

import type { Sha256Hex } from '../../../core/hash.js';
import type { ErrorCode, ErrorData } from '../../../errors.js';
import type { ExcludeOptions, Exclusion } from '../../../rules/excludes.js';
import type { ScanLimits, ScanResult } from '../../../workspace-fs/scan.js';
import type { StatCacheEntry } from '../../../workspace-fs/stat-cache.js';

/** Bumped on any incompatible change; the handshake refuses a mismatch. */
export const PROTOCOL_VERSION = 2;

const MIB = 1024 * 1024;
/** Largest JSON header of one frame. */
export const MAX_HEADER_BYTES = MIB;
/** Largest payload of one frame. */
export const MAX_PAYLOAD_BYTES = 8 * MIB;
/** Largest frame body (header + payload); a bigger length prefix is a protocol error. */
export const MAX_FRAME_BYTES = MAX_HEADER_BYTES + MAX_PAYLOAD_BYTES;
/** Bytes returned by one `read` (files that would overflow it come back as `too-large`). */
export const READ_BATCH_MAX_BYTES = MIB;
/** Paths in one `read` request. */
export const READ_BATCH_MAX_FILES = 64;
/** Payload of one `write` batch. */
export const WRITE_BATCH_MAX_BYTES = 4 * MIB;
/** Operations in one `write` batch. */
export const WRITE_BATCH_MAX_OPS = 256;
/** Default and largest piece of a `read-stream`. */
export const STREAM_CHUNK_BYTES = MIB;
export const STREAM_CHUNK_MAX_BYTES = 4 * MIB;
/** The scan result travels as JSON text cut into parts of this size. */
export const SCAN_PART_BYTES = 4 * MIB;
/** Entries in one `stage-reuse` or `cache-update` request. */
export const LIST_BATCH_MAX_ITEMS = 4096;
/** Budget senders keep list-carrying headers under, leaving room for long paths. */
export const HEADER_BUDGET_BYTES = MIB / 2;
/** Staging ids, batch ids, cache keys and update ids: safe as file-name parts. */
export const TOKEN_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Every operation the agent serves. */
export type AgentOp =
  | 'hello'
  | 'probe'
  | 'scan'
  | 'recheck'
  | 'read'
  | 'read-stream'
  | 'cancel'
  | 'cache-update'
  | 'stage-begin'
  | 'write'
  | 'stage-reuse'
  | 'publish'
  | 'stage-abort';

/** The header of a request frame; the remaining fields depend on `op`. */
export interface RequestHeader {
  readonly id: number;
  readonly op: AgentOp;
  readonly [field: string]: unknown;
}

/** A `HoldfastError` as it travels: `toJSON()` of the error. */
export interface WireError {
  readonly code: ErrorCode;
  readonly message: string;
  readonly data: ErrorData;
}

/** The header of a response frame. `id` is null when the request's own header was unreadable. */
export interface ResponseHeader {
  readonly id: number | null;
  /** A part of a streamed result; the request stays open. */
  readonly more?: boolean;
  readonly result?: unknown;
  readonly error?: WireError;
  readonly [field: string]: unknown;
}

/** `hello` result: who is answering. */
export interface HelloResult {
  readonly version: number;
  /** SHA-256 of the agent file that is running. */
  readonly agentHash: string;
  readonly node: string;
  readonly platform: string;
  readonly arch: string;
  readonly pid: number;
}

/** `probe {root?}` result. */
export interface ProbeResult {
  readonly root: { readonly exists: boolean; readonly isDirectory: boolean; readonly writable: boolean } | null;
  /** Bytes free to an unprivileged user on the filesystem of `root` (or the agent home); null when unknown. */
  readonly freeBytes: number | null;
  readonly uid: number | null;
  readonly gid: number | null;
  readonly node: string;
  readonly platform: string;
  /** Where the agent keeps its state (`<home>/.holdfast`). */
  readonly stateDir: string;
}

/** `scan` request fields. */
export interface ScanRequest {
  readonly root: string;
  readonly excludes?: ExcludeOptions;
  readonly limits: ScanLimits;
  /** Names the agent's stat cache for this workspace; omit to get no cached ids. */
  readonly cacheKey?: string;
  /** When set, cached ids are returned only if the cache was written for this checkpoint. */
  readonly base?: string;
  /**
   * A scan of this agent process (same root, excludes and limits) the host still holds: the
   * answer may then be a delta against it ({@link ScanWire.delta}). An unknown id gets a full answer.
   */
  readonly since?: string;
}

/** In a delta answer, a directory whose whole subtree is identical to the one at its path in the `since` scan. */
export interface StubDir {
  readonly type: 'dir';
  readonly name: string;
  readonly same: true;
}

/** Content ids the agent's stat cache vouches for. */
export interface CachedIds {
  readonly sha256: Sha256Hex;
  readonly chunks: readonly Sha256Hex[];
}

/** The scan as it travels (JSON in the parts' payloads). */
export interface ScanWire extends ScanResult {
  readonly scanId: string;
  /** Checkpoint the stat cache was written for; null without a usable cache. */
  readonly base: string | null;
  readonly cached: ReadonlyArray<CachedIds & { readonly path: string }>;
  /**
   * True when the tree is told against the request's `since` scan: unchanged subtrees are
   * {@link StubDir}s (the root too, when nothing changed), and `cached` covers only files outside them.
   */
  readonly delta?: boolean;
  /** Secret paths let through by `allowSecretPaths` (never silent). */
  readonly allowances: readonly Exclusion[];
  /** How the agent's watches made the scan (absent from an agent that does not watch). A report only: it decides nothing on the host. */
  readonly watch?: WatchReport;
}

/** Why a watched scan read every directory (see the agent's `workspace-watch.ts`). */
export const FULL_SCAN_REASONS = [
  'first',
  'off',
  'overflow',
  'watch-limit',
  'watch-error',
  'moved',
  'ignore-rules',
  'hard-link',
  'request-changed',
  'verify',
] as const;
export type FullScanReason = (typeof FULL_SCAN_REASONS)[number];

/** How a scan was made, as the scan answer reports it (`ScanWire.watch`). */
export interface WatchReport {
  /** `delta`: only the directories with events (and their ancestors) were read; `full`: all. */
  readonly mode: 'delta' | 'full';
  readonly reason?: FullScanReason;
  /** Directories read (-1: watching was off, so not counted). */
  readonly dirsRead: number;
  /** On a verifying scan: directories that had changed without the watcher telling (0: it missed nothing). */
  readonly missed?: number;
}

/** Per-file answer of `read`: `length` bytes of the payload, in request order. */
export interface ReadFileHeader {
  readonly path: string;
  readonly length: number;
  /** Set when no bytes were sent: gone, no longer a regular file, too big for this batch, or not readable by the agent's user. */
  readonly status?: 'missing' | 'not-file' | 'too-large' | 'unreadable';
  /** With `unreadable`: the errno of the open (`EACCES` or `EPERM`). */
  readonly errno?: 'EACCES' | 'EPERM';
}

/** One file of a `cache-update`: its path, stat identity and content ids. */
export interface CacheUpdateEntry extends StatCacheEntry {
  readonly path: string;
}

/** `stage-begin` result. */
export interface StageBeginResult {
  readonly staging: string;
  readonly targetState: 'absent' | 'empty' | 'non-empty';
  /** True when the staging directory already existed (a new agent taking over). */
  readonly resumed: boolean;
  /** `staging`: send (the rest of) the batches, then publish. Otherwise publishing had begun: just send publish again. */
  readonly phase: 'staging' | 'publishing' | 'published';
  /** Batch ids already applied in this staging directory. */
  readonly completedBatchIds: readonly string[];
}

/** One operation of a write batch; every path is relative to the staging root. */
export type WriteOp =
  /** A directory (created 0700; its mode and mtime come later with a `dir` op). */
  | { readonly op: 'mkdir'; readonly path: string }
  /**
   * Bytes `[offset, offset+length)` of the payload written at file position `at` (0 = a new
   * file), the file then cut to `at + length`. When `at + length === size` the file is
   * complete: its SHA-256 is verified and mode and mtime are set.
   */
  | {
      readonly op: 'file';
      readonly path: string;
      readonly size: number;
      readonly sha256: Sha256Hex;
      readonly at: number;
      readonly offset: number;
      readonly length: number;
      readonly mode: number;
      readonly mtimeMs: number;
      /** Chunk ids, on the completing op, for the stat cache written at publish. */
      readonly chunks?: readonly Sha256Hex[];
    }
  | { readonly op: 'symlink'; readonly path: string; readonly target: string; readonly mtimeMs: number }
  /**
   * A hard link at `path` to `leader`, a file of the same checkpoint already complete in
   * staging (written, or reused, earlier): both get one inode. `size`, `sha256`, `mode` and
   * `mtimeMs` are the member's tree entry, which must equal the leader's as staged.
   */
  | {
      readonly op: 'link';
      readonly path: string;
      readonly leader: string;
      readonly size: number;
      readonly sha256: Sha256Hex;
      readonly mode: number;
      readonly mtimeMs: number;
    }
  /** Mode and mtime of a directory, sent after everything inside it; `''` is the root (mode only: publish sets its mtime). */
  | { readonly op: 'dir'; readonly path: string; readonly mode: number; readonly mtimeMs: number };

/** `write` result. */
export interface WriteResult {
  /** False when the batch id was already completed: acknowledged, not applied again. */
  readonly applied: boolean;
  readonly ops: number;
}

/** A file the engine would like reused from the existing target. */
export interface ReuseFile {
  readonly path: string;
  readonly size: number;
  readonly mode: number;
  readonly mtimeMs: number;
  readonly sha256: Sha256Hex;
  readonly chunks: readonly Sha256Hex[];
}

/** `publish` result. */
export interface PublishResult {
  readonly target: string;
  /** True when a previous copy was moved aside and removed. */
  readonly replaced: boolean;
  /** True when this staging id had already been published (a re-sent publish). */
  readonly alreadyPublished: boolean;
  /** Entries written to the agent's stat cache (0 without `cacheKey` and `base`). */
  readonly cacheEntries: number;
}

/**
 * `data.reason` of the `NOT_FOUND` an agent answers for a root removed while it ran (a host tool
 * deleted and recreated the directory the sandbox had mounted): the host's pool then retries
 * once with a fresh agent, which sees the directory there now.
 */
export const UNLINKED_ROOT = 'root-unlinked';
