/**
 * Realistic credentials generated at run time from a seeded stream, and look-alikes that are
 * not credentials. Nothing token-shaped is written literally here: prefixes are assembled
 * from pieces, so neither GitHub push protection nor Holdfast's own rules flag this file.
 */
import { TOKEN_RANDOM_CHARS, tokenChecksum } from '../../src/rules/token-format.js';

/** Deterministic xorshift32 stream, so failures reproduce. */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

export const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
export const LOWER = 'abcdefghijklmnopqrstuvwxyz';
export const DIGITS = '0123456789';
export const ALNUM = UPPER + LOWER + DIGITS;
export const HEX = '0123456789abcdef';
const B64URL = `${ALNUM}_-`;

/** Random strings over an alphabet, from one seeded stream per generator. */
export function generator(seed: number): (alphabet: string, length: number) => string {
  const next = rng(seed);
  return (alphabet, length) => {
    let out = '';
    for (let i = 0; i < length; i += 1) out += alphabet[next() % alphabet.length];
    return out;
  };
}

const random = generator(20261201);
const b64 = (text: string): string => Buffer.from(text).toString('base64');
const b64url = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
/** A password as a generator makes it: letters and digits, always both. */
const password = (): string => `${random(ALNUM, 18)}${random(DIGITS, 2)}${random(LOWER, 2)}`;
const uuid = (): string => [8, 4, 4, 4, 12].map((n) => random(HEX, n)).join('-');
const PRIVATE = ['PRIVATE', 'KEY'].join(' ');
/** An environment reference as shells and npm write it: `${NAME}`. */
const ref = (name: string): string => `\${${name}}`;

/** A PEM block of `kind` with a random body. */
export function pemBlock(kind: string, lines = 6): string {
  const body = Array.from({ length: lines }, () => random(`${ALNUM}+/`, 64)).join('\n');
  return `-----BEGIN ${kind}-----\n${body}\n-----END ${kind}-----\n`;
}

/** A Kubernetes service-account token: RS256, a key id, the bound-token claims, a 2048-bit signature. */
export function serviceAccountJwt(): string {
  const header = b64url({ alg: 'RS256', kid: random(B64URL, 43) });
  const issued = 1_760_000_000 + (Number.parseInt(random(DIGITS, 6), 10) % 1_000_000);
  const claims = b64url({
    aud: ['https://kubernetes.default.svc.cluster.local'],
    exp: issued + 3600,
    iat: issued,
    iss: 'https://kubernetes.default.svc.cluster.local',
    'kubernetes.io': { namespace: 'build', serviceaccount: { name: 'builder', uid: uuid() } },
    sub: 'system:serviceaccount:build:builder',
  });
  return `${header}.${claims}.${random(B64URL, 342)}`;
}

/** Seeded apart from the other samples, so adding Holdfast's tokens moved none of them. */
const randomHoldfast = generator(20260424);

/**
 * A Holdfast token in the current format (`holdfast_` + 43 base62 + its CRC32 suffix, see
 * `src/rules/token-format.ts`), as `generateToken` mints it, but reproducible.
 */
export function holdfastToken(): string {
  const body = randomHoldfast(ALNUM, TOKEN_RANDOM_CHARS);
  return `hold${'fast'}_${body}${tokenChecksum(body)}`;
}

/** A Holdfast token of the format before it: `hf_` + 43 base64url characters (32 random bytes). */
export function legacyHoldfastToken(): string {
  return `h${'f'}_${randomHoldfast(B64URL, 43)}`;
}

/** `[rule, text]` for Holdfast's own tokens, both formats, found at the offset of `text`'s first byte. */
export function holdfastTokenSamples(): ReadonlyArray<readonly [string, string]> {
  return [
    ['holdfast-token', holdfastToken()],
    // Printed with no separator after it: the checksum, not a word boundary, ends the token.
    ['holdfast-token', `${holdfastToken()}Z9`],
    ['holdfast-legacy-token', legacyHoldfastToken()],
    // Base64url may begin with the letters a Hugging Face token is made of; 43 characters still make it Holdfast's.
    ['holdfast-legacy-token', `h${'f'}_${randomHoldfast(UPPER + LOWER, 34)}-${randomHoldfast(B64URL, 8)}`],
  ];
}

