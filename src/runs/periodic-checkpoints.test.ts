import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { PeriodicCheckpoints } from './periodic-checkpoints.js';

describe('PeriodicCheckpoints', () => {
  it('never runs two saves at once, skips ticks while one is in flight, and stop waits for it', async () => {
    let running = 0;
    let most = 0;
    let finished = 0;
    const periodic = new PeriodicCheckpoints(5, async () => {
      running += 1;
      most = Math.max(most, running);
      await sleep(40);
      running -= 1;
      finished += 1;
    });
    periodic.start();
    await sleep(150);
    await periodic.stop();
    expect(most).toBe(1);
    expect(running).toBe(0);
    expect(periodic.counts.started).toBeGreaterThanOrEqual(2);
    expect(periodic.counts.skipped).toBeGreaterThan(0);
    expect(finished).toBe(periodic.counts.started);
    const after = periodic.counts.started;
    await sleep(30);
    expect(periodic.counts.started).toBe(after);
  });

  it('a failing save does not stop the timer; interval 0 never ticks', async () => {
    let calls = 0;
    const failing = new PeriodicCheckpoints(5, async () => {
      calls += 1;
      throw new Error('store down');
    });
    failing.start();
    await sleep(60);
    await failing.stop();
    expect(calls).toBeGreaterThanOrEqual(2);
    const off = new PeriodicCheckpoints(0, async () => {
      throw new Error('must not run');
    });
    off.start();
    await sleep(20);
    await off.stop();
    expect(off.counts.started).toBe(0);
  });
});
