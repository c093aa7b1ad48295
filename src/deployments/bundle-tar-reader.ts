import { Header, Pax, ReadEntry } from 'tar';
import { InputError } from '../errors.js';

/** Bytes of one tar block: every header, and every body padded to a whole number of them. */
export const TAR_BLOCK_BYTES = 512;
/** Largest metadata entry (pax header, GNU long name) read: they name one entry, never carry content. */
export const MAX_TAR_META_BYTES = 1024 * 1024;
/**
 * Zero bytes accepted after the end-of-archive (the two zero blocks): what tar writers pad an
 * archive with to a whole record (GNU tar: 10 KiB; `-b 2048`: 1 MiB). Anything else there is
 * trailing data and refused.
 */
export const MAX_TAR_TRAILING_ZERO_BYTES = 1024 * 1024;

/**
 * Reads a plain (already inflated) tar stream, chunk by chunk, each byte once: one 512-byte
 * carry for a header split across chunks, bodies passed on as slices of the chunks they came
 * in. It decodes headers with the `tar` package's `Header` and `Pax` (pax and GNU long names
 * applied as that package applies them) and hands each entry that is not metadata to `onEntry`
 * as a paused `ReadEntry`, then writes its body into it and ends it. Reading stops at the
 * end-of-archive: after it, only zero padding of at most {@link MAX_TAR_TRAILING_ZERO_BYTES}
 * is accepted. A bad checksum, a header without a path, a link without a target (or a target
 * on a non-link), data after the end-of-archive or a stream ending inside a header or a body is
 * `INVALID_INPUT` (`data.reason` `not-a-tar` | `trailing-data` | `truncated`, `data.offset` the
 * byte of the plain stream); a metadata entry past {@link MAX_TAR_META_BYTES} is `LIMIT_EXCEEDED`.
 * Whatever `onEntry` throws passes through `push`.
 */
export class TarReader {
  private readonly carry = Buffer.alloc(TAR_BLOCK_BYTES);
  private carried = 0;
  private state: 'header' | 'body' | 'meta' | 'end' = 'header';
  private entry: ReadEntry | undefined;
  /** Body bytes of the current entry still to come, its padding included. */
  private remaining = 0;
  private metaChunks: Buffer[] = [];
  private ex: Pax | undefined;
  private gex: Pax | undefined;
  private sawNullBlock = false;
  /** Bytes of the plain stream consumed so far. */
  private offset = 0;
  private trailing = 0;

  constructor(private readonly onEntry: (entry: ReadEntry) => void) {}

  /** Whether the end-of-archive was read (what follows may only be zero padding). */
  get ended(): boolean {
    return this.state === 'end';
  }

  /** Consumes one chunk of the plain tar stream. */
  push(chunk: Buffer): void {
    let pos = 0;
    while (pos < chunk.length) {
      if (this.state === 'end') {
        this.trailer(chunk.subarray(pos));
        return;
      }
      if (this.state === 'header') {
        pos = this.headerFrom(chunk, pos);
        continue;
      }
      const n = Math.min(this.remaining, chunk.length - pos);
      const slice = chunk.subarray(pos, pos + n);
      if (this.state === 'body') (this.entry as ReadEntry).write(slice);
      else this.metaChunks.push(Buffer.from(slice));
      pos += n;
      this.offset += n;
      this.remaining -= n;
      if (this.remaining === 0) this.finishEntry();
    }
  }

  /** The stream ended: refused when it ends inside a header or a body. A missing end-of-archive is tolerated, as tar tools do. */
  end(): void {
    if (this.state === 'end' || (this.state === 'header' && this.carried === 0)) return;
    throw refused('truncated', 'the archive ends inside an entry: send the whole archive', this.offset + this.carried);
  }

  /** Takes one header block from `chunk` at `pos` (through the carry when it is split); returns the position after it. */
  private headerFrom(chunk: Buffer, pos: number): number {
    if (this.carried === 0 && chunk.length - pos >= TAR_BLOCK_BYTES) {
      this.header(chunk.subarray(pos, pos + TAR_BLOCK_BYTES));
      return pos + TAR_BLOCK_BYTES;
    }
    const n = Math.min(TAR_BLOCK_BYTES - this.carried, chunk.length - pos);
    chunk.copy(this.carry, this.carried, pos, pos + n);
    this.carried += n;
    if (this.carried === TAR_BLOCK_BYTES) {
      this.carried = 0;
      this.header(this.carry);
    }
    return pos + n;
  }

