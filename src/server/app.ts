/**
 * `server/`: the HTTP service: the Hono app, authentication, one file per route group
 * (`routes/`), the error-code to status map, logs, metrics, the OpenAPI document and the
 * inspector's assets route.
 */
import { Hono, type MiddlewareHandler } from 'hono';
import { z } from 'zod';
import { NotFoundError } from '../errors.js';
import type { Holdfast } from '../index.js';
import { folderAccessLookups, PRINCIPAL_KINDS, type PrincipalKind } from '../tenants/folder-access.js';
import type { AppEnv } from './app-env.js';
import { bearerAuth } from './auth.js';
import { bodyLimit, MAX_REQUEST_BODY_BYTES } from './body-limit.js';
import { errorHandler, routeNotFound } from './error-response.js';
import { idempotency } from './idempotency.js';
import { INSPECTOR_DOCS, mountInspector } from './inspector-assets.js';
import type { Logger } from './logger.js';
import { requestLogger } from './logger.js';
import { engineMetrics, httpMetrics, type Metrics, PROMETHEUS_CONTENT_TYPE } from './metrics.js';
import { buildOpenApi, type RouteDoc } from './openapi.js';
import { answerAs, type RouteDef } from './route.js';
import { bundleRoutes } from './routes/bundles.js';
import { checkpointRoutes } from './routes/checkpoints.js';
import { deploymentRoutes } from './routes/deployments.js';
import { inspectorAnyPrincipalRoutes, inspectorV1Routes } from './routes/inspector-support.js';
import { runRoutes } from './routes/runs.js';
import { Health, Readiness } from './routes/schemas.js';
import { tokenRoutes } from './routes/tokens.js';
import { workFolderPaths, workFolderRoutes } from './routes/work-folders.js';

/** The license of the service (SPDX), as package.json says. */
const LICENSE = 'Apache-2.0';

/** What {@link createApp} needs. */
export interface AppOptions {
  readonly hf: Holdfast;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly version: string;
  /**
   * Whether the inspector (`/ui`, `/ui/*`) is served; default true. Off, its paths answer 404
   * `NOT_FOUND` like any unknown path and leave the OpenAPI document (the API routes it reads,
   * such as who-am-I and checkpoint diffs, stay: they are API routes of their own).
   */
  readonly inspector?: boolean;
}

/** The document's own shape, as much of it as a client relies on (`GET /v1/openapi.json`). */
const OpenApiDocument = z.looseObject({
  openapi: z.literal('3.1.0'),
  info: z.looseObject({ title: z.string(), version: z.string() }),
  paths: z.record(z.string(), z.record(z.string(), z.unknown())),
});

/** Public routes, documented with the rest. */
const PUBLIC_DOCS: readonly RouteDoc[] = [
  {
    method: 'get',
    path: '/healthz',
    operationId: 'getHealth',
    summary: 'Liveness: the process answers',
    auth: false,
    tags: ['ops'],
    response: Health,
  },
  {
    method: 'get',
    path: '/readyz',
    operationId: 'getReadiness',
    summary: 'Readiness: the metadata store and the blob store answer',
    auth: false,
    tags: ['ops'],
    response: Readiness,
    errors: ['STORE_UNAVAILABLE'],
  },
  {
    method: 'get',
    path: '/metrics',
    operationId: 'getMetrics',
    summary: 'Prometheus metrics (text format 0.0.4)',
    auth: false,
    tags: ['ops'],
    produces: 'text/plain',
    response: z.string(),
  },
  {
    method: 'get',
    path: '/v1/openapi.json',
    operationId: 'getOpenApi',
    summary: 'This document',
    auth: false,
    tags: ['ops'],
    response: OpenApiDocument,
  },
];

