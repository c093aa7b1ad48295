import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeOf } from '../../../test/support/error-code.js';
import { describeSandboxProviderContract } from '../sandbox.contract.js';
import { LocalSandboxProvider } from './local.js';

let contractRoot = '';
describeSandboxProviderContract({
  name: 'local',
  create: async () => {
    // realpath: the contract compares `pwd -P` with workspaceRoot, which is a host path here.
    contractRoot = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hf-sbx-local-')));
    const provider = new LocalSandboxProvider({ root: contractRoot });
    return {
      provider,
      cleanup: async () => {
        for (const info of await provider.list()) await provider.destroy(info.id);
        fs.rmSync(contractRoot, { recursive: true, force: true });
      },
    };
  },
  reopen: () => new LocalSandboxProvider({ root: contractRoot }),
});

describe('LocalSandboxProvider', () => {
  it('exposes the workspace as a host path and deletes it on destroy', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-sbx-local-'));
    try {
      const provider = new LocalSandboxProvider({ root });
      const sandbox = await provider.create();
      expect(sandbox.localPath).toBe(sandbox.workspaceRoot);
      fs.writeFileSync(path.join(sandbox.localPath ?? '', 'from-host.txt'), 'hi');
      expect((await sandbox.run(['cat', 'from-host.txt'])).stdout.toString()).toBe('hi');
      expect(await new Promise((resolve) => fs.stat(sandbox.agentHome, (e) => resolve(e === null)))).toBe(true);
      await provider.destroy(sandbox.id);
      expect(fs.existsSync(sandbox.workspaceRoot)).toBe(false);
      expect(await codeOf(() => provider.create({ image: 'debian:12' }))).toBe('INVALID_INPUT');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('deletes a sandbox whose commands left unreadable directories', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-sbx-local-'));
    try {
      const provider = new LocalSandboxProvider({ root });
      const sandbox = await provider.create();
      expect((await sandbox.run(['sh', '-c', 'mkdir -p locked/inner && touch locked/inner/f && chmod 000 locked/inner locked'])).code).toBe(
        0,
      );
      await provider.destroy(sandbox.id);
      expect(fs.readdirSync(root)).toEqual([]);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
