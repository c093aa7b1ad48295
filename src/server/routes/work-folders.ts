/**
 * The work-folder routes (issue 12, DESIGN section 10): every route under
 * {@link WORK_FOLDERS_BASE} asks `canAccessFolder` before it does anything else and answers
 * every denial with the same 404 `NOT_FOUND`, so a caller learns nothing about a collection it
 * may not reach (not even that it exists, nor whether a path in it is valid). The tenant in the
 * path (`:companyId`) is the tenant's name, as everywhere else in the API (`POST /v1/tokens`,
 * `--tenant`); another tenant's name is such a denial.
 *
 * Mutations are idempotent by their `Idempotency-Key`, which is the `Folders` operation id (kept
 * for the collection's life, shared by every caller of the collection), not the per-token
 * receipt of the `/v1` routes: a retry from another process or a sandbox sync is the same
 * operation. Uploads stream into `Folders.write`, bounded by the folder file limit.
 */
import type { Context } from 'hono';
import { z } from 'zod';
import { NotFoundError } from '../../errors.js';
import type { FolderRef, Folders } from '../../folders/folders.js';
import type { FolderSync } from '../../folders/sandbox-sync.js';
import { FOLDER_SCOPES, type FolderScope } from '../../model/folder-scopes.js';
import { canAccessFolder, type FolderAccessLookups, type FolderAction, type FolderTarget } from '../../tenants/folder-access.js';
import type { AppEnv } from '../app-env.js';
import type { HeaderDoc } from '../openapi.js';
import { answerAs, type RouteDef, readJson, readQuery } from '../route.js';
import { downloadResponse, requestChunks, requireOctetStream } from './work-folders-content.js';
import {
  FolderDownloadHeaders,
  FolderListPage,
  FolderListQuery,
  FolderOperationBody,
  FolderOperationHeaders,
  FolderOperationResult,
  FolderPathParams,
  FolderPathQuery,
  FolderPurgeCollectionResult,
  FolderRefreshBody,
  FolderRefreshResult,
  FolderSyncList,
  FolderUploadHeaders,
  FolderWriteResult,
  WORK_FOLDERS_BASE,
} from './work-folders-schemas.js';

/** Longest owner id a collection can have (`FolderRef.ownerId`); anything else names no collection. */
const MAX_OWNER_ID_CHARS = 256;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this rejects
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/** What the work-folder routes need: the library and the lookups of the access policy. */
export interface WorkFolderRouteDeps {
  readonly folders: Folders;
  /** Per-sandbox save state and queued refreshes (`…/sync`, `…/refresh`). */
  readonly sync: Pick<FolderSync, 'status' | 'requestRefresh'>;
  readonly lookups: FolderAccessLookups;
}

/** The one answer to every denial: nothing about the collection, the path or the reason. */
function denied(): NotFoundError {
  return new NotFoundError('work folder not found', { data: {} });
}

/**
 * The collection a request addresses, once the caller may do `action` on it; otherwise the
 * denial (`NOT_FOUND`). A scope outside {@link FOLDER_SCOPES}, an owner id no collection can
 * have, and another tenant's name are denials too: they name no collection this caller has.
 */
async function collectionFor(c: Context<AppEnv>, action: FolderAction, lookups: FolderAccessLookups): Promise<FolderRef> {
  const principal = c.get('principal');
  const scope = c.req.param('scope') ?? '';
  const ownerId = c.req.param('ownerId') ?? '';
  if (c.req.param('companyId') !== principal.tenantName) throw denied();
  if (!(FOLDER_SCOPES as readonly string[]).includes(scope)) throw denied();
  if (ownerId.length === 0 || ownerId.length > MAX_OWNER_ID_CHARS || CONTROL_CHARACTER.test(ownerId)) throw denied();
  const ref: FolderRef = {
    tenantId: principal.tenantId,
    scope: scope as FolderScope,
    ownerId: await collectionOwner(principal.tenantId, scope, ownerId, lookups),
  };
  const target: FolderTarget = ref;
  if (!(await canAccessFolder(principal, target, action, lookups))) throw denied();
  return ref;
}

