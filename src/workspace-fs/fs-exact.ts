import fs from 'node:fs';
import { permissionBits } from '../core/modes.js';
import { textFromBytes } from '../core/name-bytes.js';
import { IntegrityError } from '../errors.js';

/**
 * The few `fs` calls whose plain form loses information, done exactly: names and link targets
 * that are not UTF-8 (`core/name-bytes.ts`), and times before 1970. Shared by the host engine
 * and the in-sandbox agent, so both sides read and write a workspace the same way.
 */

/**
 * The names in directory `at`, as text: read as strings (fast), and again as bytes only when
 * a name came back with U+FFFD, which is how Node shows a name that is not UTF-8 (a real
 * U+FFFD costs the second read and comes back as itself). Unsorted.
 */
export function readNames(at: string | Buffer): string[] {
  const names = fs.readdirSync(at);
  if (!names.some((name) => name.includes('\ufffd'))) return names;
  return fs.readdirSync(at, { encoding: 'buffer' }).map(textFromBytes);
}

/** A symlink's target as text, read again as bytes when it is not UTF-8. */
export function readLinkTarget(at: string | Buffer): string {
  const target = fs.readlinkSync(at);
  return target.includes('\ufffd') ? textFromBytes(fs.readlinkSync(at, { encoding: 'buffer' })) : target;
}

/**
 * What `utimes`/`futimes`/`lutimes` are given for whole milliseconds `ms`: seconds as a
 * decimal string. Node takes a negative number as "now" (1960 would come back as the time of
 * the restore) but a numeric string as it is; a `Date` brings many whole milliseconds back
 * one lower. Ten microseconds are added because the seconds pass through a double (near
 * 1.7e9 s it resolves ~240 ns, in 2400 ~2 µs) that libuv truncates to the microsecond: without
 * them 12:00:00.678 can land on .677999 and read back one millisecond early (before 1970 the
 * truncation rounds up, which the margin keeps inside the millisecond too). What is read
 * back, floored to the millisecond, is `ms`.
 */
export function utimeOf(ms: number): string {
  return String((ms + 0.01) / 1000);
}

/**
 * Checks what the filesystem kept after a restore set it: the permission bits (when `mode` is
 * given) and the mtime to the millisecond (when `mtimeMs` is). A target that cannot keep them
 * (no permissions, coarse or bounded timestamps: ext4 holds 1901-2446) fails the restore with
 * `INTEGRITY` (data: `path`, `field`) instead of giving a receipt that says verified.
 */
export function checkKept(rel: string, st: fs.Stats, mode: number | undefined, mtimeMs: number | undefined): void {
  const field =
    mode !== undefined && permissionBits(st.mode) !== mode
      ? 'mode'
      : mtimeMs !== undefined && Math.floor(st.mtimeMs) !== mtimeMs
        ? 'mtime'
        : undefined;
  if (field === undefined) return;
  throw new IntegrityError('INTEGRITY', `the restore target did not keep the ${field} of ${rel === '' ? 'the root' : rel}`, {
    data: { path: rel, field },
  });
}
