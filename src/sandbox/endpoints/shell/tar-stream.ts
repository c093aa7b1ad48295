import { bytesFromText } from '../../../core/name-bytes.js';

/** The tar block size. */
const BLOCK = 512;
/** Longest name the ustar `name` field holds; longer ones travel in a pax `path` record. */
const USTAR_NAME_BYTES = 100;

/** One regular file of a tar stream. */
export interface TarFile {
  /** Workspace-relative path (byte escapes for names that are not UTF-8). */
  readonly path: string;
  readonly mode: number;
  readonly mtimeMs: number;
  readonly bytes: readonly Uint8Array[];
  readonly size: number;
}

/** Bytes a file costs in a tar stream (headers, content and padding), for batching. */
export function tarCost(file: Pick<TarFile, 'size'>): number {
  return 3 * BLOCK + Math.ceil(file.size / BLOCK) * BLOCK;
}

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

/** A pax record: its length (digits included), `key=value`, newline. */
function paxRecord(key: string, value: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(` ${key}=`), value, Buffer.from('\n')]);
  let len = body.length + 1;
  while (String(len).length + body.length !== len) len += 1;
  return Buffer.concat([Buffer.from(String(len)), body]);
}

function header(name: Buffer, size: number, mode: number, mtimeSeconds: number, type: '0' | 'x'): Buffer {
  const h = Buffer.alloc(BLOCK);
  name.copy(h, 0, 0, Math.min(name.length, USTAR_NAME_BYTES));
  h.write(octal(mode, 8), 100, 'latin1');
  h.write(octal(0, 8), 108, 'latin1');
  h.write(octal(0, 8), 116, 'latin1');
  h.write(octal(size, 12), 124, 'latin1');
  h.write(octal(Math.max(0, mtimeSeconds), 12), 136, 'latin1');
  h.write('        ', 148, 'latin1');
  h.write(type, 156, 'latin1');
  h.write('ustar\u000000', 257, 'latin1');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return h;
}

/**
 * A POSIX (pax) tar stream of `files`, extracted in the sandbox by its own `tar` (GNU or
 * busybox) in one process instead of a `dd` and a `touch` per file. Each file gets a pax
 * header with its exact mtime (`mtime=s.fff`, which GNU tar applies; busybox keeps the whole
 * seconds of the ustar field) and, for a long name, its `path`; names are raw bytes. Nothing
 * but regular files: directories exist already and links are made afterwards. What `tar`
 * wrote is read back and checked like any other write.
 */
export function tarStream(files: readonly TarFile[]): Buffer[] {
  const out: Buffer[] = [];
  for (const f of files) {
    const name = bytesFromText(f.path);
    const seconds = Math.floor(f.mtimeMs / 1000);
    const records = [paxRecord('mtime', Buffer.from((f.mtimeMs / 1000).toFixed(3)))];
    if (name.length > USTAR_NAME_BYTES) records.push(paxRecord('path', name));
    const pax = Buffer.concat(records);
    out.push(header(Buffer.from('PaxHeader'), pax.length, 0o644, seconds, 'x'), pad(pax));
    out.push(header(name, f.size, f.mode, seconds, '0'));
    for (const b of f.bytes) out.push(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
    const rest = f.size % BLOCK;
    if (rest !== 0) out.push(Buffer.alloc(BLOCK - rest));
  }
  out.push(Buffer.alloc(2 * BLOCK));
  return out;
}

function pad(b: Buffer): Buffer {
  const rest = b.length % BLOCK;
  return rest === 0 ? b : Buffer.concat([b, Buffer.alloc(BLOCK - rest)]);
}
