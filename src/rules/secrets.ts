import { looksLikePlaceholder, MAX_SECRET_SPAN_BYTES, SECRET_RULES, type SecretRule } from './secret-rules.js';

export { SECRET_RULE_IDS } from './secret-rules.js';

/** Where a content rule matched: the rule's name and the byte offset where the secret starts. */
export interface SecretFinding {
  /** Stable rule name: `pem-private-key`, `aws-access-key-id`, `github-token`, … (see `SECRET_RULE_IDS`). */
  readonly rule: string;
  /** Byte offset of the first byte of the secret within the scanned content (or stream). */
  readonly offset: number;
}

/**
 * Bytes a chunked scan must see twice: no secret this module detects is longer than this,
 * so a scanner that keeps the last `SECRET_SCAN_OVERLAP_BYTES` of one chunk in front of the
 * next finds every secret that spans the seam. `createSecretScanner` does this for you.
 */
export const SECRET_SCAN_OVERLAP_BYTES = MAX_SECRET_SPAN_BYTES + 1;

/** The rules of one anchor, grouped so that a hit costs one table lookup in the common case. */
interface AnchorGroup {
  readonly search: number | Buffer;
  /** Rules by the last byte of their lead (byte anchors only). */
  readonly byLeadEnd: readonly (readonly SecretRule[] | undefined)[];
  /** Rules with an empty lead: checked on every hit, after their `follow` bytes. */
  readonly unled: readonly SecretRule[];
  readonly anchorBytes: number;
  readonly maxLeadBytes: number;
  /** The anchor byte, for single-byte anchors. */
  readonly byte: number | undefined;
  /** For each unled rule: how many anchor bytes its `follow` starts with. */
  readonly unledRuns: readonly number[];
  /** For each unled rule: the first byte after the anchor that is not part of such a run (-1: none to check). */
  readonly unledNext: readonly number[];
}

function leadingRun(text: string, byte: number): number {
  let n = 0;
  while (n < text.length && text.charCodeAt(n) === byte) n += 1;
  return n;
}

function groupRules(rules: readonly SecretRule[]): readonly AnchorGroup[] {
  const anchors = [...new Set(rules.map((r) => r.anchor))];
  return anchors.map((anchor) => {
    const own = rules.filter((r) => r.anchor === anchor);
    const byLeadEnd: SecretRule[][] = [];
    for (const rule of own) {
      if (rule.lead === '') continue;
      const last = rule.lead.charCodeAt(rule.lead.length - 1);
      byLeadEnd[last] = [...(byLeadEnd[last] ?? []), rule];
    }
    const unled = own.filter((r) => r.lead === '');
    const byte = typeof anchor === 'number' ? anchor : undefined;
    // The run handling in `scanRange` relies on both shapes; a rule breaking them would be missed silently.
    for (const rule of own) {
      const leadEndsInAnchor = rule.lead !== '' && rule.lead.charCodeAt(rule.lead.length - 1) === byte;
      const followAllAnchor = rule.lead === '' && byte !== undefined && leadingRun(rule.follow, byte) === rule.follow.length;
      if (leadEndsInAnchor || followAllAnchor) throw new Error(`secret rule ${rule.id} has a lead or follow the anchor scan cannot handle`);
    }
    return {
      search: byte ?? Buffer.from(anchor as string, 'latin1'),
      byLeadEnd,
      unled,
      anchorBytes: byte === undefined ? (anchor as string).length : 1,
      maxLeadBytes: Math.max(...own.map((r) => Math.max(r.lead.length, r.schemeBytes))),
      byte,
      unledRuns: unled.map((r) => (byte === undefined ? 0 : leadingRun(r.follow, byte))),
      unledNext: unled.map((r) => {
        const run = byte === undefined ? 0 : leadingRun(r.follow, byte);
        return run < r.follow.length ? r.follow.charCodeAt(run) : -1;
      }),
    };
  });
}

const GROUPS = groupRules(SECRET_RULES);
const NO_RULES: readonly SecretRule[] = [];

