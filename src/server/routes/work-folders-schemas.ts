import { z } from 'zod';
import { FOLDER_SCOPES } from '../../model/folder-scopes.js';

/**
 * Request and response schemas of the work-folder routes: the handlers parse with them and
 * the OpenAPI document is built from them, so the two cannot drift.
 */

/** Where every work-folder route lives; `:companyId` is the tenant's name (as in `POST /v1/tokens`). */
export const WORK_FOLDERS_BASE = '/api/companies/:companyId/work-folders/:scope/:ownerId';

/** Longest operation id (`Idempotency-Key`), as `Folders` accepts it. */
export const MAX_OPERATION_ID_CHARS = 256;
/** Longest declared content type (`X-File-Content-Type`), as `Folders` accepts it. */
export const MAX_CONTENT_TYPE_CHARS = 256;
/** Longest `cursor` accepted: cursors are opaque but short; a long one is garbage. */
export const MAX_CURSOR_CHARS = 1024;
/** Longest row id accepted in an operation body. */
export const MAX_FILE_ID_CHARS = 128;

/** One printable-ASCII token, as HTTP header values and `Folders` operation ids allow. */
const OPERATION_ID = z
  .string()
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces')
  .max(MAX_OPERATION_ID_CHARS);

export const FolderScopeSchema = z.enum(FOLDER_SCOPES);

/**
 * `true` or `false` in a query string or a header, documented as a boolean (what a generated
 * client sends it as, written `true`/`false`); anything else is `INVALID_INPUT`.
 */
const WireBoolean = z.stringbool({ truthy: ['true'], falsy: ['false'], case: 'sensitive' }).meta({ type: 'boolean' });

/** The path parameters of every work-folder route, documented (the handlers answer a scope or owner id outside them `NOT_FOUND`). */
export const FolderPathParams = z.object({
  companyId: z.string().min(1).describe("The tenant's name"),
  scope: FolderScopeSchema.describe('Who owns the collection'),
  ownerId: z.string().min(1).max(256).describe("The owner's id (for `user`, the user's name)"),
});

export const FolderEntrySchema = z
  .object({
    id: z.string(),
    path: z.string(),
    kind: z.enum(['file', 'directory']),
    size: z.number().int().min(0),
    sha256: z.string().nullable(),
    executable: z.boolean(),
    contentType: z.string().nullable(),
    updatedAt: z.number(),
    deletedAt: z.number().nullable(),
  })
  .meta({ id: 'FolderEntry' });

export const FolderListQuery = z.object({
  trash: WireBoolean.optional().describe('List the trash instead of live files'),
  cursor: z.string().min(1).max(MAX_CURSOR_CHARS).optional().describe('`nextCursor` of the previous page'),
  limit: z.coerce.number().int().min(1).max(1000).optional().describe('Rows per page (default 200)'),
});

export const FolderListPage = z.object({
  files: z.array(FolderEntrySchema),
  nextCursor: z.string().nullable(),
  lastOperationAt: z.number().nullable(),
});

export const FolderPathQuery = z.object({
  path: z.string().describe('The file path inside the collection, relative, `/`-separated'),
});

/** Headers of a download. */
export const FolderDownloadHeaders = z.object({
  Range: z
    .string()
    .max(256)
    .optional()
    .describe('One byte range, `bytes=START-END`, `bytes=START-` or `bytes=-SUFFIX`; other forms are ignored (the whole file is sent)'),
});

/**
 * Headers of an upload, spelt as the document spells them (the handler reads each by name, in any
 * case). Its `Content-Type` is the request body's media type, not a parameter.
 */
