import { createRequire } from 'node:module';

/** How stored bytes are encoded: raw, or one zstd frame. */
export type BoundedCodec = 'none' | 'zstd';

interface ZstdBinding {
  getFrameContentSize(frame: Uint8Array): number | null;
  findFrameCompressedSize(frame: Uint8Array): number;
  DCtx: new () => { decompress(dst: Uint8Array, src: Uint8Array): number };
}

const require = createRequire(import.meta.url);
let binding: ZstdBinding | undefined;
let dctx: InstanceType<ZstdBinding['DCtx']> | undefined;

/**
 * Decodes stored bytes whose decoded length must be at most `maxRaw`. A zstd input must be
 * exactly one frame that declares its content size, no more than `maxRaw`: the output buffer
 * is allocated from that declared size, so stored data that lies about it cannot make the
 * reader allocate more than the caller's bound. Throws an `Error` saying why otherwise.
 */
export function decodeBounded(stored: Uint8Array, codec: BoundedCodec, maxRaw: number): Uint8Array {
  if (codec === 'none') {
    if (stored.length > maxRaw) throw new Error(`stored length ${stored.length} exceeds ${maxRaw}`);
    return stored;
  }
  binding ??= require('zstd-napi/binding') as ZstdBinding;
  const declared = binding.getFrameContentSize(stored);
  if (declared === null || declared > maxRaw) throw new Error(`zstd frame declares ${declared ?? 'no'} content size (at most ${maxRaw})`);
  if (binding.findFrameCompressedSize(stored) !== stored.length) throw new Error('stored bytes are not exactly one zstd frame');
  const out = Buffer.allocUnsafe(declared);
  dctx ??= new binding.DCtx();
  if (dctx.decompress(out, stored) !== declared) throw new Error('zstd frame is shorter than it declares');
  return out;
}

/** zstd-compresses `raw` (on the calling thread) at `level`, as one frame that declares its size. */
export function zstdCompress(raw: Uint8Array, level: number): Buffer {
  const zstd = require('zstd-napi') as { compress(input: Uint8Array, params: { compressionLevel: number }): Buffer };
  return zstd.compress(raw, { compressionLevel: level });
}
