/**
 * Content rules that recognise a credential by its context or structure rather than a
 * prefix of its own: a key name next to the value (`"SecretAccessKey": "…"`, `_authToken=`,
 * `"auth": "…"`, `refresh_token`), a URL's userinfo (`scheme://user:password@host`), or a
 * decoded structure (a JWT header naming its `alg`, base64 of a private-key PEM block). Each
 * runs a `check` on its match so that placeholders, environment references (`${NPM_TOKEN}`)
 * and documentation samples do not count. Anchors are bytes the prefix rules already scan for
 * (`_`) or three more (`:`, `J`, `=`), so the whole table costs three extra passes over the data
 * (`=` for git's `extraHeader`, about a 60% longer scan of minified JavaScript, where `=` is common).
 */
import type { RuleSpec } from './secret-rules.js';
import {
  isBase64PrivateKey,
  isBasicAuthBase64,
  isPasswordBase64,
  isSignedJwt,
  looksGenerated,
  looksLikeTokenValue,
} from './secret-values.js';

const UNDERSCORE = 0x5f;
const COLON = 0x3a;
const LETTER_J = 0x4a;
const EQUALS = 0x3d;

/** Longest JWT header and claims the rule reads; real ones (Kubernetes, Azure AD) stay well under. */
const JWT_HEADER_CHARS = 1000;
const JWT_CLAIMS_CHARS = 6000;
/** Signature characters that prove a JWT is signed (HS256 has 43, RS256 342). */
const JWT_SIGNATURE_CHARS = 16;
/** Base64 characters decoded to recognise a private-key block: header, armor lines and 40 body characters. */
const BASE64_KEY_CHARS = 256;
const URL_SCHEME_CHARS = 32;
const URL_USER_CHARS = 64;
const URL_PASSWORD_CHARS = 128;
/** Shortest userinfo that counts as a token on its own (GitHub's classic tokens have 40 hex digits; user names are shorter). */
const URL_TOKEN_USER_CHARS = 32;
const NPM_VALUE_CHARS = 512;
/** Longest credential of an `Authorization` header the rule reads (base64 of a long user and token). */
const AUTH_VALUE_CHARS = 1024;
/** The header name as tools spell it, bare or closing a quoted key (`"Authorization": …`). */
const AUTH_LEADS = ['authorization', 'Authorization', 'AUTHORIZATION'].flatMap((n) => [n, `${n}"`, `${n}'`]);

/** One blank between the parts of an `Authorization` header: a space, a tab, or a continuation line of git config (`\` and a line break). */
const AUTH_GAP = String.raw`(?:[ \t]|\\\r?\n)`;

/** Userinfo characters of a URL, stopping at anything that ends a URL in text or code. */
const USERINFO = String.raw`[^\s:@/?#"'<>\\\`]`;

/** Longest header name and value of a git `extraHeader` the rule reads. */
const EXTRAHEADER_NAME_CHARS = 64;
const EXTRAHEADER_VALUE_CHARS = 1024;
/**
 * `extraheader = "Name: [scheme ]value"` as git config writes it: the value is the last word
 * (group 1); quotes and continuation lines between the parts read as git reads them.
 */
const EXTRAHEADER_RE = new RegExp(
  `extraheader${AUTH_GAP}{0,8}=${AUTH_GAP}{0,8}"?[A-Za-z0-9_-]{1,${EXTRAHEADER_NAME_CHARS}}${AUTH_GAP}{0,8}:${AUTH_GAP}{0,8}(?:[A-Za-z]{1,16}${AUTH_GAP}{1,8})?"?([^\\s"\\\\;]{8,${EXTRAHEADER_VALUE_CHARS}})`,
  'iy',
);
const EXTRAHEADER_SPAN_BYTES =
  11 + 3 * 8 + 1 + 3 * 8 + 1 + EXTRAHEADER_NAME_CHARS + 3 * 8 + 1 + 3 * 8 + 16 + 3 * 8 + 1 + EXTRAHEADER_VALUE_CHARS + 1;
/** Whether an `extraHeader`'s value is a credential: generated-looking, or base64 of user:password. */
function extraHeaderCredential(m: RegExpExecArray): boolean {
  const value = m[1] as string;
  // A cookie's value follows its name: `session=<token>`.
  const cookie = /^[A-Za-z0-9_.-]{1,64}=(?!=)/.exec(value);
  const values = cookie === null ? [value] : [value, value.slice(cookie[0].length)];
  return values.some((v) => looksLikeTokenValue(v) || isBasicAuthBase64(v));
}