/** The document's tags, with what each groups. */
const TAGS: Readonly<Record<string, string>> = {
  ops: 'Health, readiness, metrics, this document and the inspector page',
  deployments: 'Deployments (immutable, content-addressed sandbox specs), their bundles, and channels',
  runs: 'Durable runs: turns, upgrades, lease recovery, restores',
  checkpoints: 'Checkpoints of a run: listing, browsing, downloading, diffing',
  auth: 'API tokens and who a token is',
  'work-folders': 'Work folders: collections of files shared by tasks, agents, users and projects',
};

const DESCRIPTION = [
  'The Holdfast service: durable runs and workspaces for agent sandboxes.',
  '',
  'Every error answer has the body `{error: {code, message, data}}`; branch on `code`. Every documented path answers a method it does not have with 405 `METHOD_NOT_ALLOWED` and an `Allow` header (`#/components/responses/MethodNotAllowed`).',
  '',
  'Writes under `/v1` take an optional `Idempotency-Key`: the first answer is kept for 24 h and replayed (`Idempotent-Replayed: true`) to the same token for the same key and request.',
  '',
  "Listings are paged: pass the answer's `nextCursor` as `cursor` for the next page.",
].join('\n');

/**
 * The HTTP API v1 (DESIGN section 12) over an open Holdfast: every `/v1` route but the OpenAPI
 * document needs a bearer token and acts inside the token's tenant only, so another tenant's
 * ids answer 404. Errors are `{error: {code, message, data}}`, mapped in one place. Every
 * route's request body is bounded while it streams (413 `LIMIT_EXCEEDED` past its limit).
 * The work-folder routes (`/api/companies/:companyId/work-folders/…`) take every token kind
 * (service, user, run) and decide with the folder policy, route by route.
 */
export function createApp(options: AppOptions): Hono<AppEnv> {
  const { hf, log, metrics } = options;
  const inspector = options.inspector ?? true;
  const app = new Hono<AppEnv>();
  app.use(requestLogger(log));
  app.use(httpMetrics(metrics));
  app.onError(errorHandler(log));
  registerRunMetrics(hf, metrics);
  engineMetrics(metrics, hf, options.version);

  const routes: RouteDef[] = [
    ...deploymentRoutes(hf),
    ...runRoutes(hf),
    ...checkpointRoutes(hf),
    ...tokenRoutes(hf),
    ...inspectorV1Routes(hf),
  ];
  const folderRoutes = [
    ...workFolderRoutes({ folders: hf.folders, sync: hf.folderSync, lookups: folderAccessLookups(hf.meta) }),
    ...inspectorAnyPrincipalRoutes(async (tenantId, userId) => (await hf.meta.users.find(tenantId, userId))?.name),
  ];
  const uploads = bundleRoutes(hf);
  // The receipt middleware keeps answers of writes only (`idempotency.ts`).
  const receipted = routes.map((r): RouteDoc => (r.doc.method === 'get' ? r.doc : { ...r.doc, idempotent: true }));
  const docs = [
    ...PUBLIC_DOCS,
    ...(inspector ? INSPECTOR_DOCS : []),
    ...receipted,
    ...uploads.map((r) => r.doc),
    ...folderRoutes.map((r) => r.doc),
  ];
  const info = { title: 'Holdfast API', version: options.version, description: DESCRIPTION, license: LICENSE, tags: TAGS };
  const openapi = OpenApiDocument.parse(buildOpenApi(info, docs));
  app.notFound(routeNotFound(docs));

  app.get('/healthz', (c) => c.json(answerAs(Health, { status: 'ok' })));
  app.get('/readyz', async (c) => {
    const started = performance.now();
    const [schemaVersion] = await Promise.all([hf.meta.schemaVersion(), hf.blobs.stat('probe/readyz')]);
    return c.json(answerAs(Readiness, { status: 'ready', schemaVersion, durationMs: Math.round(performance.now() - started) }));
  });
  app.get('/metrics', async (c) => c.body(await metrics.render(), 200, { 'content-type': PROMETHEUS_CONTENT_TYPE }));
  app.get('/v1/openapi.json', (c) => c.json(openapi));
  if (inspector) mountInspector(app);

  // Service and user tokens pass here; each route then serves only its own kinds (`servesKind`).
  app.use(
    '/v1/*',
    bearerAuth((hash) => hf.tokens.principal(hash), { kinds: V1_PRINCIPAL_KINDS }),
  );
  for (const route of routes) {
    const limit = bodyLimit(route.maxBodyBytes ?? MAX_REQUEST_BODY_BYTES);
    app.on(
      route.doc.method.toUpperCase(),
      route.doc.path,
      limit,
      servesKind(route),
      authorizeRoute(route),
      idempotency(hf.meta, route),
      route.handler,
    );
  }
  // Bundle uploads: no receipt middleware (it reads the body whole); the same content is the same bundle.
  for (const route of uploads) {
    const limit = bodyLimit(route.maxBodyBytes ?? MAX_REQUEST_BODY_BYTES);
    app.on(route.doc.method.toUpperCase(), route.doc.path, limit, servesKind(route), authorizeRoute(route), route.handler);
  }
  // Work folders (and who-am-I): every token kind; each folder route asks the folder policy itself. No receipt
  // middleware (it reads the body whole): their Idempotency-Key is the operation id `Folders` keeps.
  const anyPrincipal = bearerAuth((hash) => hf.tokens.principal(hash), { kinds: PRINCIPAL_KINDS });
  for (const route of folderRoutes) {
    const limit = bodyLimit(route.maxBodyBytes ?? MAX_REQUEST_BODY_BYTES);
    for (const path of workFolderPaths(route.doc.path)) app.on(route.doc.method.toUpperCase(), path, limit, anyPrincipal, route.handler);
  }
  return app;
}

