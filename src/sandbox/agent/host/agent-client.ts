import { createHash, randomBytes } from 'node:crypto';
import { isSha256Hex } from '../../../core/hash.js';
import { InputError, IntegrityError, StoreError } from '../../../errors.js';
import { ExcludeRules, type Exclusion } from '../../../rules/excludes.js';
import { DEFAULT_MAX_DIRS, type ScanLimits, type ScannedDir, type ScanResult } from '../../../workspace-fs/scan.js';
import {
  type CachedIds,
  type CacheUpdateEntry,
  FULL_SCAN_REASONS,
  type FullScanReason,
  type HelloResult,
  PROTOCOL_VERSION,
  type ProbeResult,
  type PublishResult,
  type ReuseFile,
  type ScanRequest,
  type ScanWire,
  type StageBeginResult,
  type WatchReport,
  type WriteOp,
  type WriteResult,
} from '../wire/protocol.js';
import { type AgentChannel, AgentConnection, type AgentExit } from './agent-connection.js';
import { type FileBytes, type FileToRead, readFiles, readStream } from './agent-reads.js';
import { chunkList } from './chunk-list.js';
import { HeldScans } from './held-scans.js';
import { checkAgentScan } from './scan-check.js';

/** Options of {@link AgentClient.connect}. */
export interface AgentClientOptions {
  /** The agent must answer (any frame) within this long while requests wait; default 60 s. */
  readonly timeoutMs?: number;
  /** Requests outstanding at the agent; a few keep the pipe busy (default 4). */
  readonly maxInFlight?: number;
}

/** A scan made by the agent: the engine's `ScanResult` plus what the agent's stat cache vouches for. */
export interface AgentScan {
  readonly scan: ScanResult;
  readonly root: string;
  /** Pass to {@link AgentClient.recheck}. */
  readonly scanId: string;
  /** Checkpoint the agent's stat cache was written for, or null. */
  readonly base: string | null;
  /** Content ids by path, for files whose stat identity matches the cache (and not racy); in a delta, of files outside its stubs only. */
  readonly cached: ReadonlyMap<string, CachedIds>;
  readonly allowances: readonly Exclusion[];
  /** The answer was a delta against the `since` scan asked for. */
  readonly delta: boolean;
  /** Directories a delta took over whole from the earlier scan (the very objects, now in `scan.root`). */
  readonly adopted: readonly ScannedDir[];
  /** Exclusions the host's own check added to the agent's. */
  readonly hostExclusions: number;
  /** How the agent says its watches made the scan (a report only: it decides nothing here), or undefined. */
  readonly watch: WatchReport | undefined;
}

const WATCH_REASONS: ReadonlySet<string> = new Set<string>(FULL_SCAN_REASONS);

/** The agent's watch report if it is well-formed (it is only reported on), else undefined. */
function watchReport(raw: unknown): WatchReport | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  if ((r.mode !== 'delta' && r.mode !== 'full') || !Number.isSafeInteger(r.dirsRead)) return undefined;
  const reason = typeof r.reason === 'string' && WATCH_REASONS.has(r.reason) ? (r.reason as FullScanReason) : undefined;
  const missed = Number.isSafeInteger(r.missed) && (r.missed as number) >= 0 ? (r.missed as number) : undefined;
  return {
    mode: r.mode,
    dirsRead: r.dirsRead as number,
    ...(reason === undefined ? {} : { reason }),
    ...(missed === undefined ? {} : { missed }),
  };
}

/** One write batch: at most 256 ops and 4 MiB of payload (the agent refuses more). */
export interface WriteBatch {
  readonly stagingId: string;
  readonly batchId: string;
  readonly ops: readonly WriteOp[];
  readonly payload: Uint8Array;
}

const DEFAULT_TIMEOUT_MS = 60_000;
/** Scan answer bytes allowed whatever the limits: the root and its directories. */
const SCAN_BASE_BYTES = 16 * 1024 * 1024;
/** Scan answer bytes allowed per file or symlink the limits permit (its entry with a long path, and its cached ids). */
const SCAN_BYTES_PER_ENTRY = 1536;
/** Scan answer bytes allowed per directory the limits permit. */
const SCAN_BYTES_PER_DIR = 512;

/** Largest scan answer accepted for `limits`: a real tree within them is far smaller. */
export function maxScanBytes(limits: ScanLimits): number {
  return SCAN_BASE_BYTES + limits.maxEntries * SCAN_BYTES_PER_ENTRY + (limits.maxDirs ?? DEFAULT_MAX_DIRS) * SCAN_BYTES_PER_DIR;
}

