import type { Holdfast } from '../../index.js';
import { type RouteDef, readJson, readQuery, tenantServices } from '../route.js';
import { runsPage, turnsPage } from './list-pages.js';
import {
  CreatedRun,
  LimitQuery,
  PageQuery,
  RestoreBody,
  Run,
  RunBody,
  RunPage,
  RunWithRepositories,
  TurnBody,
  TurnPage,
  TurnResult,
  UpgradeBody,
} from './schemas.js';

/** Runs, turns, upgrades, lease resolution and restore into a new sandbox. */
export function runRoutes(hf: Holdfast): RouteDef[] {
  const tags = ['runs'];
  return [
    {
      doc: {
        method: 'post',
        path: '/v1/runs',
        summary:
          'Create a run on a channel or a pinned deployment, optionally bound to collections (then its run token is in the answer, once)',
        tags,
        body: RunBody,
        response: CreatedRun,
        responseStatus: 201,
      },
      // The run token's secret exists once: a replay answers the run with `runToken: null`.
      credentialFields: ['runToken'],
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        return c.json(await runs.create(await readJson(c, RunBody)), 201);
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/end',
        summary: 'End a run (idempotent): no more turns, and its run tokens reach nothing',
        tags,
        response: Run,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        return c.json(await runs.end(c.req.param('id') ?? ''));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/runs',
        summary: 'List runs, newest first, a page at a time',
        tags,
        query: PageQuery,
        response: RunPage,
      },
      async handler(c) {
        const page = await runsPage(hf.meta, await tenantServices(hf, c), readQuery(c, PageQuery));
        return c.json({ runs: page.items, nextCursor: page.nextCursor });
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/runs/:id',
        summary: 'Get a run with its lease, sandbox and repository checkouts',
        tags,
        response: RunWithRepositories,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const run = await runs.get(c.req.param('id') ?? '');
        return c.json({ ...run, repositories: await hf.repositories.status(run) });
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/runs/:id/events',
        summary: 'Recorded steps (recoveries, upgrades, lease changes) with timings',
        tags,
        query: LimitQuery,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        return c.json({ events: await runs.events(c.req.param('id') ?? '', readQuery(c, LimitQuery).limit) });
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/runs/:id/turns',
        summary: 'Turns of a run, newest first, a page at a time',
        tags,
        query: PageQuery,
        response: TurnPage,
      },
      async handler(c) {
        const page = await turnsPage(hf.meta, await tenantServices(hf, c), c.req.param('id') ?? '', readQuery(c, PageQuery));
        return c.json({ turns: page.items, nextCursor: page.nextCursor });
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/turns',
        summary:
          'Run a command as one turn: ensures the sandbox (recovering or upgrading it), runs argv in the workspace, and answers once the turn checkpoint is the ready head',
        tags,
        body: TurnBody,
        response: TurnResult,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const body = await readJson(c, TurnBody);
        const outcome = await runs.command(c.req.param('id') ?? '', body);
        const { value } = outcome;
        return c.json({
          turn: outcome.turn,
          checkpoint: outcome.checkpoint,
          exit: { code: value.code, signal: value.signal, timedOut: value.timedOut },
          stdout: value.stdout.toString('utf8'),
          stderr: value.stderr.toString('utf8'),
        });
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/upgrade',
        summary: "Move a run to its channel's active deployment (or the one named) now, whatever the policy",
        tags,
        body: UpgradeBody,
        response: Run,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const body = await readJson(c, UpgradeBody);
        return c.json(
          await runs.upgrade(c.req.param('id') ?? '', body.deploymentId === undefined ? {} : { deploymentId: body.deploymentId }),
        );
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/lease/resolve',
        summary: 'Clear release_recovery_required after checking the provider',
        tags,
        response: Run,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        return c.json(await runs.resolveLease(c.req.param('id') ?? ''));
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/restore',
        summary: 'Restore a checkpoint of the run (default: its head) into a new sandbox of its deployment',
        tags,
        body: RestoreBody,
        responseStatus: 201,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const body = await readJson(c, RestoreBody);
        const restored = await runs.restore(
          c.req.param('id') ?? '',
          body.checkpointId === undefined ? {} : { checkpointId: body.checkpointId },
        );
        const { sandbox } = restored;
        return c.json(
          {
            sandbox: { provider: sandbox.provider, id: sandbox.id, workspaceRoot: sandbox.workspaceRoot },
            deploymentId: restored.deployment.id,
            checkpointId: restored.receipt.checkpointId,
          },
          201,
        );
      },
    },
  ];
}
