import { type PassThrough, Writable } from 'node:stream';

/** Bytes of the header before every frame of a non-TTY attach stream. */
const FRAME_HEADER_BYTES = 8;
const STREAM_STDOUT = 1;
const STREAM_STDERR = 2;

/**
 * A writable that splits Docker's multiplexed attach stream into stdout and stderr. Each frame
 * is an 8-byte header (stream type: 1 stdout, 2 stderr; three zero bytes; payload length,
 * 32-bit big-endian) then the payload, which is forwarded as it arrives, so no frame is ever
 * held whole in memory. Backpressure is kept: a chunk is acknowledged only once the output it
 * went to has drained. A header naming another stream is a protocol error (the writable errors
 * and the caller tears the exec down).
 */
export class StreamDemux extends Writable {
  private header = Buffer.alloc(0);
  private remaining = 0;
  private target: PassThrough | undefined;

  constructor(
    private readonly stdout: PassThrough,
    private readonly stderr: PassThrough,
  ) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    let offset = 0;
    const waits = new Set<PassThrough>();
    while (offset < chunk.length) {
      if (this.remaining === 0) {
        const need = FRAME_HEADER_BYTES - this.header.length;
        this.header = Buffer.concat([this.header, chunk.subarray(offset, offset + need)]);
        offset += Math.min(need, chunk.length - offset);
        if (this.header.length < FRAME_HEADER_BYTES) break;
        const type = this.header[0];
        this.remaining = this.header.readUInt32BE(4);
        this.header = Buffer.alloc(0);
        if (type === STREAM_STDOUT) this.target = this.stdout;
        else if (type === STREAM_STDERR) this.target = this.stderr;
        else {
          callback(new Error(`[docker] attach stream frame of unknown type ${type}`));
          return;
        }
        continue;
      }
      const take = Math.min(this.remaining, chunk.length - offset);
      const target = this.target as PassThrough;
      if (!target.write(chunk.subarray(offset, offset + take))) waits.add(target);
      offset += take;
      this.remaining -= take;
    }
    if (waits.size === 0) {
      callback();
      return;
    }
    let pending = waits.size;
    for (const target of waits) {
      target.once('drain', () => {
        pending -= 1;
        if (pending === 0) callback();
      });
    }
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.stdout.end();
    this.stderr.end();
    callback();
  }
}