/** Every anchor group (all bits), the mask a scan of a large range uses. */
const ALL_GROUPS = -1;
/** Inputs up to this long are looked over once for their anchors' first bytes before any group searches them. */
const SHORT_INPUT_BYTES = 256;
/**
 * For each byte, the groups whose anchor starts with it (bit i: `GROUPS[i]`). A match holds its
 * anchor, so a group whose first anchor byte is nowhere in the input cannot match: a name or a
 * tiny file skips most groups' searches. With more groups than an int has bits, every byte
 * names them all.
 */
const GROUPS_OF_BYTE = (() => {
  const table = new Int32Array(256);
  if (GROUPS.length > 31) return table.fill(ALL_GROUPS);
  for (const [i, g] of GROUPS.entries()) {
    const first = g.byte ?? ((g.search as Buffer)[0] as number);
    table[first] = (table[first] as number) | (1 << i);
  }
  return table;
})();

/** The groups {@link GROUPS_OF_BYTE} says may match somewhere in `buf`. */
function groupsIn(buf: Buffer): number {
  let mask = 0;
  for (let i = 0; i < buf.length; i += 1) mask |= GROUPS_OF_BYTE[buf[i] as number] as number;
  return mask;
}

const WORD_BYTE = new Uint8Array(256);
for (const range of ['09', 'AZ', 'az']) {
  for (let c = range.charCodeAt(0); c <= range.charCodeAt(1); c += 1) WORD_BYTE[c] = 1;
}

function bytesAt(buf: Buffer, at: number, literal: string): boolean {
  if (at < 0 || at + literal.length > buf.length) return false;
  for (let k = 0; k < literal.length; k += 1) {
    if (buf[at + k] !== literal.charCodeAt(k)) return false;
  }
  return true;
}

const SCHEME_BYTE = new Uint8Array(256);
for (let c = 0; c < 256; c += 1) SCHEME_BYTE[c] = WORD_BYTE[c] === 1 || c === 0x2b || c === 0x2d || c === 0x2e ? 1 : 0;

/**
 * Where the URL scheme ending at `anchorAt` starts: the run of scheme bytes before it, at
 * most `most` long and starting with a letter; undefined when there is none or it is longer.
 */
function schemeStart(buf: Buffer, anchorAt: number, most: number): number | undefined {
  let start = anchorAt;
  while (start > 0 && anchorAt - start < most && SCHEME_BYTE[buf[start - 1] as number] === 1) start -= 1;
  if (start === anchorAt || (start > 0 && SCHEME_BYTE[buf[start - 1] as number] === 1)) return undefined;
  const first = (buf[start] as number) | 0x20;
  return first >= 0x61 && first <= 0x7a ? start : undefined;
}

/** Runs `rule` for an anchor hit at `anchorAt`; returns the token start when it matches. */
function tryRule(buf: Buffer, rule: SecretRule, anchorAt: number, anchorBytes: number, from: number, to: number): number | undefined {
  // Cheapest rejections first: most anchor hits in ordinary text fail on the follow bytes.
  if (!bytesAt(buf, anchorAt + anchorBytes, rule.follow)) return undefined;
  const start = rule.schemeBytes > 0 ? schemeStart(buf, anchorAt, rule.schemeBytes) : anchorAt - rule.lead.length;
  if (start === undefined || start < from || start >= to || !bytesAt(buf, start, rule.lead)) return undefined;
  if (rule.wordStart && start > 0 && WORD_BYTE[buf[start - 1] as number] === 1) return undefined;
  let end = Math.min(buf.length, start + rule.spanBytes);
  const run = rule.runBytes;
  if (run !== undefined) {
    if (start > 0 && run[buf[start - 1] as number] === 1) return undefined;
    let runEnd = start;
    while (runEnd < end && run[buf[runEnd] as number] === 1) runEnd += 1;
    end = Math.min(end, runEnd + 1);
  }
  const window = buf.toString('latin1', start, end);
  rule.pattern.lastIndex = 0;
  const match = rule.pattern.exec(window);
  if (match === null) return undefined;
  const value = match[1] ?? match[2];
  if (rule.placeholders && value !== undefined && looksLikePlaceholder(value)) return undefined;
  if (rule.check !== undefined && !rule.check(match)) return undefined;
  return start;
}

