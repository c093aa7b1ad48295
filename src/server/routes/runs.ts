import type { ErrorCode } from '../../errors.js';
import type { Holdfast } from '../../index.js';
import { answerAs, type RouteDef, readJson, readQuery, tenantServices } from '../route.js';
import { runsPage, turnsPage } from './list-pages.js';
import {
  CreatedRun,
  EndRunBody,
  LimitQuery,
  PageQuery,
  RestoreBody,
  RestoredSandbox,
  Run,
  RunBody,
  RunEventList,
  RunPage,
  RunWithRepositories,
  TurnBody,
  TurnPage,
  TurnResult,
  UpgradeBody,
} from './schemas.js';

/**
 * What work in a run's sandbox (a turn, an upgrade, a checkpoint, a restore) may answer: the
 * run busy, ended or taken over (409), setup or validation failing (422), a timeout (504), the
 * server shutting down before the work finished (503), the store full (507), corrupt or
 * incomplete data (500).
 */
export const RUN_WORK_ERRORS: readonly ErrorCode[] = [
  'CONFLICT',
  'STALE_LEASE',
  'CANCELLED',
  'INTERRUPTED',
  'WORKSPACE_CHANGED',
  'SETUP_FAILED',
  'TIMEOUT',
  'STORE_FULL',
  'INTEGRITY',
  'RESTORE_INCOMPLETE',
];

/** What a route taking a run or checkpoint id (exact, a unique prefix of 8+ characters, or `latest`) may answer: a prefix several match. */
export const ID_PREFIX_ERRORS: readonly ErrorCode[] = ['CONFLICT'];

