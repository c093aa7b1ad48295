import type { Context } from 'hono';
import { DEFAULT_BUNDLE_TAR_LIMITS } from '../../deployments/bundle-tar.js';
import { HoldfastError } from '../../errors.js';
import type { Holdfast } from '../../index.js';
import type { AppEnv } from '../app-env.js';
import { answerAs, type RouteDef, tenantServices } from '../route.js';
import { BundleRecordSchema } from './schemas.js';
import { requestChunks } from './work-folders-content.js';

/** Largest tar upload accepted, as sent (a compressed one is also bounded by what it expands to). */
export const MAX_BUNDLE_UPLOAD_BYTES = 256 * 1024 * 1024;

/** `application/x-tar`, with any parameters; the only body a bundle upload takes. */
const TAR_MEDIA_TYPE = /^application\/x-tar\s*(?:;|$)/i;

/**
 * Deployment bundles: `POST /v1/bundles` takes a tar archive of the bundle directory as the
 * raw body (streamed into a fresh temp directory, strictly: see `extractBundleTar`; the
 * request's abort signal, which fires when the client goes away, stops the work) and answers
 * the bundle record that `POST /v1/deployments` takes as `bundle`. The same content is the same
 * record, so a retried upload needs no idempotency key: these routes keep no receipts.
 */
export function bundleRoutes(hf: Holdfast): RouteDef[] {
  return [
    {
      doc: {
        method: 'post',
        path: '/v1/bundles',
        operationId: 'captureBundle',
        summary: `Capture a deployment bundle from a tar archive (at most ${MAX_BUNDLE_UPLOAD_BYTES} bytes, ${DEFAULT_BUNDLE_TAR_LIMITS.maxEntries} entries, ${DEFAULT_BUNDLE_TAR_LIMITS.maxPathBytes}-byte paths; no absolute paths, .., escaping links or devices; no credential)`,
        tags: ['deployments'],
        consumes: 'application/x-tar',
        response: BundleRecordSchema,
        responseStatus: 201,
        errors: ['INVALID_PATH', 'SECRET_EXCLUDED', 'STORE_FULL'],
        responses: {
          400: {
            description:
              'The archive is malformed, has data after its end-of-archive, or holds an entry a bundle may not have (nothing captured)',
          },
          413: {
            description:
              'The body is larger than the upload limit, or the archive expands past its limits or its inflation bounds (nothing captured)',
          },
          415: { description: 'The body is not declared as application/x-tar' },
          422: { description: 'A file of the bundle holds a credential (nothing captured)' },
        },
      },
      maxBodyBytes: MAX_BUNDLE_UPLOAD_BYTES,
      async handler(c) {
        // Whatever refuses an upload, the rest of its body is not wanted: close rather than drain it.
        try {
          requireTar(c);
          const { bundles } = await tenantServices(hf, c);
          const record = await bundles.captureTar(requestChunks(c), { signal: c.req.raw.signal });
          return c.json(answerAs(BundleRecordSchema, record), 201);
        } catch (error) {
          c.header('connection', 'close');
          throw error;
        }
      },
    },
  ];
}

function requireTar(c: Context<AppEnv>): void {
  const type = c.req.header('content-type') ?? '';
  if (TAR_MEDIA_TYPE.test(type)) return;
  throw new HoldfastError('UNSUPPORTED_MEDIA_TYPE', 'upload the bundle as a tar archive with Content-Type: application/x-tar', {
    data: { contentType: type.slice(0, 100) },
  });
}
