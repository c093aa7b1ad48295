import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type AnyTextAdapter, type ChatMiddleware, chat, defineChatMiddleware } from '@tanstack/ai';
import { defineSandbox, getSandbox, SandboxCapability, type SandboxProvider as TanStackProvider } from '@tanstack/ai-sandbox';
import { afterEach, describe, expect, it } from 'vitest';
import { type Holdfast, openHoldfast } from '../src/holdfast.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { LocalSandboxProvider } from '../src/sandbox/providers/local.js';
import {
  HoldfastLockStore,
  holdfastSandboxProvider,
  holdfastStores,
  withHoldfastDurability,
  withHoldfastStores,
} from '../src/tanstack/index.js';
import { codeOf } from './support/error-code.js';
import { createTestDatabase } from './support/postgres.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';
import { pemBlock } from './support/secret-samples.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A store both processes of a test open: a SQLite file or a PostgreSQL database, and blobs on disk. */
interface StoreCase {
  readonly name: string;
  open(dir: string): Promise<{ meta: string; drop: () => Promise<void> }>;
}
const STORES: readonly StoreCase[] = [
  { name: 'sqlite', open: async (dir) => ({ meta: `sqlite:${path.join(dir, 'meta.db')}`, drop: async () => undefined }) },
  {
    name: 'postgres',
    async open() {
      const db = await createTestDatabase();
      return { meta: db.url, drop: () => db.drop() };
    },
  },
];

async function fixture(store: StoreCase) {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-tanstack-'));
  const { meta, drop } = await store.open(dir);
  cleanups.push(async () => {
    await drop();
    await fs.rm(dir, { recursive: true, force: true });
  });
  /** A fresh process's worth of Holdfast on the shared store. */
  const open = async (): Promise<Holdfast> => {
    const hf = await openHoldfast({
      meta,
      blobs: `file:${path.join(dir, 'blobs')}`,
      cacheDir: path.join(dir, 'cache', randomBytes(4).toString('hex')),
    });
    cleanups.push(() => hf.close());
    return hf;
  };
  return { dir, open };
}

/** A model adapter that answers every request with one scripted text message, as TanStack's adapter interface streams it. */
function scriptedModel(answer: string): AnyTextAdapter {
  return {
    kind: 'text',
    name: 'scripted',
    model: 'scripted-1',
    async *chatStream(options: { threadId?: string; runId?: string }) {
      const base = { threadId: options.threadId ?? 't', runId: options.runId ?? 'r', model: 'scripted-1', timestamp: Date.now() };
      yield { ...base, type: 'RUN_STARTED' };
      yield { ...base, type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' };
      yield { ...base, type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: answer };
      yield { ...base, type: 'TEXT_MESSAGE_END', messageId: 'm1' };
      yield { ...base, type: 'RUN_FINISHED', finishReason: 'stop' };
    },
    structuredOutput: async () => ({ data: {}, rawText: '{}' }),
  } as unknown as AnyTextAdapter;
}

/** A middleware standing for a harness: it works in the run's sandbox (TanStack's capability) after `withSandbox` set it up. */
function inSandbox(work: (sandbox: NonNullable<ReturnType<typeof getSandbox>>) => Promise<void>): ChatMiddleware {
  return defineChatMiddleware({
    name: 'harness',
    requires: [SandboxCapability],
    async setup(ctx) {
      const sandbox = getSandbox(ctx);
      if (sandbox === undefined) throw new Error('withSandbox provided no sandbox');
      await work(sandbox);
    },
  });
}

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** Files of every kind of byte: random binary, bytes that are not UTF-8, text, nested. */
function workspaceFiles(): Record<string, Buffer> {
  return {
    'src/main.ts': Buffer.from('export const answer = 42;\n'),
    'data/blob.bin': randomBytes(300 * 1024),
    'data/not-utf8.bin': Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x0a, 0xc3, 0x28]),
    'notes/deep/readme.md': Buffer.from('# kept\n'),
  };
}
const SECRETS = { '.env': Buffer.from('API_KEY=sk-live-123\n'), 'keys/deploy.pem': Buffer.from(pemBlock('RSA PRIVATE KEY')) };

