/**
 * The table of content rules behind `findSecret` (see `secrets.ts`). High-confidence formats
 * only: each rule names a fixed prefix that real credentials carry, so a hit is worth
 * excluding a file for. Entropy guesses are left out on purpose: they flag hashes, lock
 * files and minified code, and an exclusion that is usually wrong teaches people to turn
 * the rules off.
 *
 * Every rule is found through an *anchor*: one byte (`_`, `-`, `I`, `:`, `J`, `=`) or a short
 * literal that `Buffer.indexOf` finds natively. Sharing six bytes across all rules keeps the
 * number of passes over the data at six, which is what makes the scan fast on binary input (the cost
 * of a pass is set by how often its first byte occurs, not by its length). Rules that need a
 * key name or a decoded structure to be sure live in `secret-context-rules.ts`.
 */
import { CONTEXT_RULE_SPECS } from './secret-context-rules.js';

export { looksLikePlaceholder } from './secret-values.js';

import {
  hasTokenChecksum,
  LEGACY_TOKEN_PREFIX,
  LEGACY_TOKEN_RANDOM_CHARS,
  TOKEN_CHECKSUM_CHARS,
  TOKEN_PREFIX,
  TOKEN_RANDOM_CHARS,
} from './token-format.js';

/** One content rule. */
export interface SecretRule {
  /** Stable rule name reported in findings (`github-token`). */
  readonly id: string;
  /** What `Buffer.indexOf` searches for: a byte value or a short literal. */
  readonly anchor: number | string;
  /** Bytes that must sit immediately before the anchor; the token starts at the first of them. */
  readonly lead: string;
  /** Bytes that must follow the anchor, checked before the regular expression runs. */
  readonly follow: string;
  /** Sticky pattern run at the token start; group 1 (or 2) holds the value checked for placeholders. */
  readonly pattern: RegExp;
  /** Most bytes the pattern can read from the token start, including one byte of lookahead. */
  readonly spanBytes: number;
  /** The byte before the token must not be a letter or digit (so `xghp_…` inside a longer word is no token). */
  readonly wordStart: boolean;
  /** Skip values that are obviously placeholders (`EXAMPLE`, `xxxxxx`, `123456`). */
  readonly placeholders: boolean;
  /**
   * For URL rules: the token starts at the URL scheme, a run of up to this many scheme
   * characters (`[A-Za-z0-9+.-]`, first a letter) ending at the anchor; 0 for other rules.
   */
  readonly schemeBytes: number;
  /**
   * For tokens that are one run of these bytes (a JWT's base64url and dots): the byte before
   * the token must not be one of them, and the pattern reads no further than the run. Keeps
   * the work per run bounded, so input made of token-like runs scans in linear time.
   */
  readonly runBytes: Uint8Array | undefined;
  /** A last test on the pattern's match (a decoded header, a password's shape); true keeps the finding. */
  readonly check: ((match: RegExpExecArray) => boolean) | undefined;
}

const UNDERSCORE = 0x5f;
const DASH = 0x2d;
const LETTER_I = 0x49;

/** Most bytes any rule reads from a token's start (a JWT's header and claims); chunked scanning keeps this much overlap. */
export const MAX_SECRET_SPAN_BYTES = 8191;

/** One rule as the tables write it: every lead it may follow, defaults left out. */
export type RuleSpec = Omit<SecretRule, 'follow' | 'wordStart' | 'placeholders' | 'lead' | 'schemeBytes' | 'check' | 'runBytes'> &
  Partial<Pick<SecretRule, 'follow' | 'wordStart' | 'placeholders' | 'schemeBytes'>> & {
    readonly leads: readonly string[];
    readonly check?: (match: RegExpExecArray) => boolean;
    /** The bytes of `runBytes`, as a string. */
    readonly runChars?: string;
  };

function byteTable(chars: string): Uint8Array {
  const table = new Uint8Array(256);
  for (let i = 0; i < chars.length; i += 1) table[chars.charCodeAt(i)] = 1;
  return table;
}

function expand(spec: RuleSpec): SecretRule[] {
  const { leads, check, runChars, ...rest } = spec;
  const runBytes = runChars === undefined ? undefined : byteTable(runChars);
  return leads.map((lead) => ({ follow: '', wordStart: true, placeholders: true, schemeBytes: 0, ...rest, lead, check, runBytes }));
}