  private header(block: Buffer): void {
    const at = this.offset;
    this.offset += TAR_BLOCK_BYTES;
    if (isZero(block)) {
      if (this.sawNullBlock) this.state = 'end';
      this.sawNullBlock = true;
      return;
    }
    this.sawNullBlock = false;
    let header: Header;
    try {
      header = new Header(block, 0, this.ex, this.gex);
    } catch (error) {
      throw refused('not-a-tar', `the header at byte ${at} cannot be read (${(error as Error).message})`, at);
    }
    if (!header.cksumValid) throw refused('not-a-tar', `the header at byte ${at} fails its checksum: send a tar archive`, at);
    if (!header.path) throw refused('not-a-tar', `the header at byte ${at} names no path`, at);
    const isLink = header.type === 'Link' || header.type === 'SymbolicLink';
    const isExtended = header.type === 'ExtendedHeader' || header.type === 'GlobalExtendedHeader';
    if (isLink && !header.linkpath) throw refused('not-a-tar', `the link at byte ${at} names no target`, at);
    if (!isLink && !isExtended && header.linkpath) throw refused('not-a-tar', `the entry at byte ${at} names a link target`, at);
    const entry = new ReadEntry(header, this.ex, this.gex);
    this.entry = entry;
    this.remaining = entry.blockRemain;
    if (entry.meta) {
      if (entry.size > MAX_TAR_META_BYTES) {
        throw new InputError('LIMIT_EXCEEDED', `the metadata entry at byte ${at} is larger than ${MAX_TAR_META_BYTES} bytes`, {
          data: { path: entry.path.slice(0, 200), reason: 'too-large', rule: `metadata entries of at most ${MAX_TAR_META_BYTES} bytes` },
        });
      }
      this.metaChunks = [];
      this.state = this.remaining > 0 ? 'meta' : 'header';
      return;
    }
    this.ex = undefined;
    this.onEntry(entry);
    if (this.remaining > 0) this.state = 'body';
    else this.finishEntry();
  }

  private finishEntry(): void {
    const entry = this.entry as ReadEntry;
    this.entry = undefined;
    this.state = 'header';
    if (!entry.meta) {
      entry.end();
      return;
    }
    const text = Buffer.concat(this.metaChunks).subarray(0, entry.size).toString('utf8');
    this.metaChunks = [];
    if (entry.type === 'ExtendedHeader' || entry.type === 'OldExtendedHeader') this.ex = Pax.parse(text, this.ex, false);
    else if (entry.type === 'GlobalExtendedHeader') this.gex = Pax.parse(text, this.gex, true);
    else if (entry.type === 'NextFileHasLongLinkpath')
      this.ex = Object.assign(this.ex ?? new Pax({}), { linkpath: text.replace(/\0.*/s, '') });
    else this.ex = Object.assign(this.ex ?? new Pax({}), { path: text.replace(/\0.*/s, '') });
  }

  /** Bytes after the end-of-archive: zero padding, within bounds, or a refusal naming where the data starts. */
  private trailer(bytes: Buffer): void {
    for (let i = 0; i < bytes.length; i += 1) {
      if (bytes[i] !== 0) {
        throw refused(
          'trailing-data',
          `the archive has data after its end (byte ${this.offset + i}): send the archive alone, without anything appended`,
          this.offset + i,
        );
      }
    }
    this.offset += bytes.length;
    this.trailing += bytes.length;
    if (this.trailing > MAX_TAR_TRAILING_ZERO_BYTES) {
      throw refused(
        'trailing-data',
        `the archive is padded with more than ${MAX_TAR_TRAILING_ZERO_BYTES} zero bytes after its end`,
        this.offset,
      );
    }
  }
}

function isZero(bytes: Buffer): boolean {
  for (let i = 0; i < bytes.length; i += 1) if (bytes[i] !== 0) return false;
  return true;
}

function refused(reason: 'not-a-tar' | 'trailing-data' | 'truncated', message: string, offset: number): InputError {
  return new InputError('INVALID_INPUT', message, { data: { reason, offset } });
}
