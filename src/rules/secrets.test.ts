import { describe, expect, it } from 'vitest';
import {
  ALNUM,
  credentialSamples,
  DIGITS,
  holdfastTokenLookAlikes,
  holdfastTokenSamples,
  LOWER,
  rng,
  UPPER,
} from '../../test/support/secret-samples.js';
import { MAX_SECRET_SPAN_BYTES, SECRET_RULES } from './secret-rules.js';
import { createSecretScanner, findSecret, SECRET_RULE_IDS, SECRET_SCAN_OVERLAP_BYTES, type SecretFinding } from './secrets.js';

// Every credential-shaped string is assembled at run time from pieces and seeded random
// characters, so this file holds no literal token for a secret scanner (ours included) to flag.

const B64 = `${ALNUM}+/`;

let seed = 1;
function random(alphabet: string, length: number): string {
  const next = rng(seed++);
  let out = '';
  for (let i = 0; i < length; i += 1) out += alphabet[next() % alphabet.length];
  return out;
}

function pemBlock(kind: string, lines = 6): string {
  const body = Array.from({ length: lines }, () => random(B64, 64)).join('\n');
  return `-----BEGIN ${kind}-----\n${body}\n-----END ${kind}-----\n`;
}

const PRIVATE = ['PRIVATE', 'KEY'].join(' ');

/** `[rule, secret]`: each must be found at its first byte. */
const POSITIVES: readonly (readonly [string, string])[] = [
  ['pem-private-key', pemBlock(`RSA ${PRIVATE}`)],
  ['pem-private-key', pemBlock(`EC ${PRIVATE}`)],
  ['pem-private-key', pemBlock(`DSA ${PRIVATE}`)],
  ['pem-private-key', pemBlock(`OPENSSH ${PRIVATE}`)],
  ['pem-private-key', pemBlock(`ENCRYPTED ${PRIVATE}`)],
  ['pem-private-key', pemBlock(PRIVATE)],
  [
    'pem-private-key',
    `-----BEGIN RSA ${PRIVATE}-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,${random('0123456789ABCDEF', 32)}\n\n${random(B64, 64)}\n`,
  ],
  // A key pasted into JSON or a JS string keeps its newlines as `\n` escapes.
  ['pem-private-key', `-----BEGIN ${PRIVATE}-----\\n${random(B64, 64)}\\n${random(B64, 64)}\\n`],
  ['pgp-private-key', `-----BEGIN PGP ${PRIVATE} BLOCK-----\nVersion: GnuPG v2\n\n${random(B64, 64)}\n${random(B64, 64)}\n`],
  ['aws-access-key-id', `AK${'IA'}${random(UPPER + DIGITS, 16)}`],
  ['aws-access-key-id', `AS${'IA'}${random(UPPER + DIGITS, 16)}`],
  ['aws-secret-access-key', `aws_secret_access_key = ${random(`${ALNUM}/+`, 40)}`],
  ['aws-secret-access-key', `AWS_SECRET_ACCESS_KEY=${random(`${ALNUM}/+`, 40)}`],
  ['aws-secret-access-key', `aws_secret_access_key": "${random(`${ALNUM}/+`, 40)}"`],
  ...['p', 'o', 'u', 's', 'r'].map((k) => ['github-token', `gh${k}_${random(ALNUM, 36)}`] as const),
  ['github-fine-grained-token', `github_${'pat'}_${random(ALNUM, 22)}_${random(ALNUM, 59)}`],
  ['gitlab-token', `gl${'pat'}-${random(ALNUM, 20)}`],
  ['slack-token', `xo${'xb'}-${random(DIGITS, 12)}-${random(DIGITS, 13)}-${random(ALNUM, 24)}`],
  ['slack-token', `xo${'xp'}-${random(DIGITS, 10)}-${random(DIGITS, 10)}-${random(DIGITS, 11)}-${random('0123456789abcdef', 32)}`],
  ['google-api-key', `AI${'za'}${random(`${ALNUM}_-`, 35)}`],
  ['stripe-live-key', `s${'k_live'}_${random(ALNUM, 24)}`],
  ['stripe-live-key', `r${'k_live'}_${random(ALNUM, 99)}`],
  ['npm-token', `np${'m'}_${random(ALNUM, 36)}`],
  ['openai-api-key', `s${'k-proj'}-${random(`${ALNUM}_-`, 156)}`],
  ['openai-api-key', `s${'k-svcacct'}-${random(`${ALNUM}_-`, 120)}`],
  ['openai-api-key', `s${'k'}-${random(ALNUM, 20)}T3BlbkFJ${random(ALNUM, 20)}`],
  ['anthropic-api-key', `s${'k-ant'}-api03-${random(`${ALNUM}_-`, 93)}AA`],
  ['huggingface-token', `h${'f'}_${random(UPPER + LOWER, 34)}`],
  ...holdfastTokenSamples(),
  ...credentialSamples(),
];

