import fs from 'node:fs';
import { splitRelativePath } from '../../../core/paths.js';
import { HoldfastError, InputError } from '../../../errors.js';
import {
  READ_BATCH_MAX_BYTES,
  READ_BATCH_MAX_FILES,
  type ReadFileHeader,
  STREAM_CHUNK_BYTES,
  STREAM_CHUNK_MAX_BYTES,
} from '../wire/protocol.js';
import type { HandlerReply, OpHandler, RequestContext } from './agent-server.js';
import { type NoFollowResolver, withResolver } from './safe-fs.js';

// O_NONBLOCK: a path that turned into a FIFO since the scan must not hang the agent in open().
const READ_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;
/** A long stream yields to the event loop this often, so a `cancel` is noticed. */
const YIELD_EVERY_BYTES = 16 * 1024 * 1024;

/**
 * `read {root, paths[]}`: up to {@link READ_BATCH_MAX_FILES} small files in one frame, the
 * payload holding their bytes back to back in request order. A file that vanished, is no
 * longer a regular file, or no longer fits the {@link READ_BATCH_MAX_BYTES} budget (it grew
 * since the scan) is answered with a `status` and no bytes, never an error: the engine treats
 * it as changed, or fetches it with `read-stream`. A file the agent's user may not open is
 * `unreadable` with its `errno` (the engine names it, and fails or skips it by policy).
 */
export const read: OpHandler = ({ fields }) => {
  const root = fields.absolutePath('root');
  const paths = fields.strings('paths', READ_BATCH_MAX_FILES, (p) => splitRelativePath(p).join('/'));
  const files: ReadFileHeader[] = [];
  const buffers: Buffer[] = [];
  let budget = READ_BATCH_MAX_BYTES;
  withResolver(root, (resolver) => {
    for (const p of paths) {
      const got = readOne(resolver, p, budget);
      if (got === 'EACCES' || got === 'EPERM') files.push({ path: p, length: 0, status: 'unreadable', errno: got });
      else if (typeof got === 'string') files.push({ path: p, length: 0, status: got });
      else {
        files.push({ path: p, length: got.length });
        buffers.push(got);
        budget -= got.length;
      }
    }
  });
  return { result: { files }, payload: Buffer.concat(buffers) };
};

function readOne(
  resolver: NoFollowResolver,
  rel: string,
  budget: number,
): Buffer | 'missing' | 'not-file' | 'too-large' | 'EACCES' | 'EPERM' {
  let fd: number;
  try {
    fd = fs.openSync(resolver.at(resolver.resolve(rel)), READ_FLAGS);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ELOOP') return 'not-file';
    if (code === 'EACCES' || code === 'EPERM') return code;
    if (code === 'ENOENT' || error instanceof HoldfastError) return 'missing';
    throw error;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return 'not-file';
    if (st.size > budget) return 'too-large';
    const buf = Buffer.allocUnsafe(st.size);
    let filled = 0;
    while (filled < st.size) {
      const n = fs.readSync(fd, buf, filled, st.size - filled, null);
      if (n === 0) break;
      filled += n;
    }
    return buf.subarray(0, filled);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * `read-stream {root, path, chunkBytes?}`: one file of any size as parts `{at}` carrying
 * consecutive pieces, then a final `{size}`. Writing each part waits while stdout is full, so
 * a slow reader on the host slows the agent instead of filling its memory. `cancel` stops it
 * with `CANCELLED`.
 */
export const readStream: OpHandler = async (ctx: RequestContext): Promise<HandlerReply> => {
  const { fields } = ctx;
  const root = fields.absolutePath('root');
  const rel = splitRelativePath(fields.string('path')).join('/');
  const chunkBytes = fields.raw('chunkBytes') === undefined ? STREAM_CHUNK_BYTES : fields.int('chunkBytes', 1, STREAM_CHUNK_MAX_BYTES);
  // Opened once: the file stays reachable through its descriptor after the resolver is closed.
  const fd = withResolver(root, (resolver) => fs.openSync(resolver.at(resolver.resolve(rel)), READ_FLAGS));
  try {
    if (!fs.fstatSync(fd).isFile()) throw new InputError('INVALID_INPUT', `${rel} is not a regular file`, { data: { path: rel } });
    let at = 0;
    let sinceYield = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(chunkBytes);
      const n = fs.readSync(fd, buf, 0, chunkBytes, null);
      if (n === 0) break;
      if (ctx.isCancelled()) throw new HoldfastError('CANCELLED', `read-stream of ${rel} was cancelled`, { data: { path: rel } });
      await ctx.part({ at }, buf.subarray(0, n));
      at += n;
      sinceYield += n;
      if (sinceYield >= YIELD_EVERY_BYTES) {
        sinceYield = 0;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
    return { result: { size: at } };
  } finally {
    fs.closeSync(fd);
  }
};
