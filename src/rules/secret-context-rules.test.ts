import { describe, expect, it } from 'vitest';
import { credentialLookAlikes, credentialSamples, serviceAccountJwt } from '../../test/support/secret-samples.js';
import { CONTEXT_RULE_SPECS } from './secret-context-rules.js';
import { createSecretScanner, findSecret } from './secrets.js';

// Credentials recognised by a key name or a decoded structure, generated at run time (see
// test/support/secret-samples.ts): each is found at its first byte, however it is embedded
// or split, and no placeholder, environment reference or documentation sample is.

const SECRETS = credentialSamples();

function embed(secret: string, before = 'config:\n  value: "', after = '"\n  next: 1\n'): { bytes: Buffer; offset: number } {
  return { bytes: Buffer.from(before + secret + after, 'latin1'), offset: before.length };
}

describe('context and structure rules', () => {
  it.each(SECRETS.map(([rule, secret], i) => [rule, i, secret] as const))('finds %s (case %i) at its first byte', (rule, _i, secret) => {
    const { bytes, offset } = embed(secret);
    expect(findSecret(bytes)).toEqual({ rule, offset });
    expect(findSecret(Buffer.from(secret, 'latin1'))).toEqual({ rule, offset: 0 });
  });

  it.each(credentialLookAlikes())('ignores %s', (_what, text) => {
    expect(findSecret(embed(text).bytes)).toBeUndefined();
  });

  it('covers every context rule with a generated credential', () => {
    const covered = new Set(SECRETS.map(([rule]) => rule));
    for (const spec of CONTEXT_RULE_SPECS) expect(covered, spec.id).toContain(spec.id);
  });

  it('finds credentials in the files that carry them', () => {
    const token = serviceAccountJwt();
    const kubeconfig = `apiVersion: v1\nkind: Config\nusers:\n- name: builder\n  user:\n    token: ${token}\n`;
    expect(findSecret(Buffer.from(kubeconfig))).toEqual({ rule: 'jwt', offset: kubeconfig.indexOf(token) });
    const [, key] = SECRETS.find(([rule]) => rule === 'base64-private-key') ?? ['', ''];
    const clientKey = `users:\n- name: admin\n  user:\n    client-certificate-data: ${Buffer.from('cert').toString('base64')}\n    client-key-data: ${key}\n`;
    expect(findSecret(Buffer.from(clientKey))?.rule).toBe('base64-private-key');
    const [, auth] = SECRETS.find(([rule]) => rule === 'docker-auth') ?? ['', ''];
    const docker = `{\n  "auths": {\n    "registry.internal:5000": {\n      ${auth}\n    }\n  }\n}\n`;
    expect(findSecret(Buffer.from(docker))?.rule).toBe('docker-auth');
    const [, npm] = SECRETS.find(([rule]) => rule === 'npmrc-auth') ?? ['', ''];
    const npmrc = `registry=https://registry.npmjs.org/\n//registry.npmjs.org/:${npm}\nalways-auth=true\n`;
    expect(findSecret(Buffer.from(npmrc))).toEqual({ rule: 'npmrc-auth', offset: npmrc.indexOf(npm) });
  });

  it('finds a long token split between two chunks at every cut', () => {
    for (const rule of ['jwt', 'url-password', 'npmrc-auth']) {
      const [, secret] = SECRETS.find(([r]) => r === rule) ?? ['', ''];
      const { bytes, offset } = embed(secret, `${'x'.repeat(9000)}=`);
      for (let cut = offset - 40; cut <= offset + secret.length + 2; cut += 7) {
        const scanner = createSecretScanner();
        const found = scanner.push(bytes.subarray(0, cut)) ?? scanner.push(bytes.subarray(cut)) ?? scanner.end();
        expect(found, `${rule} cut at ${cut}`).toEqual({ rule, offset });
      }
    }
  });

  it('finds nothing in input built from anchor-shaped runs (the per-run work is bounded)', () => {
    // Before `runBytes`, every `eyJ` of `_eyJ_eyJ…` re-read up to 8 KiB: quadratic in the input.
    for (const unit of ['_eyJ', 'eyJ.', 'eyJ ', '"auth": "', 'http://a:', '_authToken=', 'LS0tLS1CRUdJTi ']) {
      expect(findSecret(Buffer.from(unit.repeat((1 << 20) / unit.length))), unit).toBeUndefined();
    }
  });
});
