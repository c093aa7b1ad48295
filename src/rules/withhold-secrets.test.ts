import { describe, expect, it } from 'vitest';
import { holdfastToken, legacyHoldfastToken } from '../../test/support/secret-samples.js';
import { withheldMarker, withholdSecrets } from './withhold-secrets.js';

// Assembled at run time, so this file holds no literal token for a scanner to flag.
const githubToken = `gh${'p'}_${'A1b2C3d4E5f6G7h8I9j0'.repeat(2).slice(0, 36)}`;

describe('withholdSecrets', () => {
  it('replaces exactly the strings that hold a credential, at any depth, and names the rule', () => {
    const answer = {
      turn: { id: 't1', seq: 3 },
      exit: 0,
      stdout: `token=${githubToken}\n`,
      stderr: 'fine',
      list: ['a', `x ${githubToken}`],
    };
    const { value, withheld } = withholdSecrets(answer);
    expect(value).toEqual({
      turn: { id: 't1', seq: 3 },
      exit: 0,
      stdout: withheldMarker('github-token'),
      stderr: 'fine',
      list: ['a', withheldMarker('github-token')],
    });
    expect(withheld).toEqual(['github-token', 'github-token']);
    expect(JSON.stringify(value)).not.toContain(githubToken);
  });

  it("withholds Holdfast's own tokens, both formats, wherever a turn or a setup command printed them", () => {
    const [token, legacy] = [holdfastToken(), legacyHoldfastToken()];
    const printed = { stdout: `HOLDFAST_RUN_TOKEN=${token}\n`, stderr: `curl: (22) token ${legacy} refused\n`, exit: 1 };
    const { value, withheld } = withholdSecrets(printed);
    expect(value).toEqual({ stdout: withheldMarker('holdfast-token'), stderr: withheldMarker('holdfast-legacy-token'), exit: 1 });
    expect(withheld).toEqual(['holdfast-token', 'holdfast-legacy-token']);
  });

  it('leaves a value without credentials as it was', () => {
    const plain = { a: [1, 'two', { three: null }], b: true };
    expect(withholdSecrets(plain)).toEqual({ value: plain, withheld: [] });
  });
});
