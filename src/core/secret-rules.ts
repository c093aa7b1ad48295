/**
 * The table of content rules behind `findSecret` (see `secrets.ts`). High-confidence formats
 * only: each rule names a fixed prefix that real credentials carry, so a hit is worth
 * excluding a file for. Entropy guesses are left out on purpose: they flag hashes, lock
 * files and minified code, and an exclusion that is usually wrong teaches people to turn
 * the rules off.
 *
 * Every rule is found through an *anchor*: one byte (`_` or `-`) or a short literal that
 * `Buffer.indexOf` finds natively. Sharing the two separator bytes across most rules keeps
 * the number of passes over the data at four, which is what makes the scan fast on binary
 * input (the cost of a pass is set by how often its first byte occurs, not by its length).
 */

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
}

const UNDERSCORE = 0x5f;
const DASH = 0x2d;

/** Most bytes any rule reads from a token's start; chunked scanning keeps this much overlap. */
export const MAX_SECRET_SPAN_BYTES = 1023;

type RuleSpec = Omit<SecretRule, 'follow' | 'wordStart' | 'placeholders' | 'lead'> &
  Partial<Pick<SecretRule, 'follow' | 'wordStart' | 'placeholders'>> & { readonly leads: readonly string[] };

function expand(spec: RuleSpec): SecretRule[] {
  const { leads, ...rest } = spec;
  return leads.map((lead) => ({ follow: '', wordStart: true, placeholders: true, ...rest, lead }));
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
    anchor: 'IA',
    leads: ['AK', 'AS'],
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
    anchor: 'AIza',
    leads: [''],
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
    id: 'huggingface-token',
    anchor: UNDERSCORE,
    leads: ['hf'],
    pattern: /hf_([A-Za-z]{34})(?![A-Za-z0-9])/y,
    spanBytes: 38,
  },
];

/** Every content rule, one entry per lead. */
export const SECRET_RULES: readonly SecretRule[] = Object.freeze(SPECS.flatMap(expand));

/** The rule names `findSecret` can report. */
export const SECRET_RULE_IDS: readonly string[] = Object.freeze([...new Set(SPECS.map((s) => s.id))]);

const PLACEHOLDER_WORD_RE = /example/i;
const PLACEHOLDER_RUN = 6;

/**
 * True for values people write in documentation instead of a credential: containing
 * `EXAMPLE` (the AWS docs keys), or six identical or consecutive characters in a row
 * (`xxxxxx`, `000000`, `123456`, `abcdef`), which random tokens of these lengths almost
 * never contain.
 */
export function looksLikePlaceholder(value: string): boolean {
  if (PLACEHOLDER_WORD_RE.test(value)) return true;
  let same = 1;
  let ascending = 1;
  for (let i = 1; i < value.length; i += 1) {
    const code = value.charCodeAt(i);
    const previous = value.charCodeAt(i - 1);
    same = code === previous ? same + 1 : 1;
    ascending = code === previous + 1 ? ascending + 1 : 1;
    if (same >= PLACEHOLDER_RUN || ascending >= PLACEHOLDER_RUN) return true;
  }
  return false;
}
