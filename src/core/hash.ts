/**
 * `core/`: pure helpers with no I/O that every layer may use: hashing, FastCDC, the tree
 * encoding, names and paths, id prefixes, page cursors, retries, bounded concurrency.
 */
import { createHash } from 'node:crypto';

/** Object ids and file hashes: SHA-256, lowercase hex. */
export type Sha256Hex = string;

const HEX64_RE = /^[0-9a-f]{64}$/;

/** SHA-256 of `bytes` as lowercase hex. */
export function sha256Hex(bytes: Uint8Array | string): Sha256Hex {
  return createHash('sha256').update(bytes).digest('hex');
}

/** True for a 64-character lowercase hex string. */
export function isSha256Hex(value: unknown): value is Sha256Hex {
  return typeof value === 'string' && HEX64_RE.test(value);
}
