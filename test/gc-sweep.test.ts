import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Holdfast, openHoldfast } from '../src/index.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';

/** The service's periodic GC sweep collects garbage; it never forgets a ready checkpoint (that is the operator's retention). */
describe('the service GC sweep keeps every ready checkpoint', () => {
  let b: OpenedBackends;
  let hf: Holdfast;
  beforeAll(async () => {
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    hf = await openHoldfast({ blobs: b.blobs, meta: b.meta, cacheDir: path.join(b.dir, 'cache'), gcSweepIntervalMs: 0 });
  });
  afterAll(async () => {
    await hf?.close();
    await b?.cleanup();
  });

  it('twelve checkpoints of a workspace survive a sweep, where the default retention keeps ten', async () => {
    const dir = path.join(b.dir, 'ws');
    fs.mkdirSync(dir);
    for (let i = 0; i < 12; i += 1) {
      fs.writeFileSync(path.join(dir, 'n.txt'), `version ${i}\n`);
      await hf.snapshots.checkpoint({ dir, workspace: 'kept' });
    }
    const outcome = await hf.sweepGarbage();
    expect(outcome.kind).toBe('swept');
    if (outcome.kind === 'swept') expect(outcome.report.forgotten).toBe(0);
    expect((await hf.snapshots.log('kept')).filter((c) => c.status === 'ready')).toHaveLength(12);
    // A bare gc with the default retention does forget the two oldest.
    const report = await hf.snapshots.gc({ dryRun: true });
    expect(report.forgotten).toBe(2);
  });
});
