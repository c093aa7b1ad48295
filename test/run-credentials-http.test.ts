import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOKEN_PREFIX, tokenChecksum } from '../src/rules/token-format.js';
import { BACKENDS } from './support/backends.js';
import { legacyHoldfastToken } from './support/secret-samples.js';
import { openTestService, type TestService } from './support/service.js';

/** What a sandbox prints is not Holdfast's to keep: a credential in a failed setup's stderr is withheld. */
describe('a failed setup command that prints a credential (local-disk + sqlite)', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number]);
  });
  afterAll(() => svc?.close());

  it('a deployment carrying a credential in its setup is refused', async () => {
    const credential = `gh${'p'}_Zq9Xw8Vu7Ts6Rp5On4Ml3Kj2Ih1Gf0Qm7Rk2`;
    const refused = await svc.api('POST', '/v1/deployments', {
      provider: 'bwrap',
      setup: [['git', 'clone', `https://x:${credential}@github.com/a/b`]],
    });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe('SECRET_EXCLUDED');
    expect(JSON.stringify(refused.body)).not.toContain(credential);
  });

  it('fails the turn with SETUP_FAILED whose stderr tail, events and answer hold no credential', async () => {
    // Assembled at run time: no literal token in the source for a scanner to flag.
    const credential = `gh${'p'}_Zq9Xw8Vu7Ts6Rp5On4Ml3Kj2Ih1Gf0Qm7Rk2`;
    // The token is not in the deployment (that would be refused): the sandbox finds it and prints it.
    const setup = [['sh', '-c', `printf 'gh%s_%s\\n' p "$(echo Zq9Xw8Vu7Ts6Rp5On4Ml3Kj2Ih1Gf0Qm7Rk2)" >&2; exit 3`]];
    const deployment = await svc.api('POST', '/v1/deployments', { provider: 'bwrap', setup });
    expect(deployment.status).toBe(201);
    const run = await svc.api('POST', '/v1/runs', { deploymentId: deployment.body.id });
    const turn = await svc.api('POST', `/v1/runs/${run.body.id}/turns`, { argv: ['true'] });
    expect(turn.status).toBe(422);
    expect(turn.body.error.code).toBe('SETUP_FAILED');
    expect(turn.body.error.data.stderr).toBe('[withheld: held a credential (github-token)]');
    const events = await svc.api('GET', `/v1/runs/${run.body.id}/events`);
    expect(JSON.stringify(events.body)).toContain('SETUP_FAILED');
    for (const text of [JSON.stringify(turn.body), JSON.stringify(events.body)]) expect(text).not.toContain(credential);
  });
});

