import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PeriodicCheckpoints } from './periodic-checkpoints.js';

// The clock is Vitest's: each tick is advanced on purpose, so a loaded machine changes nothing.
describe('PeriodicCheckpoints', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('never runs two saves at once, skips ticks while one is in flight, and stop waits for it', async () => {
    let running = 0;
    let most = 0;
    let finished = 0;
    const releases: Array<() => void> = [];
    const periodic = new PeriodicCheckpoints(5, async () => {
      running += 1;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => releases.push(resolve));
      running -= 1;
      finished += 1;
    });
    periodic.start();
    await vi.advanceTimersByTimeAsync(5);
    expect(periodic.counts).toEqual({ started: 1, skipped: 0 });
    await vi.advanceTimersByTimeAsync(20);
    expect(periodic.counts).toEqual({ started: 1, skipped: 4 });
    releases.shift()?.();
    await vi.advanceTimersByTimeAsync(5);
    expect(periodic.counts).toEqual({ started: 2, skipped: 4 });
    let stopped = false;
    const stopping = periodic.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(50);
    expect(stopped).toBe(false);
    releases.shift()?.();
    await stopping;
    expect(most).toBe(1);
    expect(running).toBe(0);
    expect(finished).toBe(periodic.counts.started);
    const after = periodic.counts.started;
    await vi.advanceTimersByTimeAsync(30);
    expect(periodic.counts.started).toBe(after);
  });

  it('a failing save does not stop the timer; interval 0 never ticks', async () => {
    let calls = 0;
    const failing = new PeriodicCheckpoints(5, async () => {
      calls += 1;
      throw new Error('store down');
    });
    failing.start();
    await vi.advanceTimersByTimeAsync(15);
    await failing.stop();
    expect(calls).toBe(3);
    const off = new PeriodicCheckpoints(0, async () => {
      throw new Error('must not run');
    });
    off.start();
    await vi.advanceTimersByTimeAsync(20);
    await off.stop();
    expect(off.counts.started).toBe(0);
  });
});
