import path from 'node:path';
import type { Hono } from 'hono';
import { type Holdfast, openHoldfast, type RunSettings } from '../../src/index.js';
import { BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import { DockerSandboxProvider } from '../../src/sandbox/providers/docker.js';
import type { SandboxProvider } from '../../src/sandbox/sandbox-provider.js';
import { createApp } from '../../src/server/app.js';
import type { AppEnv } from '../../src/server/app-env.js';
import { silentLogger } from '../../src/server/logger.js';
import { Metrics } from '../../src/server/metrics.js';
import { generateToken, hashToken } from '../../src/tenants/tokens.js';
import type { BackendCase } from './backends.js';
import { nodeImage } from './docker-images.js';
import { FaultInjectingBlobStore } from './fault-injecting-blob-store.js';
import { expectBwrapInstalled } from './sandbox-processes.js';

/** The sandbox providers a test service can run on. */
export type TestProviderName = 'bwrap' | 'docker';

/** Options of {@link openTestService}. */
export interface TestServiceOptions {
  /** Run settings of the Holdfast under test. */
  readonly settings?: Partial<RunSettings>;
  /** Which provider builds the sandboxes; default `bwrap`. */
  readonly provider?: TestProviderName;
  /**
   * Names the docker scope (`<scopePrefix>-<temp dir name>`): one per test file and service,
   * so list(), the stray sweep and close() see only this service's containers even while other
   * files (or other checkouts) use the same daemon. Default `service`.
   */
  readonly scopePrefix?: string;
}

/** A JSON answer of the API. */
export interface ApiAnswer {
  readonly status: number;
  // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
  readonly body: any;
}

/** Holdfast with its HTTP app over one backend pair and bwrap or docker sandboxes, driven through `app.request()`. */
export interface TestService {
  readonly hf: Holdfast;
  readonly app: Hono<AppEnv>;
  /** The blob store under Holdfast, wrapped for fault injection. */
  readonly faults: FaultInjectingBlobStore;
  /** The provider Holdfast uses; its `name` is what a deployment names. */
  readonly provider: SandboxProvider;
  /**
   * Another instance over the same sandboxes that Holdfast does not hold: what destroys a
   * sandbox behind Holdfast's back (nothing it remembers learns of the destroy).
   */
  readonly outside: SandboxProvider;
  /** What a deployment on this provider names besides `provider`: the image for docker, nothing for bwrap. */
  readonly deploymentBase: { readonly provider: TestProviderName; readonly image?: string };
  /** A token of tenant `default`. */
  readonly token: string;
  /** An admin token of tenant `default`. */
  readonly adminToken: string;
  readonly metrics: Metrics;
  /** Sends a request with `token` (default: the tenant token; `null`: none). */
  api(method: string, url: string, body?: unknown, token?: string | null): Promise<ApiAnswer>;
  close(): Promise<void>;
}

/** A provider instance for `name` (the same sandboxes each time it is called with the same `dir` and `scope`). */
function providerFor(name: TestProviderName, dir: string, scope: string): SandboxProvider {
  if (name === 'bwrap') return new BwrapSandboxProvider({ root: path.join(dir, 'sandboxes') });
  return new DockerSandboxProvider({ image: nodeImage(), scope });
}

/**
 * Opens the service on `backend`. Bwrap sandboxes live under the backend's temp dir; docker
 * ones are containers of the Node test image in a scope of this service's own. `close()`
 * destroys every sandbox of that provider (directory or scope) and removes the stores.
 * Fails (never skips) when the chosen provider's machinery is missing.
 */
export async function openTestService(backend: BackendCase, options: TestServiceOptions = {}): Promise<TestService> {
  const name = options.provider ?? 'bwrap';
  if (name === 'bwrap') expectBwrapInstalled();
  const image = name === 'docker' ? nodeImage() : undefined;
  const opened = await backend.open();
  const faults = new FaultInjectingBlobStore(opened.blobs);
  const scope = `${options.scopePrefix ?? 'service'}-${path.basename(opened.dir).replace(/[^A-Za-z0-9._-]/g, '')}`;
  const provider = providerFor(name, opened.dir, scope);
  const outside = providerFor(name, opened.dir, scope);
  const hf = await openHoldfast({
    blobs: faults,
    meta: opened.meta,
    cacheDir: path.join(opened.dir, 'hf-cache'),
    providers: (asked) => {
      if (asked !== name) throw new Error(`test service has only ${name}, not ${asked}`);
      return provider;
    },
    runSettings: options.settings ?? {},
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
    outside,
    deploymentBase: image === undefined ? { provider: name } : { provider: name, image },
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
      try {
        await hf.close();
      } finally {
        for (const sandbox of await outside.list()) await outside.destroy(sandbox.id);
        await opened.cleanup();
      }
    },
  };
}
