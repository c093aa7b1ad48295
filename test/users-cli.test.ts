import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { canAccessFolder, openHoldfast, type Principal } from '../src/index.js';
import { folderAccessLookups } from '../src/tenants/folder-access.js';
import { hashToken } from '../src/tenants/tokens.js';
import { storeEnvironment } from './support/cli-env.js';
import { type CliRun, HOLDFAST_BIN, runHoldfast } from './support/serve-process.js';

describe('holdfast user, token --user, run create and run end (compiled HOLDFAST_BIN, --json)', () => {
  let dir: string;
  let env: Record<string, string>;
  const holdfast = (args: string[]): Promise<CliRun> => runHoldfast(args, env);
  const json = async (args: string[]) => {
    const run = await holdfast(['--json', ...args]);
    expect(run.code, run.stderr).toBe(0);
    // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
    return JSON.parse(run.stdout) as any;
  };
  const errorCode = (run: CliRun): unknown => (JSON.parse(run.stderr) as { error: { code: string } }).error.code;
  /** Opens the same store the CLI uses, runs `fn`, closes it. */
  const withStore = async <T>(fn: (hf: Awaited<ReturnType<typeof openHoldfast>>) => Promise<T>): Promise<T> => {
    const hf = await openHoldfast({ config: loadConfig({ env }), cacheDir: path.join(dir, 'cache') });
    try {
      return await fn(hf);
    } finally {
      await hf.close();
    }
  };
  const principalOf = (token: string) => withStore((hf) => hf.tokens.principal(hashToken(token)));

  beforeAll(() => {
    expect(fs.existsSync(HOLDFAST_BIN), `${HOLDFAST_BIN} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-users-cli-'));
    env = storeEnvironment(dir);
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('user add, ls and revoke; a user token acts as that user until the revocation, then resolves to nothing', async () => {
    const added = await json(['user', 'add', '--tenant', 'acme', 'ada', '--role', 'member']);
    expect(added).toMatchObject({ tenant: 'acme', name: 'ada', role: 'member', revokedAt: null });
    expect(await json(['user', 'add', '--tenant', 'acme', 'vic', '--role', 'viewer'])).toMatchObject({ role: 'viewer' });
    const dup = await holdfast(['--json', 'user', 'add', '--tenant', 'acme', 'ada', '--role', 'viewer']);
    expect([dup.code, errorCode(dup)]).toEqual([1, 'ALREADY_EXISTS']);
    expect((await holdfast(['user', 'add', '--tenant', 'acme', 'bob', '--role', 'owner'])).code).toBe(2);
    const badName = await holdfast(['--json', 'user', 'add', '--tenant', 'acme', '../bob', '--role', 'member']);
    expect([badName.code, errorCode(badName)]).toEqual([2, 'INVALID_INPUT']);

    const created = await json(['token', 'create', '--tenant', 'acme', '--user', 'ada']);
    expect(created).toMatchObject({ tenant: 'acme', user: 'ada', admin: false, runId: null, name: 'user ada' });
    // The principal carries the user's immutable id (the row `user add` printed) and the name.
    expect(await principalOf(created.token)).toMatchObject({
      kind: 'user',
      userId: added.id,
      userName: 'ada',
      role: 'member',
      tenantName: 'acme',
    });
    const plain = await holdfast(['token', 'create', '--tenant', 'acme', '--user', 'vic', '--name', 'vic-laptop']);
    expect(plain.code).toBe(0);
    expect(plain.stdout.trim()).toMatch(/^holdfast_[0-9A-Za-z]{49}$/); // stdout holds the token alone
    const adminUser = await holdfast(['--json', 'token', 'create', '--tenant', 'acme', '--user', 'ada', '--admin']);
    expect([adminUser.code, errorCode(adminUser)]).toEqual([2, 'INVALID_INPUT']);
    const nobody = await holdfast(['--json', 'token', 'create', '--tenant', 'acme', '--user', 'nobody']);
    expect([nobody.code, errorCode(nobody)]).toEqual([1, 'NOT_FOUND']);

    const tokens = await json(['token', 'list']);
    expect(tokens.find((t: { id: string }) => t.id === created.id)).toMatchObject({ kind: 'user', admin: false });
    expect(JSON.stringify(tokens)).not.toContain(created.token);

    const revoked = await json(['user', 'revoke', '--tenant', 'acme', 'ada']);
    expect(revoked).toMatchObject({ name: 'ada', tenant: 'acme' });
    expect(revoked.revokedAt).toEqual(expect.any(Number));
    expect(await principalOf(created.token)).toBeUndefined();
    const again = await holdfast(['--json', 'user', 'revoke', '--tenant', 'acme', 'ada']);
    expect([again.code, errorCode(again)]).toEqual([1, 'NOT_FOUND']);
    const users = await json(['user', 'ls', '--tenant', 'acme']);
    expect(users.map((u: { name: string; revokedAt: number | null }) => [u.name, u.revokedAt === null])).toEqual([
      ['ada', false],
      ['vic', true],
    ]);
    expect(await json(['user', 'ls', '--tenant', 'nowhere'])).toEqual([]);
  });

  it('run create with bindings prints its run token once; the token is a run principal until run end', async () => {
    const lin = await json(['user', 'add', '--tenant', 'acme', 'lin', '--role', 'member']);
    const deploymentId = await withStore(async (hf) => (await (await hf.forTenant('acme')).deployments.create({ provider: 'local' })).id);
    const created = await json([
      'run',
      'create',
      '--tenant',
      'acme',
      '--deployment',
      deploymentId,
      '--task',
      't-1',
      '--agent',
      'a-1',
      '--user',
      'lin',
    ]);
    expect(created).toMatchObject({ tenant: 'acme', deploymentId, bindings: { task: 't-1', agent: 'a-1', user: 'lin' }, endedAt: null });
    const p = (await principalOf(created.runToken)) as Principal;
    // The CLI is the operator giving lin's consent; the run is bound to lin's id, the answer shows the name.
    expect(p).toMatchObject({ kind: 'run', runId: created.id, bindings: { task: 't-1', agent: 'a-1', user: lin.id } });
    const may = (scope: 'task' | 'agent' | 'user', ownerId: string) =>
      withStore(async (hf) => canAccessFolder(p, { tenantId: p.tenantId, scope, ownerId }, 'write', folderAccessLookups(hf.meta)));
    expect(await may('agent', 'a-1')).toBe(true);
    expect(await may('agent', 'a-2')).toBe(false);

    const unbound = await holdfast(['run', 'create', '--tenant', 'acme', '--deployment', deploymentId]);
    expect(unbound.code, unbound.stderr).toBe(0);
    expect(unbound.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/); // the id alone: no token for an unbound run
    const both = await holdfast(['--json', 'run', 'create', '--tenant', 'acme']);
    expect([both.code, errorCode(both)]).toEqual([2, 'INVALID_INPUT']);
    const badOwner = await holdfast(['--json', 'run', 'create', '--tenant', 'acme', '--deployment', deploymentId, '--task', 'a/b']);
    expect([badOwner.code, errorCode(badOwner)]).toEqual([2, 'INVALID_INPUT']);

    const ended = await json(['run', 'end', created.id]);
    expect(ended).toMatchObject({ id: created.id, tenant: 'acme' });
    expect(ended.endedAt).toEqual(expect.any(Number));
    expect(await may('task', 't-1')).toBe(false);
    expect(await may('user', 'lin')).toBe(false);
  });
});
