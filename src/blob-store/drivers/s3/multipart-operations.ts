import type { MultipartOperations } from './multipart-upload.js';
import { isPreconditionFailed, s3ErrorName } from './s3-errors.js';
import { md5Base64, type S3Requests, withSignal } from './s3-requests.js';

/**
 * The S3 requests behind one multipart upload of `key`, each retried and error-mapped through
 * {@link S3Requests.run}. Parts are buffers, so a failed part is resent on its own. Completion
 * carries `If-None-Match: *`, so an upload never replaces an existing object.
 */
export function s3MultipartOperations(requests: S3Requests, key: string, signal: AbortSignal | undefined): MultipartOperations {
  const { sdk, client } = requests;
  const target = { Bucket: requests.settings.bucket, Key: requests.objectKey(key) };
  const missing = (field: string): never => {
    throw requests.storeError(`the server sent no ${field} for "${key}"`, key);
  };
  return {
    create: () =>
      requests.run(
        'CreateMultipartUpload',
        key,
        async () => (await client.send(new sdk.CreateMultipartUploadCommand(target), withSignal(signal))).UploadId ?? missing('UploadId'),
        signal,
      ),

    uploadPart: (UploadId, PartNumber, body, partSignal) => {
      const input = { ...target, UploadId, PartNumber, Body: body, ContentLength: body.length, ContentMD5: md5Base64(body) };
      return requests.run(
        'UploadPart',
        key,
        async () => (await client.send(new sdk.UploadPartCommand(input), withSignal(partSignal))).ETag ?? missing('ETag'),
        partSignal,
      );
    },

    complete: (UploadId, Parts) => {
      const input = { ...target, UploadId, MultipartUpload: { Parts: [...Parts] }, IfNoneMatch: '*' };
      return requests.run(
        'CompleteMultipartUpload',
        key,
        async (attempt) => {
          try {
            await client.send(new sdk.CompleteMultipartUploadCommand(input));
            return true;
          } catch (error) {
            if (isPreconditionFailed(error)) return false;
            // An earlier try completed the upload but its answer was lost on the way back.
            if (attempt > 1 && s3ErrorName(error) === 'NoSuchUpload' && (await requests.rawHead(key)) !== undefined) return true;
            throw error;
          }
        },
        signal,
      );
    },

    // No signal: the abort must go out even (especially) when the put was cancelled.
    abort: (UploadId) =>
      requests.run('AbortMultipartUpload', key, async () => {
        try {
          await client.send(new sdk.AbortMultipartUploadCommand({ ...target, UploadId }));
        } catch (error) {
          if (s3ErrorName(error) !== 'NoSuchUpload') throw error;
        }
      }),
  };
}