/** `[what, text]`: strings close to a Holdfast token that no rule may match. */
export function holdfastTokenLookAlikes(): ReadonlyArray<readonly [string, string]> {
  const token = holdfastToken();
  const body = token.slice(-49, -6);
  const wrongSum = `${token.slice(0, -1)}${token.endsWith('0') ? '1' : '0'}`;
  return [
    ['a Holdfast token with a wrong checksum', wrongSum],
    ['a Holdfast token cut short', token.slice(0, -1)],
    ['the Holdfast prefix and a word', `hold${'fast'}_${body}`],
    ['a legacy token one character short', legacyHoldfastToken().slice(0, -1)],
    ['a legacy token one character long', `${legacyHoldfastToken()}A`],
    ['a long snake_case identifier after hf_', `h${'f'}_hub_download_with_retries_and_long_suffix_x`],
    ['an upper-case constant after hf_', `h${'f'}_HUB_DOWNLOAD_WITH_RETRIES_AND_LONG_SUFFIX_X`],
  ];
}

/** `[rule, text]`: each text holds one credential, found by `rule` at the offset of `text`'s first byte. */
export function credentialSamples(): ReadonlyArray<readonly [string, string]> {
  const hs256 = `${b64url({ alg: 'HS256', typ: 'JWT' })}.${b64url({ sub: uuid(), iat: 1_760_000_000, scope: 'api' })}.${random(B64URL, 43)}`;
  return [
    ['jwt', serviceAccountJwt()],
    ['jwt', hs256],
    ['base64-private-key', b64(pemBlock(`RSA ${PRIVATE}`))],
    ['base64-private-key', b64(pemBlock(`EC ${PRIVATE}`, 3))],
    ['base64-private-key', b64(pemBlock(PRIVATE, 20))],
    ['aws-secret-access-key', `SecretAccessKey": "${random(`${ALNUM}/+`, 40)}"`],
    ['aws-secret-access-key', `secretAccessKey: '${random(`${ALNUM}/+`, 40)}'`],
    ['docker-auth', `"auth": "${b64(`ci-bot:${password()}`)}"`],
    ['docker-auth', `"auth":"${b64(`_json_key:${password()}${password()}`)}"`],
    [
      'slack-webhook',
      `https://hooks.${'slack'}.com/services/T${random(UPPER + DIGITS, 9)}/B${random(UPPER + DIGITS, 11)}/${random(ALNUM, 24)}`,
    ],
    ['url-password', `postgres://app:${password()}@db.internal:5432/app`],
    ['url-password', `mongodb+srv://svc-${random(LOWER, 4)}:${password()}@cluster0.${random(LOWER, 5)}.mongodb.net/prod`],
    ['url-password', `https://deploy:${password()}@git.internal/team/repo.git`],
    // A token as the whole userinfo, as GitHub and others accept it in a remote URL.
    ['url-password', `https://${random(HEX, 40)}@github.example.com/team/repo.git`],
    ['url-password', `redis://:${password()}@cache:6379/0`],
    ['npmrc-auth', `_authToken=${uuid()}`],
    ['npmrc-auth', `_authToken = "${random(ALNUM, 40)}${random(DIGITS, 3)}"`],
    ['npmrc-auth', `_auth=${b64(`builder:${password()}`)}`],
    ['npmrc-auth', `_password=${b64(password())}`],
    ['google-oauth-refresh-token', `refresh_token": "1//0${random(B64URL, 100)}"`],
    ['google-oauth-client-secret', `GOC${'SPX'}-${random(B64URL, 28)}`],
    ['pypi-token', `py${'pi'}-AgEI${'cHlwaS5vcmc'}${random(B64URL, 160)}`],
    ['pypi-token', `py${'pi'}-AgEN${'dGVzdC5weXBpLm9yZw'}${random(B64URL, 150)}`],
    ['age-secret-key', `AGE-${'SECRET-KEY'}-1${random('QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L', 58)}`],
    ['slack-app-token', `xa${'pp'}-1-A${random(UPPER + DIGITS, 10)}-${random(DIGITS, 13)}-${random(HEX, 64)}`],
    ['shopify-token', `shp${'at'}_${random(HEX, 32)}`],
    ['digitalocean-token', `do${'p'}_v1_${random(HEX, 64)}`],
    ['http-authorization', `AUTHORIZATION: basic ${b64(`x-access-token:gh${'s'}_${random(ALNUM, 36)}`)}`],
    ['http-authorization', `Authorization: Bearer ${random(ALNUM, 30)}${random(DIGITS, 4)}`],
    ['http-authorization', `Authorization": "Basic ${b64(`deploy:${password()}`)}"`],
    // git config spellings git reads as the same header: a quoted credential, continuation lines, GitHub's `token` scheme.
    ['http-authorization', `AUTHORIZATION: basic "${b64(`x-access-token:${password()}`)}"`],
    ['http-authorization', `Authorization: Basic" ${b64(`x-access-token:${password()}`)}`],
    ['http-authorization', `Authorization: Basic\\\n ${b64(`x-access-token:${password()}`)}`],
    ['http-authorization', `Authorization:\\\n\tBearer ${random(ALNUM, 30)}${random(DIGITS, 4)}`],
    ['http-authorization', `AUTHORIZATION: token ${random(HEX, 40)}`],
    ['git-extraheader', `extraheader = PRIVATE-TOKEN: gl${'pat'}x${random(ALNUM, 18)}${random(DIGITS, 2)}`],
    ['git-extraheader', `extraHeader = "X-Auth-Token: ${random(HEX, 40)}"`],
    ['git-extraheader', `EXTRAHEADER = Cookie: session=${random(ALNUM, 30)}${random(DIGITS, 4)}`],
    ['git-extraheader', `extraheader = AUTHORIZATION: negotiate ${b64(`oauth2:${password()}`)}`],
    ['git-extraheader', `ExtraHeader = X-Custom:\\\n ${random(ALNUM, 30)}${random(DIGITS, 4)}`],
  ];
}

