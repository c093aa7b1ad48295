import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fsPath } from '../../../core/name-bytes.js';
import { InputError, IntegrityError } from '../../../errors.js';
import { checkKept, utimeOf } from '../../../workspace-fs/fs-exact.js';
import { WRITE_BATCH_MAX_BYTES, WRITE_BATCH_MAX_OPS, type WriteOp } from '../wire/protocol.js';
import type { OpHandler } from './agent-server.js';
import { type AgentState, faultPoint } from './agent-state.js';
import type { BatchJournal, StagedFile } from './batch-journal.js';
import { BatchListing } from './batch-listing.js';
import { parseWriteOp } from './parse-write-op.js';
import { type NoFollowResolver, withResolver } from './safe-fs.js';
import { openStaging } from './staging-registry.js';

const { O_RDWR, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
const VERIFY_BLOCK_BYTES = 4 * 1024 * 1024;
type FileOp = Extract<WriteOp, { op: 'file' }>;
type LinkOp = Extract<WriteOp, { op: 'link' }>;

/**
 * `write {stagingId, batchId, ops[]}` + payload: applies one batch to a staging directory.
 *
 * Three phases: validate every op (pure), plan against the filesystem (parents are real
 * directories or made earlier in the batch; continued files exist with enough bytes), then
 * apply. A batch refused in the first two phases has changed nothing. Every op is idempotent
 * on its own: a new file replaces whatever an interrupted attempt left at its name (never
 * writing through it, so a hard link from `stage-reuse` is never modified), a continued piece
 * is written at its absolute position and the file cut right after it. So a batch killed
 * half-way is simply applied again. Every entry is read back after it is made: a mode or
 * mtime the filesystem did not keep fails the batch with `INTEGRITY` (data: `path`, `field`).
 * A `link` op links a member to a leader this staging completed before (or this batch
 * completes first) and checks both are one inode. Its id is journaled (fsynced) only once every op is done;
 * a journaled id is acknowledged without being applied again, which is what keeps an old
 * batch re-sent late from cutting a file that later batches have extended.
 */
export function write(state: AgentState): OpHandler {
  return ({ fields, payload }) => {
    const stagingId = fields.token('stagingId');
    const batchId = fields.token('batchId');
    const rawOps = fields.array('ops', WRITE_BATCH_MAX_OPS);
    if (payload.length > WRITE_BATCH_MAX_BYTES) {
      throw new InputError('LIMIT_EXCEEDED', `write batch payload of ${payload.length} bytes is over ${WRITE_BATCH_MAX_BYTES}; split it`, {
        data: { payloadBytes: payload.length, limit: WRITE_BATCH_MAX_BYTES },
      });
    }
    const ops = rawOps.map((raw, i) => parseWriteOp(raw, i, payload.length));
    const { staging, journal } = openStaging(state, stagingId);
    if (journal.has(batchId)) return { result: { applied: false, ops: ops.length } };
    withResolver(staging, (resolver) => {
      const listing = new BatchListing(resolver);
      const batch: BatchContext = { absent: plan(resolver, listing, journal, ops), writable: new Set(), listing, relinked: [] };
      const staged: StagedFile[] = [];
      for (const op of ops) {
        applyOp(resolver, batch, op, payload, staged);
        faultPoint();
      }
      journal.complete(batchId, staged, batch.relinked);
    });
    faultPoint();
    return { result: { applied: true, ops: ops.length } };
  };
}

/**
 * What the apply phase of one batch may skip re-checking: paths the plan found empty (nothing
 * to remove before creating them) and directories already made writable.
 */
interface BatchContext {
  readonly absent: Set<string>;
  readonly writable: Set<string>;
  /** Op paths resolved by the plan. */
  readonly listing: BatchListing;
  /** Leaders this batch linked members to: their stat changed since they were staged. */
  readonly relinked: string[];
}

/**
 * Checks every op against the filesystem; returns the paths where nothing exists yet. A link's
 * leader must be a regular file that this staging completed (its journal lists it) or that an
 * earlier op of this batch completes.
 */
function plan(resolver: NoFollowResolver, listing: BatchListing, journal: BatchJournal, ops: readonly WriteOp[]): Set<string> {
  const madeDirs = new Set<string>();
  const sizes = new Map<string, number>();
  const completes = new Set<string>();
  const absent = new Set<string>();
  for (const op of ops) {
    if (op.path === '') continue;
    const st = listing.lstat(op.path, madeDirs);
    if (st === undefined && !madeDirs.has(op.path) && !sizes.has(op.path)) absent.add(op.path);
    const refuse = (why: string): never => {
      throw new InputError('INVALID_INPUT', `${op.op} ${op.path}: ${why}`, { data: { path: op.path, op: op.op } });
    };
    if (op.op === 'mkdir') {
      if (st !== undefined && !st.isDirectory()) refuse('something other than a directory is there');
      madeDirs.add(op.path);
    } else if (op.op === 'dir') {
      if (!madeDirs.has(op.path) && st?.isDirectory() !== true) refuse('no such directory in staging');
    } else if (st?.isDirectory() === true || madeDirs.has(op.path)) {
      refuse('a directory is there');
    } else if (op.op === 'file' && op.at > 0) {
      const have = sizes.get(op.path) ?? (st?.isFile() === true && st.nlink === 1 ? st.size : -1);
      if (have < op.at) refuse(`piece at ${op.at} but ${Math.max(have, 0)} bytes are staged; send the earlier pieces first`);
    }
    if (op.op === 'link' && !completes.has(op.leader)) {
      const leader = lstatPlanned(resolver, op.leader, madeDirs);
      if (leader?.isFile() !== true || !journal.isStaged(op.leader)) refuse(`leader ${op.leader} is not a file completed in this staging`);
    }
    if (op.op === 'file') {
      sizes.set(op.path, op.at + op.length);
      if (op.at + op.length === op.size) completes.add(op.path);
      else completes.delete(op.path);
    } else completes.delete(op.path);
  }
  return absent;
}

/**
 * `lstat` of a staging path whose parents may be planned but not made yet: a deep path is
 * reached by opening its parents, which fails `ENOENT` before they exist; that is "nothing there".
 */
function lstatPlanned(resolver: NoFollowResolver, rel: string, planned: ReadonlySet<string>): fs.Stats | undefined {
  const abs = resolver.resolve(rel, planned);
  try {
    return fs.lstatSync(resolver.at(abs), { throwIfNoEntry: false });
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
    throw error;
  }
}

function applyOp(resolver: NoFollowResolver, batch: BatchContext, op: WriteOp, payload: Buffer, staged: StagedFile[]): void {
  const abs = op.path === '' ? resolver.base : batch.listing.resolve(op.path);
  // Only the first op on a path may rely on the plan's "nothing there": it creates something.
  const fresh = batch.absent.delete(op.path);
  if (op.op !== 'dir') {
    const parent = path.dirname(abs);
    if (!batch.writable.has(parent)) {
      ensureWritable(resolver.at(parent));
      batch.writable.add(parent);
    }
  }
  switch (op.op) {
    case 'mkdir':
      try {
        fs.mkdirSync(resolver.at(abs), { mode: 0o700 });
      } catch (error) {
        if ((error as { code?: unknown }).code !== 'EEXIST' || !fs.lstatSync(resolver.at(abs)).isDirectory()) throw error;
      }
      resolver.markDir(op.path);
      return;
    case 'file':
      writePiece(resolver.at(abs), abs, op, payload.subarray(op.offset, op.offset + op.length), staged, fresh);
      return;
    case 'symlink': {
      const at = resolver.at(abs);
      if (!fresh) removeNonDirectory(at);
      fs.symlinkSync(fsPath(op.target), at);
      fs.lutimesSync(at, utimeOf(op.mtimeMs), utimeOf(op.mtimeMs));
      checkKept(op.path, fs.lstatSync(at), undefined, op.mtimeMs);
      return;
    }
    case 'link':
      linkMember(resolver, abs, op, fresh);
      batch.relinked.push(op.leader);
      return;
    case 'dir': {
      // Plan checked it is a real directory; the root's mtime is set by publish (which changes it).
      const at = resolver.at(abs);
      fs.chmodSync(at, op.mode);
      batch.writable.delete(abs);
      if (op.path !== '') fs.utimesSync(at, utimeOf(op.mtimeMs), utimeOf(op.mtimeMs));
      checkKept(op.path, fs.lstatSync(at), op.mode, op.path === '' ? undefined : op.mtimeMs);
      return;
    }
  }
}

/**
 * Makes a hard link of a group's member to its leader, then checks that the two are one inode
 * carrying what the member's entry says (size, mode, mtime): a leader that is not what the
 * tree recorded is not linked to silently. The leader's hash was verified when it was staged.
 */
function linkMember(resolver: NoFollowResolver, abs: string, op: LinkOp, fresh: boolean): void {
  const at = resolver.at(abs);
  if (!fresh) removeNonDirectory(at);
  const leader = resolver.at(resolver.resolve(op.leader));
  fs.linkSync(leader, at);
  const st = fs.lstatSync(at);
  const leaderSt = fs.lstatSync(leader);
  if (!st.isFile() || st.ino !== leaderSt.ino || st.dev !== leaderSt.dev || st.size !== op.size) {
    throw new IntegrityError('INTEGRITY', `[agent] link ${op.path} to ${op.leader} is not the leader's file as recorded`, {
      data: { path: op.path, field: 'hardlink' },
    });
  }
  checkKept(op.path, st, op.mode, op.mtimeMs);
}

/**
 * Gives the owner write access to a staging directory before an op changes it. A directory's
 * final mode comes with its `dir` op, after its content; only a batch applied again after a
 * kill can find a read-only directory here, and its own `dir` op sets the mode again.
 */
function ensureWritable(dir: string | Buffer): void {
  const mode = fs.lstatSync(dir).mode & 0o7777;
  if ((mode & 0o300) !== 0o300) fs.chmodSync(dir, mode | 0o700);
}

function removeNonDirectory(abs: string | Buffer): void {
  const st = fs.lstatSync(abs, { throwIfNoEntry: false });
  if (st !== undefined && !st.isDirectory()) fs.unlinkSync(abs);
}

/**
 * Writes one piece. A first piece creates the file afresh (O_EXCL), so it is ours, empty and
 * unlinked elsewhere without checking; a later piece checks that the staged file is ours and
 * long enough, writes at its offset and cuts the file right after it.
 */
function writePiece(abs: string | Buffer, key: string, op: FileOp, piece: Buffer, staged: StagedFile[], fresh: boolean): void {
  let fd: number;
  if (op.at === 0) {
    if (!fresh) removeNonDirectory(abs);
    fd = createExclusive(abs, fresh);
  } else {
    fd = fs.openSync(abs, O_RDWR | O_NOFOLLOW);
  }
  try {
    if (op.at > 0) {
      const st = fs.fstatSync(fd);
      if (!st.isFile() || st.nlink !== 1 || st.size < op.at) {
        throw new InputError('INVALID_INPUT', `file ${op.path}: cannot continue at ${op.at} (staged file is not ours or too short)`, {
          data: { path: op.path },
        });
      }
    }
    for (let done = 0; done < piece.length; ) done += fs.writeSync(fd, piece, done, piece.length - done, op.at + done);
    if (op.at > 0) fs.ftruncateSync(fd, op.at + op.length);
    const running = hashAlong(key, op, piece);
    if (op.at + op.length < op.size) return;
    const digest = running ?? hashFd(fd, op.size);
    if (digest !== op.sha256) {
      throw new IntegrityError('INTEGRITY', `staged ${op.path} does not match its recorded hash`, {
        data: { path: op.path, expected: op.sha256, actual: digest },
      });
    }
    fs.fchmodSync(fd, op.mode);
    fs.futimesSync(fd, utimeOf(op.mtimeMs), utimeOf(op.mtimeMs));
    const st = fs.fstatSync(fd);
    checkKept(op.path, st, op.mode, op.mtimeMs);
    if (op.chunks !== undefined) {
      const stat = { ino: st.ino, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
      staged.push({ path: op.path, size: op.size, mtimeMs: op.mtimeMs, mode: op.mode, sha256: op.sha256, chunks: op.chunks, stat });
    }
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Creates a file's first piece: exclusive, never through a symlink. The plan found the name
 * free (`fresh`) by listing its directory; something made there since (by another process in
 * the sandbox) is removed as a re-applied batch would, unless it is a directory.
 */
function createExclusive(abs: string | Buffer, fresh: boolean): number {
  try {
    return fs.openSync(abs, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  } catch (error) {
    if (!fresh || (error as { code?: unknown }).code !== 'EEXIST') throw error;
    removeNonDirectory(abs);
    return fs.openSync(abs, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  }
}

/**
 * Hashes of files being assembled from pieces in order by this process, so a big file is
 * verified without reading it back. Only an unbroken run from byte 0 counts; anything else (a
 * piece re-applied after a failure, pieces written by an earlier process) forgets the entry
 * and the file is read back instead.
 */
const assembling = new Map<string, { next: number; hash: Hash }>();

/** Feeds `piece` to the file's running hash; returns the digest once the file is complete. */
function hashAlong(abs: string, op: FileOp, piece: Buffer): string | undefined {
  const current = op.at === 0 ? { next: 0, hash: createHash('sha256') } : assembling.get(abs);
  assembling.delete(abs);
  if (current === undefined || current.next !== op.at) return undefined;
  current.hash.update(piece);
  current.next += piece.length;
  if (current.next === op.size) return current.hash.digest('hex');
  assembling.set(abs, current);
  return undefined;
}

/** Hashes a file assembled from several pieces by reading it back (pieces may come from several agent processes). */
function hashFd(fd: number, size: number): string {
  const hash = createHash('sha256');
  const block = Buffer.allocUnsafe(Math.min(VERIFY_BLOCK_BYTES, Math.max(size, 1)));
  for (let pos = 0; pos < size; ) {
    const n = fs.readSync(fd, block, 0, Math.min(block.length, size - pos), pos);
    if (n === 0) break;
    hash.update(block.subarray(0, n));
    pos += n;
  }
  return hash.digest('hex');
}