/**
 * The owner id of the collection a path segment names. For the `user` scope the segment is the
 * user's name, as people type it, and the owner is the row id of the tenant's live user of that
 * name (so a revoked user's collection is reached by no name, and a reused name reaches only its
 * new user's); no live user of that name is a denial. Other scopes' owners are the segment itself.
 */
async function collectionOwner(tenantId: string, scope: string, segment: string, lookups: FolderAccessLookups): Promise<string> {
  if (scope !== 'user') return segment;
  const id = await lookups.liveUserId(tenantId, segment);
  if (id === undefined) throw denied();
  return id;
}

/** The operation id of a mutation: its `Idempotency-Key`, required (`INVALID_INPUT` without). */
function operationIdOf(c: Context<AppEnv>): string {
  return FolderOperationHeaders.parse({ 'Idempotency-Key': c.req.header('idempotency-key') })['Idempotency-Key'];
}

/**
 * The routes. `maxBodyBytes` of the upload is the folder file limit, enforced while the body
 * streams (`app.ts` mounts these routes without the receipt middleware, which would read the
 * body whole).
 */
export function workFolderRoutes({ folders, sync, lookups }: WorkFolderRouteDeps): RouteDef[] {
  const tags = ['work-folders'];
  return [
    {
      doc: {
        method: 'get',
        path: WORK_FOLDERS_BASE,
        operationId: 'listFolderFiles',
        summary: 'List the live files of a collection (or its trash, ?trash=true), a page at a time',
        tags,
        params: FolderPathParams,
        query: FolderListQuery,
        response: FolderListPage,
      },
      async handler(c) {
        const ref = await collectionFor(c, 'read', lookups);
        const query = readQuery(c, FolderListQuery);
        const page = await folders.list(ref, {
          trash: query.trash === true,
          ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
          ...(query.limit === undefined ? {} : { limit: query.limit }),
        });
        return c.json(answerAs(FolderListPage, page));
      },
    },
    {
      doc: {
        method: 'delete',
        path: WORK_FOLDERS_BASE,
        operationId: 'purgeFolderCollection',
        summary: "Purge the owner's whole collection for good (service tokens only; never a user collection)",
        tags,
        params: FolderPathParams,
        response: FolderPurgeCollectionResult,
      },
      async handler(c) {
        const ref = await collectionFor(c, 'purge-collection', lookups);
        return c.json(answerAs(FolderPurgeCollectionResult, await folders.purgeCollection(ref)));
      },
    },
    {
      doc: {
        method: 'get',
        path: `${WORK_FOLDERS_BASE}/content`,
        operationId: 'downloadFolderFile',
        summary: "Download a file's bytes (streamed, verified; always an attachment, never cached, sandboxed), one Range supported",
        tags,
        params: FolderPathParams,
        query: FolderPathQuery,
        headers: FolderDownloadHeaders,
        // The stored content type when it is a plain `type/subtype`, else application/octet-stream.
        produces: '*/*',
        responseHeaders: DOWNLOAD_RESPONSE_HEADERS,
        errors: ['INVALID_PATH', 'RANGE_NOT_SATISFIABLE', 'INTEGRITY'],
        responses: {
          206: { description: 'The byte range asked for', produces: '*/*', headers: PARTIAL_RESPONSE_HEADERS },
          416: { description: 'The range lies past the end of the file' },
        },
      },
      async handler(c) {
        const ref = await collectionFor(c, 'read', lookups);
        const { path } = readQuery(c, FolderPathQuery);
        return downloadResponse(c, folders, ref, path);
      },
    },
    {
      doc: {
        method: 'put',
        path: `${WORK_FOLDERS_BASE}/content`,
        operationId: 'uploadFolderFile',
        summary: 'Upload a file (raw bytes, streamed; published only when complete, within the size limit and matching X-File-SHA256)',
        tags,
        params: FolderPathParams,
        query: FolderPathQuery,
        headers: FolderUploadHeaders,
        consumes: 'application/octet-stream',
        response: FolderWriteResult,
        errors: ['INVALID_PATH', 'CONFLICT', 'STORE_FULL'],
        responses: {
          409: {
            description:
              'The Idempotency-Key was used with other content, the body does not match X-File-SHA256, or a directory is at the path (nothing published)',
          },
          413: { description: 'The body is larger than the folder file limit (nothing published)' },
          415: { description: 'The body is not declared as application/octet-stream' },
        },
      },
      maxBodyBytes: folders.limits.maxFileBytes,
      async handler(c) {
        // Whatever refuses an upload, the rest of its body is not wanted: close rather than drain it.
        try {
          const ref = await collectionFor(c, 'write', lookups);
          requireOctetStream(c);
          const { path } = readQuery(c, FolderPathQuery);
          const headers = FolderUploadHeaders.parse({
            'Idempotency-Key': c.req.header('idempotency-key'),
            'X-File-Content-Type': c.req.header('x-file-content-type'),
            'X-File-Executable': c.req.header('x-file-executable'),
            'X-File-SHA256': c.req.header('x-file-sha256'),
            'X-File-Replace-Kind': c.req.header('x-file-replace-kind'),
          });
          const contentType = headers['X-File-Content-Type'];
          const expectedSha256 = headers['X-File-SHA256']?.toLowerCase();
          const result = await folders.write(ref, path, requestChunks(c), {
            operationId: headers['Idempotency-Key'],
            executable: headers['X-File-Executable'] === true,
            replaceKind: headers['X-File-Replace-Kind'] === true,
            ...(contentType === undefined ? {} : { contentType }),
            ...(expectedSha256 === undefined ? {} : { expectedSha256 }),
          });
          return c.json(answerAs(FolderWriteResult, result));
        } catch (error) {
          c.header('connection', 'close');
          throw error;
        }
      },
    },
    {
      doc: {
        method: 'post',
        path: `${WORK_FOLDERS_BASE}/operations`,
        operationId: 'applyFolderOperation',
        summary: 'mkdir or delete (to the trash) a path, restore or purge a trashed row; idempotent by Idempotency-Key',
        tags,
        params: FolderPathParams,
        headers: FolderOperationHeaders,
        body: FolderOperationBody,
        response: FolderOperationResult,
        errors: ['INVALID_PATH', 'CONFLICT'],
        responses: { 409: { description: 'The Idempotency-Key was used for another operation, or the path is taken by another kind' } },
      },
      async handler(c) {
        const ref = await collectionFor(c, 'write', lookups);
        const operationId = operationIdOf(c);
        const op = await readJson(c, FolderOperationBody);
        const options = { operationId };
        switch (op.action) {
          case 'mkdir': {
            const done = await folders.mkdir(ref, op.path, op.replaceKind === true ? { ...options, replaceKind: true } : options);
            return c.json(answerAs(FolderOperationResult, { action: op.action, applied: done.applied, entry: done.entry }));
          }
          case 'delete': {
            const done = await folders.remove(ref, op.path, options);
            return c.json(answerAs(FolderOperationResult, { action: op.action, applied: done.applied, removed: done.removed }));
          }
          case 'restore': {
            const done = await folders.restore(ref, op.fileId, options);
            return c.json(answerAs(FolderOperationResult, { action: op.action, applied: done.applied, restored: done.restored }));
          }
          case 'purge': {
            const done = await folders.purge(ref, op.fileId, options);
            return c.json(answerAs(FolderOperationResult, { action: op.action, applied: done.applied, purged: done.purged }));
          }
        }
      },
    },
    {
      doc: {
        method: 'get',
        path: `${WORK_FOLDERS_BASE}/sync`,
        operationId: 'getFolderSyncStatus',
        summary: 'The save state of the collection in every sandbox that synced it (saving, saved, failed, or never saved), oldest first',
        tags,
        params: FolderPathParams,
        response: FolderSyncList,
      },
      async handler(c) {
        const ref = await collectionFor(c, 'read', lookups);
        const principal = c.get('principal');
        const sandboxes = await sync.status({ id: principal.tenantId, name: principal.tenantName }, ref);
        return c.json(answerAs(FolderSyncList, { sandboxes }));
      },
    },
    {
      doc: {
        method: 'post',
        path: `${WORK_FOLDERS_BASE}/refresh`,
        operationId: 'refreshFolder',
        summary:
          "Queue a refresh of the collection in a bound run's sandbox for the run's next safe boundary (after a successful final flush)",
        tags,
        params: FolderPathParams,
        body: FolderRefreshBody,
        response: FolderRefreshResult,
        responseStatus: 202,
        errors: ['CONFLICT'],
        responses: { 409: { description: 'The run has ended' } },
      },
      async handler(c) {
        const ref = await collectionFor(c, 'write', lookups);
        const { runId } = await readJson(c, FolderRefreshBody);
        const principal = c.get('principal');
        const queued = await sync.requestRefresh({ id: principal.tenantId, name: principal.tenantName }, runId, ref);
        return c.json(answerAs(FolderRefreshResult, queued), 202);
      },
    },
  ];
}

