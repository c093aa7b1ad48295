import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEndpoints } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import type { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import type { SandboxHandle } from '../src/sandbox/sandbox-provider.js';
import type { OpenedBackends } from './support/backends.js';
import { openBwrapBackends } from './support/bwrap-backends.js';
import { withoutStdin, withoutStdinProvider } from './support/shell-handles.js';

/** What a rejected promise was rejected with. */
async function rejection(p: Promise<unknown>): Promise<{ code?: string; data?: Record<string, unknown> }> {
  try {
    await p;
  } catch (error) {
    return error as { code?: string; data?: Record<string, unknown> };
  }
  throw new Error('expected a rejection');
}

/** The same bwrap sandbox through the agent, and through the shell route (a handle that takes no stdin). */
const ROUTES = [
  { route: 'agent', shell: false },
  { route: 'shell-args', shell: true },
] as const;

describe.each(ROUTES)('a file the sandbox user cannot read ($route route, bwrap)', ({ route, shell }) => {
  let b: OpenedBackends;
  let provider: BwrapSandboxProvider;
  let sandbox: SandboxHandle;
  let created: SandboxHandle;
  const endpoints = new SandboxEndpoints((name) => {
    if (name !== provider.name) throw new Error(`no provider ${name}`);
    return shell ? withoutStdinProvider(provider) : provider;
  });

  beforeAll(async () => {
    ({ b, provider } = await openBwrapBackends());
    created = await provider.create({});
    sandbox = shell ? withoutStdin(created) : created;
    const fill = await created.run([
      'sh',
      '-c',
      'mkdir -p src && echo readable > src/ok.txt && echo hidden > src/locked.txt && chmod 000 src/locked.txt && head -c 70000000 /dev/zero > big.bin && chmod 000 big.bin',
    ]);
    expect(fill.code).toBe(0);
    expect(await endpoints.route(sandbox)).toBe(route);
  }, 120_000);
  afterAll(async () => {
    if (created !== undefined) await provider.destroy(created.id);
    await endpoints.close();
    await b?.cleanup();
  }, 60_000);

  it('fails the checkpoint by default with FORBIDDEN naming the file and EACCES, not WORKSPACE_CHANGED; the head does not move', async () => {
    const error = await rejection(endpoints.checkpoint(b.snapshots, sandbox, { workspace: 'unreadable-fail' }));
    expect(error.code).toBe('FORBIDDEN');
    expect(error.data).toMatchObject({ reason: 'unreadable', errno: 'EACCES' });
    const named = ((error.data?.unreadable ?? []) as { path: string; errno: string }[]).map((u) => `${u.path}:${u.errno}`).sort();
    expect(named).toEqual(['big.bin:EACCES', 'src/locked.txt:EACCES']);
    expect(['big.bin', 'src/locked.txt']).toContain(error.data?.path);
    expect((await rejection(b.snapshots.restorePoint('unreadable-fail'))).code).toBe('NOT_FOUND');
  }, 120_000);

  it("onUnreadable 'skip' leaves them out and reports each among the exclusions (reason unreadable, rule the errno)", async () => {
    const saved = await endpoints.checkpoint(b.snapshots, sandbox, { workspace: 'unreadable-skip', onUnreadable: 'skip' });
    expect(saved.stats.files).toBe(1);
    expect(saved.excluded.filter((e) => e.reason === 'unreadable').sort((x, y) => (x.path < y.path ? -1 : 1))).toEqual([
      { path: 'big.bin', reason: 'unreadable', rule: 'EACCES' },
      { path: 'src/locked.txt', reason: 'unreadable', rule: 'EACCES' },
    ]);
    expect(saved.stats.excludedByReason.unreadable).toBe(2);
    const listing = await b.snapshots.ls(saved.checkpoint.id, 'src');
    expect(listing.kind === 'dir' ? listing.entries.map((e) => e.name) : []).toEqual(['ok.txt']);
  }, 120_000);

  it('an onUnreadable that is neither fail nor skip is INVALID_INPUT before anything is recorded', async () => {
    const error = await rejection(
      endpoints.checkpoint(b.snapshots, sandbox, { workspace: 'unreadable-bad', onUnreadable: 'ignore' as unknown as 'skip' }),
    );
    expect(error.code).toBe('INVALID_INPUT');
  });
});
