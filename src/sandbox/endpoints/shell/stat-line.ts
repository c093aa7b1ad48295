import { malformedAnswer } from './shell-exec.js';

/**
 * The `stat -c` format every shell script prints, one line per path (no name, so a name with
 * a newline cannot break the framing): raw mode in hex, size, mtime as epoch seconds and as a
 * date with nanoseconds, the same for ctime, inode, device, link count. GNU coreutils and
 * busybox both print it; `%Y` alone has no fraction in busybox, so the fraction comes from `%y`.
 */
export const STAT_FORMAT = '%f %s %Y %y %Z %z %i %d %h';

/** One path's `lstat` as the sandbox's `stat` printed it. */
export interface StatFields {
  /** `st_mode`: type and permission bits. */
  readonly mode: number;
  readonly size: number;
  /** Milliseconds with the fraction the tool printed (as Node's `mtimeMs`). */
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly ino: number;
  readonly dev: number;
  readonly nlink: number;
}

/** `st_mode` file type bits. */
export const S_IFMT = 0o170000;
export const S_IFDIR = 0o040000;
export const S_IFREG = 0o100000;
export const S_IFLNK = 0o120000;

const LINE_RE =
  /^([0-9a-f]{1,8}) (\d{1,20}) (-?\d{1,20}) \d{4,}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.(\d{1,9}))? [+-]\d{4} (-?\d{1,20}) \d{4,}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.(\d{1,9}))? [+-]\d{4} (\d{1,20}) (\d{1,20}) (\d{1,20})$/;
/** Inode and device numbers are 64-bit; kept modulo 2^53 so they stay exact JavaScript numbers (they are only compared). */
const SAFE_MODULUS = 2n ** 53n;

/** Milliseconds from whole epoch seconds and a nanosecond fraction, computed as Node computes `mtimeMs`. */
function millis(seconds: string, fraction: string | undefined): number {
  const ns = fraction === undefined ? 0 : Number(fraction.padEnd(9, '0'));
  return Number(seconds) * 1e3 + ns / 1e6;
}

function count(text: string): number {
  const n = BigInt(text);
  return Number(n < SAFE_MODULUS ? n : n % SAFE_MODULUS);
}

/** Parses one line of {@link STAT_FORMAT}; anything else is `INTEGRITY`. */
export function parseStatLine(line: string, what: string): StatFields {
  const m = LINE_RE.exec(line);
  if (m === null) throw malformedAnswer(what, 'a stat line is malformed');
  const size = Number(m[2]);
  if (!Number.isSafeInteger(size)) throw malformedAnswer(what, 'a size is out of range');
  return {
    mode: Number.parseInt(m[1] as string, 16),
    size,
    mtimeMs: millis(m[3] as string, m[4]),
    ctimeMs: millis(m[5] as string, m[6]),
    ino: count(m[7] as string),
    dev: count(m[8] as string),
    nlink: count(m[9] as string),
  };
}

/**
 * Splits the text before the first line equal to `end` into lines; `INTEGRITY` when there is
 * no such line or the number of lines is not `expected`.
 */
export function statLines(text: string, end: string, expected: number, what: string): { lines: string[]; rest: number } {
  const stop = text === `${end}\n` || text.startsWith(`${end}\n`) ? 0 : text.indexOf(`\n${end}\n`);
  if (stop < 0) throw malformedAnswer(what, 'the stat section has no end');
  const lines = stop === 0 ? [] : text.slice(0, stop).split('\n');
  if (lines.length !== expected) throw malformedAnswer(what, `${lines.length} stat lines for ${expected} paths`);
  return { lines, rest: stop === 0 ? end.length + 1 : stop + end.length + 2 };
}