/** The context and structure rules, merged into `SECRET_RULES` by `secret-rules.ts`. */
export const CONTEXT_RULE_SPECS: readonly RuleSpec[] = [
  {
    // Kubernetes service-account tokens, OIDC ID tokens, API bearer tokens: header.claims.signature.
    id: 'jwt',
    anchor: LETTER_J,
    leads: ['ey'],
    pattern: new RegExp(
      `(eyJ[A-Za-z0-9_-]{4,${JWT_HEADER_CHARS}})\\.(eyJ[A-Za-z0-9_-]{4,${JWT_CLAIMS_CHARS}})\\.([A-Za-z0-9_-]{${JWT_SIGNATURE_CHARS}})`,
      'y',
    ),
    spanBytes: 3 + JWT_HEADER_CHARS + 1 + 3 + JWT_CLAIMS_CHARS + 1 + JWT_SIGNATURE_CHARS + 1,
    placeholders: false,
    runChars: `${'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'}_-.`,
    check: (m) => isSignedJwt(m[1] as string, m[2] as string, m[3] as string),
  },
  {
    // A private key stored base64-encoded: kubeconfig `client-key-data`, Kubernetes `tls.key`.
    // `LS0tLS1CRUdJTi` is base64 of `-----BEGIN `.
    id: 'base64-private-key',
    anchor: LETTER_J,
    leads: ['LS0tLS1CRUd'],
    follow: 'Ti',
    pattern: new RegExp(`LS0tLS1CRUdJTi[A-Za-z0-9+/]{90,${BASE64_KEY_CHARS - 14}}`, 'y'),
    spanBytes: BASE64_KEY_CHARS + 1,
    placeholders: false,
    check: (m) => isBase64PrivateKey(m[0].slice(0, m[0].length - (m[0].length % 4))),
  },
  {
    // The JSON and JavaScript spellings of an AWS secret key (`aws sts` output, SDK config).
    id: 'aws-secret-access-key',
    anchor: COLON,
    leads: ['SecretAccessKey"', "SecretAccessKey'", 'SecretAccessKey'].flatMap((l) => [l, `s${l.slice(1)}`]),
    pattern: /[Ss]ecretAccessKey["']?:[ \t]{0,8}["']([A-Za-z0-9/+]{40})["']/y,
    spanBytes: 15 + 2 + 8 + 1 + 40 + 1,
  },
  {
    // Docker's config.json (`"auths": {"registry": {"auth": "…"}}`): base64 of `user:password`.
    id: 'docker-auth',
    anchor: COLON,
    leads: ['"auth"'],
    pattern: /"auth":[ \t]{0,8}"([A-Za-z0-9+/]{8,600}={0,2})"/y,
    spanBytes: 7 + 8 + 1 + 602 + 1,
    placeholders: false,
    check: (m) => isBasicAuthBase64(m[1] as string),
  },
  {
    id: 'slack-webhook',
    anchor: COLON,
    leads: ['https'],
    follow: '//hooks.slack.com/',
    pattern: /https:\/\/hooks\.slack\.com\/services\/T[A-Z0-9]{8,12}\/B[A-Z0-9]{8,12}\/([A-Za-z0-9]{24})(?![A-Za-z0-9])/y,
    spanBytes: 34 + 13 + 13 + 24 + 1,
  },
  {
    // `scheme://user:password@host` with a generated-looking password; `user:password@`,
    // `${PASS}` and friends are documentation. A userinfo without a password counts when it is
    // itself a generated token of at least URL_TOKEN_USER_CHARS (`https://<token>@github.com/…`).
    id: 'url-password',
    anchor: COLON,
    leads: [''],
    follow: '//',
    schemeBytes: URL_SCHEME_CHARS,
    pattern: new RegExp(
      `[A-Za-z][A-Za-z0-9+.-]{0,${URL_SCHEME_CHARS - 1}}://(${USERINFO}{0,${URL_USER_CHARS}})(?::(${USERINFO}{1,${URL_PASSWORD_CHARS}}))?@[A-Za-z0-9[]`,
      'y',
    ),
    spanBytes: URL_SCHEME_CHARS + 3 + URL_USER_CHARS + 1 + URL_PASSWORD_CHARS + 2 + 1,
    placeholders: false,
    check: (m) =>
      !/[$<>{}]/.test(m[1] as string) &&
      (m[2] === undefined ? (m[1] as string).length >= URL_TOKEN_USER_CHARS && looksLikeTokenValue(m[1] as string) : looksGenerated(m[2])),
  },
  {
    // `.npmrc`: `//registry/:_authToken=…`, `_auth=` (base64 of user:password), `_password=` (base64).
    id: 'npmrc-auth',
    anchor: UNDERSCORE,
    leads: [''],
    follow: 'auth',
    pattern: new RegExp(`_(authToken|auth)[ \\t]{0,8}=[ \\t]{0,8}["']?([^\\s"']{1,${NPM_VALUE_CHARS}})`, 'y'),
    spanBytes: 10 + 8 + 1 + 8 + 1 + NPM_VALUE_CHARS + 1,
    placeholders: false,
    check: (m) => (m[1] === 'auth' ? isBasicAuthBase64(m[2] as string) : looksLikeTokenValue(m[2] as string)),
  },
  {
    id: 'npmrc-auth',
    anchor: UNDERSCORE,
    leads: [''],
    follow: 'password',
    pattern: new RegExp(`_password[ \\t]{0,8}=[ \\t]{0,8}["']?([A-Za-z0-9+/=]{8,${NPM_VALUE_CHARS}})(?![^\\s"'])`, 'y'),
    spanBytes: 9 + 8 + 1 + 8 + 1 + NPM_VALUE_CHARS + 1,
    placeholders: false,
    check: (m) => isPasswordBase64(m[1] as string),
  },
  {
    // An HTTP `Authorization` header with its credential, wherever it is written down: git's
    // `http.extraheader = AUTHORIZATION: basic …` (actions/checkout: base64 of
    // `x-access-token:<token>`), `curl -H 'Authorization: Bearer …'`, a request dump, a JSON
    // header map. Basic counts when it decodes to `user:password` with a generated password,
    // Bearer (and GitHub's `token`) when the token looks generated. Between the parts, what git
    // config reads as nothing or as a space counts too: quotes and continuation lines (`\`
    // before a line break), so `Basic "…"` and `Basic\⏎ …` in a config file are found.
    id: 'http-authorization',
    anchor: COLON,
    leads: AUTH_LEADS,
    pattern: new RegExp(
      `authorization["']?:${AUTH_GAP}{0,8}["']?(basic|bearer|token)["']?${AUTH_GAP}{1,8}["']?([A-Za-z0-9+/._~_-]{8,${AUTH_VALUE_CHARS}}={0,2})`,
      'iy',
    ),
    spanBytes: 14 + 1 + 3 * 8 + 1 + 6 + 1 + 3 * 8 + 1 + AUTH_VALUE_CHARS + 2 + 1,
    placeholders: false,
    check: (m) => ((m[1] as string).toLowerCase() === 'basic' ? isBasicAuthBase64(m[2] as string) : looksLikeTokenValue(m[2] as string)),
  },
  {
    // Google OAuth refresh tokens (gcloud's application-default credentials) start `1//`.
    id: 'google-oauth-refresh-token',
    anchor: UNDERSCORE,
    leads: ['refresh'],
    follow: 'token',
    pattern: /refresh_token["']?[ \t]{0,8}[:=][ \t]{0,8}["']?1\/\/([A-Za-z0-9_-]{40,})/y,
    spanBytes: 13 + 1 + 8 + 1 + 8 + 1 + 3 + 41,
  },
  {
    // Any header git sends for every request (`http.extraHeader = <Name>: <credential>`, in a
    // workspace repository's `.git/config`): GitLab's `PRIVATE-TOKEN`, `X-Auth-Token`, a cookie,
    // or an `Authorization` scheme the rule above does not know. The key is what makes it a
    // credential, so the value counts when it looks generated or is base64 of user:password.
    // Git reads the key in any case; the leads are how git and tools write it, `=` the anchor.
    id: 'git-extraheader',
    anchor: EQUALS,
    leads: ['extraheader', 'extraHeader', 'EXTRAHEADER', 'ExtraHeader'].flatMap((k) => [k, `${k} `, `${k}\t`]),
    pattern: EXTRAHEADER_RE,
    spanBytes: EXTRAHEADER_SPAN_BYTES,
    placeholders: false,
    check: extraHeaderCredential,
  },
];