/** `[what, text]`: credential look-alikes (placeholders, environment references, samples) no rule may match. */
export function credentialLookAlikes(): ReadonlyArray<readonly [string, string]> {
  const sampleJwt = `${b64url({ alg: 'HS256', typ: 'JWT' })}.${b64url({ sub: '1234567890', name: 'John Doe', iat: 1516239022 })}.${random(B64URL, 43)}`;
  return [
    ['the jwt.io sample token', sampleJwt],
    ['an unsigned JWT', `${b64url({ alg: 'none' })}.${b64url({ sub: uuid() })}.${random(B64URL, 20)}`],
    ['base64 JSON without alg', `${b64url({ typ: 'JWT' })}.${b64url({ sub: uuid() })}.${random(B64URL, 43)}`],
    ['a base64 source map', `//# sourceMappingURL=data:application/json;base64,${b64(JSON.stringify({ version: 3, sources: ['a.ts'] }))}`],
    ['a base64 public key', b64(pemBlock('PUBLIC KEY'))],
    ['a base64 certificate', b64(pemBlock('CERTIFICATE'))],
    ['the AWS documentation secret in JSON', `"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"`],
    ['an SDK config reading the environment', 'secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY,'],
    ['a docker auth of username:password', `"auth": "${b64('username:password')}"`],
    ['a docker auth scheme name', '"auth": "bearer"'],
    ['the Slack documentation webhook', `https://hooks.${'slack'}.com/services/T00000000/B00000000/${'X'.repeat(24)}`],
    ['a URL with a documentation password', 'postgres://user:password@localhost:5432/db'],
    ['a URL with a numbered placeholder', 'mysql://root:changeme123@127.0.0.1/app'],
    ['a URL with a counted documentation key', 'dotenv://:key_1234@dotenvx.com/vault/.env.vault?environment=development'],
    [
      'a URL with template passwords',
      `https://${ref('USER')}:${ref('PASS')}@host/ and redis://:<password>@localhost and http://u:{{ pw }}@h`,
    ],
    ['a URL with a printf password', 'amqp://guest:%s@broker:5672/'],
    ['a URL without userinfo', 'https://registry.npmjs.org:443/some-package/-/some-package-1.2.3.tgz'],
    ['an ssh URL with only a user', 'git+ssh://git@github.com/owner/repo.git'],
    ['a short URL password', 'ftp://anonymous:a1b2@ftp.host/'],
    ['an npmrc environment reference', `//registry.npmjs.org/:_authToken=${ref('NPM_TOKEN')}\n_authToken=$NPM_TOKEN\n`],
    ['an npmrc placeholder', '//registry.npmjs.org/:_authToken=YOUR_NPM_TOKEN_GOES_HERE\n'],
    ['code assigning an auth token', 'this._authToken = options.authToken;\nself._password = password\n'],
    ['npmrc auth references', `_auth=${ref('NPM_AUTH')}\n_password=${ref('NPM_PASSWORD')}\n`],
    ['a refresh token placeholder', `refresh_token": "1//${'x'.repeat(60)}" and refresh_token: "REFRESH_TOKEN"`],
    ['a client secret placeholder', `GOC${'SPX'}-${'x'.repeat(28)}`],
    ['a pypi token prefix alone', `py${'pi'}-AgEI${'cHlwaS5vcmc'}`],
    ['a documentation basic header', `Authorization: Basic ${b64('username:password')}`],
    ['a bearer header reading a variable', `Authorization: Bearer ${ref('TOKEN')} and "Authorization": "Bearer <token>"`],
    ['an auth header scheme alone', 'WWW-Authenticate: Basic realm="git" and Authorization: Basic'],
    ['a git extraheader without a credential', 'extraheader = X-Request-Source: holdfast-ci and extraHeader = Accept: application/json'],
    ['a git extraheader reading a variable', `extraheader = X-Token: ${ref('TOKEN')}`],
    ['code naming an extraHeader', 'const extraHeader = { name: value };'],
  ];
}