/** Offered ids, kept only when well-formed (one per path); whether they are used is decided elsewhere. */
function offeredIds(raw: unknown): Map<string, CachedIds> {
  const out = new Map<string, CachedIds>();
  if (!Array.isArray(raw)) return out;
  for (const c of raw as Array<Partial<CachedIds & { path: unknown }>>) {
    if (typeof c?.path !== 'string' || !isSha256Hex(c.sha256) || !Array.isArray(c.chunks) || !c.chunks.every(isSha256Hex)) continue;
    out.set(c.path, { sha256: c.sha256, chunks: c.chunks });
  }
  return out;
}
const DEFAULT_MAX_IN_FLIGHT = 4;

/** The stat-cache key of one workspace checked out at one directory in a sandbox. */
export function agentCacheKey(workspaceId: string, root: string): string {
  return createHash('sha256').update(`${workspaceId}\0${root}`).digest('hex').slice(0, 32);
}

/**
 * Host side of the agent protocol: typed calls for every op over one channel (see protocol.ts
 * for the wire). Calls may be issued concurrently; they reach the agent in call order, at most
 * `maxInFlight` at a time, and the agent serves them in that order. Agent errors arrive as the
 * matching `HoldfastError`; a channel that dies fails every waiting call with `STORE_UNAVAILABLE`.
 */
export class AgentClient {
  /** The host's own record of the last checkpoint made through this agent process, per workspace checkout. */
  readonly held = new HeldScans();

  private constructor(
    private readonly conn: AgentConnection,
    /** What the agent said in the handshake. */
    readonly agent: HelloResult,
    private readonly maxInFlight: number,
  ) {}

  /** Shakes hands over `channel`; refuses an agent speaking another protocol version (`INVALID_INPUT`). */
  static async connect(channel: AgentChannel, options: AgentClientOptions = {}): Promise<AgentClient> {
    const maxInFlight = Math.max(1, options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT);
    const conn = new AgentConnection(channel, options.timeoutMs ?? DEFAULT_TIMEOUT_MS, maxInFlight);
    try {
      const hello = (await conn.call('hello', { version: PROTOCOL_VERSION })).result as HelloResult;
      if (hello?.version !== PROTOCOL_VERSION) {
        throw new InputError(
          'INVALID_INPUT',
          `[agent] speaks protocol v${hello?.version}, this Holdfast v${PROTOCOL_VERSION}: restage it`,
          {
            data: { agentVersion: hello?.version ?? null, clientVersion: PROTOCOL_VERSION },
          },
        );
      }
      return new AgentClient(conn, hello, maxInFlight);
    } catch (error) {
      await conn.close().catch(() => undefined);
      throw error;
    }
  }

  /** Facts about the sandbox and, with `root`, whether the workspace exists and is writable. */
  async probe(root?: string): Promise<ProbeResult> {
    return (await this.conn.call('probe', root === undefined ? {} : { root })).result as ProbeResult;
  }

  /**
   * Scans `root` in the sandbox (the engine's `scanWorkspace`, run there) and checks the answer
   * as untrusted input ({@link checkAgentScan}): the tree is re-walked with the request's own
   * rules and limits, allowances are the host's, and offered ids are only well-formed claims
   * (whether one may be used is the caller's decision; see `ExecWorkspaceSource`). An answer
   * longer than {@link maxScanBytes} is refused with `LIMIT_EXCEEDED` without being held.
   *
   * With `since` (`request.since` names it: a scan of this agent process the host checked, with
   * the same request) the answer may be a delta, whose stubs are resolved against `since`'s
   * root (`checkAgentScan`); a request without it never accepts a stub.
   */
  async scan(request: ScanRequest, since?: ScannedDir): Promise<AgentScan> {
    const rules = ExcludeRules.create(request.excludes);
    const limit = maxScanBytes(request.limits);
    const parts: Buffer[] = [];
    let received = 0;
    const { reply } = await this.conn.start('scan', request, undefined, (_h, payload) => {
      received += payload.length;
      if (received <= limit) parts.push(payload);
    });
    const { result } = await reply;
    if (received > limit) {
      throw new InputError('LIMIT_EXCEEDED', `[agent] the scan answer is larger than ${limit} bytes; refused`, {
        data: { limit, source: 'agent' },
      });
    }
    const json = Buffer.concat(parts);
    if (json.length !== (result as { bytes?: unknown })?.bytes) throw new StoreError('[agent] scan result arrived incomplete');
    let wire: Partial<ScanWire>;
    try {
      wire = JSON.parse(json.toString('utf8')) as Partial<ScanWire>;
    } catch {
      throw new IntegrityError('INTEGRITY', '[agent] the scan answer is not JSON; nothing was saved', { data: { source: 'agent' } });
    }
    const delta = wire.delta === true && request.since !== undefined && since !== undefined;
    const checked = checkAgentScan(wire, rules, request.limits, request.root, new Map(), delta ? since : undefined);
    if (typeof wire.scanId !== 'string')
      throw new IntegrityError('INTEGRITY', '[agent] the scan answer has no scan id', { data: { source: 'agent' } });
    return {
      scan: checked.scan,
      root: request.root,
      scanId: wire.scanId,
      base: typeof wire.base === 'string' ? wire.base : null,
      cached: offeredIds(wire.cached),
      allowances: rules.allowances,
      delta,
      adopted: checked.adopted,
      hostExclusions: checked.hostExclusions,
      watch: watchReport(wire.watch),
    };
  }

