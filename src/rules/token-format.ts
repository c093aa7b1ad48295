/**
 * The format of Holdfast's own bearer tokens, shared by the code that mints them
 * (`tenants/tokens.ts`) and the secret rule that finds them (`secret-rules.ts`):
 *
 * ```text
 * holdfast_<43 base62 random characters><6 base62 characters: CRC32 of the random part>
 * ```
 *
 * 58 characters in all. The prefix names Holdfast, so people and outside secret scanners
 * know what leaked; the random part is 43 characters of `0-9A-Za-z` (over 256 bits of
 * entropy); the suffix is the CRC32 (IEEE 802.3, as zlib computes it) of the random part's
 * ASCII bytes, written in base62 (`0-9A-Za-z`, most significant digit first) and padded
 * with `0` to 6 characters. A scanner checks the suffix offline, so a string that only looks
 * like a token is not reported. Only base62 follows the prefix, so the token is one word
 * (no `-` or `_` where it could be cut).
 *
 * Tokens minted before this format are `hf_` + 43 base64url characters (32 random bytes);
 * they stay valid (a token is stored as its hash, and verification hashes what comes in) and
 * are found by a secret rule of their own.
 */

/** Prefix of every token Holdfast mints. */
export const TOKEN_PREFIX = 'holdfast_';
/** Characters of the random part: 43 base62 characters hold 43 · log2(62) ≈ 256.03 bits. */
export const TOKEN_RANDOM_CHARS = 43;
/** Characters of the checksum suffix: 62^6 > 2^32, so every CRC32 fits. */
export const TOKEN_CHECKSUM_CHARS = 6;
/** The digits of the random part and the checksum, in value order. */
export const BASE62_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Prefix of the tokens minted before {@link TOKEN_PREFIX}: `hf_` + 43 base64url characters. */
export const LEGACY_TOKEN_PREFIX = 'hf_';
/** Characters after {@link LEGACY_TOKEN_PREFIX}: 32 bytes in unpadded base64url. */
export const LEGACY_TOKEN_RANDOM_CHARS = 43;

const CRC32_POLYNOMIAL = 0xedb88320;
const CRC32_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n += 1) {
    let c = n;
    for (let k = 0; k < 8; k += 1) c = c & 1 ? CRC32_POLYNOMIAL ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC32 (IEEE, zlib's) of the Latin-1 bytes of `text`, as an unsigned 32-bit integer. */
export function crc32(text: string): number {
  let crc = 0xffffffff;
  for (let i = 0; i < text.length; i += 1) {
    crc = (CRC32_TABLE[(crc ^ text.charCodeAt(i)) & 0xff] as number) ^ (crc >>> 8);
  }
  return (crc ^ 0xffffffff) >>> 0;
}

/** The checksum suffix of a token whose random part is `random`: its CRC32 in base62, 6 characters. */
export function tokenChecksum(random: string): string {
  let value = crc32(random);
  let out = '';
  for (let i = 0; i < TOKEN_CHECKSUM_CHARS; i += 1) {
    out = BASE62_ALPHABET[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/** True when `checksum` is the checksum suffix of `random` (see {@link tokenChecksum}). */
export function hasTokenChecksum(random: string, checksum: string): boolean {
  return tokenChecksum(random) === checksum;
}