/** The principal kinds some `/v1` route serves (`RouteDef.principals`); run tokens reach none. */
const V1_PRINCIPAL_KINDS: readonly PrincipalKind[] = ['service', 'user'];

/**
 * A principal of a kind the route does not serve (`RouteDef.principals`, default service only)
 * is `NOT_FOUND`, as `bearerAuth` answers it: to such a token the route does not exist.
 */
function servesKind(route: RouteDef): MiddlewareHandler<AppEnv> {
  const kinds = new Set<PrincipalKind>(route.principals ?? ['service']);
  return async (c, next) => {
    if (!kinds.has(c.get('principal').kind)) throw new NotFoundError(`no route ${c.req.method} ${c.req.path} for this token`, { data: {} });
    await next();
  };
}

/** The route's own authorization, before its idempotency receipt is consulted. */
function authorizeRoute(route: RouteDef): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    route.authorize?.(c.get('principal'));
    await next();
  };
}

/** Run metrics: turns by outcome, recorded steps by kind and outcome with their durations, active turns. */
function registerRunMetrics(hf: Holdfast, metrics: Metrics): void {
  metrics.gauge('holdfast_turns_active', 'Turns running in this process.', [], () => [{ labels: {}, value: hf.activeTurns() }]);
  const turns = metrics.counter('holdfast_turns_total', 'Turns finished in this process, by outcome.', ['outcome']);
  const steps = metrics.counter(
    'holdfast_run_steps_total',
    'Recorded run steps (recovery, upgrade, create, lease, sweep), by kind, step and status.',
    ['kind', 'step', 'status'],
  );
  const stepSeconds = metrics.histogram(
    'holdfast_run_step_duration_seconds',
    'Duration of recorded run steps.',
    [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    ['kind', 'step'],
  );
  hf.onRunEvent((event) => {
    if (event.event === 'turn_completed') turns.inc({ outcome: 'completed' });
    else if (event.event === 'turn_failed') turns.inc({ outcome: 'failed' });
    else if (event.event === 'step') {
      const labels = { kind: event.kind, step: event.step };
      steps.inc({ ...labels, status: event.status });
      stepSeconds.observe(labels, event.durationMs / 1000);
    }
  });
}