/** Text that looks close to a secret but is not one. */
const NEAR_MISSES: readonly (readonly [string, string])[] = [
  ['public key', pemBlock('PUBLIC KEY')],
  ['RSA public key', pemBlock('RSA PUBLIC KEY')],
  ['certificate', pemBlock('CERTIFICATE')],
  ['certificate request', pemBlock('CERTIFICATE REQUEST')],
  ['ssh public key line', `ssh-ed25519 ${random(B64, 68)} user@host`],
  ['PEM header quoted in code', `if (text.startsWith('-----BEGIN RSA ${PRIVATE}-----')) return parse(text);\n// ...\n`],
  ['AWS documentation key id', `AK${'IA'}IOSFODNN7EXAMPLE`],
  ['AWS documentation secret', `aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`],
  ['AWS key id inside a longer word', `X${'AK'}IA${random(UPPER + DIGITS, 16)}`],
  ['AWS key id too long', `AK${'IA'}${random(UPPER + DIGITS, 17)}`],
  ['aws secret of the wrong length', `aws_secret_access_key = ${random(ALNUM, 39)}`],
  ['github token too short', `gh${'p'}_${random(ALNUM, 35)}`],
  ['github token placeholder', `gh${'p'}_${'x'.repeat(36)}`],
  ['github token sequence placeholder', `gh${'p'}_1234567890${random(ALNUM, 26)}`],
  ['github prefix inside a word', `xgh${'p'}_${random(ALNUM, 36)}`],
  ['gitlab token too short', `gl${'pat'}-${random(ALNUM, 19)}`],
  ['slack placeholder', `xo${'xb'}-your-bot-token-here`],
  ['google key too short', `AI${'za'}${random(ALNUM, 34)}`],
  ['stripe test key', `s${'k_test'}_${random(ALNUM, 24)}`],
  ['npm token too long', `np${'m'}_${random(ALNUM, 37)}`],
  ['npm config variable', 'npm_config_cache_folder_for_tests_and_more_words_here'],
  ['openai legacy key too short', `s${'k'}-${random(ALNUM, 47)}`],
  ['css class', `.task-${random(LOWER, 48)} { color: red }`],
  ['huggingface token with digits', `h${'f'}_${random(DIGITS, 34)}`],
  ['python identifier', `hf_hub_download(repo_id="${random(LOWER, 20)}")`],
  ...holdfastTokenLookAlikes(),
];

function embed(secret: string, before = 'config:\n  value: "', after = '"\n  next: 1\n'): { bytes: Buffer; offset: number } {
  return { bytes: Buffer.from(before + secret + after, 'latin1'), offset: before.length };
}

function scanInChunks(bytes: Uint8Array, sizes: () => number): SecretFinding | undefined {
  const scanner = createSecretScanner();
  for (let at = 0; at < bytes.length; ) {
    const size = Math.max(1, sizes());
    const found = scanner.push(bytes.subarray(at, at + size));
    if (found !== undefined) return found;
    at += size;
  }
  return scanner.end();
}

describe('findSecret', () => {
  it.each(POSITIVES.map(([rule, secret], i) => [rule, i, secret] as const))('finds %s (case %i) at its first byte', (rule, _i, secret) => {
    const { bytes, offset } = embed(secret);
    expect(findSecret(bytes)).toEqual({ rule, offset });
    expect(findSecret(Buffer.from(secret, 'latin1'))).toEqual({ rule, offset: 0 });
  });

  it.each(NEAR_MISSES)('ignores a %s', (_what, text) => {
    expect(findSecret(embed(text).bytes)).toBeUndefined();
  });

  it('covers every rule with a positive case', () => {
    expect(new Set(POSITIVES.map(([rule]) => rule))).toEqual(new Set(SECRET_RULE_IDS));
  });

  it('gives a short input (its anchors looked for first) the answer the full scan of every group gives', () => {
    // Up to 256 bytes, groups whose anchor's first byte is absent are skipped; a prefix of
    // spaces (no anchor, no word byte) pushes the same text onto the path that runs every group.
    const pad = ' '.repeat(300);
    const texts = [...POSITIVES.map(([, secret]) => secret), ...NEAR_MISSES.map(([, text]) => text)].filter((t) => t.length <= 200);
    expect(texts.length).toBeGreaterThan(POSITIVES.length / 2);
    for (const text of texts) {
      const short = findSecret(Buffer.from(text, 'latin1'));
      const long = findSecret(Buffer.from(pad + text, 'latin1'));
      expect(long === undefined ? undefined : { ...long, offset: long.offset - pad.length }).toEqual(short);
    }
    expect(texts.some((t) => findSecret(Buffer.from(t, 'latin1')) !== undefined)).toBe(true);
  });

  it('finds nothing in random binary data', () => {
    const next = rng(42);
    const bytes = new Uint8Array(4 * 1024 * 1024);
    for (let i = 0; i < bytes.length; i += 4) new DataView(bytes.buffer).setUint32(i, next());
    expect(findSecret(bytes)).toBeUndefined();
  });

  it('finds secrets next to runs of their anchor bytes', () => {
    const pem = pemBlock(`RSA ${PRIVATE}`);
    const dashes = Buffer.from(`${'-'.repeat(40)}\n--${pem}`);
    expect(findSecret(dashes)).toEqual({ rule: 'pem-private-key', offset: 43 });
    const token = `gh${'o'}_${random(ALNUM, 36)}`;
    expect(findSecret(Buffer.from(`${'_'.repeat(30)}${token}`))).toEqual({ rule: 'github-token', offset: 30 });
    expect(findSecret(Buffer.from(`${'_'.repeat(30)}${token.slice(0, 3)}${'_'.repeat(5)}`))).toBeUndefined();
  });

  it('reports the earliest of several secrets', () => {
    const late = `gh${'p'}_${random(ALNUM, 36)}`;
    const early = `np${'m'}_${random(ALNUM, 36)}`;
    const text = `a = "${late}"`;
    const bytes = Buffer.from(`x = "${early}"\n${text}\n${pemBlock(`RSA ${PRIVATE}`)}`);
    expect(findSecret(bytes)).toEqual({ rule: 'npm-token', offset: 5 });
  });

  it('accepts a plain Uint8Array view at an offset', () => {
    const { bytes, offset } = embed(`gl${'pat'}-${random(ALNUM, 20)}`);
    const backing = new Uint8Array(bytes.length + 10);
    backing.set(bytes, 10);
    expect(findSecret(backing.subarray(10))).toEqual({ rule: 'gitlab-token', offset });
  });

  it('reads no rule further than the scan overlap allows', () => {
    for (const rule of SECRET_RULES) expect(rule.spanBytes).toBeLessThanOrEqual(MAX_SECRET_SPAN_BYTES);
    expect(SECRET_SCAN_OVERLAP_BYTES).toBeGreaterThan(MAX_SECRET_SPAN_BYTES);
  });
});

