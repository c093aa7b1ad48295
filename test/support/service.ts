import path from 'node:path';
import type { Hono } from 'hono';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { type Holdfast, openHoldfast, type RunSettings } from '../../src/index.js';
import { BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import type { SandboxProvider } from '../../src/sandbox/sandbox-provider.js';
import { createApp } from '../../src/server/app.js';
import type { AppEnv } from '../../src/server/app-env.js';
import { silentLogger } from '../../src/server/logger.js';
import { Metrics } from '../../src/server/metrics.js';
import type { BackendCase } from './backends.js';
import { FaultInjectingBlobStore } from './fault-injecting-blob-store.js';

/** A JSON answer of the API. */
export interface ApiAnswer {
  readonly status: number;
  // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
  readonly body: any;
}

/** Holdfast with its HTTP app over one backend pair and bwrap sandboxes, driven through `app.request()`. */
export interface TestService {
  readonly hf: Holdfast;
  readonly app: Hono<AppEnv>;
  /** The blob store under Holdfast, wrapped for fault injection. */
  readonly faults: FaultInjectingBlobStore;
  readonly provider: SandboxProvider;
  /** A token of tenant `default`. */
  readonly token: string;
  /** An admin token of tenant `default`. */
  readonly adminToken: string;
  readonly metrics: Metrics;
  /** Sends a request with `token` (default: the tenant token; `null`: none). */
  api(method: string, url: string, body?: unknown, token?: string | null): Promise<ApiAnswer>;
  close(): Promise<void>;
}

/** Opens the service on `backend`; the sandboxes live under the backend's temp dir. */
export async function openTestService(backend: BackendCase, settings: Partial<RunSettings> = {}): Promise<TestService> {
  const opened = await backend.open();
  const faults = new FaultInjectingBlobStore(opened.blobs);
  const provider = new BwrapSandboxProvider({ root: path.join(opened.dir, 'sandboxes') });
  const hf = await openHoldfast({
    blobs: faults,
    meta: opened.meta,
    cacheDir: path.join(opened.dir, 'hf-cache'),
    providers: (name) => {
      if (name !== 'bwrap') throw new Error(`test service has only bwrap, not ${name}`);
      return provider;
    },
    runSettings: settings,
  });
  const metrics = new Metrics();
  const app = createApp({ hf, log: silentLogger, metrics, version: 'test' });
  const token = generateToken();
  const adminToken = generateToken();
  await opened.meta.tokens.create({ tenantId: hf.tenant.id, name: 'test', hash: hashToken(token), admin: false });
  await opened.meta.tokens.create({ tenantId: hf.tenant.id, name: 'admin', hash: hashToken(adminToken), admin: true });
  return {
    hf,
    app,
    faults,
    provider,
    token,
    adminToken,
    metrics,
    async api(method, url, body, withToken = token) {
      const headers: Record<string, string> = {};
      if (withToken !== null) headers.authorization = `Bearer ${withToken}`;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const response = await app.request(url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON (file downloads, metrics)
      }
      return { status: response.status, body: parsed };
    },
    async close() {
      await hf.close();
      for (const sandbox of await provider.list()) await provider.destroy(sandbox.id);
      await opened.cleanup();
    },
  };
}
