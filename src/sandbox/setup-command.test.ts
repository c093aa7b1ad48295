import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HoldfastError } from '../errors.js';
import { withheldMarker } from '../rules/withhold-secrets.js';
import { LocalSandboxProvider } from './providers/local.js';
import type { SandboxHandle } from './sandbox-provider.js';
import { runSetupCommand } from './setup-command.js';

// Assembled at run time, so this file holds no literal token for a scanner to flag.
const githubToken = `gh${'p'}_${'Q9w8E7r6T5y4U3i2O1p0'.repeat(2).slice(0, 36)}`;

describe('runSetupCommand (the one runner of setup, validation, install and repository setup commands)', () => {
  let root = '';
  let provider: LocalSandboxProvider;
  let sandbox: SandboxHandle;
  beforeAll(async () => {
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hf-setup-')));
    provider = new LocalSandboxProvider({ root });
    sandbox = await provider.create({});
  });
  afterAll(async () => {
    await provider.destroy(sandbox.id);
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('a command that prints a credential and fails is SETUP_FAILED whose kept stderr withholds it', async () => {
    // The token reaches the command in two halves (a deployment's argv never holds one: specs refuse them).
    const argv = ['sh', '-c', 'echo "auth failed for $A$B" >&2; exit 3'];
    const env = { A: githubToken.slice(0, 10), B: githubToken.slice(10) };
    const error = await runSetupCommand(sandbox, { argv, env, timeoutMs: 10_000, what: 'setup command 1', data: { repo: 'r' } }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HoldfastError);
    const failed = error as HoldfastError;
    expect(failed.code).toBe('SETUP_FAILED');
    expect(failed.data).toMatchObject({ repo: 'r', exitCode: 3, timedOut: false });
    expect(JSON.stringify(failed.toJSON())).not.toContain(githubToken);
    expect(failed.data.stderr).toBe(withheldMarker('github-token'));
  });

  it('runs in the given directory with the given variables, and succeeds quietly on exit 0', async () => {
    fs.mkdirSync(path.join(sandbox.localPath as string, 'sub'));
    await runSetupCommand(sandbox, {
      argv: ['sh', '-c', 'test "$(pwd -P)" = "$1" && test "$X" = y', 'sh', `${sandbox.workspaceRoot}/sub`],
      cwd: `${sandbox.workspaceRoot}/sub`,
      env: { X: 'y' },
      timeoutMs: 10_000,
      what: 'check',
    });
  });

  it('a command past its deadline is SETUP_FAILED with timedOut', async () => {
    const error = (await runSetupCommand(sandbox, { argv: ['sleep', '30'], timeoutMs: 200, what: 'slow' }).catch(
      (e: unknown) => e,
    )) as HoldfastError;
    expect(error.code).toBe('SETUP_FAILED');
    expect(error.data.timedOut).toBe(true);
  });
});