/**
 * The paths a work-folder route is served at: its documented path, and for the collection itself
 * also that path with a trailing slash (`GET …/:ownerId/` lists the collection, as the collection's
 * `GET /` always meant; without this it was a 405 naming GET among the allowed methods). The slash
 * form is not documented: OpenAPI paths take no trailing slash.
 */
export function workFolderPaths(path: string): readonly string[] {
  return path === WORK_FOLDERS_BASE ? [path, `${path}/`] : [path];
}

/** Headers every download carries (`work-folders-content.ts`). */
const DOWNLOAD_RESPONSE_HEADERS: Readonly<Record<string, HeaderDoc>> = {
  'Content-Type': always('The content type stored with the file when it is a plain `type/subtype`, else application/octet-stream'),
  'Content-Length': always('Bytes of the file', z.string().regex(/^[0-9]+$/)),
  'Content-Disposition': always('`attachment` with the file name (ASCII fallback and RFC 8187 UTF-8)', z.string().regex(/^attachment;/)),
  'Cache-Control': always('`private, no-store`', z.literal('private, no-store')),
  'X-Content-Type-Options': always('`nosniff`', z.literal('nosniff')),
  'Content-Security-Policy': always("`sandbox; default-src 'none'`", z.literal("sandbox; default-src 'none'")),
  'Accept-Ranges': always('`bytes`', z.literal('bytes')),
  ETag: always('The SHA-256 of the content, quoted', z.string().regex(/^"[0-9a-f]{64}"$/)),
  'X-File-SHA256': always('The SHA-256 of the whole content (also on a 206)', z.string().regex(/^[0-9a-f]{64}$/)),
  'X-File-Executable': always('`true` or `false`', z.enum(['true', 'false'])),
};

const PARTIAL_RESPONSE_HEADERS: Readonly<Record<string, HeaderDoc>> = {
  ...DOWNLOAD_RESPONSE_HEADERS,
  'Content-Length': always('Bytes of the range', z.string().regex(/^[0-9]+$/)),
  'Content-Range': always('`bytes START-END/SIZE`', z.string().regex(/^bytes [0-9]+-[0-9]+\/[0-9]+$/)),
};

/** A header every answer of its kind carries. */
function always(description: string, schema?: z.ZodType): HeaderDoc {
  return { description, required: true, ...(schema === undefined ? {} : { schema }) };
}