export const FolderUploadHeaders = z.object({
  'Idempotency-Key': OPERATION_ID.describe(
    'Required: the operation id. The same key with the same content is answered `applied: false`; with other content 409 CONFLICT',
  ),
  'X-File-Content-Type': z
    .string()
    .min(1)
    .max(MAX_CONTENT_TYPE_CHARS)
    .regex(/^[\x20-\x7e]+$/, 'printable ASCII')
    .optional()
    .describe('The content type to store with the file and serve it with'),
  'X-File-Executable': WireBoolean.optional().describe('Whether the file is executable (default false)'),
  'X-File-SHA256': z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, '64 hex digits')
    .optional()
    .describe('The SHA-256 the body must have; a mismatch is 409 CONFLICT and nothing is published'),
  'X-File-Replace-Kind': WireBoolean.optional().describe(
    'Replace a directory at the path (it and its subtree go to the trash); default false, a directory there is 409',
  ),
});

/** Headers of an operation. */
export const FolderOperationHeaders = z.object({
  'Idempotency-Key': OPERATION_ID.describe('Required: the operation id (same key and body: `applied: false`; other body: 409 CONFLICT)'),
});

/** Paths are validated by `Folders` alone (`INVALID_PATH`), so every route refuses the same ones the same way. */
const FolderPath = z.string();
const FileId = z.string().min(1).max(MAX_FILE_ID_CHARS);

export const FolderOperationBody = z
  .discriminatedUnion('action', [
    z.strictObject({ action: z.literal('mkdir'), path: FolderPath, replaceKind: z.boolean().optional() }),
    z.strictObject({ action: z.literal('delete'), path: FolderPath }),
    z.strictObject({ action: z.literal('restore'), fileId: FileId }),
    z.strictObject({ action: z.literal('purge'), fileId: FileId }),
  ])
  .meta({ id: 'FolderOperation' });

/** The answer to an upload. */
export const FolderWriteResult = z.object({
  applied: z.boolean().describe('false when this operation id had been applied before (nothing changed now)'),
  entry: FolderEntrySchema.nullable().describe('The row the write produced, as it is now (`null` if it has been purged since)'),
});

/** The answer to an operation: `applied` and what the action reports. */
export const FolderOperationResult = z
  .object({
    action: z.enum(['mkdir', 'delete', 'restore', 'purge']),
    applied: z.boolean(),
    entry: FolderEntrySchema.nullable().optional().describe('mkdir: the directory row'),
    removed: z.number().int().optional().describe('delete: rows moved to the trash'),
    restored: z.number().int().optional().describe('restore: rows brought back'),
    purged: z.number().int().optional().describe('purge: rows removed for good'),
  })
  .meta({ id: 'FolderOperationResult' });

export const FolderPurgeCollectionResult = z.object({ purged: z.number().int().describe('Rows removed for good') });

const SyncError = z.object({ code: z.string(), message: z.string() }).describe('The last failure: its error code and message');

/** One sandbox's sync of a collection (`GET …/sync`). */
export const FolderSyncStatusSchema = z.object({
  runId: z.string(),
  sandbox: z.object({ provider: z.string(), id: z.string() }),
  state: z
    .enum(['never_saved', 'saving', 'saved', 'failed'])
    .describe('`never_saved` until the first save completes: never shown as saved; `failed` keeps the previous lastSavedAt'),
  lastSavedAt: z.number().nullable().describe('Epoch ms of the last successful save (periodic or final)'),
  finalCheckpointAt: z
    .number()
    .nullable()
    .describe('Epoch ms of the last completed final flush (a turn end, a drain); a periodic save never sets it'),
  error: SyncError.nullable(),
  refresh: z.object({
    state: z.enum(['none', 'queued', 'running', 'failed']),
    at: z.number().nullable().describe('When the refresh state last changed'),
    error: SyncError.nullable(),
  }),
  active: z.boolean().describe('The run is active and this is its current sandbox'),
});

export const FolderSyncList = z.object({ sandboxes: z.array(FolderSyncStatusSchema) });

export const FolderRefreshBody = z.strictObject({ runId: z.string().min(1).max(128).describe('A run bound to this collection') });

export const FolderRefreshResult = z.object({
  queued: z.boolean().describe("false when the run's sandbox has not synced this collection yet: its next start hydrates it anyway"),
});