describe('createSecretScanner', () => {
  it('finds a secret split between two chunks at every possible cut', () => {
    const samples = [
      'pem-private-key',
      'aws-secret-access-key',
      'github-token',
      'slack-token',
      'holdfast-token',
      'holdfast-legacy-token',
    ].map((id) => POSITIVES.find(([rule]) => rule === id));
    // Both prefix lengths matter: the scanner merges small pushes and scans large ones in place.
    for (const [[rule, secret], prefix] of samples.flatMap((s) => (s === undefined ? [] : [[s, 700] as const, [s, 3000] as const]))) {
      const { bytes, offset } = embed(secret, `${'x'.repeat(prefix)}=`);
      for (let cut = offset - 2; cut <= offset + secret.length + 2; cut += 1) {
        const scanner = createSecretScanner();
        const found = scanner.push(bytes.subarray(0, cut)) ?? scanner.push(bytes.subarray(cut)) ?? scanner.end();
        expect(found, `cut at ${cut}`).toEqual({ rule, offset });
      }
    }
  });

  it('gives the same answer as findSecret however the stream is split', () => {
    const next = rng(7);
    const filler = (n: number): string => random(`${ALNUM} \n_-=:"`, n);
    for (let round = 0; round < 40; round += 1) {
      const [, secret] = POSITIVES[next() % POSITIVES.length] ?? ['', ''];
      const [, miss] = NEAR_MISSES[next() % NEAR_MISSES.length] ?? ['', ''];
      const bytes = Buffer.from(
        filler(next() % 3000) + miss + filler(next() % 2000) + (round % 4 === 0 ? '' : secret) + filler(next() % 3000),
      );
      const expected = findSecret(bytes);
      const sizes = [() => 1 + (next() % 64), () => 1 + (next() % 1500), () => 1024 + (next() % 4096), () => 1 << 20];
      for (const size of sizes) expect(scanInChunks(bytes, size)).toEqual(expected);
    }
  });

  it('keeps its own copy of held-back bytes, so callers may reuse their read buffer', () => {
    const { bytes, offset } = embed(`gh${'s'}_${random(ALNUM, 36)}`, `${'y'.repeat(3000)} `);
    const scanner = createSecretScanner();
    const reused = Buffer.alloc(1000);
    let found: SecretFinding | undefined;
    for (let at = 0; at < bytes.length && found === undefined; at += reused.length) {
      const n = bytes.copy(reused, 0, at, at + reused.length);
      found = scanner.push(reused.subarray(0, n));
      reused.fill(0x41);
    }
    expect(found ?? scanner.end()).toEqual({ rule: 'github-token', offset });
  });

  it('keeps returning its finding once it has one, and nothing for a clean or empty stream', () => {
    const scanner = createSecretScanner();
    const { bytes } = embed(`AI${'za'}${random(ALNUM, 35)}`, `${'z'.repeat(4999)} `, `"${'z'.repeat(2000 + SECRET_SCAN_OVERLAP_BYTES)}`);
    const first = scanner.push(bytes);
    expect(first).toEqual({ rule: 'google-api-key', offset: 5000 });
    expect(scanner.push(Buffer.from('more'))).toEqual(first);
    expect(scanner.end()).toEqual(first);
    expect(createSecretScanner().end()).toBeUndefined();
    const clean = createSecretScanner();
    expect(clean.push(new Uint8Array(0)) ?? clean.push(Buffer.from('hello world')) ?? clean.end()).toBeUndefined();
  });
});