// A private key is only a key with its body: a header quoted in code or documentation, or
// sitting in a binary's string table, is not. The body follows the header after line breaks
// (real or `\n`-escaped, as in JSON), indentation, quotes or string concatenation, and
// optional RFC 7468 / OpenPGP armor headers (`Proc-Type: …`, `Version: …`); its first line
// holds at least 40 base64 characters (real lines hold 64 or 70).
const PEM_SEPARATOR = String.raw`(?:[\s"'+,]|\\[rn]){1,16}`;
const PEM_ARMOR_HEADER = String.raw`[A-Za-z][A-Za-z-]{0,31}: [^\r\n\\]{0,100}`;
const PEM_BODY = `(?:${PEM_SEPARATOR}${PEM_ARMOR_HEADER}){0,4}${PEM_SEPARATOR}[A-Za-z0-9+/]{40}`;
const PEM_BODY_BYTES = 4 * (32 + 33 + 2 + 100) + 32 + 40;

const SPECS: readonly RuleSpec[] = [
  {
    id: 'pem-private-key',
    anchor: DASH,
    leads: [''],
    follow: '----BEGIN ',
    pattern: new RegExp(`-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY-----${PEM_BODY}`, 'y'),
    spanBytes: 11 + 3 * 17 + 16 + PEM_BODY_BYTES,
    wordStart: false,
    placeholders: false,
  },
  {
    id: 'pgp-private-key',
    anchor: DASH,
    leads: [''],
    follow: '----BEGIN PGP ',
    pattern: new RegExp(`-----BEGIN PGP PRIVATE KEY BLOCK-----${PEM_BODY}`, 'y'),
    spanBytes: 37 + PEM_BODY_BYTES,
    wordStart: false,
    placeholders: false,
  },
  {
    id: 'aws-access-key-id',
    anchor: LETTER_I,
    leads: ['AK', 'AS'],
    follow: 'A',
    pattern: /A[KS]IA([A-Z0-9]{16})(?![A-Za-z0-9])/y,
    spanBytes: 21,
  },
  {
    // The secret half of an AWS key pair has no prefix of its own; only an assignment to the
    // conventional variable name makes it recognisable.
    id: 'aws-secret-access-key',
    anchor: UNDERSCORE,
    leads: ['aws', 'AWS', 'Aws'],
    pattern: /aws_secret_access_key["']?[ \t]{0,8}(?::=|=>|[:=])[ \t]{0,8}["']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])/iy,
    spanBytes: 21 + 1 + 8 + 2 + 8 + 1 + 40 + 1,
    wordStart: false,
  },
  {
    id: 'github-token',
    anchor: UNDERSCORE,
    leads: ['ghp', 'gho', 'ghu', 'ghs', 'ghr'],
    pattern: /gh[pousr]_([A-Za-z0-9]{36})/y,
    spanBytes: 40,
  },
  {
    id: 'github-fine-grained-token',
    anchor: UNDERSCORE,
    leads: ['github'],
    follow: 'pat_',
    pattern: /github_pat_([A-Za-z0-9_]{82})/y,
    spanBytes: 93,
  },
  { id: 'gitlab-token', anchor: DASH, leads: ['glpat'], pattern: /glpat-([A-Za-z0-9_-]{20})/y, spanBytes: 26 },
  {
    id: 'slack-token',
    anchor: DASH,
    leads: ['xoxa', 'xoxb', 'xoxo', 'xoxp', 'xoxr', 'xoxs'],
    pattern: /xox[abopsr]-(?:[0-9]{1,20}-){1,4}([A-Za-z0-9]{16})/y,
    spanBytes: 5 + 4 * 21 + 16,
  },
  {
    id: 'google-api-key',
    anchor: LETTER_I,
    leads: ['A'],
    follow: 'za',
    pattern: /AIza([A-Za-z0-9_-]{35})(?![A-Za-z0-9_-])/y,
    spanBytes: 40,
  },
  {
    id: 'stripe-live-key',
    anchor: UNDERSCORE,
    leads: ['sk', 'rk'],
    follow: 'live_',
    pattern: /[sr]k_live_([A-Za-z0-9]{24})/y,
    spanBytes: 32,
  },
  { id: 'npm-token', anchor: UNDERSCORE, leads: ['npm'], pattern: /npm_([A-Za-z0-9]{36})(?![A-Za-z0-9])/y, spanBytes: 41 },
  {
    id: 'anthropic-api-key',
    anchor: DASH,
    leads: ['sk'],
    follow: 'ant-',
    pattern: /sk-ant-([A-Za-z0-9_-]{40})/y,
    spanBytes: 47,
  },
  {
    // Project, service-account and admin keys carry a kind; legacy keys are exactly 48 characters.
    id: 'openai-api-key',
    anchor: DASH,
    leads: ['sk'],
    pattern: /sk-(?:(?:proj|svcacct|admin)-([A-Za-z0-9_-]{40})|([A-Za-z0-9]{48})(?![A-Za-z0-9_-]))/y,
    spanBytes: 52,
  },
  {
    // Holdfast's own tokens (format: `token-format.ts`): the CRC32 suffix tells a token from a
    // look-alike, so neither a word boundary nor a placeholder test is needed around it.
    id: 'holdfast-token',
    anchor: UNDERSCORE,
    leads: ['holdfast'],
    pattern: new RegExp(`holdfast_([0-9A-Za-z]{${TOKEN_RANDOM_CHARS}})([0-9A-Za-z]{${TOKEN_CHECKSUM_CHARS}})`, 'y'),
    spanBytes: TOKEN_PREFIX.length + TOKEN_RANDOM_CHARS + TOKEN_CHECKSUM_CHARS,
    wordStart: false,
    placeholders: false,
    check: (match) => hasTokenChecksum(match[1] ?? '', match[2] ?? ''),
  },
  {
    // Holdfast tokens minted before the `holdfast_` prefix: `hf_` + exactly 43 base64url
    // characters (Hugging Face's are 34 letters, so neither rule takes the other's token).
    // Without a checksum, mixed case tells 32 random bytes from a long snake_case identifier.
    id: 'holdfast-legacy-token',
    anchor: UNDERSCORE,
    leads: ['hf'],
    pattern: new RegExp(`hf_([A-Za-z0-9_-]{${LEGACY_TOKEN_RANDOM_CHARS}})(?![A-Za-z0-9_-])`, 'y'),
    spanBytes: LEGACY_TOKEN_PREFIX.length + LEGACY_TOKEN_RANDOM_CHARS + 1,
    placeholders: false,
    check: (match) => /[A-Z]/.test(match[1] ?? '') && /[a-z]/.test(match[1] ?? ''),
  },
  {
    id: 'huggingface-token',
    anchor: UNDERSCORE,
    leads: ['hf'],
    pattern: /hf_([A-Za-z]{34})(?![A-Za-z0-9])/y,
    spanBytes: 38,
  },
  {
    // The client secret of a Google OAuth client (gcloud's application-default credentials).
    id: 'google-oauth-client-secret',
    anchor: DASH,
    leads: ['GOCSPX'],
    pattern: /GOCSPX-([A-Za-z0-9_-]{28})(?![A-Za-z0-9_-])/y,
    spanBytes: 36,
  },
  {
    // A macaroon whose first caveat names the index: `AgEI` + base64 of `pypi.org`, `AgEN` + `test.pypi.org`.
    id: 'pypi-token',
    anchor: DASH,
    leads: ['pypi'],
    follow: 'AgE',
    pattern: /pypi-AgE[IN]([A-Za-z0-9_-]{50})/y,
    spanBytes: 59,
  },
  {
    id: 'age-secret-key',
    anchor: DASH,
    leads: ['AGE'],
    follow: 'SECRET-KEY-1',
    pattern: /AGE-SECRET-KEY-1([QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})(?![A-Za-z0-9])/y,
    spanBytes: 75,
  },
  {
    id: 'slack-app-token',
    anchor: DASH,
    leads: ['xapp'],
    pattern: /xapp-[0-9]-[A-Z0-9]{9,12}-[0-9]{10,14}-([a-f0-9]{64})/y,
    spanBytes: 5 + 2 + 13 + 15 + 64 + 1,
  },
  {
    id: 'shopify-token',
    anchor: UNDERSCORE,
    leads: ['shpat', 'shpss', 'shpca', 'shppa'],
    pattern: /shp(?:at|ss|ca|pa)_([a-fA-F0-9]{32})(?![A-Za-z0-9])/y,
    spanBytes: 39,
  },
  {
    id: 'digitalocean-token',
    anchor: UNDERSCORE,
    leads: ['dop', 'doo', 'dor'],
    follow: 'v1_',
    pattern: /do[por]_v1_([a-f0-9]{64})(?![A-Za-z0-9])/y,
    spanBytes: 72,
  },
];

const ALL_SPECS: readonly RuleSpec[] = [...SPECS, ...CONTEXT_RULE_SPECS];

/** Every content rule, one entry per lead. */
export const SECRET_RULES: readonly SecretRule[] = Object.freeze(ALL_SPECS.flatMap(expand));

/** The rule names `findSecret` can report. */
export const SECRET_RULE_IDS: readonly string[] = Object.freeze([...new Set(ALL_SPECS.map((s) => s.id))]);