async function readAll(
  sandbox: NonNullable<ReturnType<typeof getSandbox>>,
  names: readonly string[],
): Promise<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  for (const name of names)
    out[name] = (await sandbox.fs.exists(`/workspace/${name}`)) ? sha(await sandbox.fs.readBytes(`/workspace/${name}`)) : null;
  return out;
}

describe.each(STORES)('TanStack AI over Holdfast ($name)', (store) => {
  it('chat() + withSandbox on bwrap: the workspace written in one run survives the destroyed sandbox into a fresh process, every byte', async () => {
    expectBwrapInstalled();
    const { dir, open } = await fixture(store);
    const bwrapRoot = path.join(dir, 'sandboxes');
    const files = workspaceFiles();
    const definition = (hf: Holdfast, stores: ReturnType<typeof holdfastStores>) =>
      defineSandbox({
        id: 'coder',
        provider: withHoldfastDurability(holdfastSandboxProvider(new BwrapSandboxProvider({ root: bwrapRoot })), hf, {
          store: stores.store,
        }),
        workspace: { source: { type: 'none' } },
        lifecycle: { snapshot: 'after-run' },
        fileEvents: false,
      });

    const hf1 = await open();
    const stores1 = holdfastStores(hf1);
    const sandbox1 = definition(hf1, stores1);
    const answer = await chat({
      adapter: scriptedModel('wrote the files'),
      messages: [{ role: 'user', content: 'write the project' }],
      threadId: 'thread-1',
      runId: 'run-1',
      stream: false,
      middleware: [
        withHoldfastStores(stores1),
        (await import('@tanstack/ai-sandbox')).withSandbox(sandbox1),
        inSandbox(async (sb) => {
          for (const [name, bytes] of Object.entries({ ...files, ...SECRETS })) await sb.fs.write(`/workspace/${name}`, bytes);
        }),
      ],
    });
    expect(answer).toContain('wrote the files');
    const key = sandbox1.key({ threadId: 'thread-1', runId: 'run-1' });
    const record = await stores1.store.getVersioned(key);
    expect(record?.latestSnapshotId).toBeDefined();
    expect(record?.threadId).toBe('thread-1');
    const label = await hf1.meta.sandboxInstances.findSnapshotLabel(hf1.tenant.id, record?.latestSnapshotId as string);
    expect(label).toMatchObject({ label: 'after-run-run-1', threadId: 'thread-1', runId: 'run-1', sandboxKey: key });
    // The sandbox is destroyed behind TanStack's back, and the first process goes away.
    await new BwrapSandboxProvider({ root: bwrapRoot }).destroy(record?.providerSandboxId as string);
    await hf1.close();

    const hf2 = await open();
    const stores2 = holdfastStores(hf2);
    let seen: Record<string, string | null> = {};
    await chat({
      adapter: scriptedModel('read them back'),
      messages: [{ role: 'user', content: 'continue' }],
      threadId: 'thread-1',
      runId: 'run-2',
      stream: false,
      middleware: [
        withHoldfastStores(stores2),
        (await import('@tanstack/ai-sandbox')).withSandbox(definition(hf2, stores2)),
        inSandbox(async (sb) => {
          seen = await readAll(sb, [...Object.keys(files), ...Object.keys(SECRETS)]);
        }),
      ],
    });
    expect(seen).toEqual({
      ...Object.fromEntries(Object.entries(files).map(([name, bytes]) => [name, sha(bytes)])),
      // Credentials are never stored, so never restored.
      '.env': null,
      'keys/deploy.pem': null,
    });
    const resumed = await stores2.store.getVersioned(key);
    expect(resumed?.providerSandboxId).not.toBe(record?.providerSandboxId);
    expect(resumed?.latestRunId).toBe('run-2');
  }, 180_000);

  it('two concurrent ensure() calls from two processes create one sandbox', async () => {
    const { dir, open } = await fixture(store);
    const local = new LocalSandboxProvider({ root: path.join(dir, 'local') });
    const [hfA, hfB] = [await open(), await open()];
    const [a, b] = [holdfastStores(hfA), holdfastStores(hfB)];
    const def = defineSandbox({ id: 'pair', provider: holdfastSandboxProvider(local), fileEvents: false });
    const [one, two] = await Promise.all([
      def.ensure({ threadId: 'thread-x', runId: 'r1', store: a.store, locks: a.locks }),
      def.ensure({ threadId: 'thread-x', runId: 'r2', store: b.store, locks: b.locks }),
    ]);
    expect(one.id).toBe(two.id);
    expect((await local.list()).map((s) => s.id)).toEqual([one.id]);
    expect((await a.store.getVersioned(def.key({ threadId: 'thread-x', runId: 'r1' })))?.version).toBe(2);
  }, 60_000);

  it('a lock holder that stalled past its lease is fenced: its write is refused with STALE_LEASE and the new holder’s record stays', async () => {
    const { open } = await fixture(store);
    const [hfA, hfB] = [await open(), await open()];
    const stalled = new HoldfastLockStore({ meta: hfA.meta, tenantId: hfA.tenant.id }, { ttlMs: 300, renew: false });
    const fresh = holdfastStores(hfB);
    const storeA = holdfastStores(hfA).store;
    const record = (providerSandboxId: string) => ({
      key: 'k',
      provider: 'local',
      providerSandboxId,
      threadId: 't',
      updatedAt: Date.now(),
    });
    let staleWrite = 'not tried';
    await stalled.withLock('sandbox:k', async () => {
      await new Promise((resolve) => setTimeout(resolve, 600));
      await fresh.locks.withLock('sandbox:k', () => fresh.store.upsert(record('from-new-holder')));
      staleWrite = await codeOf(storeA.upsert(record('from-stale-holder')));
    });
    expect(staleWrite).toBe('STALE_LEASE');
    expect((await fresh.store.get('k'))?.providerSandboxId).toBe('from-new-holder');
    const state = await hfA.meta.locks.state(hfA.tenant.id, 'sandbox:k');
    expect(state?.token).toBe(2);
    expect(state?.holder).toBeNull();
  }, 60_000);

  it('any provider reached through its text commands only: snapshot, destroy, restoreSnapshot with every byte and no secret', async () => {
    const { dir, open } = await fixture(store);
    const hf = await open();
    const local = new LocalSandboxProvider({ root: path.join(dir, 'local') });
    const provider: TanStackProvider = withHoldfastDurability(holdfastSandboxProvider(local), hf, { route: 'commands' });
    expect(provider.capabilities().snapshots).toBe(true);
    const created = await provider.create({ id: 'thread/with/slashes' });
    const files = workspaceFiles();
    for (const [name, bytes] of Object.entries({ ...files, ...SECRETS })) await created.fs.write(`/workspace/${name}`, bytes);
    const ref = await created.snapshot?.('before-destroy');
    expect(ref?.label).toBe('before-destroy');
    await provider.destroy({ id: created.id });
    expect(await provider.resume({ id: created.id })).toBeNull();
    const restoreSnapshot = provider.restoreSnapshot as NonNullable<TanStackProvider['restoreSnapshot']>;
    const restored = await restoreSnapshot({ snapshotId: ref?.id as string });
    expect(await readAll(restored, [...Object.keys(files), ...Object.keys(SECRETS)])).toEqual({
      ...Object.fromEntries(Object.entries(files).map(([name, bytes]) => [name, sha(bytes)])),
      '.env': null,
      'keys/deploy.pem': null,
    });
    expect(await codeOf(restoreSnapshot({ snapshotId: 'no-such-checkpoint' }))).toBe('NOT_FOUND');
  }, 120_000);
});
