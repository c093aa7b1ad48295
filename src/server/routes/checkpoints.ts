import { Readable } from 'node:stream';
import { z } from 'zod';
import type { Holdfast } from '../../index.js';
import { answerAs, type RouteDef, readJson, readQuery, tenantServices } from '../route.js';
import { checkpointsPage } from './list-pages.js';
import { ID_PREFIX_ERRORS, RUN_WORK_ERRORS } from './runs.js';
import {
  Checkpoint,
  CheckpointNoteBody,
  CheckpointPage,
  FilePathQuery,
  PageQuery,
  PathQuery,
  RestoredSandbox,
  TreeLookup,
} from './schemas.js';
import { attachmentDisposition, DOWNLOAD_HEADERS } from './work-folders-content.js';

/**
 * The headers of a checkpoint file download: those of every work-folder download (never
 * sniffed, rendered only in a sandbox, always an attachment), except that this route serves
 * no ranges.
 */
function checkpointFileHeaders(path: string, size: number | undefined): Record<string, string> {
  return {
    ...DOWNLOAD_HEADERS,
    'accept-ranges': 'none',
    'content-type': 'application/octet-stream',
    'content-disposition': attachmentDisposition(path),
    ...(size === undefined ? {} : { 'content-length': String(size) }),
  };
}

/** Checkpoints: by run, one by id, a directory listing, a file download. */
export function checkpointRoutes(hf: Holdfast): RouteDef[] {
  const tags = ['checkpoints'];
  return [
    {
      doc: {
        method: 'post',
        path: '/v1/runs/:id/checkpoints',
        operationId: 'checkpointRun',
        summary: "Checkpoint a run's sandbox now (reason manual), with an optional label and metadata",
        tags,
        body: CheckpointNoteBody,
        response: Checkpoint,
        responseStatus: 201,
        errors: [...RUN_WORK_ERRORS, 'SECRET_EXCLUDED', 'LIMIT_EXCEEDED'],
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const { label, meta } = await readJson(c, CheckpointNoteBody);
        const note = { ...(label === undefined ? {} : { label }), ...(meta === undefined ? {} : { meta }) };
        return c.json(answerAs(Checkpoint, await runs.checkpoint(c.req.param('id') ?? '', note)), 201);
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/runs/:id/checkpoints',
        operationId: 'listCheckpoints',
        errors: ID_PREFIX_ERRORS,
        summary: "A run's checkpoints, newest first (failed ones with their errors), a page at a time",
        tags,
        query: PageQuery,
        response: CheckpointPage,
      },
      async handler(c) {
        const page = await checkpointsPage(hf.meta, await tenantServices(hf, c), c.req.param('id') ?? '', readQuery(c, PageQuery));
        return c.json(answerAs(CheckpointPage, { checkpoints: page.items, nextCursor: page.nextCursor }));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/checkpoints/:id',
        operationId: 'getCheckpoint',
        errors: ID_PREFIX_ERRORS,
        summary: 'Get a checkpoint',
        tags,
        response: Checkpoint,
      },
      async handler(c) {
        const { checkpoints } = await tenantServices(hf, c);
        return c.json(answerAs(Checkpoint, await checkpoints.get(c.req.param('id') ?? '')));
      },
    },
    {
      doc: {
        method: 'post',
        path: '/v1/checkpoints/:id/restore',
        operationId: 'restoreCheckpoint',
        summary:
          "Restore a checkpoint by its id alone (exact, unique prefix or latest) into a new sandbox of its run's deployment (the caller destroys it)",
        tags,
        response: RestoredSandbox,
        responseStatus: 201,
        errors: [...ID_PREFIX_ERRORS, ...RUN_WORK_ERRORS],
        responses: { 400: { description: 'Bad input, the checkpoint is not ready, or it is of no run' } },
      },
      async handler(c) {
        const { runs } = await tenantServices(hf, c);
        const restored = await runs.restoreCheckpoint(c.req.param('id') ?? '');
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
    {
      doc: {
        method: 'get',
        path: '/v1/checkpoints/:id/tree',
        operationId: 'listCheckpointTree',
        summary: 'List a directory (or describe one entry) inside a ready checkpoint',
        tags,
        query: PathQuery,
        response: TreeLookup,
        errors: [...ID_PREFIX_ERRORS, 'INVALID_PATH', 'INTEGRITY'],
        responses: { 400: { description: 'Bad input, or the checkpoint is not ready' } },
      },
      async handler(c) {
        const { checkpoints } = await tenantServices(hf, c);
        return c.json(answerAs(TreeLookup, await checkpoints.ls(c.req.param('id') ?? '', readQuery(c, PathQuery).path ?? '')));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/checkpoints/:id/file',
        operationId: 'downloadCheckpointFile',
        summary: "Download a file's bytes from a ready checkpoint (verified as streamed), always as an attachment",
        tags,
        query: FilePathQuery,
        produces: 'application/octet-stream',
        responseHeaders: {
          'Content-Length': { description: 'Bytes of the file', required: true, schema: z.string().regex(/^[0-9]+$/) },
          'Content-Disposition': {
            description: '`attachment` with the file name (ASCII fallback and RFC 8187 UTF-8)',
            required: true,
            schema: z.string().regex(/^attachment;/),
          },
          'Cache-Control': { description: '`private, no-store`', required: true, schema: z.literal('private, no-store') },
          'X-Content-Type-Options': { description: '`nosniff`', required: true, schema: z.literal('nosniff') },
          'Content-Security-Policy': {
            description: "`sandbox; default-src 'none'`",
            required: true,
            schema: z.literal("sandbox; default-src 'none'"),
          },
        },
        errors: [...ID_PREFIX_ERRORS, 'INVALID_PATH', 'INTEGRITY'],
        responses: { 400: { description: 'Bad input, or the checkpoint is not ready' } },
      },
      async handler(c) {
        const { checkpoints } = await tenantServices(hf, c);
        const id = c.req.param('id') ?? '';
        const { path } = readQuery(c, FilePathQuery);
        const lookup = await checkpoints.ls(id, path);
        const chunks = checkpoints.cat(id, path);
        // Read the first chunk before answering, so a missing or corrupt file is an error status, not a cut stream.
        const first = await chunks.next();
        const body = Readable.from(
          (async function* () {
            if (first.done !== true) yield first.value;
            yield* chunks;
          })(),
        );
        const size = lookup.kind === 'entry' && lookup.entry.type === 'file' ? lookup.entry.size : undefined;
        return new Response(Readable.toWeb(body) as ReadableStream, { headers: checkpointFileHeaders(path, size) });
      },
    },
  ];
}
