import type { BlobsConfig } from '../config.js';
import type { BlobStore } from './blob-store.js';

/**
 * Opens the BlobStore a configuration names. Drivers are imported on demand, so the AWS SDK
 * is loaded only when an `s3://` store is used.
 */
export async function openBlobStore(config: BlobsConfig): Promise<BlobStore> {
  switch (config.kind) {
    case 'local-disk': {
      const { LocalDiskBlobStore } = await import('./drivers/local-disk.js');
      return LocalDiskBlobStore.open({ path: config.path });
    }
    case 's3': {
      const { createS3BlobStore } = await import('./drivers/s3.js');
      return createS3BlobStore(config);
    }
  }
}