  /**
   * The second look: true when nothing the scan saw has moved. Pass `cachedWereUsed` when every
   * id in `scan.cached` was used instead of reading the file (only read files are re-stated then).
   * False too when the agent no longer knows the scan (it was restarted): scan again.
   */
  async recheck(
    scan: Pick<AgentScan, 'root' | 'scanId'>,
    options: { readonly cachedWereUsed?: boolean; readonly read?: readonly string[] } = {},
  ): Promise<boolean> {
    // The files read, when they fit one request: only they are re-stated (with every directory).
    const parts = options.read === undefined ? [] : chunkList(options.read);
    const { result } = await this.conn.call('recheck', {
      root: scan.root,
      scanId: scan.scanId,
      cachedWereUsed: options.cachedWereUsed === true,
      ...(parts.length === 1 ? { read: parts[0] } : {}),
    });
    return (result as { unchanged: boolean }).unchanged;
  }

  /** Reads files whole in protocol-sized, pipelined batches; yields in input order. */
  readFiles(root: string, files: readonly FileToRead[]): AsyncGenerator<FileBytes> {
    return readFiles(this.conn, root, files, this.maxInFlight);
  }

  /** Streams one file of any size; breaking out of the loop cancels it. */
  readStream(root: string, path: string, options: { readonly chunkBytes?: number } = {}): AsyncGenerator<Buffer> {
    return readStream(this.conn, root, path, options.chunkBytes);
  }

  /**
   * Replaces the agent's stat cache for `cacheKey` (call after a checkpoint commits, with the ids
   * it computed; `racyAfterMs` is the scan's `startedAtMs`). Sent in parts; returns entries sent.
   * With `since` (the checkpoint's scan) the agent keeps every line its cache vouched for in
   * that scan and `entries` need only the files read; false when the agent no longer knows
   * `since` (nothing was saved: send them all).
   */
  async cacheUpdate(input: {
    cacheKey: string;
    base: string;
    racyAfterMs: number;
    entries: readonly CacheUpdateEntry[];
    since?: string;
  }): Promise<boolean> {
    const updateId = randomBytes(8).toString('hex');
    const parts = chunkList(input.entries);
    for (const [i, entries] of parts.entries()) {
      const { cacheKey, base, racyAfterMs, since } = input;
      const final = i === parts.length - 1;
      const { result } = await this.conn.call('cache-update', {
        cacheKey,
        updateId,
        base,
        racyAfterMs,
        entries,
        final,
        ...(since === undefined ? {} : { since }),
      });
      if ((result as { known?: unknown }).known === false) return false;
    }
    return true;
  }

  /** Creates (or resumes) the staging directory of a restore beside `target`. */
  async stageBegin(input: { stagingId: string; target: string; replace?: boolean; cacheKey?: string }): Promise<StageBeginResult> {
    return (await this.conn.call('stage-begin', input)).result as StageBeginResult;
  }

  /** Applies one write batch; `applied: false` means the batch id was already done (acknowledged, not re-applied). */
  async write(batch: WriteBatch): Promise<WriteResult> {
    const { stagingId, batchId, ops, payload } = batch;
    return (await this.conn.call('write', { stagingId, batchId, ops }, payload)).result as WriteResult;
  }

  /** Hard-links unchanged files of the existing target into staging; returns the paths reused. */
  async stageReuse(stagingId: string, files: readonly ReuseFile[]): Promise<string[]> {
    const reused: string[] = [];
    for (const part of chunkList(files)) {
      if (part.length === 0) continue;
      reused.push(...((await this.conn.call('stage-reuse', { stagingId, files: part })).result as { reused: string[] }).reused);
    }
    return reused;
  }

  /** Swaps staging into place atomically; with `base` (and a cache key at stage-begin) writes the stat cache. */
  async publish(input: {
    stagingId: string;
    target: string;
    base?: string;
    /** The root directory's recorded mode and mtime, applied to the target after publishing (and read back). */
    root?: { readonly mode: number; readonly mtimeMs: number };
  }): Promise<PublishResult> {
    return (await this.conn.call('publish', input)).result as PublishResult;
  }

  /** Removes a staging directory (undoing a half-done publish); false when there was none. */
  async abort(stagingId: string): Promise<boolean> {
    return ((await this.conn.call('stage-abort', { stagingId })).result as { removed: boolean }).removed;
  }

  /** True while the agent can take requests (it has not died, failed, or been closed). */
  get alive(): boolean {
    return this.conn.alive;
  }

  /** Ends the session: EOF to the agent, which finishes what it has and exits. */
  close(): Promise<AgentExit> {
    return this.conn.close();
  }
}
