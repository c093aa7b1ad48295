import { Hono, type MiddlewareHandler } from 'hono';
import { folderAccessLookups, PRINCIPAL_KINDS } from '../auth/folder-access.js';
import type { Holdfast } from '../index.js';
import { INSPECTOR_BASE_PATH, mountInspector } from '../inspector/server/inspector-assets.js';
import type { AppEnv } from './app-env.js';
import { bearerAuth } from './auth.js';
import { bodyLimit, MAX_REQUEST_BODY_BYTES } from './body-limit.js';
import { errorHandler, routeNotFound } from './error-response.js';
import { idempotency } from './idempotency.js';
import type { Logger } from './logger.js';
import { requestLogger } from './logger.js';
import { httpMetrics, type Metrics, PROMETHEUS_CONTENT_TYPE } from './metrics.js';
import { buildOpenApi, type RouteDoc } from './openapi.js';
import type { RouteDef } from './route.js';
import { bundleRoutes } from './routes/bundles.js';
import { checkpointRoutes } from './routes/checkpoints.js';
import { deploymentRoutes } from './routes/deployments.js';
import { inspectorAnyPrincipalRoutes, inspectorV1Routes } from './routes/inspector-support.js';
import { runRoutes } from './routes/runs.js';
import { tokenRoutes } from './routes/tokens.js';
import { workFolderRoutes } from './routes/work-folders.js';

/** What {@link createApp} needs. */
export interface AppOptions {
  readonly hf: Holdfast;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly version: string;
}

/** Public routes, documented with the rest. */
const PUBLIC_DOCS: readonly RouteDoc[] = [
  { method: 'get', path: '/healthz', summary: 'Liveness: the process answers', auth: false, tags: ['ops'] },
  { method: 'get', path: '/readyz', summary: 'Readiness: the metadata store and the blob store answer', auth: false, tags: ['ops'] },
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics (text format 0.0.4)',
    auth: false,
    tags: ['ops'],
    produces: 'text/plain',
  },
  { method: 'get', path: '/v1/openapi.json', summary: 'This document', auth: false, tags: ['ops'] },
  {
    method: 'get',
    path: INSPECTOR_BASE_PATH,
    summary: 'The inspector: a web page over this API (it asks for a token and sends it with every call)',
    auth: false,
    tags: ['ops'],
    produces: 'text/html',
  },
];

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
  const app = new Hono<AppEnv>();
  app.use(requestLogger(log));
  app.use(httpMetrics(metrics));
  app.onError(errorHandler(log));
  registerRunMetrics(hf, metrics);

  const routes: RouteDef[] = [
    ...deploymentRoutes(hf),
    ...runRoutes(hf),
    ...checkpointRoutes(hf),
    ...tokenRoutes(hf),
    ...inspectorV1Routes(hf),
  ];
  const folderRoutes = [
    ...workFolderRoutes({ folders: hf.folders, sync: hf.folderSync, lookups: folderAccessLookups(hf.meta) }),
    ...inspectorAnyPrincipalRoutes(),
  ];
  const uploads = bundleRoutes(hf);
  const docs = [...PUBLIC_DOCS, ...routes.map((r) => r.doc), ...uploads.map((r) => r.doc), ...folderRoutes.map((r) => r.doc)];
  const openapi = buildOpenApi({ title: 'Holdfast API', version: options.version }, docs);
  app.notFound(routeNotFound(docs));

  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const started = performance.now();
    const [schemaVersion] = await Promise.all([hf.meta.schemaVersion(), hf.blobs.stat('probe/readyz')]);
    return c.json({ status: 'ready', schemaVersion, durationMs: Math.round(performance.now() - started) });
  });
  app.get('/metrics', async (c) => c.body(await metrics.render(), 200, { 'content-type': PROMETHEUS_CONTENT_TYPE }));
  app.get('/v1/openapi.json', (c) => c.json(openapi));
  mountInspector(app);

  app.use(
    '/v1/*',
    bearerAuth((hash) => hf.tokens.principal(hash)),
  );
  for (const route of routes) {
    const limit = bodyLimit(route.maxBodyBytes ?? MAX_REQUEST_BODY_BYTES);
    app.on(route.doc.method.toUpperCase(), route.doc.path, limit, authorizeRoute(route), idempotency(hf.meta, route), route.handler);
  }
  // Bundle uploads: no receipt middleware (it reads the body whole); the same content is the same bundle.
  for (const route of uploads) {
    const limit = bodyLimit(route.maxBodyBytes ?? MAX_REQUEST_BODY_BYTES);
    app.on(route.doc.method.toUpperCase(), route.doc.path, limit, authorizeRoute(route), route.handler);
  }
  // Work folders (and who-am-I): every token kind; each folder route asks the folder policy itself. No receipt
  // middleware (it reads the body whole): their Idempotency-Key is the operation id `Folders` keeps.
  const anyPrincipal = bearerAuth((hash) => hf.tokens.principal(hash), { kinds: PRINCIPAL_KINDS });
  for (const route of folderRoutes) {
    const limit = bodyLimit(route.maxBodyBytes ?? MAX_REQUEST_BODY_BYTES);
    app.on(route.doc.method.toUpperCase(), route.doc.path, limit, anyPrincipal, route.handler);
  }
  return app;
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
