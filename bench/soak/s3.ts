import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import { S3RVER_CREDENTIALS, S3RVER_REGION } from '../../test/support/s3-server.js';
import { makeS3rverFaithful } from '../../test/support/s3rver-fidelity.js';
import type { S3Chaos } from './s3-chaos.js';

/** The soak's S3 endpoint: s3rver on loopback, made faithful as the tests make it, with chaos in front. */
export interface SoakS3 {
  readonly endpoint: string;
  readonly bucket: string;
  close(): Promise<void>;
}

/** Starts s3rver as `test/support/s3-server.ts` does, with `chaos` ahead of every other middleware. */
export async function startSoakS3(chaos: S3Chaos): Promise<SoakS3> {
  const bucket = 'holdfast-soak';
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'holdfast-soak-s3-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  server.middleware.unshift(chaos.middleware(), makeS3rverFaithful(server));
  const address = await server.run();
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    bucket,
    async close() {
      const stopping = server.close();
      server.httpServer?.closeAllConnections();
      await stopping;
      await fs.rm(directory, { recursive: true, force: true });
    },
  };
}

export { S3RVER_CREDENTIALS, S3RVER_REGION };
