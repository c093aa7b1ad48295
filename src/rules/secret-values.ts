/**
 * Tests on the value a content rule matched: whether it is a documentation placeholder, and,
 * for the rules that recognise a credential by its structure rather than a prefix, whether
 * that structure is really there (a JWT header that decodes to JSON naming an `alg`, a base64
 * value that decodes to `user:password`). All pure; they run only on the rare pattern match.
 */

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

/**
 * Words that mark a password or token as written for a reader, not generated; `1234` is how
 * documentation counts (`key_1234`, `pass1234`), which a generated value of these lengths
 * holds about once in a million.
 */
const PLACEHOLDER_WORDS_RE =
  /pass|pwd|secret|example|sample|change|your|dummy|fake|test|token|redacted|placeholder|hidden|xxx|\*\*\*|mypass|demo|guest|admin|foo|bar|1234/i;
/** Template and variable syntax (`${PASS}`, `$PASS`, `<password>`, `{{ pass }}`, `%s`, `%(pass)s`). */
const TEMPLATE_RE = /[$<>{}]|%(?:s|\()/;
const MIN_PASSWORD_CHARS = 8;
const MIN_TOKEN_CHARS = 16;

/**
 * True when `value` reads like a generated password or token rather than a placeholder: at
 * least `minChars` long, with letters and digits, no template syntax, no placeholder word
 * (`password`, `changeme`, `your…`) and no placeholder run (see {@link looksLikePlaceholder}).
 */
export function looksGenerated(value: string, minChars = MIN_PASSWORD_CHARS): boolean {
  return (
    value.length >= minChars &&
    /[A-Za-z]/.test(value) &&
    /[0-9]/.test(value) &&
    !TEMPLATE_RE.test(value) &&
    !PLACEHOLDER_WORDS_RE.test(value) &&
    !looksLikePlaceholder(value)
  );
}

/** An npm registry token value: a generated token, never an environment reference (`${NPM_TOKEN}`). */
export function looksLikeTokenValue(value: string): boolean {
  return looksGenerated(value, MIN_TOKEN_CHARS);
}

const BASE64_RE = /^[A-Za-z0-9+/]+={0,2}$/;
const PRINTABLE_RE = /^[\x20-\x7e]+$/;

/** The text `value` encodes in base64 when it is canonical base64 of printable ASCII, else undefined. */
function decodePrintableBase64(value: string): string | undefined {
  if (value.length % 4 !== 0 || !BASE64_RE.test(value)) return undefined;
  const bytes = Buffer.from(value, 'base64');
  // Canonical only: re-encoding gives the same text, so stray characters cannot hide in padding.
  if (bytes.toString('base64') !== value) return undefined;
  const text = bytes.toString('latin1');
  return PRINTABLE_RE.test(text) ? text : undefined;
}

/**
 * True when `value` is base64 of `user:password` (Docker's `"auth"`, npm's `_auth`) with a
 * generated-looking password.
 */
export function isBasicAuthBase64(value: string): boolean {
  const text = decodePrintableBase64(value);
  if (text === undefined) return false;
  const colon = text.indexOf(':');
  return colon > 0 && looksGenerated(text.slice(colon + 1));
}

/** True when `value` is base64 of a generated-looking password (npm's `_password`). */
export function isPasswordBase64(value: string): boolean {
  const text = decodePrintableBase64(value);
  return text !== undefined && looksGenerated(text);
}

/** Claims that mark a token as a documentation sample (jwt.io's `John Doe`, `1234567890`). */
const SAMPLE_CLAIMS_RE = /example|john doe|jane doe|1234567890/i;

function decodeJsonObject(part: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * True for a signed JWT: the header decodes to a JSON object naming a signing `alg` (not
 * `none`), the claims decode to a JSON object that is not a documentation sample, and the
 * signature is not a placeholder run.
 */
export function isSignedJwt(header: string, claims: string, signature: string): boolean {
  const alg = decodeJsonObject(header)?.alg;
  if (typeof alg !== 'string' || alg.toLowerCase() === 'none') return false;
  const body = decodeJsonObject(claims);
  return body !== undefined && !SAMPLE_CLAIMS_RE.test(JSON.stringify(body)) && !looksLikePlaceholder(signature);
}

const PRIVATE_KEY_HEADER_RE = /^-----BEGIN (?:[A-Z0-9]{1,16} ){0,4}PRIVATE KEY(?: BLOCK)?-----/;

/** True when `value` (base64, a multiple of 4 characters) decodes to a private-key PEM header and a key body. */
export function isBase64PrivateKey(value: string): boolean {
  const text = Buffer.from(value, 'base64').toString('latin1');
  const header = PRIVATE_KEY_HEADER_RE.exec(text);
  if (header === null) return false;
  // The body follows on the next lines, after any armor headers; 40 base64 characters prove it.
  return /(?:^|\n)[A-Za-z0-9+/]{40}/.test(text.slice(header[0].length));
}