/** Runs, turns, upgrades, lease resolution and restore into a new sandbox. */
export function runRoutes(hf: Holdfast): RouteDef[] {
  const tags = ['runs'];
  return [
    {
      doc: {
        method: 'post',
        path: '/v1/runs',
        operationId: 'createRun',
        summary:
          'Create a run on a channel or a pinned deployment, or fork one from any checkpoint of the tenant (no byte copied), optionally bound to collections (then its run token is in the answer, once)',
        tags,
        body: RunBody,
        response: CreatedRun,
        responseStatus: 201,
        errors: ['FORBIDDEN', ...ID_PREFIX_ERRORS, 'SECRET_EXCLUDED', 'LIMIT_EXCEEDED'],
        responses: {
          403: {
            description: "bindings.user without that user's consent: only a token of that user may bind it (data.field names the binding)",
          },
        },
      },
      // The run token's secret exists once: a replay answers the run with `runToken: null`.
      credentialFields: ['runToken'],
      // A user token may create a run: binding a user's folder needs a token of that user (`Runs.create`).
      principals: ['service', 'user'],
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const body = await readJson(c, RunBody);
        const caller = { caller: c.get('principal') };
        const created = 'fromCheckpoint' in body ? await runs.fork(body, caller) : await runs.create(body, caller);
        return c.json(answerAs(CreatedRun, await runs.named(created)), 201);
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/end',
        operationId: 'endRun',
        errors: RUN_WORK_ERRORS,
        summary:
          'End a run (idempotent): no more turns, and its run tokens reach nothing; its sandbox is saved (a final checkpoint) and destroyed unless keepSandbox',
        tags,
        body: EndRunBody,
        response: Run,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const body = await readJson(c, EndRunBody);
        return c.json(answerAs(Run, await runs.named(await runs.end(c.req.param('id') ?? '', { keepSandbox: body.keepSandbox }))));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/runs',
        operationId: 'listRuns',
        summary: 'List runs, newest first, a page at a time',
        tags,
        query: PageQuery,
        response: RunPage,
      },
      async handler(c) {
        const services = await tenantServices(hf, c);
        const page = await runsPage(hf.meta, services, readQuery(c, PageQuery));
        const named = await Promise.all(page.items.map((run) => services.runs.named(run)));
        return c.json(answerAs(RunPage, { runs: named, nextCursor: page.nextCursor }));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/runs/:id',
        operationId: 'getRun',
        errors: ID_PREFIX_ERRORS,
        summary: 'Get a run with its lease, sandbox and repository checkouts',
        tags,
        response: RunWithRepositories,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const run = await runs.get(c.req.param('id') ?? '');
        return c.json(answerAs(RunWithRepositories, { ...(await runs.named(run)), repositories: await hf.repositories.status(run) }));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/runs/:id/events',
        operationId: 'listRunEvents',
        errors: ID_PREFIX_ERRORS,
        summary: 'Recorded steps (recoveries, upgrades, lease changes) with timings, newest first',
        tags,
        query: LimitQuery,
        response: RunEventList,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        return c.json(answerAs(RunEventList, { events: await runs.events(c.req.param('id') ?? '', readQuery(c, LimitQuery).limit) }));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/runs/:id/turns',
        operationId: 'listTurns',
        errors: ID_PREFIX_ERRORS,
        summary: 'Turns of a run, newest first, a page at a time',
        tags,
        query: PageQuery,
        response: TurnPage,
      },
      async handler(c) {
        const page = await turnsPage(hf.meta, await tenantServices(hf, c), c.req.param('id') ?? '', readQuery(c, PageQuery));
        return c.json(answerAs(TurnPage, { turns: page.items, nextCursor: page.nextCursor }));
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/turns',
        operationId: 'runTurn',
        summary:
          'Run a command as one turn: ensures the sandbox (recovering or upgrading it), runs argv in the workspace, and answers once the turn checkpoint is the ready head',
        tags,
        body: TurnBody,
        response: TurnResult,
        errors: RUN_WORK_ERRORS,
        responses: {
          409: { description: 'The run is busy with another turn (past waitMs), has ended, or its lease was taken over' },
          413: { description: 'The body is too large, or the command wrote more output than a turn keeps' },
        },
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const { checkpoint, ...command } = await readJson(c, TurnBody);
        const outcome = await runs.command(c.req.param('id') ?? '', { ...command, ...(checkpoint === undefined ? {} : { checkpoint }) });
        const { value } = outcome;
        return c.json(
          answerAs(TurnResult, {
            turn: outcome.turn,
            checkpoint: outcome.checkpoint,
            exit: { code: value.code, signal: value.signal, timedOut: value.timedOut },
            stdout: value.stdout.toString('utf8'),
            stderr: value.stderr.toString('utf8'),
          }),
        );
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/upgrade',
        operationId: 'upgradeRun',
        summary: "Move a run to its channel's active deployment (or the one named) now, whatever the policy",
        tags,
        body: UpgradeBody,
        response: Run,
        errors: RUN_WORK_ERRORS,
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const body = await readJson(c, UpgradeBody);
        const run = await runs.upgrade(c.req.param('id') ?? '', body.deploymentId === undefined ? {} : { deploymentId: body.deploymentId });
        return c.json(answerAs(Run, await runs.named(run)));
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/lease/resolve',
        operationId: 'resolveRunLease',
        summary: 'Clear release_recovery_required after checking the provider',
        tags,
        response: Run,
        errors: ID_PREFIX_ERRORS,
        responses: { 409: { description: 'The lease does not need recovery, or the id prefix matches several runs' } },
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        return c.json(answerAs(Run, await runs.named(await runs.resolveLease(c.req.param('id') ?? ''))));
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/restore',
        operationId: 'restoreRun',
        summary: 'Restore a checkpoint of the run (default: its head) into a new sandbox of its deployment (the caller destroys it)',
        tags,
        body: RestoreBody,
        response: RestoredSandbox,
        responseStatus: 201,
        errors: RUN_WORK_ERRORS,
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
          answerAs(RestoredSandbox, {
            sandbox: { provider: sandbox.provider, id: sandbox.id, workspaceRoot: sandbox.workspaceRoot },
            deploymentId: restored.deployment.id,
            checkpointId: restored.receipt.checkpointId,
          }),
          201,
        );
      },
    },
  ];
}