/** Bytes scanned by every anchor group before the next block: small enough to stay in the core's cache between passes. */
const SCAN_BLOCK_BYTES = 128 * 1024;

/**
 * The earliest secret whose first byte lies in `[from, to)` of `buf`. The caller guarantees
 * that every byte a rule may read for such a start is present (or that `buf` ends the data),
 * and that the byte before `from` is present unless `from` is 0 and starts the data. Large
 * ranges go block by block, so each anchor's pass reads the block from cache, not memory.
 */
function scanRange(buf: Buffer, from: number, to: number): SecretFinding | undefined {
  for (let at = from; at < to; at += SCAN_BLOCK_BYTES) {
    const found = scanBlock(buf, at, Math.min(to, at + SCAN_BLOCK_BYTES));
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * {@link scanRange} for one block: every anchor group (or those in `groups`, when the caller
 * knows the others cannot match), each searching only as far as a start in the block can reach.
 */
function scanBlock(buf: Buffer, from: number, to: number, groups = ALL_GROUPS): SecretFinding | undefined {
  let best: SecretRule | undefined;
  let limit = to;
  for (let g = 0; g < GROUPS.length; g += 1) {
    if ((groups & (1 << g)) === 0) continue;
    const { search, byte, byLeadEnd, unled, unledRuns, unledNext, anchorBytes, maxLeadBytes } = GROUPS[g] as AnchorGroup;
    // An anchor at or past `limit + maxLeadBytes` cannot start a secret before `limit`.
    const window = buf.subarray(0, Math.min(buf.length, limit + maxLeadBytes + anchorBytes));
    let at = window.indexOf(search, from);
    while (at !== -1 && at - maxLeadBytes < limit) {
      const led = at > 0 ? byLeadEnd[buf[at - 1] as number] : undefined;
      for (const rule of led ?? NO_RULES) {
        const start = tryRule(buf, rule, at, anchorBytes, from, limit);
        if (start !== undefined) [best, limit] = [rule, start];
      }
      // A run of the anchor byte (`-----`, `____`) is handled in one step: no lead ends in the
      // anchor byte, so only the run's first byte can follow one, and an unled rule whose follow
      // starts with m anchor bytes can only sit m + 1 bytes before the run's end. A file of
      // dashes then costs a byte loop instead of an `indexOf` call per byte.
      let runEnd = at + 1;
      if (byte !== undefined) while (buf[runEnd] === byte) runEnd += 1;
      for (let i = 0; i < unled.length; i += 1) {
        const rule = unled[i] as SecretRule;
        const position = byte === undefined ? at : runEnd - 1 - (unledRuns[i] as number);
        // Inline first test: on a common anchor byte most hits fail here, before any call.
        const next = unledNext[i] as number;
        const nextAt = byte === undefined ? at + anchorBytes : runEnd;
        if (position < at || (next !== -1 && (nextAt >= buf.length || buf[nextAt] !== next))) continue;
        const start = tryRule(buf, rule, position, anchorBytes, from, limit);
        if (start !== undefined) [best, limit] = [rule, start];
      }
      at = window.indexOf(search, runEnd);
    }
  }
  return best === undefined ? undefined : { rule: best.id, offset: limit };
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * The first (lowest-offset) high-confidence secret in `content`, or undefined. Detects PEM
 * and PGP private-key blocks with a key body (a bare header quoted in code is not a key) and
 * their base64 form (kubeconfig `client-key-data`); AWS access key ids and secret keys
 * assigned to their conventional names (`aws_secret_access_key = …`, `"SecretAccessKey": …`);
 * GitHub, GitLab, Slack (tokens and webhooks), npm, PyPI, Hugging Face, Shopify and
 * DigitalOcean tokens; Holdfast's own tokens (`holdfast_` with a valid checksum, and the
 * older `hf_` + 43 base64url, see `token-format.ts`); Google API keys, OAuth client secrets
 * and refresh tokens; Stripe live keys, OpenAI and Anthropic API keys, age secret keys; signed JWTs (Kubernetes
 * service-account tokens); `.npmrc` credentials (`_authToken=`, `_auth=`, `_password=`),
 * Docker `"auth"` values and URLs with an embedded password (`scheme://user:password@host`).
 * Public keys, certificates, environment references (`${NPM_TOKEN}`) and documentation
 * placeholders (`AKIAIOSFODNN7EXAMPLE`, `user:password@`) do not match. Pure and
 * synchronous; linear in the input, fast on binary data.
 */
export function findSecret(content: Uint8Array): SecretFinding | undefined {
  const buf = asBuffer(content);
  if (buf.length > SHORT_INPUT_BYTES) return scanRange(buf, 0, buf.length);
  const groups = groupsIn(buf);
  return groups === 0 ? undefined : scanBlock(buf, 0, buf.length, groups);
}

/** Incremental form of {@link findSecret} for files read in chunks. */
export interface SecretScanner {
  /**
   * Scans the next chunk. Returns the first finding whose bytes have all been seen, else
   * undefined; a secret cut by the chunk's end is found by a later `push` or by `end`.
   * The chunk may be reused by the caller afterwards (what is kept is copied). Once a
   * finding is returned, every later call returns the same finding without scanning.
   */
  push(chunk: Uint8Array): SecretFinding | undefined;
  /** Ends the stream and scans what was held back. The result equals `findSecret` of the concatenated chunks. */
  end(): SecretFinding | undefined;
}

/**
 * A scanner whose findings, offsets included, are exactly those of `findSecret` on the
 * whole stream, however it is split: each push keeps the last `SECRET_SCAN_OVERLAP_BYTES`
 * and decides only secrets whose bytes have fully arrived.
 */
export function createSecretScanner(): SecretScanner {
  // `carry` holds the bytes not yet decided plus the one before them; `carryFrom` is the
  // first undecided start inside it (0 only at the start of the stream) and `base` is the
  // stream offset of carry[0].
  let carry = Buffer.alloc(0);
  let carryFrom = 0;
  let base = 0;
  let found: SecretFinding | undefined;

  const report = (finding: SecretFinding | undefined, offset: number): SecretFinding | undefined => {
    if (finding !== undefined) found = { rule: finding.rule, offset: finding.offset + offset };
    return found;
  };
  const keep = (buf: Buffer, firstPending: number): void => {
    const cut = Math.max(0, firstPending - 1);
    carry = Buffer.from(buf.subarray(cut));
    carryFrom = firstPending - cut;
    base += cut;
  };

  return {
    push(chunk) {
      if (found !== undefined) return found;
      const data = asBuffer(chunk);
      if (carry.length + data.length <= 2 * SECRET_SCAN_OVERLAP_BYTES) {
        const buf = Buffer.concat([carry, data]);
        const decidable = buf.length - MAX_SECRET_SPAN_BYTES;
        if (report(scanRange(buf, carryFrom, decidable), base) !== undefined) return found;
        keep(buf, Math.max(carryFrom, decidable));
        return undefined;
      }
      // Large chunk: decide the held-back starts (and the chunk's first byte, whose
      // predecessor is in `carry`) on a small seam buffer, then scan the chunk in place
      // instead of copying it behind the carry.
      const seam = Buffer.concat([carry, data.subarray(0, SECRET_SCAN_OVERLAP_BYTES)]);
      if (report(scanRange(seam, carryFrom, carry.length + 1), base) !== undefined) return found;
      base += carry.length;
      const decidable = data.length - MAX_SECRET_SPAN_BYTES;
      if (report(scanRange(data, 1, decidable), base) !== undefined) return found;
      keep(data, decidable);
      return undefined;
    },
    end() {
      if (found !== undefined) return found;
      return report(scanRange(carry, carryFrom, carry.length), base);
    },
  };
}
