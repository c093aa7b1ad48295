/**
 * A counting s3rver (`scale-s3.ts`) in a process of its own, so a load test can read its CPU
 * apart from the replicas'. Started with an IPC channel (`fork`): sends `{ endpoint, bucket,
 * region }` once listening, answers every `'counts'` message with its counters, and stops on
 * `'stop'` or when the channel closes.
 */
import { startCountingS3 } from './scale-s3.js';

const s3 = await startCountingS3();
const send = (message: unknown) => process.send?.(message);
send({ kind: 'ready', endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region });
const stop = async () => {
  await s3.close();
  process.exit(0);
};
process.on('message', (message) => {
  if (message === 'counts') send({ kind: 'counts', counts: s3.counts() });
  else if (message === 'stop') void stop();
});
process.on('disconnect', () => void stop());
