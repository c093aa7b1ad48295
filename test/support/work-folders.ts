import path from 'node:path';
import type { FolderLimits } from '../../src/folders/folders.js';
import { type Holdfast, openHoldfast } from '../../src/index.js';
import type { StoredRunBindings } from '../../src/metadata/metadata-store.js';
import type { FolderScope } from '../../src/model/folder-scopes.js';
import { createApp } from '../../src/server/app.js';
import { listen, type RunningServer } from '../../src/server/http-server.js';
import { silentLogger } from '../../src/server/logger.js';
import { Metrics } from '../../src/server/metrics.js';
import { generateToken, hashToken } from '../../src/tenants/tokens.js';
import type { BackendCase, OpenedBackends } from './backends.js';

/** The tenant the folder tests work in, and the other one whose tokens must reach nothing of it. */
export const TENANT = 'acme';
export const OTHER_TENANT = 'globex';

/** A JSON (or text) answer with its headers. */
export interface FolderAnswer {
  readonly status: number;
  readonly headers: Headers;
  /** The raw body bytes. */
  readonly bytes: Buffer;
  // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
  readonly body: any;
}

/** A request to a work-folder route. */
export interface FolderRequest {
  readonly token: string;
  readonly headers?: Record<string, string>;
  /** JSON (sent as application/json) unless a Buffer or a stream (sent as is). */
  readonly body?: unknown;
}

/** Holdfast over one backend pair, its app on a real loopback socket, and the tenant's principals. */
export interface FolderService {
  readonly hf: Holdfast;
  readonly backend: OpenedBackends;
  readonly server: RunningServer;
  readonly tenantId: string;
  /** A service token of {@link TENANT}. */
  readonly serviceToken: string;
  /** A service token of {@link OTHER_TENANT}. */
  readonly otherTenantToken: string;
  /** Adds a user to {@link TENANT} and gives back a token of it. */
  addUser(name: string, role: 'member' | 'viewer'): Promise<string>;
  /**
   * Creates a run of {@link TENANT} bound to `bindings` and gives back its run id and a run
   * token; `bindings.user` is a user's name, stored (as `Runs.create` stores it) as the id of
   * the live user of that name.
   */
  addRun(bindings: StoredRunBindings): Promise<{ runId: string; token: string }>;
  /** The row id of the live user `name` of {@link TENANT}: the owner id of that user's collection. */
  userId(name: string): Promise<string>;
  /** The URL path of a collection route: `suffix` is '', '/content' or '/operations'. */
  route(scope: FolderScope, ownerId: string, suffix?: string, query?: Record<string, string>, company?: string): string;
  request(method: string, route: string, request: FolderRequest): Promise<FolderAnswer>;
  close(): Promise<void>;
}

/** Opens a {@link FolderService}; `limits` override the folder limits (a small file limit for the 413 cases). */
export async function openFolderService(backendCase: BackendCase, limits: Partial<FolderLimits> = {}): Promise<FolderService> {
  const backend = await backendCase.open();
  const hf = await openHoldfast({
    blobs: backend.blobs,
    meta: backend.meta,
    cacheDir: path.join(backend.dir, 'hf-cache'),
    tenant: TENANT,
    folders: { limits },
  });
  const app = createApp({ hf, log: silentLogger, metrics: new Metrics(), version: 'test' });
  const server = await listen(app, { host: '127.0.0.1', port: 0 });
  const serviceToken = generateToken();
  await backend.meta.tokens.create({ tenantId: hf.tenant.id, name: 'service', hash: hashToken(serviceToken), admin: false });
  const other = (await hf.forTenant(OTHER_TENANT)).tenant;
  const otherTenantToken = generateToken();
  await backend.meta.tokens.create({ tenantId: other.id, name: 'other', hash: hashToken(otherTenantToken), admin: false });
  let deploymentId: string | undefined;
  const userId = async (name: string): Promise<string> => {
    const user = await backend.meta.users.findActive(hf.tenant.id, name);
    if (user === undefined) throw new Error(`no live user ${name}`);
    return user.id;
  };
  return {
    userId,
    hf,
    backend,
    server,
    tenantId: hf.tenant.id,
    serviceToken,
    otherTenantToken,
    async addUser(name, role) {
      const user = await backend.meta.users.create({ tenantId: hf.tenant.id, name, role });
      const token = generateToken();
      await backend.meta.tokens.create({
        tenantId: hf.tenant.id,
        name: `user-${name}`,
        hash: hashToken(token),
        admin: false,
        userId: user.id,
      });
      return token;
    },
    async addRun(bindings) {
      deploymentId ??= (await hf.deployments.create({ provider: 'bwrap' })).id;
      const workspace = await backend.meta.workspaces.create({
        tenantId: hf.tenant.id,
        name: `folder-run-${generateToken().slice(-12)}`,
      });
      const run = await backend.meta.runs.create({
        tenantId: hf.tenant.id,
        workspaceId: workspace.id,
        channel: null,
        deploymentId,
        bindings: bindings.user === undefined ? bindings : { ...bindings, user: await userId(bindings.user) },
      });
      const token = generateToken();
      await backend.meta.tokens.create({
        tenantId: hf.tenant.id,
        name: `run-${run.id}`,
        hash: hashToken(token),
        admin: false,
        runId: run.id,
      });
      return { runId: run.id, token };
    },
    route(scope, ownerId, suffix = '', query = {}, company = TENANT) {
      const search = new URLSearchParams(query).toString();
      return `/api/companies/${encodeURIComponent(company)}/work-folders/${scope}/${encodeURIComponent(ownerId)}${suffix}${search === '' ? '' : `?${search}`}`;
    },
    async request(method, route, { token, headers = {}, body }) {
      const sent: Record<string, string> = { authorization: `Bearer ${token}`, ...headers };
      let payload: Uint8Array | ReadableStream | string | undefined;
      if (body instanceof Buffer || body instanceof Uint8Array) payload = body;
      else if (body instanceof ReadableStream) payload = body;
      else if (body !== undefined) {
        payload = JSON.stringify(body);
        sent['content-type'] ??= 'application/json';
      }
      const response = await fetch(new URL(route, server.url), {
        method,
        headers: sent,
        ...(payload === undefined ? {} : { body: payload, duplex: 'half' }),
      } as RequestInit);
      const bytes = Buffer.from(await response.arrayBuffer());
      let parsed: unknown = bytes.toString('utf8');
      try {
        parsed = JSON.parse(parsed as string);
      } catch {
        // a download, not JSON
      }
      return { status: response.status, headers: response.headers, bytes, body: parsed };
    },
    async close() {
      try {
        await server.close();
        await hf.close();
      } finally {
        await backend.cleanup();
      }
    },
  };
}

/** Headers of an upload with operation id `key`. */
export function uploadHeaders(key: string, extra: Record<string, string> = {}): Record<string, string> {
  return { 'content-type': 'application/octet-stream', 'idempotency-key': key, ...extra };
}
