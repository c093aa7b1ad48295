/**
 * Routes the inspector (`/ui/`) needs beyond the rest of the API: who the signed-in token is
 * (any token kind, so a person's token can find its own collections) and what changed in a
 * checkpoint against its parent.
 */
import { z } from 'zod';
import type { Holdfast } from '../../index.js';
import { answerAs, type RouteDef, readQuery, tenantServices } from '../route.js';
import { ID_PREFIX_ERRORS } from './runs.js';

/** Most changes one diff answer carries; past it `truncated` is true (the CLI's `holdfast diff` gives them all). */
export const MAX_DIFF_CHANGES = 5_000;

export const DiffQuery = z.object({
  against: z.string().min(1).max(128).optional().describe('The checkpoint to compare with (default: the parent)'),
});

export const DiffChange = z.object({
  path: z.string(),
  change: z.enum(['added', 'removed', 'modified', 'type-changed', 'mode-changed']),
  type: z.enum(['file', 'dir', 'symlink']),
});

export const CheckpointDiff = z.object({
  checkpointId: z.string(),
  baseId: z.string().nullable().describe('The checkpoint compared with; `null` when there is none (a first checkpoint)'),
  changes: z.array(DiffChange),
  truncated: z.boolean(),
});

export const WhoAmI = z.object({
  kind: z.enum(['service', 'user', 'run']),
  tenant: z.string().describe('The tenant name (the `:companyId` of the work-folder routes)'),
  admin: z.boolean().optional().describe('service tokens: may manage tenants and tokens'),
  user: z.string().optional().describe('user tokens: the user name (the `:ownerId` of their user collection in the work-folder routes)'),
  userId: z.string().optional().describe("user tokens: the user's immutable id (a later user of the same name has another)"),
  role: z.enum(['member', 'viewer']).optional(),
  runId: z.string().optional().describe('run tokens: the run'),
  bindings: z
    .record(z.string(), z.string())
    .optional()
    .describe("run tokens: the owners the run is bound to (the user's name for `user`, as the work-folder routes take it)"),
});

/** The diff route, served to service tokens like the rest of `/v1`. */
export function inspectorV1Routes(hf: Holdfast): RouteDef[] {
  return [
    {
      doc: {
        method: 'get',
        path: '/v1/checkpoints/:id/diff',
        operationId: 'diffCheckpoint',
        summary: `What changed in a ready checkpoint against its parent (or ?against=), at most ${MAX_DIFF_CHANGES} changes`,
        tags: ['checkpoints'],
        query: DiffQuery,
        response: CheckpointDiff,
        errors: [...ID_PREFIX_ERRORS, 'INTEGRITY'],
      },
      async handler(c) {
        const { checkpoints, snapshots } = await tenantServices(hf, c);
        const id = c.req.param('id') ?? '';
        const { against } = readQuery(c, DiffQuery);
        const checkpoint = await checkpoints.get(id);
        const baseId = against ?? checkpoint.parentId;
        if (baseId === null)
          return c.json(answerAs(CheckpointDiff, { checkpointId: checkpoint.id, baseId: null, changes: [], truncated: false }));
        const changes = await snapshots.diff(baseId, checkpoint.id);
        return c.json(
          answerAs(CheckpointDiff, {
            checkpointId: checkpoint.id,
            baseId,
            changes: changes.slice(0, MAX_DIFF_CHANGES),
            truncated: changes.length > MAX_DIFF_CHANGES,
          }),
        );
      },
    },
  ];
}

/**
 * `GET /api/whoami`, mounted for every token kind (service, user, run). `userName` finds the
 * name of a tenant's user (live or revoked) by its row id, which is what bindings hold.
 */
export function inspectorAnyPrincipalRoutes(userName: (tenantId: string, userId: string) => Promise<string | undefined>): RouteDef[] {
  return [
    {
      doc: {
        method: 'get',
        path: '/api/whoami',
        operationId: 'whoAmI',
        summary: 'Who the bearer token is: its kind, tenant and, for a user or run token, the user or run (never the secret)',
        tags: ['auth'],
        response: WhoAmI,
      },
      async handler(c) {
        const principal = c.get('principal');
        const base = { kind: principal.kind, tenant: principal.tenantName };
        switch (principal.kind) {
          case 'service':
            return c.json(answerAs(WhoAmI, { ...base, admin: principal.admin }));
          case 'user':
            return c.json(answerAs(WhoAmI, { ...base, user: principal.userName, userId: principal.userId, role: principal.role }));
          case 'run': {
            // The collections it reaches; its repositories are not collections.
            const { repos: _repos, ...owners } = principal.bindings;
            const name = owners.user === undefined ? undefined : await userName(principal.tenantId, owners.user);
            const shown = name === undefined ? owners : { ...owners, user: name };
            return c.json(answerAs(WhoAmI, { ...base, runId: principal.runId, bindings: shown }));
          }
        }
      },
    },
  ];
}