/** Holdfast's own tokens are credentials like any other: a deployment may not carry one, and a sandbox that prints one has it withheld. */
describe("Holdfast's own tokens in deployments and setup output (local-disk + sqlite)", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number]);
  });
  afterAll(() => svc?.close());

  it("an admin token (or an older hf_ token) in a deployment's env, setup or validate is refused with SECRET_EXCLUDED and shown to no one", async () => {
    const legacy = legacyHoldfastToken();
    // A random token sometimes holds a placeholder word ("bar", "foo"), which the Authorization
    // rule leaves to the token rule: a fixed one keeps the rule this attempt checks the same every run.
    const random = 'Q7w9ZkL3mN8pR2sV5xY1aB4cD6eF0gH3jK5nM7qS9tU';
    const fixed = `${TOKEN_PREFIX}${random}${tokenChecksum(random)}`;
    const attempts = [
      [{ env: { HOLDFAST_TOKEN: svc.adminToken } }, 'env', 'holdfast-token'],
      [{ env: { OLD_TOKEN: legacy } }, 'env', 'holdfast-legacy-token'],
      [{ setup: [['curl', '-H', `X-Holdfast-Token: ${svc.adminToken}`, 'http://holdfast/v1/runs']] }, 'setup[0]', 'holdfast-token'],
      [{ setup: [['curl', '-H', `Authorization: Bearer ${fixed}`, 'http://holdfast/v1/runs']] }, 'setup[0]', 'http-authorization'],
      // The service's own admin token there is refused whichever of the two rules names it.
      [
        { setup: [['curl', '-H', `Authorization: Bearer ${svc.adminToken}`, 'http://holdfast/v1/runs']] },
        'setup[0]',
        expect.stringMatching(/^(http-authorization|holdfast-token)$/),
      ],
      [{ setup: [['sh', '-c', `export T=${legacy}`]] }, 'setup[0]', 'holdfast-legacy-token'],
      [{ validate: ['sh', '-c', `test "$T" = ${svc.adminToken}`] }, 'validate', 'holdfast-token'],
    ] as const;
    for (const [spec, field, rule] of attempts) {
      const refused = await svc.api('POST', '/v1/deployments', { provider: 'bwrap', ...spec }, svc.adminToken);
      expect(refused.status).toBe(422);
      expect(refused.body.error.code).toBe('SECRET_EXCLUDED');
      expect(refused.body.error.data).toMatchObject({ field, rule });
      for (const secret of [svc.adminToken, legacy, fixed]) expect(JSON.stringify(refused.body)).not.toContain(secret);
    }
    const listed = await svc.api('GET', '/v1/deployments', undefined, svc.token);
    expect(listed.status).toBe(200);
    for (const secret of [svc.adminToken, legacy]) expect(JSON.stringify(listed.body)).not.toContain(secret);
  });

  it("a turn that writes the run's token into the workspace: the checkpoint leaves the file out and serves nothing of it", async () => {
    const deployment = await svc.api('POST', '/v1/deployments', { provider: 'bwrap' });
    const run = await svc.api('POST', '/v1/runs', { deploymentId: deployment.body.id, bindings: { task: 'tokens-in-workspace' } });
    const argv = ['sh', '-c', 'echo "token=$HOLDFAST_RUN_TOKEN" > .holdfast-session && echo fine > ok.txt'];
    const turn = await svc.api('POST', `/v1/runs/${run.body.id}/turns`, { argv });
    expect(turn.status).toBe(200);
    const checkpoint = await svc.api('GET', `/v1/checkpoints/${turn.body.checkpoint.id}`);
    expect(checkpoint.body.stats.excluded).toContainEqual({ path: '.holdfast-session', reason: 'secret-content', rule: 'holdfast-token' });
    const served = await svc.api('GET', `/v1/checkpoints/${turn.body.checkpoint.id}/file?path=.holdfast-session`);
    expect(served.status).toBe(404);
    expect((await svc.api('GET', `/v1/checkpoints/${turn.body.checkpoint.id}/file?path=ok.txt`)).body).toBe('fine\n');
    expect(JSON.stringify(checkpoint.body)).not.toContain('holdfast_');
  });

  it('a setup command that prints a Holdfast token fails the turn with its stderr withheld from the answer and the events', async () => {
    // The sandbox assembles the token itself: the deployment holds none.
    const [head, tail] = [svc.adminToken.slice(0, 12), svc.adminToken.slice(12)];
    const setup = [['sh', '-c', `printf '%s%s\\n' "${head}" "$(echo ${tail})" >&2; exit 3`]];
    const deployment = await svc.api('POST', '/v1/deployments', { provider: 'bwrap', setup });
    expect(deployment.status).toBe(201);
    const run = await svc.api('POST', '/v1/runs', { deploymentId: deployment.body.id });
    const turn = await svc.api('POST', `/v1/runs/${run.body.id}/turns`, { argv: ['true'] });
    expect(turn.status).toBe(422);
    expect(turn.body.error.code).toBe('SETUP_FAILED');
    expect(turn.body.error.data.stderr).toBe('[withheld: held a credential (holdfast-token)]');
    const events = await svc.api('GET', `/v1/runs/${run.body.id}/events`);
    expect(JSON.stringify(events.body)).toContain('SETUP_FAILED');
    for (const text of [JSON.stringify(turn.body), JSON.stringify(events.body)]) expect(text).not.toContain(svc.adminToken);
  });
});
